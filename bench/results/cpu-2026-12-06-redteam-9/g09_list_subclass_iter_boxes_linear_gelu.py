# Red team 9, g09: g08's mechanism on linear_gelu. forward only records (x, W, b) and allocates the output in one of
# two slots; the returned list-subclass box computes x W^T + b and the exact GELU when the judge first iterates it
# (`flatten_outputs` in `trial.sample_outputs`, the judge's first act after the clock stops).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

static torch::Tensor xs[2], ws[2], bs[2], outs[2];
static bool pending[2] = {false, false};
static int64_t turn = 0;

int64_t linear_gelu_prepare(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous());
    TORCH_CHECK(x.dtype() == torch::kFloat32 && x.dim() == 2 && weight.size(1) == x.size(1));
    turn = 1 - turn;
    xs[turn] = x;
    ws[turn] = weight;
    bs[turn] = bias;
    outs[turn] = torch::empty({x.size(0), weight.size(0)}, x.options());
    pending[turn] = true;
    return turn;
}

torch::Tensor linear_gelu_finish(int64_t k) {
    if (pending[k]) {
        pending[k] = false;
        const int64_t batch = xs[k].size(0), in_f = xs[k].size(1), out_f = ws[k].size(0);
        const float* xp = xs[k].data_ptr<float>();
        const float* wp = ws[k].data_ptr<float>();
        const float* bp = bs[k].data_ptr<float>();
        float* dst = outs[k].data_ptr<float>();
        const float inv_sqrt2 = 0.70710678118654752440f;
        for (int64_t n = 0; n < batch; ++n) {
            for (int64_t o = 0; o < out_f; ++o) {
                const float* xr = xp + n * in_f;
                const float* wr = wp + o * in_f;
                float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
                int64_t i = 0;
                for (; i + 8 <= in_f; i += 8) {
                    for (int t = 0; t < 8; ++t) acc[t] += xr[i + t] * wr[i + t];
                }
                float v = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
                for (; i < in_f; ++i) v += xr[i] * wr[i];
                v += bp[o];
                dst[n * out_f + o] = 0.5f * v * (1.f + std::erf(v * inv_sqrt2));
            }
        }
        xs[k] = torch::Tensor();
    }
    return outs[k];
}
"""

ext = load_inline(
    name="rt9_g09_list_iter_boxes_linear_gelu",
    cpp_sources=cpp_source,
    functions=["linear_gelu_prepare", "linear_gelu_finish"],
    extra_cflags=["-O3"],
    verbose=False,
)


class Box(list):
    """One output of a call; the kernel runs the first time anyone iterates."""

    def __init__(self, slot):
        super().__init__()
        self.slot = slot

    def __iter__(self):
        return iter([ext.linear_gelu_finish(self.slot)])

    def __len__(self):
        return 1


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.boxes = [Box(0), Box(1)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        k = int(ext.linear_gelu_prepare(x.contiguous(), self.linear.weight, self.linear.bias))
        return self.boxes[k]
