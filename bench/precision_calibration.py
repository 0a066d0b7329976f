"""Calibrate the strict precision check: how far reduced precision moves outputs from float64.

For each task, the reference runs in float64 (the truth), in float32 with TF32 off (what the
judge's baseline uses), in float32 with TF32 on, and in bf16 and fp16. Reported is the normwise
relative error of each against float64 and its ratio to float32's. The judge rejects an fp32
candidate whose error exceeds max(factor x fp32 error, floor); this shows which factor and floor
separate legit fp32 from reduced precision.

Run: python bench/precision_calibration.py --out OUT_DIR kernelbench/L1/1 kernelbench/L1/23 ...
Writes precision_calibration.json (every task's row) and the summary, precision_calibration_summary.json and .md.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.summary import write_summary  # noqa: E402
from cuda_agent.tasks import Catalog  # noqa: E402
from cuda_agent.tasks.inspection import flatten_outputs  # noqa: E402
from cuda_agent.tasks.problem import call_inputs, draw_inputs, load_problem  # noqa: E402


def norm_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.linalg.vector_norm((a.double() - b).flatten()) / torch.linalg.vector_norm(b.flatten()))


def run_variant(model: torch.nn.Module, inputs: list, dtype: torch.dtype, tf32: bool) -> list[torch.Tensor]:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    cast = [x.to(dtype) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
    with torch.no_grad():
        out = flatten_outputs(copy.deepcopy(model).to(dtype)(*cast))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return [o.double() for o in out if isinstance(o, torch.Tensor) and o.is_floating_point()]


def calibrate(ref: str, catalog: Catalog) -> dict:
    task = catalog.resolve(ref)
    module = load_problem(task.code, task.name)
    torch.manual_seed(0)
    model = module.Model(*call_inputs(module, task.name, "get_init_inputs")).cuda()
    inputs = draw_inputs(module, task.name, seed=1, device="cuda")
    truth = run_variant(model, inputs, torch.float64, False)
    row = {"ref": ref, "name": task.name}
    for label, dtype, tf32 in (
        ("fp32", torch.float32, False),
        ("tf32", torch.float32, True),
        ("bf16", torch.bfloat16, False),
        ("fp16", torch.float16, False),
    ):
        try:
            outs = run_variant(model, inputs, dtype, tf32)
            row[label] = max(norm_rel(o, t) for o, t in zip(outs, truth, strict=True))
        except Exception as exc:  # an op without a kernel for that dtype
            row[label] = None
            row[f"{label}_error"] = f"{type(exc).__name__}: {str(exc)[:100]}"
    for label in ("tf32", "bf16", "fp16"):
        if row.get(label) is not None and row["fp32"]:
            row[f"{label}_ratio"] = row[label] / row["fp32"]
    torch.cuda.empty_cache()
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("refs", nargs="+")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    catalog = Catalog()
    rows = []
    for ref in args.refs:
        try:
            rows.append(calibrate(ref, catalog))
        except Exception as exc:
            rows.append({"ref": ref, "error": f"{type(exc).__name__}: {str(exc)[:200]}"})
        print(json.dumps(rows[-1]), flush=True)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "precision_calibration.json").write_text(json.dumps(rows, indent=1))
    sections = {row["ref"]: row for row in rows}
    title = "Normwise error against float64, per precision"
    write_summary(args.out, "precision_calibration_summary", title, sections, " ".join(sys.argv))


if __name__ == "__main__":
    main()
