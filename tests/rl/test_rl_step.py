"""bench/rl_step_gpu.py's PPO step on a hand-made batch (no episodes): verl's engine workers for actor and
critic on the CPU, one optimisation step each, finite losses that go down, changed parameters; and the
fallback (verl's loss functions on the plain HF models) agrees with the engine.

Runs the script in a subprocess: it sets verl's platform and torch.distributed for its whole process.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
pytest.importorskip("tokenizers")

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("rl_step")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "rl_step_gpu.py"), "--device", "cpu", "--batch", "handmade"]
        + ["--out", str(out)],
        cwd=out,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert (out / "rl_step.json").is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((out / "rl_step.json").read_text())
    assert proc.returncode == 0, "\n".join(data.get("errors", [])) or proc.stderr[-3000:]
    return data


def test_engine_step_changes_both_models_with_finite_losses(report: dict) -> None:
    assert report["ok"] and report["path"] == "engine", report["errors"]
    assert [e["reward"] for e in report["episodes"]] == [3.0, -1.0, 1.0]
    for name in ("actor", "critic"):
        row = report["step"][name]
        values = [row["loss_before"], row["loss_after"], row["grad_norm"], row["param_change_norm"]]
        assert all(math.isfinite(v) for v in values), row
        assert row["param_change_norm"] > 0 and row["grad_norm"] > 0, row
        assert row["loss_after"] < row["loss_before"], row  # one step on this batch lowers its loss
    # Whitened GAE advantages: the PPO loss at the old policy (ratio 1) is -mean(A) = 0.
    assert abs(report["step"]["actor"]["loss_before"]) < 1e-5
    assert abs(report["advantages"]["mean"]) < 1e-5


def test_fallback_agrees_with_the_engine(report: dict) -> None:
    # The engine runs the models in bf16 autocast, the cross-check in fp32: close, not equal.
    for name in ("actor", "critic"):
        engine, plain = report["step"][name], report["cross_check"][name]
        assert plain["loss_before"] == pytest.approx(engine["loss_before"], abs=2e-3, rel=1e-2)
        assert plain["grad_norm"] == pytest.approx(engine["grad_norm"], rel=2e-2)
        assert plain["loss_after"] == pytest.approx(engine["loss_after"], abs=2e-3, rel=5e-2)
