"""Single-file (load_inline) build speed: torch's plain load_inline against the judge's fast build.

The target: a one-kernel load_inline solution that includes <torch/extension.h> builds cold in <= 20 s on a
GPU machine, and an identical solution again does not build at all. Per solution, side by side in one run:

- plain: the solution imported in a fresh process with a fresh TORCH_EXTENSIONS_DIR (torch alone);
- ours cold: `judge.build.build_solution` into a fresh build cache (the solution was never built), with
  the machine's prepared artefacts (precompiled header per flag set, light and lean header guards) made first by
  `prepare` (timed apart: once per machine, torch and flag set);
- ours cold, spare: the same, in another fresh cache, with the build's importing child started ahead and ready
  (judge/build.py --standby, as a pool's prepare spare hands it): its build seconds, run before `ours cold`;
- ours again: the identical solution from another process (served by the build cache, no compile);
- candidate load: the solution imported as the candidate's process does, after our build (ninja must
  find nothing to do).

    python bench/single_file_build.py --device cuda --out bench/results/DIR   # the GPU machine, end to end
    python bench/single_file_build.py --units --out bench/results/DIR         # a CPU torch: the units alone

`--units` is for a machine whose torch cannot build CUDA extensions (the CPU wheel): it compiles each
solution's two units the way torch's build file would (the CUDA unit with nvcc for sm_90, `main.cpp`
with the host compiler), plain and ours, and reports wall and CPU seconds; where the CUDA toolkit
lacks a library's headers (cuSPARSE, cuBLAS, cuSOLVER) or the CPU wheel lacks a configured CUDA
header, declaration-only stand-ins are put last on the include path, the same for both variants.
Writes single_file_build_<mode>.json, prints a table, and writes the summary: single_file_build.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.judge import build, fast_build, header_guard  # noqa: E402
from cuda_agent.judge.solution import SolutionSource  # noqa: E402

DEFAULT_SOLUTIONS = [
    "solutions/kernelbench/L1/19.py",
    "solutions/kernelbench/L1/26.py",
    "solutions/kernelbench/L1/1.py",
]

_STUBS = {
    "cusparse.h": "typedef struct cusparseContext* cusparseHandle_t;\ntypedef enum { CUSPARSE_STATUS_SUCCESS = 0 } cusparseStatus_t;\n",
    "cublas_v2.h": "typedef struct cublasContext* cublasHandle_t;\ntypedef enum { CUBLAS_STATUS_SUCCESS = 0 } cublasStatus_t;\n",
    "cublasLt.h": "#include <cublas_v2.h>\ntypedef struct cublasLtContext* cublasLtHandle_t;\n",
    "cusolverDn.h": "typedef struct cusolverDnContext* cusolverDnHandle_t;\ntypedef enum { CUSOLVER_STATUS_SUCCESS = 0 } cusolverStatus_t;\n",
    "cusolver_common.h": "#include <cusolverDn.h>\n",
    "c10/cuda/impl/cuda_cmake_macros.h": "#define C10_CUDA_BUILD_SHARED_LIBS\n",
}


def timed(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> dict:
    """Run a command; its wall and CPU seconds (user + system of it and its children)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "ok": done.returncode == 0,
        "log": (done.stdout + done.stderr)[-1500:],
    }


def _import_code(solution: Path) -> str:
    return (
        "import importlib.util, sys\n"
        "from pathlib import Path\n"
        "from cuda_agent.judge.build import loading_extensions\n"
        f"spec = importlib.util.spec_from_file_location('candidate', {str(solution)!r})\n"
        "m = importlib.util.module_from_spec(spec)\n"
        "import os\n"
        "with loading_extensions(Path(os.environ['TORCH_EXTENSIONS_DIR'])):\n"
        "    spec.loader.exec_module(m)\n"
    )


def _deps(ext_dir: Path, target: str) -> str:
    """The headers ninja recorded for one object of a torch build folder (ninja keeps no depfiles)."""
    folders = {p.parent for p in ext_dir.glob("*/build.ninja")}
    if len(folders) != 1:
        return ""
    argv = ["ninja", "-C", str(folders.pop()), "-t", "deps", target]
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout


def _objects(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.suffix in (".o", ".so")}


