"""ResNet-18 (He et al. 2015; torchvision's layout, written out with torch.nn): 11.7 million
parameters, so every tensor above 256 elements goes into a safetensors side file beside
the problem file.

    adjoint import examples/resnet18.py:make_model --input x=1x3x32x32 -o resnet18.yaml
    adjoint solve resnet18.yaml --structure      # nodes, calls, shapes: no values
    adjoint solve resnet18.yaml --float64        # the same engine on doubles

(The exact mode is for tiny models: a ResNet-18 is a --float64 / --structure model.)
``make_narrow`` is the same eighteen layers with 8 to 64 channels instead of 64 to 512 (the
test suite's ResNet-18: its biggest tensors still go to the side file):

    adjoint import examples/resnet18.py:make_narrow --input x=1x3x1x1 -o narrow.yaml
    adjoint verify narrow.yaml --float64 --origin
"""

import torch
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        identity = x if self.downsample is None else self.downsample(x)
        return self.relu(out + identity)


class ResNet18(nn.Module):
    def __init__(self, classes=10, width=64):
        super().__init__()
        w1, w2, w3, w4 = width, 2 * width, 4 * width, 8 * width
        self.conv1 = nn.Conv2d(3, w1, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(w1)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(BasicBlock(w1, w1), BasicBlock(w1, w1))
        self.layer2 = nn.Sequential(BasicBlock(w1, w2, 2), BasicBlock(w2, w2))
        self.layer3 = nn.Sequential(BasicBlock(w2, w3, 2), BasicBlock(w3, w3))
        self.layer4 = nn.Sequential(BasicBlock(w3, w4, 2), BasicBlock(w4, w4))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w4, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def make_model():
    torch.manual_seed(0)
    return ResNet18().eval()


def make_narrow():
    torch.manual_seed(0)
    return ResNet18(width=8).eval()
