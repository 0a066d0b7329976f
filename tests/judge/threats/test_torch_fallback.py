"""Threat 1: torch does the work instead of the candidate's kernel, in Python or in C++ (static and runtime)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.judge.threats import _static
from tests.judge.threats._hacks import checks_of, judge_hack, judge_pool_hack, model_new
from tests.judge.threats._static import LAUNCH, checks, expect, solution

MIXED = set()
"""Under kernelbench torch may compute beside the candidate's kernels, so these pass the static policy there; the
runtime check that the kernels reach the outputs (the runtime tests below) rejects the ones that are torch alone."""


def test_template_is_legit() -> None:
    assert checks(solution()) == set()


@pytest.mark.parametrize(
    "forward",
    [
        "return torch.relu(x)",
        "return x.relu()",
        "return torch.ops.aten.relu.default(x)",
        "return torch._C._nn.gelu(x)",
        "r = torch.relu\nreturn r(x)",
        "return getattr(torch, 'relu')(x)",
        "return x.float()",
    ],
    ids=["torch_function", "tensor_method", "aten_op", "torch_C", "alias", "getattr_literal", "dtype_cast"],
)
def test_rejects_torch_fallback_in_forward(forward: str) -> None:
    # kernelbench: forward must still call the extension; torch's private internals are refused there too.
    # torch's private names are dynamic_code under cuda-agent (a chain through a private name), kernelbench's
    # own rule names them global_state_change.
    private = "_C" in forward
    kernelbench = {"forward_calls_no_kernel"} | ({"global_state_change"} if private else set())
    cuda_agent = {"torch_compute_in_forward", "forward_calls_no_kernel"} | ({"dynamic_code"} if private else set())
    assert checks(solution(forward=forward)) == expect(cuda_agent, kernelbench)


def test_rejects_torch_fallback_next_to_a_kernel_call() -> None:
    source = solution(forward="y = ext.relu_forward(x)\nreturn torch.clamp(y, max=6.0)")
    assert checks(source) == expect({"torch_compute_in_forward"}, MIXED)


def test_rejects_functional_import_and_call() -> None:
    source = solution(prelude="import torch.nn.functional as F", forward="return F.relu(x)")
    assert checks(source) == expect(
        {"forbidden_import", "torch_compute_in_forward", "forward_calls_no_kernel"}, {"forward_calls_no_kernel"}
    )


def test_rejects_names_imported_from_torch() -> None:
    source = solution(prelude="from torch import relu", forward="return relu(x)")
    assert checks(source) == expect(
        {"forbidden_import", "torch_compute_in_forward", "forward_calls_no_kernel"}, {"forward_calls_no_kernel"}
    )


def test_rejects_calling_a_submodule() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.act = nn.ReLU()\n"
    assert checks(solution(init=init, forward="return self.act(x)")) == expect(
        {
            "torch_compute_in_forward",
            "forward_calls_no_kernel",
        }
    )


def test_rejects_fallback_hidden_in_a_helper_function() -> None:
    prelude = "\ndef _finish(y):\n    return y.sum(dim=0, keepdim=True) * 0 + y\n"
    source = solution(prelude=prelude, forward="return _finish(ext.relu_forward(x))")
    assert checks(source) == expect({"torch_compute_in_forward", "tensor_arithmetic_in_forward"}, MIXED)


@pytest.mark.parametrize(
    "forward",
    ["return ext.relu_forward(x) * 1.0", "return ext.relu_forward(x @ x)", "y = ext.relu_forward(x)\ny += x\nreturn y"],
    ids=["scale", "matmul_operator", "in_place_add"],
)
def test_rejects_tensor_arithmetic_in_forward(forward: str) -> None:
    assert checks(solution(forward=forward)) == expect({"tensor_arithmetic_in_forward"}, MIXED)


def test_rejects_swapping_tensor_data() -> None:
    assert checks(solution(forward="y = ext.relu_forward(x)\ny.data = x\nreturn y")) == expect(
        {"torch_compute_in_forward"}, MIXED
    )


def test_rejects_indexing_with_a_tensor() -> None:
    init = "def __init__(self):\n    super().__init__()\n    self.perm = nn.Parameter(torch.arange(10.0))\n"
    source = solution(init=init, forward="return ext.relu_forward(x)[self.perm]")
    assert checks(source) == expect({"torch_compute_in_forward"}, MIXED)


def test_accepts_arithmetic_on_shapes() -> None:
    forward = (
        "n = x.size(0) * x.size(1) // 2 + len(x.shape)\n"
        "rows = max(n, 1) - 1\n"
        "return ext.relu_forward(x.view(-1)).view(x.shape[0], -1)[: rows + 1]"
    )
    assert checks(solution(forward=forward)) == set()


SHAPE_HELPERS = """
import math
def count(shape):
    total = 1
    for d in shape:
        total *= d
    return total
