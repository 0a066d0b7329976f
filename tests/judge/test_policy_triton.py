"""The static policy on Triton solutions (policy/triton.py and forward's launch rule); reads text only, needs no triton."""

from __future__ import annotations

from pathlib import Path

import pytest

from cuda_agent.judge.policy import POLICIES, check_policy
from cuda_agent.judge.solution import SolutionSource, detect_language, read_solution

ROOT = Path(__file__).resolve().parents[2]
TRITON_SOLUTIONS = sorted((ROOT / "cuda_agent" / "tasks" / "examples" / "solutions" / "triton").glob("*.py")) + sorted(
    (ROOT / "solutions" / "kernelbench_triton").glob("L*/*.py")
)

TEMPLATE = """
import torch
import torch.nn as nn
import triton
import triton.language as tl
PRELUDE

DECORATORS
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    BODY
    tl.store(y_ptr + offsets, tl.where(x < 0.0, 0.0, x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
        FORWARD
        return y
"""
LAUNCH = "relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)"


def triton_solution(
    prelude: str = "", decorators: str = "@triton.jit", body: str = "pass", forward: str = LAUNCH
) -> str:
    return (
        TEMPLATE.replace("PRELUDE", prelude)
        .replace("DECORATORS", decorators)
        .replace("BODY", body)
        .replace("FORWARD", forward.replace("\n", "\n        "))
    )


def checks(source: str, policy: str = "cuda-agent", task_dtypes: set[str] | None = None) -> set[str]:
    return {v.check for v in check_policy(SolutionSource(python=source), "cpu", policy=policy, task_dtypes=task_dtypes)}


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("path", TRITON_SOLUTIONS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_bundled_triton_solutions_pass_the_static_policy(path: Path, policy: str) -> None:
    solution = read_solution(path)
    assert solution.language == "triton"
    assert check_policy(solution, "cuda", policy=policy) == []


@pytest.mark.parametrize(
    ("source", "language"),
    [
        (triton_solution(), "triton"),
        ("from triton import language as tl\n", "triton"),
        ("import torch\nfrom torch.utils.cpp_extension import load_inline\n", "cuda"),
        ("import tritonish\n", "cuda"),
        ("import triton\nclass ModelNew(:\n", "triton"),  # a syntax error keeps its language
    ],
)
def test_language_is_decided_from_the_imports(source: str, language: str) -> None:
    assert detect_language(source) == language
    assert SolutionSource(python=source).language == language


@pytest.mark.parametrize(
    ("body", "rule"),
    [
        ("x = torch.relu(x)", "triton_kernel"),  # plain Python under the CPU interpreter: torch would run
        ("CACHE[0] = x", "triton_kernel"),  # a module-level store kept between calls
        ("import os", "triton_kernel"),
        ("f = lambda v: v", "triton_kernel"),
        ("x = tl.math.exp(x) - tl.exp(x) + x", None),  # the language and its submodules are the kernel's own
        ("n2 = triton.cdiv(BLOCK, 2)", None),
        ("n2 = triton.knobs.cache.dir", "triton_internals"),
    ],
)
def test_kernel_body_reaches_only_the_language(body: str, rule: str | None) -> None:
    source = triton_solution(prelude="CACHE = {}", body=body)
    for policy in POLICIES:
        assert (rule in checks(source, policy)) if rule else checks(source, policy) == set(), (policy, body)


@pytest.mark.parametrize(
    ("prelude", "decorators", "forward", "rule"),
    [
        ("", "@triton.jit", "triton.knobs.cache.dir = '/tmp/shared'\n" + LAUNCH, "triton_internals"),
        ("from triton.runtime import driver", "@triton.jit", LAUNCH, "forbidden_import"),
        (
            "",
            "@triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'], do_bench=print)\n@triton.jit",
            "relu_kernel[(n,)](x, y, n)",
            "triton_internals",
        ),
        (
            "",
            "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, pre_hook=print)], key=['n'])\n@triton.jit",
            "relu_kernel[(n,)](x, y, n)",
            "triton_internals",
        ),
        (
            "",
            "@triton.heuristics({'BLOCK': lambda args: args['x_ptr'].sum()})\n@triton.jit",
            "relu_kernel[(n,)](x, y, n)",
            "triton_internals",
        ),
        ("", "@triton.jit", "relu_kernel(x, y, n, BLOCK=1024)", "triton_kernel"),
        ("", "@triton.jit", "k = relu_kernel\nk[(n,)](x, y, n, BLOCK=1024)", "triton_kernel"),
        ("", "@triton.jit", "relu_kernel.run(x, y, n, grid=(1,), warmup=False, BLOCK=1024)", "triton_kernel"),
        ("", "@triton.jit", "pass", "forward_calls_no_kernel"),
        ("def wrap(f):\n    return f", "@wrap\n@triton.jit", LAUNCH, "dynamic_code"),
    ],
)
def test_triton_internals_and_kernel_objects_are_refused(
    prelude: str, decorators: str, forward: str, rule: str
) -> None:
    source = triton_solution(prelude=prelude, decorators=decorators, forward=forward)
    for policy in POLICIES:
        assert rule in checks(source, policy), (policy, checks(source, policy))


def test_legitimate_autotune_heuristics_and_lambda_grids_pass() -> None:
    decorators = (
        "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, num_warps=2), triton.Config({'BLOCK': 256})], "
        "key=['n'], reset_to_zero=['y_ptr'])\n"
        "@triton.heuristics({'EVEN': lambda args: args['n'] % 64 == 0})\n@triton.jit"
    )
    source = triton_solution(
        decorators=decorators, forward="relu_kernel[lambda meta: (triton.cdiv(n, meta['BLOCK']),)](x, y, n)"
    )
    assert checks(source) == set()


def test_forward_computes_only_under_kernelbench() -> None:
    source = triton_solution(forward=LAUNCH + "\ny = torch.relu(y) + 0")
    assert {"torch_compute_in_forward", "tensor_arithmetic_in_forward"} <= checks(source, "cuda-agent")
    assert checks(source, "kernelbench") == set()


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("z = tl.dot(x, x)", True),  # Triton's default for float32 operands is TF32 on the GPU
        ("z = tl.dot(x, x, input_precision='tf32')", True),
        ("z = tl.dot(x, x, input_precision='ieee')", False),
        ("z = tl.dot(x, x, allow_tf32=False)", False),
        ("x = x.to(tl.float16)", True),
        ("x = x.to(tl.bfloat16)", True),
    ],
)
def test_reduced_precision_in_a_float32_task(body: str, refused: bool) -> None:
    source = triton_solution(body=body)
    assert ("precision_downcast" in checks(source)) is refused
    assert "precision_downcast" not in checks(source, task_dtypes={"torch.float16", "torch.float32"})
