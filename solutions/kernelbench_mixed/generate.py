"""Write the mixed (torch + own kernel) KernelBench solutions of this folder from one table of specs.

    python solutions/kernelbench_mixed/generate.py [--data-dir ../shared]

Each spec is one KernelBench level-2 task: torch keeps the heavy operator (cuDNN convolution, cuBLAS
GEMM through nn.Conv2d / nn.Linear), and the solution's own kernel does everything after it in one
pass (a fused elementwise epilogue, a row softmax or logsumexp, or a min over channels). Written:

- `cuda/L2/{P}.py`: the CUDA form (kernel in `cuda_sources`, a small C++ wrapper in `cpp_sources`),
  named as `cuda-agent bench --solutions` expects for kernelbench/L2/{P};
- `cpu/{name}.py`: the same solution with the kernel as a C++ loop, for the CPU judge;
- `cpu_problems/{name}.py`: the task itself with its sizes shrunk for a 2-core CPU (the same Model),
  so that `--suite solutions/kernelbench_mixed/cpu_problems` judges the CPU forms.

Every file is legal under the `kernelbench` policy and rejected under `cuda-agent` (forward calls
torch). tests/judge/test_policy.py checks that the committed files match this script's output.
"""

# size-exempt: one table of 22 task specs and the C++/CUDA templates it fills; splitting would scatter them.
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

GELU = "0.5f * v * (1.f + erff(v * 0.70710678118654752f))"
MISH = "v * tanhf(v > 20.f ? v : log1pf(expf(v)))"
SIGMOID = "1.f / (1.f + expf(-v))"
HARDSWISH = "v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f"


@dataclass(frozen=True)
class Spec:
    """One task's solution: what torch computes, and what the own kernel does after it."""

    problem: int
    name: str
    kind: str
    """'elementwise' (steps on each value), 'softmax' or 'logsumexp' (over dim 1), 'channel_min' (min over dim 1)."""
    init: str
    """ModelNew.__init__'s body: the reference's modules and parameters, created in the reference's order."""
    torch_part: str
    """Python expression of x computed by torch before the kernel."""
    steps: list[str] = field(default_factory=list)
    """C statements on `float v`, in order, applied to each value the kernel reads (`c` is the channel; p0 a
    per-channel vector, s0/s1/s2 scalars)."""
    post: list[str] = field(default_factory=list)
    """channel_min: C statements on `float v` applied to each minimum."""
    vectors: list[str] = field(default_factory=list)
    """Per-channel parameters passed to the kernel (Python expressions)."""
    scalars: list[str] = field(default_factory=list)
    """Scalars passed to the kernel (Python expressions)."""
    channel_dim_last: bool = False
    """The per-channel vector runs along the last dim (Linear outputs) rather than dim 1 (conv outputs)."""


def _conv(extra: str = "") -> str:
    return "self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)" + extra


