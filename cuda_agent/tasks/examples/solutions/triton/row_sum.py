import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols: tl.constexpr, BLOCK: tl.constexpr):
    # One program per row, the row read in blocks of BLOCK columns and summed in fp32. The loop's bound is a
    # constexpr: Triton's CPU interpreter cannot loop to a runtime scalar under NumPy 2.4.
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        rows, cols = x.shape
        out = torch.empty(rows, dtype=x.dtype, device=x.device)
        row_sum_kernel[(rows,)](x, out, cols, BLOCK=1024)
        return out
