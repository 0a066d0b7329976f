"""The static policy: legit solutions of every common shape pass untouched; the rules' plumbing works.

Hacks, one file per threat, are in `tests/judge/threats/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge import policy
from cuda_agent.judge.policy import KERNELBENCH_DIFFERENCES, RULES, check_policy
from cuda_agent.judge.policy import build as policy_build
from cuda_agent.judge.policy import cpp as policy_cpp
from cuda_agent.judge.policy import forward as policy_forward
from cuda_agent.judge.policy import triton as policy_triton
from cuda_agent.judge.solution import SolutionSource, read_solution

EXAMPLE_SOLUTIONS = Path(__file__).resolve().parents[2] / "cuda_agent" / "tasks" / "examples" / "solutions"

CPU_OPENMP = r'''
import math
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <omp.h>

// Scaled row softmax; a comment naming torch::softmax or x.sum() must not matter.
torch::Tensor scaled_softmax(torch::Tensor x, double scale) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat, "x must be contiguous float32");
    const int64_t cols = x.size(-1);
    const int64_t rows = x.numel() / cols;
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const float s = static_cast<float>(scale);
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r) {
            float m = -INFINITY, total = 0.f;
            for (int64_t c = 0; c < cols; ++c) m = std::max(m, src[r * cols + c] * s);
            for (int64_t c = 0; c < cols; ++c) {
                dst[r * cols + c] = std::exp(src[r * cols + c] * s - m);
                total += dst[r * cols + c];
            }
            for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] /= total;
        }
    });
    return out;
}

torch::Tensor add_bias(torch::Tensor x, torch::Tensor bias) {
    auto out = torch::empty_like(x);
    const int64_t n = x.numel(), d = bias.numel();
    const float* xp = x.data_ptr<float>();
    const float* bp = bias.data_ptr<float>();
    float* op = out.data_ptr<float>();
#pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) op[i] = xp[i] + bp[i % d];
    return out;
}
"""

ext = load_inline(
    name="legit_cpu_softmax",
    cpp_sources=[cpp_source],
    functions=["scaled_softmax", "add_bias"],
    extra_cflags=["-O3", "-fopenmp", "-march=native"],
    extra_ldflags=["-fopenmp"],
)

BLOCK = 16


def _out_features(dim: int, factor: int = 2) -> int:
    return (dim + BLOCK - 1) // BLOCK * BLOCK * factor // 2


