"""A synthesis run end to end (filters without torch.compile, to stay fast): output, sidecar, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cuda_agent.synth.catalog import probe
from cuda_agent.synth.compose import ComposeConfig
from cuda_agent.synth.filters import FilterConfig
from cuda_agent.synth.pipeline import SynthConfig, Synthesizer, read_sidecar, rule_composer, run_synthesis
from cuda_agent.tasks.sources import load_parquet

from .test_compose import NAMES
from .test_decontaminate import KB


@pytest.fixture(scope="module")
def ops():
    return [probe(name, kind) for name, kind in NAMES]


def _config(n: int) -> SynthConfig:
    return SynthConfig(
        n=n,
        seed=3,
        compose=ComposeConfig(min_numel=4096, max_numel=16384),
        filters=FilterConfig(compile=False, min_ms=0.0, max_ms=1e6),
        checkpoint_every=2,
    )


def _run(ops, out: Path, n: int, resume: bool = False) -> Synthesizer:
    config = _config(n)
    synth = Synthesizer(config, ops, [("kb/1", KB)], out)
    if resume:
        synth.resume()
    return run_synthesis(synth, rule_composer(ops, config))


def test_run_writes_ops6k_columns_and_a_sidecar(ops, tmp_path: Path) -> None:
    out = tmp_path / "s.parquet"
    synth = _run(ops, out, 3)
    table = pq.read_table(out)
    assert table.column_names == ["ops", "data_source", "code"] and table.num_rows == 3
    row = table.to_pylist()[0]
    assert row["data_source"] == f"synth#{len(json.loads(row['ops']))}"
    kept = [r for r in read_sidecar(out) if r.kept]
    assert len(kept) == 3 == synth.kept and all(r.filter is not None and r.filter.passed for r in kept)
    tasks = load_parquet(out, "mine")  # the task layer reads the output like Ops-6K
    assert [t.metadata["ops"] for t in tasks] == [r.ops for r in kept]


def test_resume_continues_the_same_stream(ops, tmp_path: Path) -> None:
    whole = _run(ops, tmp_path / "whole.parquet", 5)
    _run(ops, tmp_path / "part.parquet", 2)
    resumed = _run(ops, tmp_path / "part.parquet", 5, resume=True)
    assert resumed.kept == 5
    codes = pq.read_table(tmp_path / "part.parquet").column("code").to_pylist()
    assert codes == pq.read_table(tmp_path / "whole.parquet").column("code").to_pylist()
    assert [r.index for r in read_sidecar(tmp_path / "part.parquet")] == [r.index for r in whole.records]


def test_a_candidate_faster_than_the_window_gets_one_larger_try(ops, tmp_path: Path) -> None:
    # Every problem here runs in well under 10 s: each is tried again with its batch scaled (to the cap), once.
    config = _config(1).model_copy(
        update={
            "filters": FilterConfig(compile=False, min_ms=10_000.0, max_ms=1e6),
            "compose": ComposeConfig(min_numel=4096, max_numel=16384, max_resized_numel=8 * 16384),
            "max_candidates": 3,
        }
    )
    out = tmp_path / "r.parquet"
    synth = run_synthesis(Synthesizer(config, ops, [("kb/1", KB)], out), rule_composer(ops, config))
    records = [r for r in read_sidecar(out) if r.filter is not None]
    assert synth.kept == 0 and all(r.reason == "time_window" for r in records)
    first = {r.index: r for r in records if r.scale == 1.0}
    second = {r.index: r for r in records if r.scale != 1.0}
    assert first and second and set(second) <= set(first)
    assert len(records) == len(first) + len(second)  # never a third try
    for index, again in second.items():
        assert again.scale >= 1.5 and again.ops == first[index].ops
        assert again.filter.output_shape[0] == round(first[index].filter.output_shape[0] * again.scale)
