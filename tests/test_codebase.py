"""Checks on the codebase itself: import layers and size budgets (STYLE.md 8.3, 'The layout')."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA_DIRS = ("tasks/examples", "rl/curriculum_kernels")


def test_import_layers_hold_over_every_module() -> None:
    # .[dev] installs import-linter: its absence is a broken install, not a reason to skip the contracts.
    assert shutil.which("lint-imports"), "import-linter is missing: pip install -e '.[dev]'"
    result = subprocess.run(["lint-imports"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]
    # A folder without __init__.py is invisible to import-linter (the workspace shims once hid an upward import
    # that way): every module of the package must be among those it analysed.
    analysed = int(re.search(r"Analyzed (\d+) files", result.stdout).group(1))
    sources = list((ROOT / "cuda_agent").rglob("*.py"))
    # Bundled task and solution files are data (problems in KernelBench's format), never imported as modules;
    # they may import torch, never us.
    data = [path for path in sources if any(path.is_relative_to(ROOT / "cuda_agent" / d) for d in DATA_DIRS)]
    assert not [path for path in data if "cuda_agent" in path.read_text()], "a bundled task file imports cuda_agent"
    modules = len(sources) - len(data)
    assert analysed == modules, f"import-linter analysed {analysed} of {modules} modules"


def test_size_budgets_hold() -> None:
    result = subprocess.run([sys.executable, "scripts/sz.py"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