class ModelNew(nn.Module):
    def __init__(self, dim: int, temperature: float = 2.0):
        super().__init__()
        self.scale = 1.0 / math.sqrt(temperature)
        self.bias = nn.Parameter(torch.zeros(_out_features(dim)))
        self.ext = ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, *rest = x.shape
        flat = x.reshape(batch, -1) if len(rest) > 1 else x
        assert flat.size(-1) == _out_features(flat.size(-1))
        y = self._softmax(flat.contiguous(), self.scale * 1.0)
        return self.ext.add_bias(y, self.bias).view(x.shape)

    def _softmax(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        if x.dim() != 2 or x.numel() == 0:
            raise ValueError("expected a non-empty matrix")
        return self.ext.scaled_softmax(x, scale)
'''

CUDA_SOFTMAX = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cooperative_groups.h>
#include <cfloat>

namespace cg = cooperative_groups;

template <typename scalar_t>
__device__ __forceinline__ scalar_t warp_max(scalar_t v) {
    #pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffff, v, offset));
    return v;
}

template <typename scalar_t>
__global__ void softmax_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int cols) {
    extern __shared__ float shared[];
    cg::thread_block block = cg::this_thread_block();
    const scalar_t* row = x + (size_t)blockIdx.x * cols;
    float m = -FLT_MAX;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    m = warp_max(m);
    if (threadIdx.x % 32 == 0) shared[threadIdx.x / 32] = m;
    block.sync();
    float total = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) total += __expf(row[c] - shared[0]);
    atomicAdd(&shared[32], total);
    __syncthreads();
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(size_t)blockIdx.x * cols + c] = __expf(row[c] - shared[0]) / shared[32];
}

torch::Tensor softmax_forward(const torch::Tensor& x) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    const at::cuda::OptionalCUDAGuard guard(device_of(x));
    auto y = at::empty_like(x);
    const int rows = x.size(0), cols = x.size(1);
    const int threads = 256;
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "softmax_forward", ([&] {
        softmax_kernel<scalar_t><<<rows, threads, 33 * sizeof(float), at::cuda::getCurrentCUDAStream()>>>(
            x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(), cols);
    }));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

ext = load_inline(
    name="legit_cuda_softmax",
    cpp_sources="torch::Tensor softmax_forward(const torch::Tensor& x);",
    cuda_sources=cuda_source,
    functions=["softmax_forward"],
    extra_cuda_cflags=["-O3", "--use_fast_math", "-lineinfo"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        rows = x.numel() // x.size(-1)
        out = ext.softmax_forward(x.reshape(rows, x.size(-1)).contiguous())
        return out.view(*x.shape[:-1], x.shape[-1])
'''

CUBLAS_SGEMM = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cublas_v2.h>

torch::Tensor matmul_forward(torch::Tensor a, torch::Tensor b) {
    const int M = a.size(0), K = a.size(1), N = b.size(1);
    auto c = torch::empty({M, N}, a.options());
    cublasHandle_t handle = at::cuda::getCurrentCUDABlasHandle();
    cublasSetStream(handle, at::cuda::getCurrentCUDAStream());
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
    const float alpha = 1.f, beta = 0.f;
    // Row-major C = A B is column-major C^T = B^T A^T.
    cublasStatus_t status = cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &alpha, b.data_ptr<float>(), N,
                                        a.data_ptr<float>(), K, &beta, c.data_ptr<float>(), N);
    TORCH_CHECK(status == CUBLAS_STATUS_SUCCESS, "cublasSgemm failed: ", cublasGetStatusString(status));
    return c;
}
"""

ext = load_inline(
    name="legit_cublas",
    cpp_sources=cpp_source,
    functions=["matmul_forward"],
    with_cuda=True,
    extra_ldflags=["-lcublas"],
)


class ModelNew(nn.Module):
    def forward(self, a, b):
        return ext.matmul_forward(a.contiguous(), b.contiguous())
'''

CUDNN_CONV = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import CUDA_HOME, load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cudnn.h>

#define CUDNN_OK(expr) TORCH_CHECK((expr) == CUDNN_STATUS_SUCCESS, #expr " failed")

void add_bias_relu(float* y, const float* bias, int64_t channels, int64_t plane, int64_t total, cudaStream_t s);

torch::Tensor conv_bias_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias, int64_t stride, int64_t padding) {
    static cudnnHandle_t handle = nullptr;
    if (handle == nullptr) CUDNN_OK(cudnnCreate(&handle));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    CUDNN_OK(cudnnSetStream(handle, stream));
    const int n = x.size(0), c = x.size(1), h = x.size(2), wd = x.size(3);
    const int k = w.size(0), r = w.size(2), s = w.size(3);
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wdsc;
    cudnnConvolutionDescriptor_t cd;
    CUDNN_OK(cudnnCreateTensorDescriptor(&xd));
    CUDNN_OK(cudnnCreateTensorDescriptor(&yd));
    CUDNN_OK(cudnnCreateFilterDescriptor(&wdsc));
    CUDNN_OK(cudnnCreateConvolutionDescriptor(&cd));
    CUDNN_OK(cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, wd));
    CUDNN_OK(cudnnSetFilter4dDescriptor(wdsc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, k, c, r, s));
    CUDNN_OK(cudnnSetConvolution2dDescriptor(cd, padding, padding, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                             CUDNN_DATA_FLOAT));
    CUDNN_OK(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
    int on, oc, oh, ow;
    CUDNN_OK(cudnnGetConvolution2dForwardOutputDim(cd, xd, wdsc, &on, &oc, &oh, &ow));
    CUDNN_OK(cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, on, oc, oh, ow));
    auto y = torch::empty({on, oc, oh, ow}, x.options());
    const auto algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    size_t bytes = 0;
    CUDNN_OK(cudnnGetConvolutionForwardWorkspaceSize(handle, xd, wdsc, cd, yd, algo, &bytes));
    auto workspace = torch::empty({(int64_t)bytes}, x.options().dtype(torch::kUInt8));
    const float one = 1.f, zero = 0.f;
    CUDNN_OK(cudnnConvolutionForward(handle, &one, xd, x.data_ptr<float>(), wdsc, w.data_ptr<float>(), cd, algo,
                                     workspace.data_ptr(), bytes, &zero, yd, y.data_ptr<float>()));
    add_bias_relu(y.data_ptr<float>(), bias.data_ptr<float>(), oc, (int64_t)oh * ow, y.numel(), stream);
    cudnnDestroyTensorDescriptor(xd);
    cudnnDestroyTensorDescriptor(yd);
    cudnnDestroyFilterDescriptor(wdsc);
    cudnnDestroyConvolutionDescriptor(cd);
    return y;
}
"""