SPECS = [
    Spec(
        1,
        "conv2d_relu_biasadd",
        "elementwise",
        _conv("\nself.bias = nn.Parameter(torch.randn(bias_shape))"),
        "self.conv(x)",
        ["v = fmaxf(v, 0.f) + p0[c];"],
        vectors=["self.bias"],
    ),
    Spec(4, "conv2d_mish_mish", "elementwise", _conv(), "self.conv(x)", [f"v = {MISH};", f"v = {MISH};"]),
    Spec(
        9,
        "matmul_subtract_multiply_relu",
        "elementwise",
        "self.linear = nn.Linear(in_features, out_features)\nself.subtract_value = subtract_value\n"
        "self.multiply_value = multiply_value",
        "self.linear(x)",
        ["v = fmaxf((v - s0) * s1, 0.f);"],
        scalars=["self.subtract_value", "self.multiply_value"],
    ),
    Spec(
        12,
        "gemm_multiply_leakyrelu",
        "elementwise",
        "self.gemm = nn.Linear(in_features, out_features)\nself.multiplier = multiplier\n"
        "self.negative_slope = negative_slope",
        "self.gemm(x)",
        ["v = v * s0;", "v = v > 0.f ? v : v * s1;"],
        scalars=["self.multiplier", "self.negative_slope"],
    ),
    Spec(
        29,
        "matmul_mish_mish",
        "elementwise",
        "self.linear = nn.Linear(in_features, out_features)",
        "self.linear(x)",
        [f"v = {MISH};", f"v = {MISH};"],
    ),
    Spec(
        40,
        "matmul_scaling_residualadd",
        "elementwise",
        "self.matmul = nn.Linear(in_features, out_features)\nself.scaling_factor = scaling_factor",
        "self.matmul(x)",
        ["v = v * s0 + v;"],
        scalars=["self.scaling_factor"],
    ),
    Spec(
        53,
        "gemm_scaling_hardtanh_gelu",
        "elementwise",
        "self.gemm = nn.Linear(in_features, out_features)\nself.scaling_factor = scaling_factor\n"
        "self.hardtanh_min = hardtanh_min\nself.hardtanh_max = hardtanh_max",
        "self.gemm(x)",
        ["v = fminf(fmaxf(v * s0, s1), s2);", f"v = {GELU};"],
        scalars=["self.scaling_factor", "self.hardtanh_min", "self.hardtanh_max"],
    ),
    Spec(
        54,
        "conv2d_multiply_leakyrelu_gelu",
        "elementwise",
        _conv("\nself.multiplier = nn.Parameter(torch.randn(multiplier_shape))"),
        "self.conv(x)",
        ["v = v * p0[c];", "v = v > 0.f ? v : v * 0.01f;", f"v = {GELU};"],
        vectors=["self.multiplier"],
    ),
    Spec(
        57,
        "conv2d_relu_hardswish",
        "elementwise",
        _conv(),
        "self.conv(x)",
        ["v = fmaxf(v, 0.f);", "v = v * fminf(fmaxf((v + 3.f) / 6.f, 0.f), 1.f);"],
    ),
    Spec(
        59,
        "matmul_swish_scaling",
        "elementwise",
        "self.matmul = nn.Linear(in_features, out_features)\nself.scaling_factor = scaling_factor",
        "self.matmul(x)",
        [f"v = v * ({SIGMOID});", "v = v * s0;"],
        scalars=["self.scaling_factor"],
    ),
    Spec(
        63,
        "gemm_relu_divide",
        "elementwise",
        "self.linear = nn.Linear(in_features, out_features)\nself.divisor = divisor",
        "self.linear(x)",
        ["v = fmaxf(v, 0.f) / s0;"],
        scalars=["self.divisor"],
    ),
    Spec(
        69, "conv2d_hardswish_relu", "elementwise", _conv(), "self.conv(x)", [f"v = {HARDSWISH};", "v = fmaxf(v, 0.f);"]
    ),
    Spec(
        70,
        "gemm_sigmoid_scaling_residualadd",
        "elementwise",
        "self.gemm = nn.Linear(input_size, hidden_size)\nself.scaling_factor = scaling_factor",
        "self.gemm(x)",
        [f"v = ({SIGMOID}) * s0 + v;"],
        scalars=["self.scaling_factor"],
    ),
    Spec(
        71,
        "conv2d_divide_leakyrelu",
        "elementwise",
        _conv("\nself.divisor = divisor"),
        "self.conv(x)",
        ["v = v / s0;", "v = v > 0.f ? v : v * 0.01f;"],
        scalars=["self.divisor"],
    ),
    Spec(
        76,
        "gemm_add_relu",
        "elementwise",
        "self.gemm = nn.Linear(in_features, out_features, bias=False)\n"
        "self.bias = nn.Parameter(torch.randn(bias_shape))",
        "self.gemm(x)",
        ["v = fmaxf(v + p0[c], 0.f);"],
        vectors=["self.bias"],
        channel_dim_last=True,
    ),
    Spec(
        81,
        "gemm_swish_divide_clamp_tanh_clamp",
        "elementwise",
        "self.gemm = nn.Linear(in_features, out_features, bias=bias)",
        "self.gemm(x)",
        [
            f"v = v * ({SIGMOID});",
            "v = v / 2.f;",
            "v = fminf(fmaxf(v, -1.f), 1.f);",
            "v = tanhf(v);",
            "v = fminf(fmaxf(v, -1.f), 1.f);",
        ],
    ),
    Spec(
        86,
        "matmul_divide_gelu",
        "elementwise",
        "self.linear = nn.Linear(input_size, output_size)\nself.divisor = divisor",
        "self.linear(x)",
        ["v = v / s0;", f"v = {GELU};"],
        scalars=["self.divisor"],
    ),
    Spec(
        87,
        "conv2d_subtract_subtract_mish",
        "elementwise",
        _conv("\nself.subtract_value_1 = subtract_value_1\nself.subtract_value_2 = subtract_value_2"),
        "self.conv(x)",
        ["v = v - s0;", "v = v - s1;", f"v = {MISH};"],
        scalars=["self.subtract_value_1", "self.subtract_value_2"],
    ),
    Spec(
        99,
        "matmul_gelu_softmax",
        "softmax",
        "self.linear = nn.Linear(in_features, out_features)",
        "self.linear(x)",
        [f"v = {GELU};"],
    ),
    Spec(
        45,
        "gemm_sigmoid_logsumexp",
        "logsumexp",
        "self.linear1 = nn.Linear(input_size, hidden_size)\nself.linear2 = nn.Linear(hidden_size, output_size)",
        "self.linear2(torch.sigmoid(self.linear1(x)))",
    ),
    Spec(
        32,
        "conv2d_scaling_min",
        "channel_min",
        _conv("\nself.scale_factor = scale_factor"),
        "self.conv(x)",
        ["v = v * s0;"],
        scalars=["self.scale_factor"],
    ),
    Spec(25, "conv2d_min_tanh_tanh", "channel_min", _conv(), "self.conv(x)", post=["v = tanhf(tanhf(v));"]),
]

