"""Bash: one persistent shell per episode, started in the workspace root, with a time limit and an output cap.

Each command runs in the same `bash` process, so `cd`, variables and functions carry over. The
shell is started in its own session (process group). A command that runs past its time limit is
killed with its whole process group; the shell then restarts in the last directory and the model
is told that shell state was lost. A `cd` that leaves the root is undone with a note. Commands
read stdin from /dev/null, and the environment keeps only an allow-list of variables, never ones
named like secrets (KEY, TOKEN, SECRET, PASSWORD, ...).

What this does NOT protect against: a command can still read or write any file the user can
(`cat /etc/passwd`, `echo > ../model.py`, `sed -i` on a protected file), reach the network, or
start processes that leave the process group (`setsid`, double fork) and outlive the time limit.
A shell cannot be confined in-process. The real defences are the sandbox layer that runs the
episode (isolation, no network, killable process trees) and the final judge, which hashes the
protected files and judges only the editable ones, so Bash edits of protected files do not count.
"""

from __future__ import annotations

import os
import re
import secrets
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cuda_agent.agent.tools.base import Observation, ToolError, function_schema
from cuda_agent.workspace.layout import FIXED_FILES

PROTECTED = ("SKILL.md", "model.py", *FIXED_FILES, "utils")
"""A workspace's read-only paths, as a sandbox command protects them: made read-only and kept root's when the
command drops to the unprivileged user (the utils/ folder too, so nothing can be added or swapped in it, not even
a cached .pyc), checked and restored after each command."""

_ENV_ALLOW = (
    "PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "USER", "SHELL", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "TORCH_CUDA_ARCH_LIST", "TORCH_EXTENSIONS_DIR", "MAX_JOBS",
    "CC", "CXX", "NVCC_FLAGS", "XDG_CACHE_HOME", "CUDA_AGENT_CACHE", "CUDA_AGENT_DATA_DIR", "OMP_NUM_THREADS",
    "PYTHONPATH", "CUDA_AGENT_KERNELBENCH", "CUDA_AGENT_OPS6K",  # the utils/ commands must import cuda_agent
    "CUDA_AGENT_SANDBOX_URL", "CUDA_AGENT_SANDBOX_TOKEN",  # where utils/ verification and profiling are judged
)  # fmt: skip
_SHELL_CREDENTIALS = ("CUDA_AGENT_SANDBOX_TOKEN",)
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION", re.IGNORECASE)
_KEEP_BYTES = 16_384  # room for the end-of-command marker line (which carries $PWD)


def agent_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for the agent's shell: allow-listed variables of ours, minus anything named like a secret."""
    env = {name: os.environ[name] for name in _ENV_ALLOW if name in os.environ}
    env.update(extra or {})
    env.update({"TERM": "dumb", "PAGER": "cat", "GIT_PAGER": "cat", "PYTHONUNBUFFERED": "1"})
    # The sandbox token is the one credential the shell keeps: utils/ verification and profiling need it to
    # reach the service, and it buys nothing the agent's own tools cannot do (judging in a sandbox).
    return {name: value for name, value in env.items() if name in _SHELL_CREDENTIALS or not _SECRET_NAME.search(name)}


@dataclass(frozen=True)
class ShellResult:
    """What one command in the persistent shell did."""

    output: str
    """Combined stdout and stderr, capped (head and tail kept)."""
    exit_code: int | None
    """Exit status; None when the command was killed or the shell died."""
    timed_out: bool
    """The command ran past its time limit and was killed."""
    cut_bytes: int
    """Output left out in the middle: bytes here, characters from a sandbox (its CommandResult.cut_chars)."""
    notes: list[str]
    """Messages for the model about the shell itself (restarted, moved back into the root)."""


class _Capture:
    """Keeps the first `cap` bytes and a rolling tail of a stream of unbounded length."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.total = cap, bytearray(), bytearray(), 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.cap + _KEEP_BYTES:
            del self.tail[: len(self.tail) - self.cap - _KEEP_BYTES]

    def window(self) -> bytes:
        """The last bytes of the stream, enough to hold the end-of-command marker line."""
        return (bytes(self.head[-_KEEP_BYTES:]) + bytes(self.tail))[-_KEEP_BYTES:]

    def text(self, end: int) -> tuple[str, int]:
        """The stream up to byte `end`, cut to `cap` bytes around the middle; returns (text, bytes cut)."""
        tail_start = self.total - len(self.tail)
        body_head = bytes(self.head[:end])
        body_tail = bytes(self.tail[: max(end - tail_start, 0)])
        if tail_start == len(self.head) and len(body_head) + len(body_tail) <= self.cap:
            return (body_head + body_tail).decode("utf-8", errors="replace"), 0
        half = self.cap // 2
        head_part = body_head[:half]
        tail_part = body_tail[-half:] if body_tail else body_head[half:][-half:]
        cut = end - len(head_part) - len(tail_part)
        note = f"\n[... {cut} bytes of output cut here ...]\n".encode()
        return (head_part + note + tail_part).decode("utf-8", errors="replace"), cut


class Shell(Protocol):
    """Where Bash runs its commands: `PersistentShell` (a process of ours) or `SandboxShell` (a sandbox job each)."""

    description: str
    """What the model is told about the shell (whether state carries over), first in the tool's description."""

    def run(self, command: str, timeout_s: float, cap_bytes: int) -> ShellResult: ...

    def close(self) -> None: ...


