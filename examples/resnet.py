"""A stack of ResNet basic blocks (conv, batch norm, ReLU, residual add), in eval mode (as for
inference: batch norm uses its running statistics); make_training_block is one block in training mode.

    adjoint import examples/resnet.py:make_model --input x=2x2x3x3 -o resnet.yaml
"""

import torch
import torch.nn.functional as F
from torch import nn


class BasicBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


class TinyResNet(nn.Module):
    def __init__(self, channels=2, blocks=2, classes=2):
        super().__init__()
        self.blocks = nn.Sequential(*[BasicBlock(channels) for _ in range(blocks)])
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(channels, classes)

    def forward(self, x):
        h = self.pool(self.blocks(x))
        return self.fc(torch.flatten(h, 1))


def make_model():
    torch.manual_seed(0)
    return TinyResNet().eval()


def make_training_block():
    """One block in training mode (batch statistics): exact solving nests a square root per
    batch norm, so this one is smaller still.

        adjoint import examples/resnet.py:make_training_block --input x=2x1x2x2
    """
    torch.manual_seed(0)
    return TinyResNet(channels=1, blocks=1)
