"""Workspace build speed: our incremental, ccache-backed build against the released CUDA Agent way.

The released way rebuilds everything on every compile with `torch.utils.cpp_extension.load` over
all sources (forced: a fresh build folder each time). Ours: the first build of a fresh workspace
with a cold compiler cache and with a warm one, a rebuild after editing one kernel file, and a
no-op rebuild. All on the same one-kernel workspace (the template's worked example), in one run.

    python bench/workspace_build.py --device cuda --out bench/results/DIR   # on the GPU machine
    python bench/workspace_build.py --device cpu --out bench/results/DIR    # the CPU variant

Writes workspace_build_<device>.json, prints a table with the ratios, and writes the summary: workspace_build.json
and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.tasks import Catalog  # noqa: E402
from cuda_agent.workspace import build_tree, create_workspace  # noqa: E402
from cuda_agent.workspace.layout import template_dir  # noqa: E402


def released_way(root: Path, device: str, index: int) -> float:
    """One forced full rebuild with cpp_extension.load, as the released compile script does."""
    import torch.utils.cpp_extension as cpp_ext

    sources = [str(template_dir() / "binding.cpp")] + sorted(
        str(p) for p in (root / "kernels").iterdir() if p.suffix in ((".cu", ".cpp") if device == "cuda" else (".cpp",))
    )
    build = Path(tempfile.mkdtemp(prefix="released-way-"))
    start = time.perf_counter()
    cpp_ext.load(
        name=f"cuda_extension_released_{index}",
        sources=sources,
        build_directory=str(build),
        extra_include_paths=[str(template_dir()), str(root), str(root / "kernels")],
        extra_cflags=["-O3"] + (["-fopenmp"] if device == "cpu" else []),
        extra_cuda_cflags=["-O3"],
        extra_ldflags=["-fopenmp"] if device == "cpu" else ["-lcublas"],
        verbose=False,
    )
    took = time.perf_counter() - start
    shutil.rmtree(build, ignore_errors=True)
    return took


def _edit_kernel(root: Path, device: str, n: int) -> None:
    kernel = root / "kernels" / ("example_scale.cu" if device == "cuda" else "example_scale.cpp")
    kernel.write_text(kernel.read_text() + f"\nstatic const int bench_edit_{n} = {n};\n")


def measure(device: str, reps: int) -> dict:
    task = Catalog().resolve("examples/scale_add")
    work = Path(tempfile.mkdtemp(prefix="ws-bench-"))
    cold_cache = work / "ccache"
    rows: dict[str, list[float]] = {
        "cold_first_build": [],
        "warm_first_build": [],
        "incremental_one_kernel": [],
        "noop_rebuild": [],
        "released_full_rebuild": [],
    }
    for rep in range(reps):
        shutil.rmtree(cold_cache, ignore_errors=True)
        first = create_workspace(task, work / f"cold{rep}", device=device)
        outcome = build_tree(first, device, cache_dir=cold_cache)
        assert outcome.ok, outcome.log
        rows["cold_first_build"].append(outcome.wall_s)
        fresh = create_workspace(task, work / f"warm{rep}", device=device)
        outcome = build_tree(fresh, device, cache_dir=cold_cache)
        assert outcome.ok, outcome.log
        rows["warm_first_build"].append(outcome.wall_s)
        _edit_kernel(fresh, device, rep)
        outcome = build_tree(fresh, device, cache_dir=cold_cache)
        assert outcome.ok and outcome.compiled == 1, (outcome.compiled, outcome.log)
        rows["incremental_one_kernel"].append(outcome.wall_s)
        rows["noop_rebuild"].append(build_tree(fresh, device, cache_dir=cold_cache).wall_s)
        rows["released_full_rebuild"].append(released_way(fresh, device, rep))
        print(f"rep {rep}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in rows.items()), flush=True)
    shutil.rmtree(work, ignore_errors=True)
    medians = {k: statistics.median(v) for k, v in rows.items()}
    released = medians["released_full_rebuild"]
    return {
        "device": device,
        "reps": reps,
        "seconds": rows,
        "median_s": medians,
        "speedup_vs_released": {k: released / v for k, v in medians.items() if k != "released_full_rebuild" and v > 0},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="folder for workspace_build_<device>.json")
    args = parser.parse_args()
    result = measure(args.device, args.reps)
    for key, value in result["median_s"].items():
        ratio = result["speedup_vs_released"].get(key)
        print(f"{key:26s} {value:7.2f} s" + (f"   {ratio:5.1f}x faster than the released way" if ratio else ""))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / f"workspace_build_{args.device}.json").write_text(json.dumps(result, indent=1))
        sections = {"median_s": result["median_s"], "times faster than the released way": result["speedup_vs_released"]}
        write_summary(
            args.out, "workspace_build", f"Workspace build seconds ({args.device})", sections, " ".join(sys.argv)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
