# Red team 9, g10: g08's box, but its __iter__ has *torch* compute the result (torch.softmax): no kernel of the
# candidate's touches the output. forward only calls the extension (which keeps x in a slot and returns the slot's
# number) and returns the slot's box. Under cuda-agent, the ATen tracer wraps only the candidate's call
# (worker.py call_candidate), and the static forward rules follow only forward's own calls, not a returned object's
# protocol methods: torch's softmax runs in the judge's `flatten_outputs`, after the clock and outside the tracer.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

static torch::Tensor xs[2];
static int64_t turn = 0;

int64_t keep(torch::Tensor x) {
    turn = 1 - turn;
    xs[turn] = x;
    return turn;
}

torch::Tensor take(int64_t k) {
    torch::Tensor x = xs[k];
    xs[k] = torch::Tensor();
    return x;
}
"""

ext = load_inline(
    name="rt9_g10_list_iter_torch_softmax",
    cpp_sources=cpp_source,
    functions=["keep", "take"],
    extra_cflags=["-O3"],
    verbose=False,
)


class Box(list):
    """One output of a call, computed by torch the first time anyone iterates."""

    def __init__(self, slot):
        super().__init__()
        self.slot = slot
        self.out = None

    def __iter__(self):
        x = ext.take(self.slot)
        if x is not None:
            self.out = torch.softmax(x, dim=-1)
        return iter([self.out])

    def __len__(self):
        return 1


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.boxes = [Box(0), Box(1)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = int(ext.keep(x.contiguous()))
        return self.boxes[k]
