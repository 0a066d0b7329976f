"""One trial's comparison work, the judge's compare module before and after the fused passes (issue 20).

Times what `judge_trial` asks of `compare.py` per trial: `same_values` on an input and its handed copy,
`same_values` on an output and its snapshot, then `check_output` against the eager reference with a float64
reference, on a ReLU-shaped trial (`--elems` float32 elements). Old and new run in turns on the same tensors,
`--repeats` times each; the medians are reported, and every figure of the two must agree (the run fails
otherwise). Also counted, once per side: the bytes the comparison's operators read and write, in full float32
passes over the output (a TorchDispatchMode sums each operator's tensor arguments and results).

Cases: `exact` (the output equals the reference, as a correct ReLU's does), `rounding` (the output one float32
step off the reference in about half the elements: every difference is below atol) and `above_atol` (values
scaled so differences exceed atol but stay within rtol: isclose must decide).

    python bench/compare_passes.py --elems 100000000 --out bench/results/cpu-2026-12-05-compare/cpu.json
    python bench/compare_passes.py --device cuda --elems 1610612736 --out $OUT/compare_passes.json \
        --old bench/results/cpu-2026-12-05-compare/compare_before.py

`--old` is a file, or a git revision whose compare.py is taken (default: the last commit before the change).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_agent.judge.child import compare as new_compare  # noqa: E402

MODULE = "cuda_agent/judge/child/compare.py"
BEFORE = "4402d82"
TOL = {"atol": 1e-2, "rtol": 1e-2, "norm_rtol": 1e-2, "strict_precision": True}
TOL |= {"precision_factor": 10.0, "precision_floor": 1e-5}  # the judge's defaults (judge/config.py)
EXACT = ("ok", "reason", "precision", "mismatch_fraction", "max_abs_err", "first_mismatch")


def load_old(spec: str) -> Any:
    path = Path(spec)
    if path.is_file():
        source = path.read_text()
    else:
        source = subprocess.run(
            ["git", "show", f"{spec}:{MODULE}"], cwd=ROOT, check=True, capture_output=True, text=True
        ).stdout
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(source)
    loader = importlib.util.spec_from_file_location("compare_before", f.name)
    module = importlib.util.module_from_spec(loader)
    sys.modules["compare_before"] = module  # dataclasses look their module up there
    loader.loader.exec_module(module)
    return module


def make_trial(case: str, n: int, device: str) -> dict[str, torch.Tensor]:
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(n, generator=gen, device=device)
    if case == "above_atol":
        x *= 1e4  # ReLU outputs up to ~5e4: a relative 1e-6 difference exceeds atol = 1e-2 there, not rtol
    given = x.clone()
    ref = torch.relu(x)
    out = torch.relu(given)
    if case == "rounding":
        out[::2] = torch.nextafter(out[::2], torch.tensor(math.inf, device=device))
    elif case == "above_atol":
        out.mul_(1.0 + 1e-6)
    return {
        "input": x,
        "given": given,
        "out": out,
        "snapshot": out.clone(),
        "ref": ref,
        "ref64": torch.relu(x.double()),
    }


def one_trial(module: Any, t: dict[str, torch.Tensor], chunk: int) -> dict[str, Any]:
    inputs_same = module.same_values(t["input"], t["given"], chunk)
    outputs_same = module.same_values(t["out"], t["snapshot"], chunk)
    check = module.check_output(t["snapshot"], t["ref"], t["ref64"], chunk_elems=chunk, **TOL)
    return {"inputs_same": inputs_same, "outputs_same": outputs_same, **check.as_dict()}


def agree(old: dict[str, Any], new: dict[str, Any]) -> dict[str, bool]:
    """Which figures are bit-identical; raises where any differs beyond float rounding."""
    exact = {}
    for key, value in old.items():
        other = new[key]
        exact[key] = repr(value) == repr(other)  # repr: -0.0 is not 0.0, nan is nan
        if exact[key] or key in EXACT or key in ("inputs_same", "outputs_same"):
            assert exact[key], f"{key}: old {value!r}, new {other!r}"
        else:
            assert math.isclose(value, other, rel_tol=1e-12), f"{key}: old {value!r}, new {other!r}"
    return exact


class Traffic(TorchDispatchMode):
    """Bytes of the tensors each operator reads and writes (views and scalars are not traffic)."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0
        self.ops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        ins = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        outs = [t for t in pytree.tree_leaves(result) if isinstance(t, torch.Tensor)]
        storages = {t.untyped_storage().data_ptr() for t in ins}
        if outs and all(t.untyped_storage().data_ptr() in storages for t in outs) and not func._schema.is_mutable:
            return result  # a view: no data moved
        moved = sum(t.numel() * t.element_size() for t in ins + outs if t.dim() > 0)
        if moved:
            self.ops += 1
            self.bytes += moved
        return result


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--elems", type=int, default=100_000_000, help="L1/19's output: 1610612736")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", nargs="+", default=["exact", "rounding", "above_atol"])
    parser.add_argument("--chunk-elems", type=int, default=new_compare.CHUNK_ELEMS)
    parser.add_argument("--old", default=BEFORE, help="the compare.py to compare with: a file or a git revision")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    old_compare = load_old(args.old)
    sides = {"old": old_compare, "new": new_compare}
    report: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.node(),
        "device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor() or "cpu",
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "elems": args.elems,
        "chunk_elems": args.chunk_elems,
        "old": args.old,
        "cases": {},
    }
    for case in args.cases:
        trial = make_trial(case, args.elems, args.device)
        results, seconds = {}, {name: [] for name in sides}
        for name, module in sides.items():  # warm-up, and the figures to compare
            results[name] = one_trial(module, trial, args.chunk_elems)
        exact = agree(results["old"], results["new"])
        for _ in range(args.repeats):
            for name, module in sides.items():
                sync(args.device)
                start = time.perf_counter()
                one_trial(module, trial, args.chunk_elems)
                sync(args.device)
                seconds[name].append(time.perf_counter() - start)
        passes = {}
        for name, module in sides.items():
            with Traffic() as traffic:
                one_trial(module, trial, args.chunk_elems)
            passes[name] = {"ops": traffic.ops, "passes": traffic.bytes / (4 * args.elems)}
        entry = {
            "figures": results["new"],
            "bit_identical": exact,
            "seconds": seconds,
            "median_s": {name: statistics.median(values) for name, values in seconds.items()},
            "traffic": passes,
        }
        entry["speedup"] = entry["median_s"]["old"] / entry["median_s"]["new"]
        report["cases"][case] = entry
        print(
            f"{case:>10}: old {entry['median_s']['old']:.3f} s ({passes['old']['passes']:.0f} passes, "
            f"{passes['old']['ops']} ops), new {entry['median_s']['new']:.3f} s ({passes['new']['passes']:.0f} "
            f"passes, {passes['new']['ops']} ops): x{entry['speedup']:.2f}; figures agree "
            f"({sum(exact.values())}/{len(exact)} bit-identical)",
            flush=True,
        )
        del trial
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
