"""A small CNN: two convolutions with ReLU, a max pool, a linear classifier head.

    adjoint import examples/cnn.py:make_model --input images=1x1x4x4 -o cnn.yaml
"""

import torch
from torch import nn


class SmallCNN(nn.Module):
    def __init__(self, channels=2, classes=2):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.flatten = nn.Flatten()
        self.head = nn.Linear(channels * 2 * 2, classes)

    def forward(self, images):
        h = self.features(images)
        return self.head(self.flatten(h))


def make_model():
    torch.manual_seed(0)
    return SmallCNN()
