"""Commands as a user types them: the installed `cuda-agent` entry point, in a child process."""

from __future__ import annotations

import os
import pty
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CUDA_AGENT = Path(sys.executable).parent / "cuda-agent"
"""The console script pip installed beside this interpreter (what README's commands run)."""

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))
"""What a user reads: README.md and its pages under docs/. Tests find the commands they run as written here."""


def guide_text() -> str:
    """Every page of the guide, joined: a command a test runs as written may sit on any of them."""
    return "\n".join(page.read_text() for page in GUIDE)


def guide_block(page: str, fence: str, heading: str = "") -> str:
    """The first ```FENCE block of PAGE (`README.md`, `docs/...`) below `heading` (a line of it), as written."""
    text = (ROOT / page).read_text()
    text = text[text.index(f"\n{heading}\n") :] if heading else text
    start = text.index(f"```{fence}\n") + len(fence) + 4
    return text[start : text.index("```\n", start)]


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

    A command still running after `timeout_s` is killed with everything it started, and the test fails.
    """
    return on_terminal([str(CUDA_AGENT), *args], timeout_s)


def on_terminal(argv: list[str], timeout_s: float) -> tuple[int, str, str]:
    """`cli_on_terminal` for any command line."""
    main, secondary = pty.openpty()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=secondary,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"},
        start_new_session=True,  # killed as a group: a hung command's children go too
    )
    os.close(secondary)
    assert proc.stdout is not None
    out = proc.stdout.fileno()
    read = {main: bytearray(), out: bytearray()}
    deadline = time.monotonic() + timeout_s
    try:
        with selectors.DefaultSelector() as selector:
            for fd in read:
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():  # both streams at once: a full stdout pipe must not stall the terminal
                if time.monotonic() > deadline:
                    _kill(proc)
                    shown = read[main][-2000:].decode(errors="replace")
                    pytest.fail(
                        f"{' '.join(argv)} ran past {timeout_s:g} s and was killed; the terminal showed:\n{shown}"
                    )
                for key, _ in selector.select(timeout=min(1.0, max(deadline - time.monotonic(), 0.0))):
                    try:
                        chunk = os.read(key.fd, 65536)
                    except OSError:  # EIO: the pty's last writer has closed it
                        chunk = b""
                    if chunk:
                        read[key.fd] += chunk
                    else:
                        selector.unregister(key.fd)
        try:
            code = proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            _kill(proc)
            pytest.fail(f"{' '.join(argv)} closed its output but ran past {timeout_s:g} s; killed")
    finally:
        os.close(main)
        proc.stdout.close()
    return code, read[out].decode(errors="replace"), read[main].decode(errors="replace")


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