def end_to_end(solution: Path, device: str, work: Path, fast_dir: Path) -> dict:
    """Plain load_inline, ours cold, ours again (another process), and the candidate's load, for one solution."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    env["CCACHE_DISABLE"] = "1"  # every arm compiles for real (torch wraps its compilers in ccache when found)
    env.pop(build.FAST_DIR_ENV, None)
    row: dict = {"solution": str(solution.relative_to(ROOT))}
    start = time.perf_counter()
    made = fast_build.prepare(solution, device, fast_dir, wait=True)
    row["prepare"] = {"wall_s": round(time.perf_counter() - start, 2), "made": made}

    plain_dir = work / "plain"
    row["plain"] = timed(
        [sys.executable, "-c", _import_code(solution)], env=env | {"TORCH_EXTENSIONS_DIR": str(plain_dir)}
    )

    cache = work / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "fast").symlink_to(fast_dir, target_is_directory=True)
    build_hash = SolutionSource(python=solution.read_text()).build_hash
    call = (
        "import json, sys, time; from pathlib import Path; from cuda_agent.judge.build import build_solution\n"
        f"r = build_solution(Path({str(solution)!r}), {build_hash!r}, {device!r}, Path({str(cache)!r}), 600)\n"
        "print(json.dumps({'ok': r.ok, 'cached': r.cached, 'ext_dir': str(r.ext_dir), 'wall_s': r.wall_s, 'log': r.log}))\n"
    )
    # First (the page cache then favours the arm after it): the same cold build with its importing child started
    # ahead and ready, as a pool's prepare spare hands it (judge/build.py --standby); its own cache.
    spare_cache = work / "cache_spare"
    spare_cache.mkdir(parents=True, exist_ok=True)
    (spare_cache / "fast").symlink_to(fast_dir, target_is_directory=True)
    spare_call = (
        "import json; from pathlib import Path; from cuda_agent.judge.build import build_solution, build_spec\n"
        "from cuda_agent.judge.standby import Standby\n"
        f"s = Standby.start(build_spec({device!r}, namespace=False)); assert s.wait_ready(300) is None\n"
        f"r = build_solution(Path({str(solution)!r}), {build_hash!r}, {device!r}, Path({str(spare_cache)!r}), 600, "
        "standby=s)\n"
        "print(json.dumps({'ok': r.ok, 'wall_s': r.wall_s, 'used': s.went is not None, 'log': r.log}))\n"
    )
    spare = timed([sys.executable, "-c", spare_call], env=env)
    spare_result = json.loads(spare["log"].strip().splitlines()[-1]) if spare["ok"] else {}
    row["ours_cold_spare"] = {
        "ok": spare["ok"] and spare_result.get("ok", False),
        "build_s": spare_result.get("wall_s"),
        "standby_used": spare_result.get("used"),
    } | ({} if spare["ok"] else {"log": spare["log"][-2000:]})
    cold = timed([sys.executable, "-c", call], env=env)
    result = json.loads(cold["log"].strip().splitlines()[-1]) if cold["ok"] else {}
    row["ours_cold"] = cold | {"build_s": result.get("wall_s"), "cached": result.get("cached")}
    ext_dir = Path(result["ext_dir"]) if result else None
    if ext_dir:
        deps = _deps(ext_dir, "cuda.cuda.o")
        row["ours_cold"]["header"] = (
            "lean" if f"/{fast_build.LEAN_DIR}/" in deps else "light" if "/light-" in deps else "torch's"
        )
        import torch.utils.cpp_extension as cpp_ext

        first = fast_build.load_inline_calls(solution.read_text())[0]
        spec = fast_build._main_flags(cpp_ext, first.extra_cflags, first.include_paths, first.with_cuda)
        row["ours_cold"]["precompiled_header"] = bool(spec and fast_build.pch_usable(spec, fast_dir / spec.folder))
    again = timed([sys.executable, "-c", call], env=env)
    again_result = json.loads(again["log"].strip().splitlines()[-1]) if again["ok"] else {}
    row["ours_again"] = again | {"cached": again_result.get("cached")}
    if ext_dir:
        before = _objects(ext_dir)
        load = timed([sys.executable, "-c", _import_code(solution)], env=env | {"TORCH_EXTENSIONS_DIR": str(ext_dir)})
        row["candidate_load"] = load | {"recompiled": _objects(ext_dir) != before}
    for part in ("plain", "ours_again", "candidate_load"):
        if part in row and row[part]["ok"]:
            row[part].pop("log")
    if row["ours_cold"]["ok"]:
        row["ours_cold"].pop("log")
    return row


def _units_flags(cpp_ext, call: fast_build.LoadInlineCall, stubs: Path) -> tuple[list[str], list[str]]:
    """The host compiler's and nvcc's flags torch's build file would give this call's units (CUDA's on a CPU torch)."""
    import sysconfig

    cuda_home = Path(shutil.which("nvcc")).resolve().parent.parent
    includes = [*cpp_ext.include_paths("cpu"), str(cuda_home / "include"), sysconfig.get_paths()["include"], str(stubs)]
    common = ["-DTORCH_EXTENSION_NAME=bench_ext", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    common += [f"-I{p}" for p in call.include_paths] + [x for p in includes for x in ("-isystem", p)]
    std = "-std=c++20"
    cxx = [*common, "-fPIC", std, *call.extra_cflags]
    nvcc = [*common, *cpp_ext.COMMON_NVCC_FLAGS, "-gencode=arch=compute_90,code=sm_90", "--compiler-options", "-fPIC"]
    return cxx, [*nvcc, std, "-O3"]


def _lean_folder(cuda: str, work: Path, fast_dir: Path, compiler: str, flags: list[str], row: dict) -> Path:
    """The unit's lean header folder, as the build child makes it (the machine's lean guard made first)."""
    import torch.utils.cpp_extension as cpp_ext

    start = time.perf_counter()
    if not (fast_dir / "lean-units.json").exists():
        ops_dir = Path(cpp_ext._TORCH_PATH) / "include" / "ATen" / "ops"
        (fast_dir / "lean-units.json").write_text(json.dumps(header_guard.lean_guard(compiler, flags, ops_dir)))
    guard = json.loads((fast_dir / "lean-units.json").read_text())
    row["lean_guard_s"] = round(time.perf_counter() - start, 2)
    ops, row["lean_refused"] = header_guard.lean_plan(cuda, guard)
    row["lean_ops"] = ops
    lean = work / fast_build.LEAN_DIR
    (lean / "torch").mkdir(parents=True)
    (lean / "torch" / "types.h").write_text(header_guard.lean_header(guard["base"], ops))
    (lean / "torch" / "extension.h").write_text("#pragma once\n#include <torch/types.h>\n")
    return lean


def units(solution: Path, work: Path, fast_dir: Path) -> dict:
    """The CUDA unit (nvcc: plain, with the light header, with the lean one) and main.cpp (plain and precompiled
    header)."""
    import ast

    import torch.utils.cpp_extension as cpp_ext

    row: dict = {"solution": str(solution.relative_to(ROOT))}
    tree = ast.parse(solution.read_text())
    strings = {
        n.targets[0].id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name) and isinstance(n.value, ast.Constant)
    }
    cuda = next(v for k, v in strings.items() if "cuda" in k and isinstance(v, str))
    cpp = next(v for k, v in strings.items() if "cpp" in k and isinstance(v, str))
    (call,) = fast_build.load_inline_calls(solution.read_text())
    stubs = work / "stubs"
    for name, text in _STUBS.items():
        (stubs / name).parent.mkdir(parents=True, exist_ok=True)
        (stubs / name).write_text("#pragma once\n// measurement stand-in: declarations only\n" + text)
    cxx_flags, nvcc_flags = _units_flags(cpp_ext, call, stubs)
    (work / "cuda.cu").write_text(
        "\n".join(["#include <torch/types.h>", "#include <cuda.h>", "#include <cuda_runtime.h>", cuda])
    )
    (work / "main.cpp").write_text(
        "\n".join(["#include <torch/extension.h>", cpp, "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {}"])
    )
    nvcc = shutil.which("nvcc")
    compiler = cpp_ext.get_cxx_compiler()

    # machine artefacts: the guard and light header (from the CUDA unit's host view), the precompiled header
    spec = fast_build.PchSpec(
        compiler,
        tuple(f for f in cxx_flags if not f.startswith("-DTORCH_EXTENSION_NAME")),
        Path(cpp_ext._TORCH_PATH) / "include/torch/extension.h",
        Path("pch-units"),
    )
    start = time.perf_counter()
    light = fast_dir / "light-units"
    if not light.exists():
        guard = fast_build.light_guard(compiler, [*spec.flags])
        fast_build._publish(
            light, {"torch/extension.h": fast_build.LIGHT_HEADER.encode(), "guard.json": json.dumps(guard).encode()}
        )
    guard = json.loads((light / "guard.json").read_text())
    row["guard_s"] = round(time.perf_counter() - start, 2)
    row["guard_hits"] = fast_build.guard_hits(cuda, guard)
    lean = _lean_folder(cuda, work, fast_dir, compiler, [*spec.flags], row)
    pch = fast_dir / spec.folder
    start = time.perf_counter()
    if not pch.exists():
        fast_build.build_pch(spec, pch)
    row["pch_s"] = round(time.perf_counter() - start, 2)

    compile_cuda = [nvcc, "-MD", "-MF", "cuda.cuda.o.d", *nvcc_flags, "-c", "cuda.cu", "-o", "cuda.cuda.o"]
    compile_main = [compiler, "-MMD", "-MF", "main.o.d", *cxx_flags, "-c", "main.cpp", "-o", "main.o"]
    plain_env = {k: v for k, v in os.environ.items() if k not in ("CPATH", "NVCC_PREPEND_FLAGS")}
    plain_env["CCACHE_DISABLE"] = "1"
    # side by side, alternating, so that the load of other work on the machine falls on both alike
    row["cuda_plain"] = timed(compile_cuda, env=plain_env, cwd=work)
    if not row["guard_hits"]:
        row["cuda_light"] = timed(compile_cuda, env=plain_env | {"NVCC_PREPEND_FLAGS": f"-I{light}"}, cwd=work)
        row["cuda_light"]["light_used"] = str(light) in (work / "cuda.cuda.o.d").read_text()
    if not row["guard_hits"] and not row["lean_refused"]:
        row["cuda_lean"] = timed(compile_cuda, env=plain_env | {"NVCC_PREPEND_FLAGS": f"-I{lean}"}, cwd=work)
        row["cuda_lean"]["lean_used"] = str(lean) in (work / "cuda.cuda.o.d").read_text()
    row["main_plain"] = timed(compile_main, env=plain_env, cwd=work)
    row["main_pch"] = timed(compile_main, env=plain_env | {"CPATH": str(pch)}, cwd=work)
    row["main_pch"]["pch_used"] = fast_build.pch_usable(spec, pch)
    for key in ("cuda_plain", "cuda_light", "cuda_lean", "main_plain", "main_pch"):
        if key in row and row[key]["ok"]:
            row[key].pop("log")
    return row


def build_seconds(row: dict) -> dict:
    """A row's seconds, one figure per way (wall; CPU too for `--units`), for the summary."""
    figures = {}
    for way, measured in row.items():
        if isinstance(measured, dict):
            figures |= {f"{way}.{key}": measured[key] for key in ("wall_s", "cpu_s", "build_s") if key in measured}
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solutions", nargs="+", default=DEFAULT_SOLUTIONS)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--units", action="store_true", help="compile the units alone (a torch without CUDA)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-s", type=float, default=1e9, help="start no further solution after this many seconds")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    work_root = Path(tempfile.mkdtemp(prefix="single-file-build-"))
    fast_dir = work_root / "fast"
    import torch

    mode = "units" if args.units else args.device
    report = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "machine": {"host": platform.node(), "cpus": os.cpu_count(), "load_1m_at_start": os.getloadavg()[0]},
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "torch": torch.__version__,
        "rows": [],
    }
    started = time.monotonic()
    for index, name in enumerate(args.solutions):
        if index and time.monotonic() - started > args.max_s:
            print(f"stopping before {name}: past --max-s {args.max_s:.0f} s", flush=True)
            break
        solution = (ROOT / name).resolve()
        work = work_root / f"s{index}"
        work.mkdir()
        row = units(solution, work, fast_dir) if args.units else end_to_end(solution, args.device, work, fast_dir)
        row["load_1m"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)
        report["rows"].append(row)
        # written after every solution, so that a run cut short keeps what it measured
        (args.out / f"single_file_build_{mode}.json").write_text(json.dumps(report, indent=1) + "\n")
    rows = report["rows"]
    shutil.rmtree(work_root, ignore_errors=True)
    sections = {row["solution"]: build_seconds(row) for row in rows}
    write_summary(args.out, "single_file_build", f"Single-file build seconds ({mode})", sections, report["command"])
    for row in rows:
        if args.units:
            plain, light, lean = row["cuda_plain"], row.get("cuda_light", {}), row.get("cuda_lean", {})
            print(
                f"{row['solution']}: CUDA unit plain {plain['cpu_s']} s CPU ({plain['wall_s']} s wall), "
                f"light {light.get('cpu_s')} s CPU ({light.get('wall_s')} s wall), "
                f"lean {lean.get('cpu_s')} s CPU ({lean.get('wall_s')} s wall); main.cpp plain "
                f"{row['main_plain']['cpu_s']} s CPU, precompiled header {row['main_pch']['cpu_s']} s CPU"
            )
        else:
            print(
                f"{row['solution']}: plain {row['plain']['wall_s']} s, ours cold {row['ours_cold']['wall_s']} s "
                f"(build {row['ours_cold'].get('build_s')} s; with a spare {row.get('ours_cold_spare', {}).get('build_s')} s; "
                f"header {row['ours_cold'].get('header')}, "
                f"pch {row['ours_cold'].get('precompiled_header')}), again {row['ours_again']['wall_s']} s "
                f"(cached {row['ours_again'].get('cached')}), candidate load {row.get('candidate_load', {}).get('wall_s')} s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
