import torch
import torch.nn as nn


class Model(nn.Module):
    """x * alpha + y, with alpha fixed at construction."""

    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x * self.alpha + y


# examples/scale_add at 512 MiB a tensor: on a GPU the time is then the memory traffic, not the launches.
batch_size = 16384
dim = 8192
alpha = 0.75


def get_inputs():
    return [torch.randn(batch_size, dim), torch.randn(batch_size, dim)]


def get_init_inputs():
    return [alpha]