class PersistentShell:
    """A `bash` process kept alive across commands, confined (softly) to `root`. See the module docstring."""

    description = (
        "Run a bash command in a persistent shell that starts in the workspace root (cd and variables persist). "
    )

    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        self.root = Path(root).resolve()
        self.cwd = self.root
        self.env = dict(env) if env is not None else agent_env()
        self._proc: subprocess.Popen[bytes] | None = None

    def _start(self) -> subprocess.Popen[bytes]:
        self._marker = f"__CUDA_AGENT_DONE_{secrets.token_hex(8)}__"
        if not self.cwd.is_dir():  # the model removed the folder it was in; a shell cannot start there
            self.cwd = self.root
        self._proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            env=self.env,
            start_new_session=True,
        )
        return self._proc

    def close(self) -> None:
        """Kill the shell and everything still running in its process group."""
        if self._proc is None:
            return
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout):
            if stream is not None:
                stream.close()
        self._proc = None

    def run(self, command: str, timeout_s: float, cap_bytes: int) -> ShellResult:
        """Run one command; never raises for the command's own failures (they are in the result)."""
        script = f"{{\n{command}\n}} < /dev/null 2>&1\n"
        syntax = subprocess.run(["bash", "-n"], input=script.encode(), capture_output=True, timeout=30)
        if syntax.returncode != 0:
            message = syntax.stderr.decode(errors="replace").replace("bash: ", "").strip()
            return ShellResult(f"syntax error, nothing was run:\n{message}", 2, False, 0, [])
        proc = self._proc if self._proc is not None and self._proc.poll() is None else self._start()
        assert proc.stdin is not None and proc.stdout is not None
        marker_line = f'__ca_rc=$?; printf \'\\n{self._marker} %s %s\\n\' "$__ca_rc" "$PWD"\n'
        proc.stdin.write((script + marker_line).encode())
        proc.stdin.flush()
        capture, done, eof = _Capture(cap_bytes), None, False
        pattern = re.compile(rb"\n" + self._marker.encode() + rb" (\d+) ([^\n]*)\n")
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(proc.stdout, selectors.EVENT_READ)
            while done is None and time.monotonic() < deadline:
                if not selector.select(min(deadline - time.monotonic(), 0.5)):
                    continue
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    eof = True
                    break
                capture.add(chunk)
                done = pattern.search(capture.window())
        return self._finish(capture, done, timed_out=done is None and not eof, timeout_s=timeout_s)

    def _finish(
        self, capture: _Capture, done: re.Match[bytes] | None, timed_out: bool, timeout_s: float
    ) -> ShellResult:
        notes: list[str] = []
        if done is None:
            text, cut = capture.text(capture.total)
            code = None if timed_out or self._proc is None else self._proc.wait()
            self.close()
            if timed_out:
                notes.append(
                    f"the command ran past its {timeout_s:g} s limit and was killed with everything it started; "
                    f"a new shell was started in {self._shown(self.cwd)} (variables and functions are reset)"
                )
            else:
                notes.append(
                    f"the shell exited (code {code}); the next command starts a new shell in {self._shown(self.cwd)} "
                    f"(variables and functions are reset)"
                )
            return ShellResult(text, code, timed_out, cut, notes)
        end = capture.total - (len(capture.window()) - done.start())
        text, cut = capture.text(end)
        cwd = Path(done.group(2).decode(errors="replace"))
        if cwd.resolve() != self.root and self.root not in cwd.resolve().parents:
            self._return_to_root()
            notes.append(f"the shell left the workspace ({cwd}); it was moved back to {self.root}. Work inside it")
        else:
            self.cwd = cwd
        return ShellResult(text, int(done.group(1)), False, cut, notes)

    def _return_to_root(self) -> None:
        self.cwd = self.root
        proc = self._proc
        if proc is not None and proc.stdin is not None:
            proc.stdin.write(f"cd {_quote(str(self.root))}\n".encode())
            proc.stdin.flush()

    def _shown(self, path: Path) -> str:
        return self.root.name if path == self.root else f"{self.root.name}/{path.relative_to(self.root).as_posix()}"