# Shrunk sizes for the CPU forms' problems (module-level constants of the KernelBench files).
CPU_SIZES = {
    "batch_size": 4,
    "in_channels": 3,
    "out_channels": 8,
    "height": 20,
    "width": 20,
    "kernel_size": 3,
    "in_features": 96,
    "out_features": 80,
    "input_size": 96,
    "hidden_size": 80,
    "output_size": 48,
}

WHAT = {
    "elementwise": "one fused elementwise pass over torch's output",
    "softmax": "one row kernel: GELU, then softmax over dim 1 (max, sum of exponentials, normalise)",
    "logsumexp": "one row kernel: logsumexp over dim 1 (max, then the sum of exponentials)",
    "channel_min": "one kernel: the minimum over channels, fused with the steps before and after it",
}


def _indent(text: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" if line else "\n" for line in text.splitlines())


def _params(spec: Spec, cuda: bool) -> tuple[str, str, str]:
    """(C parameter list, C argument list, binding parameters) for the vectors and scalars of a spec."""
    c_params = "".join(f", const float* {'__restrict__ ' if cuda else ''}p{i}" for i in range(len(spec.vectors)))
    c_params += "".join(f", float s{i}" for i in range(len(spec.scalars)))
    c_args = "".join(f", p{i}.data_ptr<float>()" for i in range(len(spec.vectors)))
    c_args += "".join(f", static_cast<float>(s{i})" for i in range(len(spec.scalars)))
    binding = "".join(f", torch::Tensor p{i}_in" for i in range(len(spec.vectors)))
    binding += "".join(f", double s{i}" for i in range(len(spec.scalars)))
    return c_params, c_args, binding


def _steps(statements: list[str]) -> str:
    return "\n".join(statements)


def _kernel_body(spec: Spec, cuda: bool) -> str:
    """The device (or CPU) code: the per-element functions and the kernels or loops."""
    c_params, _, _ = _params(spec, cuda)
    qual = "__device__ __forceinline__ " if cuda else "static inline "
    pre = f"{qual}float pre(float v, int64_t c{c_params}) {{\n{_indent(_steps(spec.steps), 4)}    return v;\n}}\n"
    if spec.kind == "channel_min":
        pre += f"{qual}float post(float v) {{\n{_indent(_steps(spec.post), 4)}    return v;\n}}\n"
    return pre


def _call_pre(spec: Spec) -> str:
    args = "".join(f", p{i}" for i in range(len(spec.vectors))) + "".join(f", s{i}" for i in range(len(spec.scalars)))
    return args


def _cuda_sources(spec: Spec) -> str:
    c_params, _, _ = _params(spec, cuda=True)
    extra = _call_pre(spec)
    head = "#include <cuda_runtime.h>\n#include <cstdint>\n#include <math.h>\n\n" + _kernel_body(spec, cuda=True)
    if spec.kind == "elementwise":
        kernel = f"""
__global__ void fused_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t n, int64_t channels,
                             int64_t inner{c_params}) {{
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {{
        dst[i] = pre(src[i], (i / inner) % channels{extra});
    }}
}}

void launch(const float* src, float* dst, int64_t n, int64_t channels, int64_t inner{c_params}, cudaStream_t stream) {{
    if (n == 0) return;
    const int threads = 256;
    const int64_t blocks = (n + threads - 1) / threads < 132 * 64 ? (n + threads - 1) / threads : 132 * 64;
    fused_kernel<<<(unsigned)blocks, threads, 0, stream>>>(src, dst, n, channels, inner{extra});
}}
"""
    elif spec.kind in ("softmax", "logsumexp"):
        write = (
            "    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) out[j] = expf(out[j] - m) / s;\n"
            if spec.kind == "softmax"
            else "    if (threadIdx.x == 0) dst[row] = isinf(m) ? m : m + logf(s);\n"
        )
        keep = "out[j] = v; " if spec.kind == "softmax" else ""
        reread = "out[j]" if spec.kind == "softmax" else f"pre(in[j], 0{extra})"
        setup = "    float* out = dst + row * cols;\n" if spec.kind == "softmax" else ""
        kernel = f"""
__device__ float block_reduce(float v, bool is_max) {{
    __shared__ float scratch[32];
    for (int offset = 16; offset > 0; offset >>= 1) {{
        const float o = __shfl_down_sync(0xffffffffu, v, offset);
        v = is_max ? fmaxf(v, o) : v + o;
    }}
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // scratch may still be read by the previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    const int warps = (blockDim.x + 31) >> 5;
    v = threadIdx.x < warps ? scratch[threadIdx.x] : (is_max ? -INFINITY : 0.f);
    if (warp == 0) {{
        for (int offset = 16; offset > 0; offset >>= 1) {{
            const float o = __shfl_down_sync(0xffffffffu, v, offset);
            v = is_max ? fmaxf(v, o) : v + o;
        }}
        if (lane == 0) scratch[0] = v;
    }}
    __syncthreads();
    return scratch[0];
}}

// One block per row: the row's maximum, then the sum of exp(v - max), then the result.
__global__ void row_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t cols{c_params}) {{
    const int64_t row = blockIdx.x;
    const float* in = src + row * cols;
{setup}    float m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{
        const float v = pre(in[j], 0{extra});
        {keep}m = fmaxf(m, v);
    }}
    m = block_reduce(m, true);
    float s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) s += isinf(m) ? 0.f : expf({reread} - m);
    s = block_reduce(s, false);
{write}}}

void launch(const float* src, float* dst, int64_t rows, int64_t cols{c_params}, cudaStream_t stream) {{
    if (rows == 0) return;
    row_kernel<<<(unsigned)rows, 256, 0, stream>>>(src, dst, cols{extra});
}}
"""
    else:
        kernel = f"""
// One thread per output element (n, s): the minimum over the C channels at spatial position s.
__global__ void channel_min_kernel(const float* __restrict__ src, float* __restrict__ dst, int64_t batch,
                                   int64_t channels, int64_t spatial{c_params}) {{
    const int64_t total = batch * spatial;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {{
        const int64_t n = i / spatial, s = i % spatial;
        const float* p = src + n * channels * spatial + s;
        float m = INFINITY;
        for (int64_t c = 0; c < channels; ++c) m = fminf(m, pre(p[c * spatial], c{extra}));
        dst[i] = post(m);
    }}
}}

void launch(const float* src, float* dst, int64_t batch, int64_t channels, int64_t spatial{c_params},
            cudaStream_t stream) {{
    const int64_t total = batch * spatial;
    if (total == 0) return;
    const int64_t blocks = (total + 255) / 256 < 132 * 64 ? (total + 255) / 256 : 132 * 64;
    channel_min_kernel<<<(unsigned)blocks, 256, 0, stream>>>(src, dst, batch, channels, spatial{extra});
}}
"""
    return head + kernel


def _wrapper(spec: Spec, cuda: bool) -> str:
    """The bound C++ function: checks, allocation and the launch (CUDA) or the loop (CPU)."""
    c_params, c_args, binding = _params(spec, cuda)
    device = "is_cuda()" if cuda else "is_cpu()"
    lines = [
        f'    TORCH_CHECK(y_in.{device} && y_in.scalar_type() == torch::kFloat32, "{spec.name}: y must be float32 on '
        f'{"CUDA" if cuda else "the CPU"}");',
        "    auto y = y_in.contiguous();",
    ]
    for i in range(len(spec.vectors)):
        lines.append(f"    auto p{i} = p{i}_in.contiguous();")
    if spec.kind == "elementwise":
        if spec.vectors:
            dim = "y.dim() - 1" if spec.channel_dim_last else "1"
            lines += [
                f"    const int64_t channels = y.size({dim});",
                f"    const int64_t inner = {'1' if spec.channel_dim_last else 'y.numel() / (y.size(0) * channels)'};",
            ]
            lines += [
                f'    TORCH_CHECK(p{i}.numel() == channels, "{spec.name}: one value per channel expected");'
                for i in range(len(spec.vectors))
            ]
        else:
            lines += ["    const int64_t channels = 1, inner = 1;"]
        lines.append("    auto out = torch::empty_like(y);")
        shape = "y.numel(), channels, inner"
    elif spec.kind in ("softmax", "logsumexp"):
        lines.append(f'    TORCH_CHECK(y.dim() == 2, "{spec.name}: expects a 2-D input");')
        alloc = "torch::empty_like(y)" if spec.kind == "softmax" else "torch::empty({y.size(0)}, y.options())"
        lines.append(f"    auto out = {alloc};")
        shape = "y.size(0), y.size(1)"
    else:
        lines += [
            f'    TORCH_CHECK(y.dim() >= 2, "{spec.name}: expects (N, C, ...)");',
            "    auto sizes = y.sizes().vec();",
            "    sizes[1] = 1;",
            "    auto out = torch::empty(sizes, y.options());",
            "    const int64_t spatial = y.numel() / (y.size(0) * y.size(1));",
        ]
        shape = "y.size(0), y.size(1), spatial"
    call = f"y.data_ptr<float>(), out.data_ptr<float>(), {shape}{c_args}"
    if cuda:
        lines += [
            f"    launch({call}, at::cuda::getCurrentCUDAStream());",
            f'    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "{spec.name}: kernel launch failed");',
        ]
    else:
        lines.append(f"    run({call});")
    lines.append("    return out;")
    fn = _function(spec)
    return f"torch::Tensor {fn}(torch::Tensor y_in{binding}) {{\n" + "\n".join(lines) + "\n}\n"


def _cpu_loops(spec: Spec) -> str:
    c_params, _, _ = _params(spec, cuda=False)
    extra = _call_pre(spec)
    body = _kernel_body(spec, cuda=False)
    if spec.kind == "elementwise":
        return (
            body
            + f"""
static void run(const float* src, float* dst, int64_t n, int64_t channels, int64_t inner{c_params}) {{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = pre(src[i], (i / inner) % channels{extra});
}}
"""
        )
    if spec.kind in ("softmax", "logsumexp"):
        finish = (
            "        for (int64_t j = 0; j < cols; ++j) out[j] = std::exp(out[j] - m) / s;\n"
            if spec.kind == "softmax"
            else "        dst[r] = std::isinf(m) ? m : m + std::log(s);\n"
        )
        store = "out[j] = v; " if spec.kind == "softmax" else ""
        value = "out[j]" if spec.kind == "softmax" else f"pre(in[j], 0{extra})"
        out_row = "        float* out = dst + r * cols;\n" if spec.kind == "softmax" else ""
        return (
            body
            + f"""
// Per row: the maximum, then the sum of exp(v - max), then the result.
static void run(const float* src, float* dst, int64_t rows, int64_t cols{c_params}) {{
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {{
        const float* in = src + r * cols;
{out_row}        float m = -INFINITY;
        for (int64_t j = 0; j < cols; ++j) {{
            const float v = pre(in[j], 0{extra});
            {store}m = std::fmax(m, v);
        }}
        float s = 0.f;
        for (int64_t j = 0; j < cols; ++j) s += std::isinf(m) ? 0.f : std::exp({value} - m);
{finish}    }}
}}
"""
        )
    return (
        body
        + f"""
// Per output element (n, s): the minimum over the C channels at spatial position s.
static void run(const float* src, float* dst, int64_t batch, int64_t channels, int64_t spatial{c_params}) {{
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch * spatial; ++i) {{
        const int64_t n = i / spatial, s = i % spatial;
        const float* p = src + n * channels * spatial + s;
        float m = INFINITY;
        for (int64_t c = 0; c < channels; ++c) m = std::fmin(m, pre(p[c * spatial], c{extra}));
        dst[i] = post(m);
    }}
}}
"""
    )


def _function(spec: Spec) -> str:
    return {"elementwise": "fused_epilogue", "softmax": "gelu_softmax", "logsumexp": "logsumexp_rows"}.get(
        spec.kind, "channel_min"
    )


def render(spec: Spec, task_name: str, init_args: str, cuda: bool) -> str:
    """One solution file."""
    device = "cuda" if cuda else "cpu"
    fn = _function(spec)
    vectors = "".join(f", {v}" for v in spec.vectors)
    scalars = "".join(f", float({s})" for s in spec.scalars)
    wrapper = _wrapper(spec, cuda)
    if cuda:
        cpp = (
            "#include <torch/extension.h>\n#include <ATen/cuda/CUDAContext.h>\n\n"
            f"void launch(const float* src, float* dst, int64_t a, int64_t b"
            f"{', int64_t c' if spec.kind != 'softmax' and spec.kind != 'logsumexp' else ''}"
            f"{_params(spec, True)[0].replace('__restrict__ ', '')}, cudaStream_t stream);\n\n" + wrapper
        )
        sources = f'cpp_source = r"""\n{cpp}"""\n\ncuda_source = r"""\n{_cuda_sources(spec)}"""\n'
        build = 'cpp_sources=cpp_source,\n    cuda_sources=cuda_source,\n    extra_cuda_cflags=["-O3"],'
    else:
        cpp = "#include <torch/extension.h>\n#include <cmath>\n\n" + _cpu_loops(spec) + "\n" + wrapper
        sources = f'cpp_source = r"""\n{cpp}"""\n'
        build = 'cpp_sources=cpp_source,\n    extra_cflags=["-O3", "-fopenmp"],\n    extra_ldflags=["-fopenmp"],'
    return f'''"""KernelBench level 2 problem {spec.problem} ({task_name}), mixed {device.upper()} solution.

torch computes `{spec.torch_part}`; the solution's own kernel does the rest: {WHAT[spec.kind]}.
Legal under the `kernelbench` policy; rejected under `cuda-agent` (torch_compute_in_forward). Generated by
generate.py; edit that, not this file.
"""

{"import torch" + chr(10) if "torch." in spec.init + spec.torch_part else ""}import torch.nn as nn
from torch.utils.cpp_extension import load_inline

{sources}
ext = load_inline(
    name="kbmix_l2_{spec.problem}_{device}",
    {build}
    functions=["{fn}"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, {init_args}):
        super().__init__()
{_indent(spec.init, 8)}
    def forward(self, x):
        x = {spec.torch_part}
        return ext.{fn}(x{vectors}{scalars})
'''


def shrink(code: str) -> str:
    """A KernelBench problem with its module-level sizes replaced by CPU_SIZES (the Model is unchanged)."""
    lines = []
    for line in code.splitlines():
        names = [n.strip() for part in line.split("=")[:-1] for n in part.split(",")] if "=" in line else []
        if names and not line.startswith((" ", "\t")) and all(n in CPU_SIZES for n in names):
            lines += [f"{name} = {CPU_SIZES[name]}" for name in names]
        else:
            lines.append(line)
    return "\n".join(lines) + "\n"


def write_all(out: Path, data_dir: Path | None = None) -> list[Path]:
    """Write every solution and CPU problem under `out`; returns the files written."""
    from cuda_agent.tasks import Catalog

    catalog = Catalog(data_dir=data_dir)
    written = []
    for spec in SPECS:
        task = catalog.resolve(f"kernelbench/L2/{spec.problem}")
        init_args = re.search(r"def __init__\(self, ([^)]*)\)", task.code).group(1)  # type: ignore[union-attr]
        files = {
            out / "cuda" / "L2" / f"{spec.problem}.py": render(spec, task.name, init_args, cuda=True),
            out / "cpu" / f"{spec.name}.py": render(spec, task.name, init_args, cuda=False),
            out / "cpu_problems" / f"{spec.name}.py": shrink(task.code),
        }
        for path, text in files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", type=Path, default=None, help="folder holding kernelbench/ (default ../shared)")
    parser.add_argument("--out", type=Path, default=HERE, help="where to write (default: this folder)")
    args = parser.parse_args()
    written = write_all(args.out, args.data_dir)
    print(f"wrote {len(written)} files ({len(SPECS)} tasks x cuda, cpu, cpu problem) under {args.out}")


if __name__ == "__main__":
    main()
