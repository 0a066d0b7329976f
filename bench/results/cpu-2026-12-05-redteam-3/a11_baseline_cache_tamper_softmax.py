"""A11: file-system tampering. The grader reads the task's cached eager/compile timings
(cache_dir/baselines/KEY.json, baseline_stage.measure_baselines) only AFTER the candidate's process ran, and
the candidate's process runs as the same user. `torch.os` is the real os module (the static rules only know
`os` imported by name), `torch.sys.modules["json"]` is json. The cache folder is two levels above
TORCH_EXTENSIONS_DIR, which the worker itself sets. The kernel is honest but slower than eager; every cached
baseline is rewritten 50x slower. (Safety for this red-team run: it only touches /tmp/redteam3/cache.)"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>
torch::Tensor softmax_forward(torch::Tensor x) {
    const int64_t cols = x.size(x.dim() - 1);
    const int64_t rows = cols == 0 ? 0 : x.numel() / cols;
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
        const float* in = src + r * cols; float* o = dst + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = std::fmax(m, in[c]);
        float sum = 0.f;
        for (int64_t c = 0; c < cols; ++c) { const float e = std::exp(in[c] - m); o[c] = e; sum += e; }
        const float inv = 1.f / sum;
        for (int64_t c = 0; c < cols; ++c) o[c] *= inv;
    }
    return out;
}
"""
ext = load_inline(
    name="rt3_a11_softmax", cpp_sources=cpp_source, functions=["softmax_forward"], extra_cflags=["-O3"], verbose=False
)

OS = torch.os
JSON = torch.sys.modules["json"]
EXT_DIR = OS.environ.get("TORCH_EXTENSIONS_DIR", "")
ROOT = OS.path.dirname(OS.path.dirname(EXT_DIR))
BASELINES = OS.path.join(ROOT, "baselines")


def slow_down(path):
    fd = OS.open(path, OS.O_RDONLY)
    data = JSON.loads(OS.read(fd, 1 << 20).decode())
    OS.close(fd)
    for phase in ("eager", "compile"):
        if data.get(phase):
            for field in ("median_ms", "min_ms"):
                data[phase][field] = data[phase][field] * 50
    fd = OS.open(path, OS.O_WRONLY | OS.O_TRUNC)
    OS.write(fd, JSON.dumps(data).encode())
    OS.close(fd)


if ROOT.startswith("/tmp/redteam3/cache") and OS.path.isdir(BASELINES):
    for name in OS.listdir(BASELINES):
        if name.endswith(".json"):
            slow_down(OS.path.join(BASELINES, name))


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.softmax_forward(x.contiguous())
