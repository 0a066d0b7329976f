"""Threat 1 (libraries): third-party libraries or non-GEMM/non-convolution cuBLAS/cuDNN do the work (static policy)."""

from __future__ import annotations

import pytest

from tests.judge.threats._static import checks, expect, solution


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "header",
    [
        "#include <cub/cub.cuh>",
        "#include <thrust/transform.h>",
        "#include <cutlass/gemm/device/gemm.h>",
        "#include <ATen/native/Activation.h>",
        "#include <ATen/ops/relu.h>",
        "#include <torch/nn/functional.h>",
        "#include <curand_kernel.h>",
        '#include "/usr/include/x.h"',
    ],
)
def test_rejects_forbidden_header(header: str) -> None:
    # kernelbench: any <system> header but those for threads, files and processes (torch and header-only CUDA
    # libraries compile into the candidate's own code, and the runtime checks that its kernels reach the output).
    kernelbench = {"forbidden_library"} if header.startswith('#include "') else set()
    assert checks(solution(headers=header)) == expect({"forbidden_library"}, kernelbench)


def test_rejects_library_namespaces_without_include() -> None:
    source = solution(launch="cub::DeviceReduce::Sum(nullptr, bytes, a, b, n);")
    assert checks(source) == expect({"forbidden_library"}, kernelbench=set())  # CUB is header-only
    assert checks(solution(launch="dnnl::stream s;")) == {"forbidden_library"}  # a prebuilt library in both


def test_rejects_cpu_blas_symbols() -> None:
    launch = "cblas_sgemm(101, 111, 111, 1, 1, 1, 1.f, a, 1, b, 1, 0.f, c, 1);"
    assert checks(solution(launch=launch)) == expect({"forbidden_library"})


@pytest.mark.parametrize(
    "launch",
    [
        "cublasSaxpy(handle, n, &one, x.data_ptr<float>(), 1, y.data_ptr<float>(), 1);",
        "cublasSgeam(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, &one, a, m, &zero, b, n, c, n);",
        "cudnnActivationForward(h, act, &one, xd, a, &zero, yd, b);",
        "cudnnSoftmaxForward(h, CUDNN_SOFTMAX_ACCURATE, CUDNN_SOFTMAX_MODE_CHANNEL, &one, xd, a, &zero, yd, b);",
    ],
    ids=["cublas_axpy", "cublas_geam", "cudnn_activation", "cudnn_softmax"],
)
def test_rejects_non_gemm_cublas_and_non_convolution_cudnn(launch: str) -> None:
    source = solution(headers="#include <cublas_v2.h>\n#include <cudnn.h>", launch=launch)
    assert checks(source) == expect({"cublas_misuse"}, kernelbench=set())  # any cuBLAS/cuDNN call


def test_accepts_cublas_gemm() -> None:
    launch = "cublasSgemm(at::cuda::getCurrentCUDABlasHandle(), CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &a, p, 1, p, 1, &b, q, 1);"
    assert checks(solution(headers="#include <cublas_v2.h>", launch=launch)) == set()


@pytest.mark.parametrize(
    ("argument", "flag"),
    [
        ("extra_ldflags", "-lcurand"),
        ("extra_ldflags", "-L/tmp/mylibs"),
        ("extra_cflags", "-include/tmp/hack.h"),
        ("extra_cuda_cflags", "-DMM=torch::matmul"),
        ("extra_cuda_cflags", "--default-stream=per-thread"),
    ],
)
def test_rejects_forbidden_build_flags(argument: str, flag: str) -> None:
    source = solution().replace('functions=["relu_forward"],', f'functions=["relu_forward"], {argument}=[{flag!r}],')
    assert checks(source) == expect({"forbidden_library"})


def test_rejects_macro_flag_that_names_a_tensor_method() -> None:
    flags = 'functions=["relu_forward"], extra_cuda_cflags=["-DOP=relu"],'
    source = solution(launch="y = x.OP();").replace('functions=["relu_forward"],', flags)
    assert checks(source) == expect({"cpp_torch_compute"}, kernelbench=set())  # torch may compute


def test_rejects_loading_native_libraries_from_python() -> None:
    assert checks(solution(prelude="torch.ops.load_library('/tmp/libhack.so')")) == expect({"forbidden_library"})
