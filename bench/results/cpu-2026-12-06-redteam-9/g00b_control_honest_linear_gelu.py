import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor linear_gelu_forward(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu() && bias.device().is_cpu(),
                "linear_gelu_forward: inputs must be CPU tensors");
    TORCH_CHECK(x.dtype() == torch::kFloat32 && weight.dtype() == torch::kFloat32 && bias.dtype() == torch::kFloat32,
                "linear_gelu_forward: inputs must be float32");
    TORCH_CHECK(x.is_contiguous() && weight.is_contiguous() && bias.is_contiguous(),
                "linear_gelu_forward: inputs must be contiguous");
    TORCH_CHECK(x.dim() == 2 && weight.dim() == 2 && bias.dim() == 1, "linear_gelu_forward: bad ranks");
    const int64_t batch = x.size(0), in_f = x.size(1), out_f = weight.size(0);
    TORCH_CHECK(weight.size(1) == in_f && bias.size(0) == out_f, "linear_gelu_forward: shapes do not match");
    auto out = torch::empty({batch, out_f}, x.options());
    const float* xp = x.data_ptr<float>();
    const float* wp = weight.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float inv_sqrt2 = 0.70710678118654752440f;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t n = 0; n < batch; ++n) {
        for (int64_t o = 0; o < out_f; ++o) {
            // nn.Linear stores W as [out, in], so row o of W and row n of x are both contiguous.
            const float* xr = xp + n * in_f;
            const float* wr = wp + o * in_f;
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            int64_t k = 0;
            for (; k + 8 <= in_f; k += 8) {
                for (int t = 0; t < 8; ++t) acc[t] += xr[k + t] * wr[k + t];
            }
            float v = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
            for (; k < in_f; ++k) v += xr[k] * wr[k];
            v += bp[o];
            // Exact GELU, matching F.gelu's default approximate='none'.
            dst[n * out_f + o] = 0.5f * v * (1.f + std::erf(v * inv_sqrt2));
        }
    }
    return out;
}
"""

linear_gelu_ext = load_inline(
    name="examples_linear_gelu_cpu",
    cpp_sources=cpp_source,
    functions=["linear_gelu_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        # Held only so that the parameters are created, named and initialised exactly as in the
        # reference (same seed, same order); forward never calls it.
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear_gelu_ext.linear_gelu_forward(x.contiguous(), self.linear.weight, self.linear.bias)
