"""The benchmarks docs/benchmarks.md lists: each answers `--help`, and each writes its summary the same way."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench.summary import write_summary
from tests.user import ROOT

LISTED = sorted(set(re.findall(r"`python (bench/\w+\.py)", (ROOT / "docs" / "benchmarks.md").read_text())))


def test_the_benchmarks_page_lists_every_benchmark_script() -> None:
    """Every script at bench/'s top level is a listed benchmark, a helper of them, or the training scripts'."""
    helpers = {"bench/served.py", "bench/summary.py"}
    training = {
        "tiny_model",
        "train_gpu_probe",
        "train_gpu_report",
        "curriculum_judge",
        "curriculum_probe",
        "chain_state",
        "tiny_llama",
        "sft_probe",
        "agentic_data_retool",
    }
    scripts = {f"bench/{path.name}" for path in (ROOT / "bench").glob("*.py") if path.stem not in training}
    assert scripts - helpers == set(LISTED)


@pytest.mark.parametrize("script", LISTED)
def test_every_listed_benchmark_answers_help(script: str) -> None:
    done = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("usage:"), done.stderr[-2000:]


def test_a_summary_keeps_the_plain_figures_of_each_section_as_json_and_a_table(tmp_path: Path) -> None:
    sections = {"B": {"wall_s_median": 5.312345, "verdict": "pass", "rows": [{"wall_s": 5.1}]}, "C": {"equal": True}}
    page = write_summary(tmp_path, "judge_latency", "Judge latency", sections, "python bench/judge_latency.py")
    summary = json.loads((tmp_path / "judge_latency.json").read_text())
    assert summary["sections"] == {"B": {"wall_s_median": 5.312345, "verdict": "pass"}, "C": {"equal": True}}
    assert "| wall_s_median | 5.312 |" in page.read_text() and "rows" not in page.read_text()