cuda_source = r"""
#include <cuda_runtime.h>
#include <cstdint>

__global__ void bias_relu_kernel(float* y, const float* bias, int64_t channels, int64_t plane, int64_t total) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const float v = y[i] + bias[(i / plane) % channels];
        y[i] = v > 0.f ? v : 0.f;
    }
}

void add_bias_relu(float* y, const float* bias, int64_t channels, int64_t plane, int64_t total, cudaStream_t s) {
    bias_relu_kernel<<<1024, 256, 0, s>>>(y, bias, channels, plane, total);
}
"""

ext = load_inline(
    name="legit_cudnn",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["conv_bias_relu"],
    extra_ldflags=["-lcudnn", f"-L{CUDA_HOME}/lib64"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: int = 0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding)
        self.stride, self.padding = stride, padding
        self.kernel_size = kernel_size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c, h, w = x.shape
        out_h = (h + 2 * self.padding - self.kernel_size) // self.stride + 1
        if out_h <= 0 or x.dtype != torch.float32:
            raise RuntimeError(f"unsupported input of shape {tuple(x.shape)}")
        for axis in range(2):
            assert x.size(axis + 2) >= self.kernel_size
        weight = self.conv.weight
        return ext.conv_bias_relu(x.contiguous(), weight, self.conv.bias, self.stride, self.padding)
'''

WORKSPACE_PYTHON = """
import torch
import torch.nn as nn

import cuda_extension


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return cuda_extension.relu_forward(x)
"""

WORKSPACE_SOURCES = {
    "kernels/relu.cuh": "#pragma once\n#include <cuda_runtime.h>\nvoid launch_relu(const float*, float*, long, cudaStream_t);\n",
    "kernels/relu.cu": """
#include "relu.cuh"

__global__ void relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

void launch_relu(const float* x, float* y, long n, cudaStream_t stream) {
    relu_kernel<<<(n + 255) / 256, 256, 0, stream>>>(x, y, n);
}
""",
    "kernels/relu_binding.cpp": """
#include <torch/types.h>
#include <torch/csrc/utils/pybind.h>
#include <ATen/cuda/CUDAContext.h>
#include "../binding_registry.h"
#include "relu.cuh"

torch::Tensor relu_forward(torch::Tensor input) {
    TORCH_CHECK(input.is_cuda() && input.is_contiguous(), "relu_forward: contiguous CUDA input expected");
    torch::Tensor output = torch::empty_like(input);
    launch_relu(input.data_ptr<float>(), output.data_ptr<float>(), input.numel(), at::cuda::getCurrentCUDAStream());
    return output;
}

REGISTER_BINDING(relu, [](pybind11::module& m) { m.def("relu_forward", &relu_forward); });
""",
}

HALF_GEMM = CUBLAS_SGEMM.replace(
    "cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);", "cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);"
)


def checks(python: str, device: str = "cuda", **kwargs) -> list[str]:
    return [v.check for v in check_policy(SolutionSource(python=python, **kwargs), device)]


@pytest.mark.parametrize(
    ("source", "device"),
    [(CPU_OPENMP, "cpu"), (CUDA_SOFTMAX, "cuda"), (CUBLAS_SGEMM, "cuda"), (CUDNN_CONV, "cuda")],
    ids=["cpu_openmp", "cuda_softmax", "cublas_sgemm", "cudnn_conv"],
)
def test_legit_single_file_solution_has_no_violations(source: str, device: str) -> None:
    assert check_policy(SolutionSource(python=source), device) == []


def test_legit_workspace_solution_has_no_violations() -> None:
    solution = SolutionSource(python=WORKSPACE_PYTHON, python_name="model_new.py", sources=WORKSPACE_SOURCES)
    assert check_policy(solution, "cuda") == []


FORWARD_TEMPLATE = """
import math
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="k", cpp_sources="torch::Tensor f(torch::Tensor x);", functions=["f"])


class ModelNew(nn.Module):
    def __init__(self, n_layers: int = 2, heads: int = 4):
        super().__init__()
        self.ws = nn.ParameterList([nn.Parameter(torch.randn(4, 4)) for _ in range(n_layers)])
        self.heads, self.eps = heads, 1e-5

    def forward(self, x, dim: int = -1):
        BODY
"""


@pytest.mark.parametrize(
    "body",
    [
        "B, T, C = x.size()\nq = ext.f(x.view(B * T, C))\nreturn q.view(B, T, self.heads, C // self.heads)",
        "for i in range(len(self.ws)):\n    x = ext.f(x, self.ws[i])\nreturn x",
        "for w in self.ws:\n    x = ext.f(x, w)\nreturn x",
        "with torch.no_grad():\n    n = x.size(0)\n    return ext.f(x).view(n, -1)",
        "return ext.f(x, dim % x.dim(), 1.0 / math.sqrt(x.shape[-1]), self.eps)",
        "out = torch.empty(x.shape[:-1] + (x.shape[-1] * 2,), device=x.device, dtype=x.dtype)\nreturn ext.f(x, out)",
        "if x.dim() != 3 or x.dtype != torch.float32 or not x.is_contiguous():\n    x = x.contiguous()\nreturn ext.f(x)",
        "outs = ext.f(x)\nreturn outs[0], outs[1][:, : x.size(1) // 2]",
        "y = ext.f(x.reshape(-1))\nreturn y.view_as(x) if x.dim() > 1 else y.reshape_as(x)",
    ],
    ids=["shapes", "range_loop", "param_loop", "no_grad", "scalars", "allocation", "checks", "tuple_results", "as_x"],
)
def test_legit_forward_patterns_have_no_violations(body: str) -> None:
    source = FORWARD_TEMPLATE.replace("BODY", body.replace("\n", "\n        "))
    assert check_policy(SolutionSource(python=source), "cuda") == []


@pytest.mark.parametrize(
    ("imports", "call"),
    [
        ("import cuda_extension", "cuda_extension.relu_forward(x)"),
        ("import cuda_extension as ce", "ce.relu_forward(x)"),
        ("from cuda_extension import relu_forward", "relu_forward(x)"),
    ],
)
def test_workspace_import_spellings(imports: str, call: str) -> None:
    python = WORKSPACE_PYTHON.replace("import cuda_extension", imports).replace("cuda_extension.relu_forward(x)", call)
    solution = SolutionSource(python=python, python_name="model_new.py", sources=WORKSPACE_SOURCES)
    assert check_policy(solution, "cuda") == []


def test_workspace_kernel_files_are_checked() -> None:
    sources = {
        **WORKSPACE_SOURCES,
        "kernels/relu.cu": WORKSPACE_SOURCES["kernels/relu.cu"] + "\nvoid f() { exit(1); }\n",
    }
    solution = SolutionSource(python=WORKSPACE_PYTHON, python_name="model_new.py", sources=sources)
    [violation] = check_policy(solution, "cuda")
    assert violation.check == "file_or_network_access"
    assert violation.message.startswith("kernels/relu.cu:13: uses `exit`;")


def _example_solutions() -> list[Path]:
    return sorted(EXAMPLE_SOLUTIONS.glob("*/*.py"))


@pytest.mark.parametrize("path", _example_solutions(), ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bundled_example_solution_has_no_violations(path: Path) -> None:
    assert check_policy(read_solution(path), path.parent.name) == []


def test_syntax_error_is_the_only_violation() -> None:
    violations = check_policy(SolutionSource(python="import os\nclass ModelNew(:\n"), "cpu")
    assert [v.check for v in violations] == ["syntax_error"]
    assert violations[0].message.startswith("solution.py:2:")


def test_message_says_what_where_and_what_is_allowed() -> None:
    source = CUDA_SOFTMAX.replace(
        "rows = x.numel() // x.size(-1)", "rows = x.numel() // x.size(-1)\n        x = x.relu()"
    )
    [violation] = check_policy(SolutionSource(python=source), "cuda")
    line = source.splitlines().index("        x = x.relu()") + 1
    assert violation.check == "torch_compute_in_forward"
    assert violation.message.startswith(f"solution.py:{line}: calls the method `.relu()`;")
    assert "functions of the compiled extension" in violation.message


def test_cpp_message_names_the_line_inside_the_file() -> None:
    source = CUBLAS_SGEMM.replace("return c;", "return c.relu();")
    [violation] = check_policy(SolutionSource(python=source), "cuda")
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "return c.relu();" in text)
    assert (violation.check, violation.message.split(": ")[0]) == ("cpp_torch_compute", f"solution.py:{line}")


def test_precision_rule_applies_only_to_float32_tasks() -> None:
    solution = SolutionSource(python=HALF_GEMM)
    assert [v.check for v in check_policy(solution, "cuda")] == ["precision_downcast"]
    assert check_policy(solution, "cuda", task_dtypes={"torch.float32", "torch.int64"})[0].check == "precision_downcast"
    assert check_policy(solution, "cuda", task_dtypes={"torch.float16"}) == []


def test_comments_and_string_literals_do_not_trigger_cpp_rules() -> None:
    text = '// torch::matmul(a, b)\n/* std::thread t; fopen("x") */\nconst char* s = "x.sum() cudaStreamCreate";\n'
    assert policy_cpp.check_cpp(text, lambda _offset: "k.cu:1", strict_precision=True, local_headers=set()) == []


def test_blanking_keeps_offsets() -> None:
    text = 'int a; // c\nconst char* s = "q";\n'
    with_literals, code = policy_cpp.blank_comments_and_literals(text)
    assert len(with_literals) == len(code) == len(text)
    assert code.count("\n") == text.count("\n") and '"q"' in with_literals and '"q"' not in code


def test_every_rule_is_described() -> None:
    advice = [policy._ADVICE, policy_build.ADVICE, policy_cpp.ADVICE, policy_forward.ADVICE, policy_triton.ADVICE]
    with_advice = {rule for table in advice for rule in table} | {"syntax_error"}
    assert with_advice == set(RULES)
    assert all(description.endswith(".") for description in RULES.values())


# The two policies (issue 22): kernelbench lets torch mix with the candidate's kernels; cuda-agent does not.

MIXED = Path(__file__).resolve().parents[2] / "solutions" / "kernelbench_mixed"
MIXED_FILES = sorted([*MIXED.glob("cpu/*.py"), *MIXED.glob("cuda/L2/*.py")])


def test_mixed_solutions_are_at_least_twenty_of_each_form() -> None:
    forms = [path.parent.name for path in MIXED_FILES]
    assert forms.count("cpu") >= 20 and forms.count("L2") >= 20


@pytest.mark.parametrize("path", MIXED_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_mixed_solution_passes_kernelbench_and_is_rejected_under_cuda_agent(path: Path) -> None:
    source = SolutionSource(python=path.read_text())
    device = "cuda" if "cuda" in path.parts else "cpu"
    assert check_policy(source, device, policy="kernelbench") == []
    assert "torch_compute_in_forward" in {v.check for v in check_policy(source, device, policy="cuda-agent")}


def test_mixed_solutions_match_their_generator(tmp_path: Path, shared_dir: Path) -> None:
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location("kernelbench_mixed_generate", MIXED / "generate.py")
    assert spec is not None and spec.loader is not None
    generate = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = generate  # dataclasses look their module up there
    spec.loader.exec_module(generate)
    for path in generate.write_all(tmp_path, shared_dir):
        committed = MIXED / path.relative_to(tmp_path)
        assert committed.read_text() == path.read_text(), f"{committed} is stale: run {MIXED / 'generate.py'}"


def _kb(source: str, device: str = "cuda") -> set[str]:
    return {v.check for v in check_policy(SolutionSource(python=source), device, policy="kernelbench")}


def _ca(source: str, device: str = "cuda") -> set[str]:
    return {v.check for v in check_policy(SolutionSource(python=source), device)}


MIXED_TEMPLATE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.cpp_extension import load_inline
PRELUDE
cpp_source = r"""
#include <torch/extension.h>
HEADERS
torch::Tensor scale_rows(torch::Tensor x) {
    auto y = torch::empty_like(x);
    BODY
    return y;
}
"""
ext = load_inline(name="mixed", cpp_sources=cpp_source, functions=["scale_rows"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        FORWARD
'''


def mixed(prelude: str = "", headers: str = "", body: str = "", forward: str = "") -> str:
    forward = forward or "return ext.scale_rows(F.gelu(self.linear(x)) @ x.t())"
    return (
        MIXED_TEMPLATE.replace("PRELUDE", prelude)
        .replace("HEADERS", headers)
        .replace("BODY", body)
        .replace("FORWARD", forward.replace("\n", "\n        "))
    )


def test_kernelbench_allows_torch_in_forward_and_cpp() -> None:
    body = "y = at::softmax(x, 1) * 2; auto z = x.sum(); (void)z;"
    assert _kb(mixed(body=body, headers="#include <ATen/ops/softmax.h>")) == set()
    assert _ca(mixed(body=body)) >= {"forbidden_import", "torch_compute_in_forward", "cpp_torch_compute"}


def test_reading_the_thread_or_core_count_is_neither_compute_nor_system_access() -> None:
    # Honest solutions size their parallel work by the threads or cores they have: under cuda-agent
    # torch.get_num_threads in forward read as torch compute, and os.cpu_count anywhere as reaching the system.
    from tests.judge.threats._static import solution

    source = solution(
        prelude="import os\nCORES = os.cpu_count()",
        forward="threads = torch.get_num_threads()\nreturn ext.relu_forward(x.contiguous())",
    )
    assert _ca(source) == set() and _kb(source) == set()
    assert _ca(solution(prelude="from os import cpu_count\nCORES = cpu_count()")) == set()
    assert _ca(solution(prelude="import os\nCORES = os.cpu_times()")) == {"file_or_network_access"}


def test_kernelbench_still_needs_a_kernel_call_in_forward() -> None:
    assert _kb(mixed(forward="return F.gelu(self.linear(x))")) == {"forward_calls_no_kernel"}


@pytest.mark.parametrize(
    ("prelude", "forward", "rule"),
    [
        ("", "with torch.cuda.stream(torch.cuda.Stream()):\n    return ext.scale_rows(x)", "side_stream"),
        ("import threading", "return ext.scale_rows(x)", "forbidden_import"),
        ("torch.backends.cudnn.benchmark = True", "return ext.scale_rows(x)", "global_state_change"),
        ("", "return ext.scale_rows(x.half())", "precision_downcast"),
        ("", "return ext.scale_rows(torch.compile(self.linear)(x))", "forbidden_library"),
        ("", "torch._C._set_grad_enabled(False)\nreturn ext.scale_rows(x)", "global_state_change"),
        ("", "try:\n    return ext.scale_rows(x)\nexcept RuntimeError:\n    return x", "try_except"),
        ("", "return ext.scale_rows(torch.load('/tmp/ref.pt'))", "file_or_network_access"),
    ],
    ids=["stream", "threading", "backend_flag", "fp16", "torch_compile", "torch_private", "try", "torch_load"],
)
def test_kernelbench_keeps_what_fakes_a_speedup_or_a_result(prelude: str, forward: str, rule: str) -> None:
    assert rule in _kb(mixed(prelude=prelude, forward=forward))


def test_kernelbench_refuses_dispatch_key_guards_in_cpp() -> None:
    body = "c10::impl::ExcludeDispatchKeyGuard guard(c10::DispatchKey::Python); y = x * 2;"
    assert _kb(mixed(body=body)) == {"global_state_change"}


def test_kernelbench_allows_header_only_libraries_but_not_threads_or_files() -> None:
    assert _kb(mixed(headers="#include <thrust/device_vector.h>\n#include <cub/cub.cuh>")) == set()
    assert _kb(mixed(headers="#include <thread>")) == {"forbidden_library"}
    assert _kb(mixed(headers="#include <fstream>")) == {"forbidden_library"}
    assert _kb(mixed(body="cblas_sgemm(101, 111, 111, 1, 1, 1, 1.f, a, 1, b, 1, 0.f, c, 1);")) == {"forbidden_library"}


LINEAR_INIT = """
import math
from torch.nn.modules.utils import _pair
KERNEL = _pair(3)


class ModelNew(nn.Module):
    def __init__(self, n=8):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, n))
        self.bias = nn.Parameter(torch.empty(n))
        self.stride = torch.nn.modules.utils._pair(1)
        fan_in, _ = nn.init._calculate_fan_in_and_fan_out(self.weight)
        self.reset_parameters()

    def reset_parameters(self):
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(self.weight)
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        FORWARD
"""


def _linear_init(forward: str = "return ext.scale_rows(F.linear(x, self.weight, self.bias))", init: str = "") -> str:
    own = LINEAR_INIT.replace("FORWARD", forward.replace("\n", "\n        "))
    own = own.replace("        self.reset_parameters()\n", "        self.reset_parameters()\n" + init)
    return mixed().split("class ModelNew")[0] + own


def test_kernelbench_allows_torchs_private_helpers_where_the_model_is_built() -> None:
    """Issue 38 item 1: `torch.nn.init._calculate_fan_in_and_fan_out`, copied from nn.Linear's own initialisation,
    and `_pair` at module level, in `__init__` and in a method only __init__ calls pass under kernelbench."""
    assert check_policy(SolutionSource(python=_linear_init()), "cuda", policy="kernelbench") == []


@pytest.mark.parametrize(
    ("forward", "init", "rule"),
    [
        ("fan, _ = nn.init._calculate_fan_in_and_fan_out(x)\nreturn ext.scale_rows(x)", "", "dynamic_code"),
        ("self.reset_parameters()\nreturn ext.scale_rows(x)", "", "dynamic_code"),  # now forward's reach
        ("return ext.scale_rows(x)", "        nn.modules.module._global_forward_hooks.clear()\n", "dynamic_code"),
        ("return ext.scale_rows(x)", "        self.m = torch.storage.collections._sys.modules\n", "dynamic_code"),
        (
            "return ext.scale_rows(self.f(x))",
            "        self.f = lambda t: nn.init._no_grad_fill_(t, 0)\n",
            "dynamic_code",
        ),
        ("return ext.scale_rows(x)", "        self.g = torch._C._DisableTorchDispatch()\n", "global_state_change"),
        ("return ext.scale_rows(x)", "        self.h = nn.init._calculate_fan_in_and_fan_out\n", "dynamic_code"),
    ],
    ids=["in_forward", "method_forward_calls", "hook_table", "held_sys", "lambda", "torch_private", "not_called"],
)
def test_kernelbench_keeps_private_names_guarded_beyond_building_the_model(forward: str, init: str, rule: str) -> None:
    """Forward's reach, private names that are not the called helper, and torch's own internals stay refused;
    the message says the rule is this judge's, not KernelBench's, and why."""
    violations = check_policy(SolutionSource(python=_linear_init(forward, init)), "cuda", policy="kernelbench")
    [violation] = [v for v in violations if v.check == rule]
    assert violation.message.endswith(f" Differs from KernelBench: {KERNELBENCH_DIFFERENCES[rule]}.")
    cuda_agent = check_policy(SolutionSource(python=_linear_init(forward, init)), "cuda")
    assert all("KernelBench" not in v.message for v in cuda_agent)


def test_unknown_policy_is_an_error() -> None:
    with pytest.raises(ValueError, match="kernelbench"):
        check_policy(SolutionSource(python=mixed()), "cuda", policy="kernel-bench")


# The review of cuda-agent's harmless-pattern rejections (SKILL.md says why each remaining rule stays).

CUDA_AGENT_OK = '''
import os
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
torch::Tensor row_sum(torch::Tensor x, torch::Tensor out) {
    auto acc = torch::zeros({x.size(0)}, x.options());
    (void)acc;
    return out;
}
"""
ext = load_inline(name="rows", cpp_sources=cpp_source, functions=["row_sum"])

try:
    BLOCK = int(os.environ.get("ROW_SUM_BLOCK", "256"))
except ValueError:
    BLOCK = 256


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros(x.size(0), device=x.device, dtype=x.dtype)
        return ext.row_sum(x, x.new_zeros(x.size(0)) if BLOCK > 0 else out)
'''


def test_cuda_agent_accepts_environment_reads_a_try_off_the_timed_path_and_zeros() -> None:
    assert _ca(CUDA_AGENT_OK, "cpu") == set()


def test_cuda_agent_still_refuses_a_try_on_the_timed_path_and_environment_writes() -> None:
    in_forward = CUDA_AGENT_OK.replace(
        "        out = torch.zeros",
        "        try:\n            pass\n        except ValueError:\n            pass\n        out = torch.zeros",
    )
    assert _ca(in_forward, "cpu") == {"try_except"}
    writes = CUDA_AGENT_OK.replace("BLOCK = 256\n", 'BLOCK = 256\nos.environ["OMP_NUM_THREADS"] = "1"\n', 1)
    assert _ca(writes, "cpu") == {"global_state_change"}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["matmul_gelu_softmax", "conv2d_min_tanh_tanh"])
