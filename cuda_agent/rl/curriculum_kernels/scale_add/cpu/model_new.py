import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self, alpha):
        super().__init__()
        self.alpha = float(alpha)

    def forward(self, x, y):
        return cuda_extension.scale_add(x.contiguous(), y.contiguous(), self.alpha)
