"""The CLI's own output, as a user sees it on a terminal or in a pipe."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from tests.user import cli, cli_on_terminal, on_terminal

RELU_CPU = Path(__file__).parents[1] / "cuda_agent" / "tasks" / "examples" / "solutions" / "cpu" / "relu.py"


def test_judge_shows_progress_on_a_terminal_and_json_stays_clean() -> None:
    args = ("judge", "examples/relu", str(RELU_CPU), "--device", "cpu", "--no-time")
    code, stdout, terminal = cli_on_terminal(*args)
    assert code == 0 and f"judging {RELU_CPU} on examples/relu" in terminal and stdout.startswith("pass")
    code, stdout, terminal = cli_on_terminal(*args, "--json")
    assert code == 0 and json.loads(stdout)["verdict"] == "pass" and "judging" not in terminal


def test_judge_keeps_its_stages_on_one_line() -> None:
    done = cli("judge", "examples/relu", str(RELU_CPU), "--device", "cpu", "--no-time", env={"COLUMNS": "20"})
    assert done.returncode == 0, done.stderr
    last = done.stdout.splitlines()[-1]  # the stages line is the last: a broken one would leave its tail here
    assert last.startswith("  stages: ") and len(last) > 20
    stages = json.loads(cli("judge", "examples/relu", str(RELU_CPU), "--device", "cpu", "--no-time", "--json").stdout)[
        "stage_s"
    ]
    assert [part.split()[0] for part in last.removeprefix("  stages: ").split(", ")] == list(stages)


def test_a_hung_command_on_the_terminal_fails_the_test_instead_of_hanging_it() -> None:
    # A hung CLI must fail its test, not hang CI: it is killed with what it started at the time limit.
    hang = "import subprocess, sys, time; print('started', file=sys.stderr, flush=True); time.sleep(120)"
    start = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match="ran past 2 s and was killed; the terminal showed:\nstarted"):
        on_terminal([sys.executable, "-c", hang], timeout_s=2)
    assert time.monotonic() - start < 10
    code, stdout, terminal = on_terminal(
        [sys.executable, "-c", "import sys; print('out'); sys.stderr.write('err')"], 10
    )
    assert (code, stdout, terminal) == (0, "out\n", "err")
