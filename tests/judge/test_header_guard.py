"""The fast build's header guards (judge/header_guard.py): what a CUDA unit reaches of torch's headers, and the
lean header's plan. The slow test reads this machine's torch headers and compiles with them."""

from __future__ import annotations

import os
import subprocess
import sysconfig
from pathlib import Path

import pytest

from cuda_agent.judge.header_guard import guard_hits, lean_guard, lean_header, lean_plan, unit_names
from tests.judge.test_build import L1_19, _cuda_source

GUARD = {
    "macros": ["TORCH_LIBRARY"],
    "decls": [
        ["func", "at", "empty_like", ["empty_like"]],
        ["func", "torch", "empty_like", ["empty_like"]],
        ["func", "at", "launch", []],
        ["func", "at", "std", []],
        ["var", "at", "stride", ["conv1d", "conv2d"]],
        ["ns", "torch", "autograd", []],
    ],
    "base": "// base\n",
}


def test_a_name_used_only_before_scope_calls_no_function() -> None:
    unit = unit_names("std::min(a, b); int stride = 1; auto v = x.size(0);")
    assert {"std", "min", "stride"} <= unit.names and "size" not in unit.names
    assert "std" not in unit.plain and {"min", "stride"} <= unit.plain
    assert guard_hits("auto m = std::min(a, b);", GUARD) == []  # no function named std is called
    assert guard_hits("auto s = std(x, 1);", GUARD) == ["func at::std"]


def test_lean_plan_takes_operator_headers_and_refuses_what_could_change_a_unit() -> None:
    assert lean_plan("auto y = torch::empty_like(x);", GUARD) == (["empty_like"], [])
    assert lean_plan("launch(x);", GUARD) == ([], ["func at::launch"])  # declared outside any operator's header
    # a variable or type the lean header lacks makes the unit fail to compile (then built with more): no refusal
    assert lean_plan("int stride = 4; at::Tensor t = at::stride_of(x);", GUARD) == ([], [])
    assert lean_plan("TORCH_LIBRARY(m, m) {}", GUARD) == ([], ["macro TORCH_LIBRARY"])
    assert lean_plan("auto o = x.options().requires_grad(true);", GUARD)[1]
    assert lean_plan("auto g = torch::autograd::grad({y}, {x});", GUARD)[1] == ["ns torch::autograd"]
    assert lean_header("// base\n", ["zeros", "empty_like", "zeros"]) == (
        "// base\n#include <ATen/ops/empty_like.h>\n#include <ATen/ops/zeros.h>\n"
    )


HOST_UNIT = """
#include <torch/extension.h>
#include <algorithm>
torch::Tensor forward(torch::Tensor x, double scale) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "x must be float32");
    TORCH_CHECK(x.is_contiguous(), "x must be contiguous");
    auto y = torch::empty_like(x);
    auto z = torch::zeros({at::size(x, 0)}, x.options());
    const int64_t n = std::min<int64_t>(x.numel(), y.numel());
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "forward", [&] {
        const scalar_t* xp = x.data_ptr<scalar_t>();
        scalar_t* yp = y.data_ptr<scalar_t>();
        for (int64_t i = 0; i < n; ++i) yp[i] = xp[i] * static_cast<scalar_t>(scale);
    });
    return y + z.sum()OPERATOR;
}
"""


@pytest.fixture(scope="module")
def real_lean() -> tuple[str, list[str], Path, dict]:
    """This machine's compiler, torch's flags for it, torch's operator headers and the lean guard made from them."""
    import torch.utils.cpp_extension as cpp_ext

    compiler = os.environ.get("CXX", "c++")
    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-std=c++20", "-fPIC"]
    flags += [f"-isystem{p}" for p in [*cpp_ext.include_paths("cpu"), sysconfig.get_paths()["include"]]]
    ops_dir = Path(cpp_ext._TORCH_PATH) / "include" / "ATen" / "ops"
    return compiler, flags, ops_dir, lean_guard(compiler, flags, ops_dir)