class CommandOutcome(Protocol):
    """How a sandboxed command ended (the sandbox's CommandResult; named structurally, because the agent may
    not import the sandbox's records: they reach the judge's config, which the agent must not)."""

    @property
    def exit_code(self) -> int | None: ...
    @property
    def stdout(self) -> str: ...
    @property
    def stderr(self) -> str: ...
    @property
    def timed_out(self) -> bool: ...
    @property
    def tampered(self) -> list[str]: ...
    @property
    def cut_chars(self) -> int: ...


class CommandRunner(Protocol):
    """Runs one command as a sandbox job: `LocalPool`, `RayPool` and `SandboxClient` all fit.

    Raises InfraError (SandboxError, PoolFullError, ...) when the sandbox could not run it.
    """

    def run_command(self, argv: list[str], cwd: str, timeout_s: float = 600.0, **fields: Any) -> CommandOutcome: ...


class SandboxShell:
    """Runs each command as a sandbox `CommandJob` in the workspace: hardened limits, no network, the candidate's
    unprivileged user where it can reach the workspace, and its whole process tree killed at the time limit.

    Unlike PersistentShell, nothing carries over between commands: each starts in the workspace root in a fresh
    shell (the model is told so in the tool's description). Whether a sandbox or the local shell runs an episode's
    commands is chosen in one place, the episode runner (agent/episode.py).
    """

    description = "Run a bash command in a fresh shell in the workspace root (nothing carries over between commands). "

    def __init__(
        self,
        runner: CommandRunner,
        root: Path,
        env: Mapping[str, str] | None = None,
        protected: tuple[str, ...] = PROTECTED,
    ) -> None:
        self.runner, self.root = runner, Path(root).resolve()
        self.env = dict(env) if env is not None else agent_env()
        self.protected = list(protected)

    def run(self, command: str, timeout_s: float, cap_bytes: int) -> ShellResult:
        """Run one command; a sandbox that cannot run it raises InfraError (ours, not the model's)."""
        argv = ["bash", "--noprofile", "--norc", "-c", f"{{\n{command}\n}} < /dev/null 2>&1"]
        fields = {"output_cap": cap_bytes, "env": self.env, "protected": self.protected}
        result = self.runner.run_command(argv, str(self.root), timeout_s=timeout_s, **fields)
        notes = [f"the command ran past its {timeout_s:g} s limit and was killed with everything it started"]
        notes = notes if result.timed_out else []
        if result.tampered:
            notes.append(f"the command changed protected files, which were restored: {', '.join(result.tampered)}")
        return ShellResult(result.stdout + result.stderr, result.exit_code, result.timed_out, result.cut_chars, notes)

    def close(self) -> None:
        """Nothing to release: each command was a sandbox job of its own, over when `run` returned."""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class BashTool:
    """Run shell commands in the episode's shell (any `Shell`: it says what the model is told and what to close)."""

    name = "Bash"

    def __init__(self, shell: Shell, timeout_s: float = 600.0, output_cap_bytes: int = 30_000) -> None:
        self.shell, self.timeout_s, self.output_cap_bytes = shell, timeout_s, output_cap_bytes

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            self.shell.description
            + "stdin is empty; stdout and stderr are combined; long output keeps its head and tail. Build with "
            "'bash utils/compile.sh', check with 'python -m utils.verification', time with 'python -m utils.profiling'.",
            {
                "command": {"type": "string", "description": "The command line to run."},
                "timeout": {"type": "number", "description": f"Time limit in seconds (at most {self.timeout_s:g})."},
            },
            ["command"],
        )

    def run(self, arguments: dict[str, Any]) -> Observation:
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise ToolError("'command' is required, e.g. 'ls kernels'")
        timeout_s = min(float(arguments.get("timeout") or self.timeout_s), self.timeout_s)
        result = self.shell.run(command, timeout_s, self.output_cap_bytes)
        parts = [result.output.rstrip("\n") or "(no output)"]
        if result.exit_code not in (0, None):
            parts.append(f"[exit code {result.exit_code}]")
        parts.extend(f"[note: {note}]" for note in result.notes)
        metadata = {"exit_code": result.exit_code, "timed_out": result.timed_out, "cut_bytes": result.cut_bytes}
        return Observation(
            text="\n".join(parts),
            is_error=result.timed_out or result.exit_code != 0,
            truncated=result.cut_bytes > 0,
            metadata=metadata,
        )

    def close(self) -> None:
        self.shell.close()