def test_mixed_cpu_solution_passes_the_judge_under_kernelbench_only(tmp_path: Path, name: str) -> None:
    from cuda_agent.judge import JudgeConfig, judge
    from cuda_agent.tasks import Catalog

    task = Catalog().resolve(str(MIXED / "cpu_problems" / f"{name}.py"))
    solution = MIXED / "cpu" / f"{name}.py"
    verdict = judge(task, solution, JudgeConfig(device="cpu", policy="kernelbench", time=False))
    assert (verdict.verdict, verdict.policy) == ("pass", "kernelbench"), verdict.message
    assert verdict.custom_kernel_time_fraction is not None and 0 < verdict.custom_kernel_time_fraction < 1
    rejected = judge(task, solution, JudgeConfig(device="cpu", time=False))
    assert (rejected.verdict, rejected.policy) == ("rejected", "cuda-agent")
    assert "torch_compute_in_forward" in {v.check for v in rejected.violations}


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("int fd = open64(path, 0);", True),
        ("int fd = openat2(3, path, 0, 0);", True),
        ("auto n = preadv2(3, 0, 0, 0, 0);", True),
        ("auto at = lseek64(3, 0, 0);", True),
        ("float v = open_interval_clamp(1.0f);", False),
        ("float v = pread_tile(1.0f);", False),
        ("float v = lseek_window(1.0f);", False),
    ],
)
def test_cpp_file_names_are_libcs_not_every_name_that_starts_so(line: str, refused: bool) -> None:
    # A helper of the candidate's own whose name starts like a libc call is no file access (an honest false refusal).
    text = f"static float open_interval_clamp(float v) {{ return v; }}\nvoid f(const char* path) {{ {line} }}\n"
    found = policy_cpp.check_cpp(text, lambda _offset: "k.cpp:1", strict_precision=True, local_headers=set())
    assert ("file_or_network_access" in {v.check for v in found}) == refused, found
