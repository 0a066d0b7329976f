"""ModelNew for the bundled relu example: relu(x) by the workspace's C++ kernel (kernels/relu.cpp)."""

import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu(x.contiguous())
