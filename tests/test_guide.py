"""The guide (README.md and its pages under docs/) as a user meets it: its links and paths lead somewhere, and its
tour runs as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.user import GUIDE, ROOT, guide_block

LINK = re.compile(r"\]\(([^)\s]+)\)")
PATH = re.compile(r"`((?:bench|cuda_agent|docs|recipes|scripts|solutions|tests)/[\w./*-]*(?:\.\w+|/))`")


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", GUIDE, ids=lambda page: page.name)
def test_every_link_of_the_guide_leads_to_a_page_and_heading_that_exist(page: Path) -> None:
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to {target}: no such file"
        assert not anchor or anchor in anchors(linked), f"{page.name} links to {target}: no such heading"


@pytest.mark.parametrize("page", GUIDE, ids=lambda page: page.name)
def test_every_file_the_guide_names_is_in_the_repository(page: Path) -> None:
    """A script, recipe or module the guide names exists (a moved or deleted one leaves no dangling name behind)."""
    named = {path for path in PATH.findall(page.read_text()) if "*" not in path}
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"{page.name} names files that are not in the repository: {missing}"


@pytest.mark.slow
def test_the_readme_tour_runs_as_written(tmp_path: Path) -> None:
    """README's tour, line by line, from a folder that holds the repository's files (its paths are relative)."""
    (tmp_path / "cuda_agent").symlink_to(ROOT / "cuda_agent")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    lines = guide_block("README.md", "bash", "## A ten-minute tour").splitlines()
    done = [
        subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True) for line in lines
    ]
    assert [run.returncode for run in done] == [0] * 4, [run.stderr[-2000:] for run in done]
    assert "examples/relu" in done[0].stdout and "def get_inputs" in done[1].stdout
    verdict = json.loads(done[2].stdout)
    assert verdict["verdict"] == "pass" and verdict["reward"] >= 1
    assert (tmp_path / "runs" / "relu" / "SKILL.md").is_file()
