"""Commands as a user types them: the installed `cuda-agent` entry point, in a child process."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CUDA_AGENT = Path(sys.executable).parent / "cuda-agent"
"""The console script pip installed beside this interpreter (what README's commands run)."""


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout_s: float = 300
) -> subprocess.CompletedProcess:
    """Run `cuda-agent ARGS` with our environment plus `env`; its exit code, stdout and stderr."""
    return subprocess.run(
        [str(CUDA_AGENT), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=cwd,
        timeout=timeout_s,
    )


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of a real headless Chromium (the system's: no browser download); skips the test without one."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    names = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    chromium = next((path for name in names if (path := shutil.which(name))), None)
    if chromium is None:
        pytest.skip("no Chromium on PATH (apt-get install -y chromium); playwright's own browser download is not used")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 900})
        finally:
            browser.close()


def cli_on_terminal(*args: str, timeout_s: float = 300) -> tuple[int, str, str]:
    """Run `cuda-agent ARGS` with stderr on a pseudo-terminal (as in an interactive shell) and stdout in a pipe.

    Returns:
        The exit code, stdout, and what the terminal showed (stderr, with its control sequences).
    """
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        [str(CUDA_AGENT), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
        text=True,
    )
    os.close(secondary)
    shown = b""
    while True:  # until the child (the terminal's only writer) has closed it
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    stdout, _ = proc.communicate(timeout=timeout_s)
    return proc.returncode, stdout, shown.decode(errors="replace")
