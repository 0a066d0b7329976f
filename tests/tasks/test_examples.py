"""The bundled example problems and their reference solutions.

Solutions compile a C++/CUDA extension when imported, so each one runs in a child process: a
build (or a crash in compiled code) stays out of the pytest process, and torch's extension cache
under ~/.cache/cuda-agent/test-ext makes reruns skip the build.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "cuda_agent" / "tasks" / "examples"
PROBLEMS = EXAMPLES / "problems"
CPU_SOLUTIONS = EXAMPLES / "solutions" / "cpu"
CUDA_SOLUTIONS = EXAMPLES / "solutions" / "cuda"
TRITON_SOLUTIONS = EXAMPLES / "solutions" / "triton"
EXPECTED = {"relu", "scale_add", "row_sum", "softmax", "matmul", "linear_gelu"}
ALLOWED_IMPORTS = {
    ("import", "torch", None),
    ("import", "torch.nn", "nn"),
    ("from", "torch.utils.cpp_extension", "load_inline"),
    ("import", "triton", None),
    ("import", "triton.language", "tl"),
}


def _stems(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if not p.name.startswith("_"))


def _top_level(path: Path) -> dict[str, ast.AST]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names[node.name] = node
    return names


def _method_params(cls: ast.ClassDef, name: str) -> list[str]:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return [a.arg for a in node.args.args[1:]]
    raise AssertionError(f"class {cls.name} has no {name}()")


def test_expected_problems_are_bundled():
    assert EXPECTED <= set(_stems(PROBLEMS))


def test_catalog_lists_the_examples():
    from cuda_agent.tasks.catalog import Catalog

    refs = {task.ref for task in Catalog().tasks("examples")}
    assert {f"examples/{name}" for name in EXPECTED} <= refs


@pytest.mark.parametrize("name", _stems(PROBLEMS))
def test_problem_defines_the_kernelbench_interface(name):
    names = _top_level(PROBLEMS / f"{name}.py")
    assert isinstance(names.get("Model"), ast.ClassDef)
    assert isinstance(names.get("get_inputs"), ast.FunctionDef)
    assert isinstance(names.get("get_init_inputs"), ast.FunctionDef)


@pytest.mark.parametrize("name", _stems(PROBLEMS))
def test_every_problem_has_a_cpu_solution(name):
    assert (CPU_SOLUTIONS / f"{name}.py").is_file()


@pytest.mark.parametrize(
    "solution",
    [CPU_SOLUTIONS / f"{s}.py" for s in _stems(CPU_SOLUTIONS)]
    + [CUDA_SOLUTIONS / f"{s}.py" for s in _stems(CUDA_SOLUTIONS)]
    + [TRITON_SOLUTIONS / f"{s}.py" for s in _stems(TRITON_SOLUTIONS)],
    ids=lambda p: f"{p.parent.name}/{p.stem}",
)
def test_solution_has_kernelbench_form(solution):
    """Same signatures as the problem's Model, plain nn.Module base, no fallback machinery."""
    problem = PROBLEMS / solution.name
    assert problem.is_file(), f"{solution} has no problem of the same name"
    model = _top_level(problem)["Model"]
    new = _top_level(solution).get("ModelNew")
    assert isinstance(new, ast.ClassDef)
    assert [ast.unparse(b) for b in new.bases] == ["nn.Module"]
    assert _method_params(new, "__init__") == _method_params(model, "__init__")
    assert _method_params(new, "forward") == _method_params(model, "forward")
    tree = ast.parse(solution.read_text())
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Try), f"{solution.name}: try/except is not allowed"
        if isinstance(node, ast.Import):
            for alias in node.names:
                assert ("import", alias.name, alias.asname) in ALLOWED_IMPORTS, ast.unparse(node)
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert ("from", node.module, alias.name) in ALLOWED_IMPORTS, ast.unparse(node)


