"""Checks on the codebase itself: import layers and size budgets (STYLE.md 8.3, 'The layout')."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_layers_hold() -> None:
    if shutil.which("lint-imports") is None:
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    result = subprocess.run(["lint-imports"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-2000:]


def test_size_budgets_hold() -> None:
    result = subprocess.run([sys.executable, "scripts/sz.py"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
