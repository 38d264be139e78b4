#!/usr/bin/python3
"""Writes the PyTorch-exported Concat models that tests/onnx/test_onnx_concat.cpp imports, with
PyTorch's own outputs as the oracle (nnlens computes none of these files).

    /usr/bin/python3 tests/onnx/data/make_concat_models.py   (torch 1.13, Debian's python3-torch)

For each model NAME: NAME.onnx (torch.onnx.export, opset 13, batch axis dynamic), NAME.x.f32 (20
inputs, float32 little-endian, [20, *input_shape]) and NAME.y.f32 (PyTorch's outputs, [20, classes]).
"""
import os

import torch
import torch.nn as nn

torch.manual_seed(2026)
HERE = os.path.dirname(os.path.abspath(__file__))


class DenseNetish(nn.Module):
    """DenseNet-style growth: cat(h, f(h)) twice along channels, a BatchNorm inside a branch."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 4, 3, padding=1)
        self.f1 = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.f2 = nn.Conv2d(8, 2, 1)
        self.head = nn.Linear(10 * 4 * 4, 5)

    def forward(self, x):
        h = torch.relu(self.stem(x))
        h = torch.cat([h, self.f1(h)], dim=1)
        h = torch.cat([h, self.f2(h)], dim=-3)  # a negative axis: the channel axis of [N,C,H,W]
        h = nn.functional.max_pool2d(h, 2)
        return self.head(torch.flatten(h, 1))


class Inceptionish(nn.Module):
    """Four parallel branches of an Inception block, concatenated along channels."""

    def __init__(self):
        super().__init__()
        self.b1 = nn.Conv2d(3, 2, 1)
        self.b2 = nn.Sequential(nn.Conv2d(3, 2, 1), nn.ReLU(), nn.Conv2d(2, 3, 3, padding=1))
        self.b3 = nn.MaxPool2d(3, stride=1, padding=1)
        self.b4 = nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), nn.Conv2d(3, 1, 1))
        self.head = nn.Linear(9 * 8 * 8, 4)

    def forward(self, x):
        h = torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], dim=1)
        return self.head(torch.flatten(torch.relu(h), 1))


class Features(nn.Module):
    """Concatenation of feature vectors: cat(h, g(h)) on [N,F]."""

    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(6, 5)
        self.g = nn.Sequential(nn.Linear(5, 3), nn.LeakyReLU(0.1))
        self.out = nn.Linear(8, 3)

    def forward(self, x):
        h = torch.relu(self.l1(x))
        return self.out(torch.cat([h, self.g(h)], dim=1))


def write(name, model, shape):
    model.eval()
    for m in model.modules():  # BatchNorm: non-trivial running statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.2, 0.2)
    x = torch.randn(20, *shape)
    with torch.no_grad():
        y = model(x)
    torch.onnx.export(model, x[:1], os.path.join(HERE, name + ".onnx"), opset_version=13,
                      input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    x.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".x.f32"))
    y.numpy().astype("<f4").tofile(os.path.join(HERE, name + ".y.f32"))


write("concat_densenet", DenseNetish(), (3, 8, 8))
write("concat_inception", Inceptionish(), (3, 8, 8))
write("concat_features", Features(), (6,))