def _compiles(compiler: str, flags: list[str], unit: str, lean: Path | None = None) -> subprocess.CompletedProcess:
    argv = [compiler, *([f"-I{lean}"] if lean else []), *flags, "-fsyntax-only", "-x", "c++", "-"]
    return subprocess.run(argv, input=unit, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_real_lean_guard_builds_typical_host_code_and_leaves_tensor_operators_to_a_fuller_build(
    tmp_path: Path, real_lean: tuple[str, list[str], Path, dict]
) -> None:
    """The lean guard from this machine's torch headers: KernelBench L1/19's CUDA source goes lean with its two
    operators; a typical host unit compiles with the lean header (g++, torch's flags); one that uses a tensor
    operator the lean header leaves out fails to compile there (the build then goes on with more of torch's
    headers) and compiles with torch's own."""
    compiler, flags, ops_dir, guard = real_lean
    with pytest.raises(RuntimeError, match="the lean header does not compile"):  # then no lean tries at all
        lean_guard(compiler, [*flags, "-DTORCH_STABLE_ONLY"], ops_dir)  # torch's headers refuse this mode
    assert lean_plan(_cuda_source(L1_19), guard) == (["empty_like", "t"], [])
    assert lean_plan("TORCH_LIBRARY(m, m) {}", guard)[1] == ["macro TORCH_LIBRARY"]

    def compiles(unit: str, lean: bool) -> subprocess.CompletedProcess:
        folder = tmp_path / ("lean" if lean else "plain")
        if lean:
            ops, refused = lean_plan(unit, guard)
            assert refused == [] and {"empty_like", "zeros"} <= set(ops)
            (folder / "torch").mkdir(parents=True, exist_ok=True)
            (folder / "torch" / "types.h").write_text(lean_header(guard["base"], ops))
            (folder / "torch" / "extension.h").write_text("#pragma once\n#include <torch/types.h>\n")
        return _compiles(compiler, flags, unit, folder if lean else None)

    plain_unit = HOST_UNIT.replace("y + z.sum()OPERATOR", "y")
    assert compiles(plain_unit, lean=True).returncode == 0, compiles(plain_unit, lean=True).stderr[-2000:]
    with_operator = HOST_UNIT.replace("OPERATOR", "")
    failed = compiles(with_operator, lean=True)
    assert failed.returncode != 0 and "operator+" in failed.stderr
    assert compiles(with_operator, lean=False).returncode == 0


def test_a_function_declared_again_as_the_light_header_declares_it_is_no_difference(tmp_path: Path) -> None:
    """torch's JIT headers declare `at::launch` again exactly as ATen/Parallel.h does: no new overload, so no
    reason to keep a unit that names `launch` from a lighter header; another overload still counts."""
    from cuda_agent.judge.header_guard import _difference

    (tmp_path / "light.h").write_text("namespace at { void launch(int f); }\n")
    (tmp_path / "again.h").write_text(
        'namespace at { __attribute__((visibility("default"))) void launch(int f); void go(int); }\n'
    )
    (tmp_path / "other.h").write_text("namespace at { void launch(double f); }\n")
    light = '#include "light.h"\n'
    full = light + '#include "again.h"\n#include "other.h"\n'
    _, kept = _difference(os.environ.get("CXX", "c++"), [f"-I{tmp_path}"], light, full, 60)
    assert {(Path(f).name, k, s, n) for f, k, s, n in kept} == {
        ("again.h", "func", "at", "go"),
        ("other.h", "func", "at", "launch"),
    }


OPERATOR_FAMILIES = """
#include <torch/extension.h>
torch::Tensor forward(torch::Tensor bn_running_var, double bn_eps, torch::Tensor v) {
    auto a = (bn_running_var + bn_eps).rsqrt();   // Tensor op scalar
    auto b = 1.0 - v * 2.0 / 3;                    // scalar op Tensor, Tensor op scalar
    auto c = v - v * v / v;                        // Tensor op Tensor
    auto m = (v > 0.5) & (v <= v) | (v == 1);      // comparisons and logic on their results
    auto d = -v;                                   // unary minus
    d += a; d *= 2.0; d -= b; d /= c;              // compound assignment
    return d.masked_fill(m, 0.0);
}
"""


@pytest.mark.slow
def test_operator_overloads_fail_loudly_with_the_lean_header_and_compile_with_torchs(
    tmp_path: Path, real_lean: tuple[str, list[str], Path, dict]
) -> None:
    """Issue 38: Tensor + double and the other free operator overloads are not in the lean header, so such a unit
    fails there (the fast build then retries with more of torch's headers: test_build's retry tests) and compiles
    with torch's own; none is silently taken for another overload. Two compiles (g++, syntax only)."""
    compiler, flags, _, guard = real_lean
    ops, refused = lean_plan(OPERATOR_FAMILIES, guard)
    assert refused == []  # the guard lets it go lean: the retry is what keeps it from a false compile_error
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "types.h").write_text(lean_header(guard["base"], ops))
    (tmp_path / "torch" / "extension.h").write_text("#pragma once\n#include <torch/types.h>\n")
    lean = _compiles(compiler, flags, OPERATOR_FAMILIES, tmp_path)
    assert lean.returncode != 0 and "operator+" in lean.stderr and "operator>" in lean.stderr
    full = _compiles(compiler, flags, OPERATOR_FAMILIES)
    assert full.returncode == 0, full.stderr[-2000:]