def halves(*dims):
    return tuple(d // 2 for d in dims) + tuple(a * b for a, b in zip(dims, dims))
def strides(shape):
    out = [d * (i + 1) for i, d in enumerate(shape)]
    return [s * 2 for s in out]
def first(a, b=1):
    return a * b
"""


@pytest.mark.parametrize(
    "forward",
    [
        "n = count(x.shape) + count((x.size(0), x.size(-1)))\nreturn ext.relu_forward(x.contiguous()).view(-1)[:n]",
        "h = halves(*x.shape)\nreturn ext.relu_forward(x.contiguous()).view(-1)[: h[0] + len(strides(x.shape))]",
        "return self.flat(x, x.shape)[: first(*x.shape[:1], b=x.size(0))]",
    ],
    ids=["loop_over_a_tuple_parameter", "star_parameter_and_comprehensions", "method_and_star_argument"],
)
def test_accepts_shape_numbers_through_a_helpers_tuple_parameter(forward: str) -> None:
    """Python ints from `x.shape`, passed through a helper's tuple or `*args` parameter, iterated, zipped or
    enumerated there, are numbers wherever they go."""
    init = (
        "def flat(self, x, shape):\n    n = math.prod(shape)\n    for d in shape:\n        n = n * d\n"
        "    return ext.relu_forward(x.contiguous()).view(-1)[:n]\n"
    )
    assert checks(solution(prelude=SHAPE_HELPERS, init=init, forward=forward)) == set()


@pytest.mark.parametrize(
    "forward",
    [
        "return ext.relu_forward(first(*x.shape[:0], x))",  # the starred shape is empty: `a` gets the tensor x
        "return ext.relu_forward(first(*x.shape[:1], b=x))",
        "return ext.relu_forward(halves(*x.shape, x)[0])",
        "n = count(x)\nreturn ext.relu_forward(x)",  # iterating a tensor gives tensors
        "n = count([x, x])\nreturn ext.relu_forward(x)",
        "for i, row in enumerate(x):\n    row *= 2\nreturn ext.relu_forward(x)",
        "for d, row in zip(x.shape, x):\n    row = row * d\nreturn ext.relu_forward(x)",
        "ys = [d * x for d in x.shape]\nreturn ext.relu_forward(x)",
    ],
    ids=[
        "empty_star",
        "star_then_keyword",
        "star_then_tensor",
        "tensor",
        "list_of_tensors",
        "enumerate",
        "zip",
        "comp",
    ],
)
def test_rejects_tensors_through_a_helpers_tuple_parameter(forward: str) -> None:
    assert checks(solution(prelude=SHAPE_HELPERS, forward=forward)) == expect({"tensor_arithmetic_in_forward"}, MIXED)


def test_rejects_torch_compute_on_a_shapes_tensor() -> None:
    forward = "s = torch.tensor(x.shape)\nn = count(s * 2)\nreturn ext.relu_forward(x)"
    assert checks(solution(prelude=SHAPE_HELPERS, forward=forward)) == expect(
        {"torch_compute_in_forward", "tensor_arithmetic_in_forward"}, MIXED
    )


@pytest.mark.parametrize(
    "launch",
    [
        "y = torch::relu(x);",
        "y = at::relu(x);",
        "y = at::native::relu(x);",
        "y = torch::nn::functional::relu(x);",
        "y.copy_(x.clamp_min(0));",
        "y = x.sum(0);",
        "y = x * 2;",
        "auto z = x.contiguous(); y = -z;",
        "y = at::_ops::relu::call(x);",
    ],
    ids=["torch_op", "aten_op", "native", "functional", "method", "reduction", "operator", "unary", "dispatcher"],
)
def test_rejects_torch_compute_in_cpp(launch: str) -> None:
    # kernelbench: torch through the dispatcher is allowed; its per-backend kernels around it (at::native::) are not
    kernelbench = {"global_state_change"} if "native" in launch else MIXED
    assert checks(solution(launch=launch)) == expect({"cpp_torch_compute"}, kernelbench)


def test_rejects_torch_namespace_aliases_in_cpp() -> None:
    source = solution(headers="using namespace at;", launch="y = relu(x);")
    assert checks(source) == expect({"cpp_torch_compute"}, MIXED)
    source = solution(headers="namespace T = torch;", launch="y = T::relu(x);")
    assert checks(source) == expect({"cpp_torch_compute"}, MIXED)


def test_rejects_macros_that_hide_a_tensor_method() -> None:
    assert checks(solution(headers="#define R relu", launch="y = x.R();")) == expect({"cpp_torch_compute"}, MIXED)
    assert checks(solution(headers="#define CALL(t, m) t.m()", launch="y = CALL(x, relu);")) == expect({"dynamic_code"})
    assert checks(solution(headers="#define CAT(a, b) a##b", launch="y = x.CAT(re, lu)();")) == expect({"dynamic_code"})


# Runtime: the judge end to end on the CPU, sharing one build of the hack extension (see _hacks.py).


def test_runtime_rejects_torch_fallback_hidden_from_static_checks(tmp_path: Path) -> None:
    # relu_clamp copies x and calls out.clamp_min_(0), a spelling the C++ text rules do not list.
    verdict = judge_hack(tmp_path, "examples/relu", model_new("return ext.relu_clamp(x.contiguous())"))
    # kernelbench: the kernel only copies x, so the output holds torch's work (a copy of a torch tensor's contents).
    expected = expect({"torch_compute_at_runtime"}, {"no_custom_kernel"})
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", expected), verdict.message
    assert "aten.clamp_min_" in verdict.message or _static.POLICY == "kernelbench"


def test_runtime_rejects_torch_fallback_run_on_a_native_pool_thread(tmp_path: Path) -> None:
    # relu_clamp_pool runs clamp_min_ on a c10::ThreadPool thread and waits for it; a dispatch mode is thread-local,
    # so only the all-threads profiler of the tracer sees it (cuda-agent). Under kernelbench torch may compute, and
    # the dataflow check's own look at other threads refuses what it cannot follow.
    verdict = judge_pool_hack(tmp_path, "examples/relu", model_new("return ext.relu_clamp_pool(x.contiguous())"))
    expected = expect({"torch_compute_at_runtime"}, {"no_custom_kernel"})
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", expected), verdict.message
    assert "clamp_min_" in verdict.message


PYTHON_THREAD = """import threading
box = []
worker = threading.Thread(target=lambda: box.append(torch.relu(x)))
worker.start()
worker.join()
return box[0]"""


@pytest.mark.parametrize(
    "forward",
    [
        PYTHON_THREAD,
        "return x.clamp_min(0.0)",
        "return torch.relu(x)",
        "return torch.ops.aten.relu.default(x)",
        "return ext.relu(x.contiguous()) * 1.0",
    ],
    ids=["joined_python_thread", "tensor_method", "torch_function", "aten_op", "kernel_then_torch"],
)
@pytest.mark.slow
def test_runtime_rejects_torch_fallback_in_python(tmp_path: Path, forward: str) -> None:
    verdict = judge_hack(tmp_path, "examples/relu", model_new(forward), static_policy=False)
    if _static.POLICY == "kernelbench" and "ext.relu" in forward:
        # Mixing is what kernelbench allows: the kernel computes the result, torch then scales it.
        assert verdict.verdict == "pass", verdict.message
        assert verdict.custom_kernel_time_fraction is not None and verdict.custom_kernel_time_fraction > 0
        return
    expected = expect({"torch_compute_at_runtime"}, {"no_custom_kernel"})
    assert (verdict.verdict, checks_of(verdict)) == ("rejected", expected), verdict.message


# Found by a red-team run on 2026-12-05 (bench/results/cpu-2026-12-05-redteam/): each passed both policies, getting
# torch's or BLAS's work, or the judge's own state, through names that no rule read.
@pytest.mark.parametrize(
    ("headers", "launch", "cuda_agent", "kernelbench"),
    [
        ('extern "C" void blas(const char*, const int*) __asm__("sgemm_");', LAUNCH, {"dynamic_code"}, None),
        (
            'static int64_t depth() __asm__("_ZN3c104impl21TorchDispatchModeTLS9stack_lenEv");',
            LAUNCH,
            {"dynamic_code"},
            None,
        ),
        ('void twin() __attribute__((alias("relu_host")));', LAUNCH, {"dynamic_code"}, None),
        (
            "namespace at { namespace cpu { at::Tensor& relu_(at::Tensor& self); } }",
            "relu_(y);",
            {"dynamic_code"},
            None,
        ),
        (
            "namespace at::cpu { at::Tensor& relu_(at::Tensor& self); }",
            "relu_(y);",
            {"dynamic_code", "cpp_torch_compute"},
            {"dynamic_code"},
        ),
        (
            "#include <ATen/CPUFunctions.h>",
            "y = at::cpu::relu(x);",
            {"forbidden_library", "cpp_torch_compute"},
            {"forbidden_library", "global_state_change"},
        ),
        ("", "at::cuda::addmm_out(y, x, x, x);", {"cpp_torch_compute"}, {"global_state_change"}),
    ],
    ids=[
        "asm_label_blas",
        "asm_label_torch_internal",
        "alias_attribute",
        "reopened_namespace",
        "nested_namespace",
        "at_cpu_kernel",
        "at_cuda_kernel",
    ],
)
def test_rejects_names_bound_around_the_rules(
    headers: str, launch: str, cuda_agent: set[str], kernelbench: set[str] | None
) -> None:
    assert checks(solution(headers=headers, launch=launch)) == expect(cuda_agent, kernelbench or cuda_agent)


def test_inline_ptx_is_not_an_asm_label() -> None:
    launch = LAUNCH + '\n    asm volatile("membar.gl;");\n    int lane; asm("mov.u32 %0, %%laneid;" : "=r"(lane));'
    assert checks(solution(launch=launch)) == set()


def test_rejects_an_openmp_clause_that_takes_more_threads() -> None:
    # The CPU timing gives the candidate the reference's threads; `num_threads(N)` took more, unflagged (red team).
    source = solution(
        headers="void spread(float* p, int n) {\n#pragma omp parallel for num_threads(2)\n"
        "for (int i = 0; i < n; ++i) p[i] = 0.f;\n}"
    )
    assert checks(source) == {"global_state_change"}


def test_cuda_types_and_getters_are_not_kernels_around_the_dispatcher() -> None:
    # kernelbench refuses at::cuda's op functions (at_cuda_kernel above), not its guards, properties or warp size.
    launch = "at::cuda::CUDAGuard guard(x.device()); int w = at::cuda::warp_size(); (void)w;\n    " + LAUNCH
    assert checks(solution(launch=launch)) == expect({"cpp_torch_compute"}, set())  # warp_size: not cuda-agent's
