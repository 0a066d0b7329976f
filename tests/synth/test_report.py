"""`cuda-agent synth report` compares a data set with a reference and writes markdown."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from cuda_agent.cli import main
from cuda_agent.synth.report import dataset_figures
from tests.user import cli

from .test_decontaminate import KB, OTHER, RENAMED


def _write(path: Path, rows: list[tuple[list[str], str]]) -> Path:
    ops = [json.dumps(o) for o, _ in rows]
    table = pa.table({"ops": ops, "data_source": ["x"] * len(rows), "code": [c for _, c in rows]})
    pq.write_table(table, path)
    return path


def test_figures_count_duplicates_and_kernelbench_copies() -> None:
    rows = [{"ops": '["nn.Conv2d", "torch.relu"]', "code": c} for c in (RENAMED, RENAMED, OTHER)]
    figures = dataset_figures("d", rows, [("kb/1", KB)])
    assert figures.depth_mix == {"2": 100.0}
    assert figures.exact_duplicates == 1 and figures.near_duplicates == 1
    assert figures.kb_max_similarity == 1.0 and figures.kb_above_threshold == 2
    assert figures.kb_same_signature == 2
    assert figures.top_ops[0] == ("nn.Conv2d", 3)


def test_report_command_prints_and_writes_markdown(tmp_path: Path, capsys) -> None:
    data = _write(tmp_path / "d.parquet", [(["torch.relu"], OTHER)])
    reference = _write(tmp_path / "ref.parquet", [(["nn.Conv2d", "torch.relu"], KB), (["a"], KB)])
    assert main(["synth", "report", str(data), "--reference", str(reference)]) == 0
    markdown = (tmp_path / "d.report.md").read_text()
    assert "| exact duplicates | 0 | 1 |" in markdown
    assert "depth 1 (%)" in capsys.readouterr().out


def test_report_of_a_file_that_is_not_parquet_is_one_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(bytes(range(256)) * 8)
    done = cli("synth", "report", str(junk))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr == f"error: {junk}: not a readable parquet file (ArrowInvalid)\n"
