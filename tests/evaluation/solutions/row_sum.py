import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <vector>

torch::Tensor row_sum_forward(torch::Tensor x) {
    TORCH_CHECK(x.device().is_cpu(), "row_sum_forward: x must be a CPU tensor");
    TORCH_CHECK(x.dtype() == torch::kFloat32, "row_sum_forward: x must be float32");
    TORCH_CHECK(x.is_contiguous(), "row_sum_forward: x must be contiguous");
    TORCH_CHECK(x.dim() >= 1, "row_sum_forward: x must have at least one dimension");
    std::vector<int64_t> out_shape;
    int64_t rows = 1;
    for (int64_t d = 0; d + 1 < x.dim(); ++d) {
        out_shape.push_back(x.size(d));
        rows *= x.size(d);
    }
    const int64_t cols = x.size(x.dim() - 1);
    auto out = torch::empty(out_shape, x.options());
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = src + r * cols;
        // Eight independent partial sums let the compiler vectorise without -ffast-math and keep
        // each accumulator's rounding error to cols/8 additions.
        float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        int64_t c = 0;
        for (; c + 8 <= cols; c += 8) {
            for (int k = 0; k < 8; ++k) acc[k] += row[c + k];
        }
        float total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
        for (; c < cols; ++c) total += row[c];
        dst[r] = total;
    }
    return out;
}
"""

row_sum_ext = load_inline(
    name="examples_row_sum_cpu",
    cpp_sources=cpp_source,
    functions=["row_sum_forward"],
    extra_cflags=["-O3", "-fopenmp"],
    extra_ldflags=["-fopenmp"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return row_sum_ext.row_sum_forward(x.contiguous())