# Runs in the child: load problem and solution, build both models from the same seed, compare on
# fresh inputs against the float32 reference (allclose) and a float64 reference (normwise error).
_CHILD = r"""
import copy, json, runpy, sys
import torch

problem_path, solution_path, device, draws = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
problem = runpy.run_path(problem_path, run_name="example_problem")
solution = runpy.run_path(solution_path, run_name="example_solution")
init_inputs = problem["get_init_inputs"]()
torch.manual_seed(0)
ref = problem["Model"](*init_inputs).to(device).eval()
torch.manual_seed(0)
new = solution["ModelNew"](*init_inputs).to(device).eval()
ref64 = copy.deepcopy(ref).double()
ref_state, new_state = ref.state_dict(), new.state_dict()
same_params = list(ref_state) == list(new_state) and all(torch.equal(ref_state[k], new_state[k]) for k in ref_state)
results = []
with torch.no_grad():
    for _ in range(draws):
        inputs = [t.to(device) if isinstance(t, torch.Tensor) else t for t in problem["get_inputs"]()]
        originals = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
        expected = ref(*inputs)
        got = new(*inputs)
        if device == "cuda":
            torch.cuda.synchronize()
        exact = ref64(*[t.double() if isinstance(t, torch.Tensor) else t for t in inputs])
        unchanged = all(torch.equal(a, b) for a, b in zip(inputs, originals) if isinstance(a, torch.Tensor))
        same_form = got.shape == expected.shape and got.dtype == expected.dtype
        results.append({
            "shape": list(got.shape),
            "expected_shape": list(expected.shape),
            "same_form": same_form,
            "allclose": same_form and torch.allclose(got, expected, atol=1e-2, rtol=1e-2),
            "max_abs_err": (got.double() - expected.double()).abs().max().item() if same_form else None,
            "normwise_err": ((got.double() - exact).norm() / exact.norm()).item() if same_form else None,
            "inputs_unchanged": unchanged,
        })
print("RESULT " + json.dumps({"same_params": same_params, "draws": results}))
"""


def _extension_cache() -> Path:
    import torch

    # torch's JIT cache keys on sources and flags but not on the torch build, so keep one folder per build.
    tag = f"py{sys.version_info.major}{sys.version_info.minor}-torch{torch.__version__}".replace("+", "_")
    return Path.home() / ".cache" / "cuda-agent" / "test-ext" / tag


def _run_child(problem: Path, solution: Path, device: str, draws: int = 2) -> dict:
    cache = _extension_cache()
    cache.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache)}
    if solution.parent == TRITON_SOLUTIONS and device == "cpu":
        env["TRITON_INTERPRET"] = "1"  # Triton's interpreter runs the kernels without a GPU
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(problem), str(solution), device, str(draws)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, (
        f"child failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
    return json.loads(lines[-1][len("RESULT ") :])


def _check(report: dict, name: str) -> None:
    assert report["same_params"], f"{name}: ModelNew's parameters differ from Model's after the same seed"
    assert len(report["draws"]) == 2
    for draw in report["draws"]:
        assert draw["same_form"], f"{name}: shape/dtype {draw['shape']} vs {draw['expected_shape']}"
        assert draw["allclose"], f"{name}: max abs error {draw['max_abs_err']}"
        assert draw["normwise_err"] < 1e-4, f"{name}: normwise error {draw['normwise_err']} vs float64"
        assert draw["inputs_unchanged"], f"{name}: the solution modified its inputs"


# Slow only on a cold cache: building all six extensions takes about 4 minutes on 2 cores, a rerun about 20 s.
@pytest.mark.slow
@pytest.mark.parametrize("name", _stems(CPU_SOLUTIONS))
def test_cpu_solution_matches_reference(name):
    _check(_run_child(PROBLEMS / f"{name}.py", CPU_SOLUTIONS / f"{name}.py", "cpu"), name)


@pytest.mark.slow
@pytest.mark.parametrize("name", _stems(TRITON_SOLUTIONS))
def test_triton_solution_matches_reference_on_the_cpu_interpreter(name):
    pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
    _check(_run_child(PROBLEMS / f"{name}.py", TRITON_SOLUTIONS / f"{name}.py", "cpu"), name)


def test_every_problem_has_a_triton_solution():
    assert _stems(TRITON_SOLUTIONS) == _stems(PROBLEMS)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", _stems(CUDA_SOLUTIONS))
def test_cuda_solution_matches_reference(name):
    _check(_run_child(PROBLEMS / f"{name}.py", CUDA_SOLUTIONS / f"{name}.py", "cuda"), name)


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("name", _stems(TRITON_SOLUTIONS))
def test_triton_solution_matches_reference_on_the_gpu(name):
    pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
    _check(_run_child(PROBLEMS / f"{name}.py", TRITON_SOLUTIONS / f"{name}.py", "cuda"), name)
