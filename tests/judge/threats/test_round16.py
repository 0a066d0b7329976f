"""Round 16 (bench/results/cpu-2026-12-08-redteam-16/): what the judge reads against what runs, and what an
unconfined candidate can reach.

- A coding declaration. Every reader of the judge's (the static policy, the build and verdict keys) reads the
  solution's text as it is; Python decodes the file's bytes by the encoding its first two lines declare. Under
  `# -*- coding: utf-7 -*-`, `+AAo-` in a comment is a newline, and what follows it is code no reader of ours saw:
  a forward that computes with torch wherever no instrument of ours watches passed the static policy, which refuses
  the same line written plainly (r1: pass 1 under both policies, the default config). Now a Python file that
  declares any encoding but UTF-8 is rejected before any stage, whatever the static policy.
- A byte order mark. The interpreter and the compilers read a UTF-8 BOM as no character of the text; the judge kept
  it: an honest Python file saved with one was the static policy's `syntax_error` (h3, -1), and before a C++ unit's
  first `#include` it hid that include from the policy (r4: a root-only file's lines in the verdict, where the
  include named it by any path). Now every text of a solution is read without it.
- A service on loopback. The candidate of `cuda-agent judge` (confined: a user id of its own, PID and mount
  namespaces) shared the machine's network, and so reached `cuda-agent serve` on 127.0.0.1 with no token: it asked
  for a job with `candidate_user: null`, whose code ran as the service's user (root), found the judgement's folder
  and rewrote the grader's result as the grader wrote it (r2: a forward of zeros passed). Now a confined candidate
  has a network namespace of its own (no interface up), and the service takes `candidate_user` from no request.
- Unconfined (a judge run as a plain user; here `candidate_user=None`), the grader's result file lay where the
  candidate's user may write: a candidate that wrote a passing result there and killed the grader passed at reward 3
  (u1: the pipeline read whatever lay at the path), and a process it left in a session of its own rewrote the
  grader's result between the grader's write and the pipeline's read, and lived on after the judgement (round 15
  left such processes open). Now the grader is the reaper of every orphan below it from its start and kills all of
  them before it writes (`uids.kill_below`), and a result counts only from a grader that ended by its own exit.
- r3: a workspace's kernels/ were compiled by the judge's user (root), outside any confinement, and the compiler's
  errors come back in the verdict: a kernel that included a file only root may read got that file's lines back as
  errors, past the static policy wherever the file's name ends as one of the workspace's own headers does (the
  policy checks a quoted include's last component only); an assembler's `.incbin` put a file's bytes in the module
  the candidate loads. Now the kernels compile as the candidate (its leased id, confined on a private copy, as a
  single file's `load_inline` build is: judge/kernel_build.py), with a compiler cache of its own and the fixed
  glue's objects read-only behind it; the machine's shared cache is not the candidate's to write.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from cuda_agent.judge import JudgeConfig, judge
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.tasks import Catalog
from tests.judge.threats import _static
from tests.judge.threats._hacks import judge_hack, model_new

RELU_CPP = r"""
#include <torch/extension.h>
torch::Tensor relu(torch::Tensor x) {
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == torch::kFloat32, "float32 contiguous");
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    for (int64_t i = 0; i < x.numel(); i -= -1) dst[i] = src[i] < 0.0f ? 0.0f : src[i];
    return out;
}
"""
"""A relu with no `+` in it: under utf-7 a `+` opens an encoded run, and the rest of the file must read alike."""

UNWATCHED_TORCH = "if torch._C._len_torch_dispatch_stack() == 0: return torch.relu(x)"
"""torch's own relu wherever no dispatch mode of ours (the ATen tracer, the dataflow check) watches the call."""


def _solution(declaration: str, hidden: str) -> str:
    return f'''{declaration}
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline(name="round16_relu", cpp_sources=r"""{RELU_CPP}""", functions=["relu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        # the kernel, on a contiguous input{hidden}
        return ext.relu(x.contiguous())
'''


def _judge(python: str) -> object:
    config = JudgeConfig(device="cpu", policy=_static.POLICY, time=False, verdict_cache=False)
    return judge(Catalog().resolve("examples/relu"), SolutionSource(python=python), config)


def test_code_a_coding_declaration_hides_from_the_judge_is_rejected(tmp_path: Path) -> None:
    # The same file, a UTF-7 declaration above it: the comment's `+AAo-` decodes to a newline, and the torch-only
    # line after it is code to Python and a comment to every reader of ours. Once: pass 1 (static policy on).
    python = _solution("# -*- coding: utf-7 -*-", "+AAo-        " + UNWATCHED_TORCH)
    assert "+" not in python.replace("+AAo-", "")
    (tmp_path / "solution.py").write_text(python)
    verdict = _judge(python)
    assert (verdict.verdict, verdict.reward) == ("rejected", -1), verdict.message
    assert [v.check for v in verdict.violations] == ["source_encoding"], verdict.message


def test_the_hidden_line_written_plainly_is_refused_by_the_static_policy() -> None:
    # The control: what the declaration hid is what the static policy refuses where it reads it.
    verdict = _judge(_solution("", "\n        " + UNWATCHED_TORCH))
    assert (verdict.verdict, verdict.reward) == ("rejected", -1), verdict.message
    assert "source_encoding" not in {v.check for v in verdict.violations}


@pytest.mark.parametrize(
    "declaration", ["", "# -*- coding: utf-8 -*-", "#!/usr/bin/env python\n# vim: set fileencoding=UTF8 :"]
)
def test_a_utf8_solution_with_or_without_a_declaration_is_judged(declaration: str) -> None:
    verdict = _judge(_solution(declaration, ""))
    assert (verdict.verdict, verdict.reward) == ("pass", 1), verdict.message


REACH_OUT = """
import socket
for family, address in ((socket.AF_INET, ("127.0.0.1", {port})), (socket.AF_UNIX, "\\0{abstract}")):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(address)
            s.sendall(b"the candidate")
    except OSError:
        pass
"""
"""What a candidate's `__init__` sends to a TCP port on loopback and to an abstract Unix socket of the machine's."""


def _listen(sock: socket.socket, heard: list[bytes]) -> None:
    sock.listen()
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:  # closed: the test is over
            return
        with conn:
            conn.settimeout(5)
            heard.append(conn.recv(64))


def test_a_confined_candidate_reaches_no_service_of_the_machines(tmp_path: Path) -> None:
    from cuda_agent.judge.confine import mounts_work

    if not mounts_work():
        pytest.skip("needs root and namespaces: unconfined, the candidate shares the judge's network by design")
    heard: list[bytes] = []
    tcp = socket.create_server(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    name = f"cuda-agent-round16-{tmp_path.name}"
    abstract.bind("\0" + name)
    for sock in (tcp, abstract):
        threading.Thread(target=_listen, args=(sock, heard), daemon=True).start()
    try:
        init = REACH_OUT.format(port=tcp.getsockname()[1], abstract=name)
        verdict = judge_hack(
            tmp_path, "examples/relu", model_new("return ext.relu(x.contiguous())", init=init), static_policy=False
        )
    finally:
        tcp.close()
        abstract.close()
    # Once: both heard the candidate (r2 asked `cuda-agent serve` on loopback to run its code as root).
    assert heard == [], heard
    assert (verdict.verdict, verdict.reward) == ("pass", 1), verdict.message


def test_the_service_takes_the_candidates_user_from_no_request() -> None:
    from cuda_agent.sandbox.service import ClientError, JudgeRequest, Paths, judge_job

    # Once: `{"candidate_user": null}` ran the request's candidate as the service's own user (root).
    for user in (None, "nobody", "fresh"):
        request = JudgeRequest(task="examples/relu", solution="x", config={"candidate_user": user})
        with pytest.raises(ClientError, match="candidate_user is the service's"):
            judge_job(request, {}, Paths(None), Catalog())


SECRET_LINE = "CANARY_round16 only root may read this line"

READ_BY_INCLUDE = '#include "{secret}"\n'
"""The secret's lines come back as the compiler's errors."""

READ_BY_INCBIN = '__asm__(".pushsection .rodata\\n.incbin \\"{secret}\\"\\n.popsection");\n'
"""The secret's bytes in the module the candidate's process loads (no error: the build passes as root)."""


def _relu_workspace(tmp_path: Path, first_line: str = "") -> Path:
    import shutil

    workspace = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[3] / "solutions" / "workspaces" / "examples_relu_cpu", workspace)
    relu = workspace / "kernels" / "relu.cpp"
    relu.write_text(first_line + relu.read_text())
    return workspace


@pytest.mark.parametrize("reads", [READ_BY_INCLUDE, READ_BY_INCBIN], ids=["include", "incbin"])
def test_a_workspace_kernel_reads_nothing_the_candidate_may_not(tmp_path: Path, reads: str) -> None:
    import os

    if os.geteuid() != 0:
        pytest.skip("needs root: a judge run as a plain user compiles as that user, whose files the candidate shares")
    secret = tmp_path / "closed" / "notes.h"
    secret.parent.mkdir(mode=0o700)
    secret.write_text(SECRET_LINE + "\n")
    secret.chmod(0o600)
    workspace = _relu_workspace(tmp_path, reads.format(secret=secret))
    (workspace / "kernels" / "notes.h").write_text("// a header of the workspace's own\n")
    config = JudgeConfig(device="cpu", policy=_static.POLICY, time=False, verdict_cache=False)
    verdict = judge(Catalog().resolve("examples/relu"), workspace, config)
    # Once: compile_error with the secret's line in compile_log (include), pass with its bytes in the module (incbin).
    assert (verdict.verdict, verdict.reward) == ("compile_error", -1), verdict.message
    assert str(secret) in (verdict.compile_log or ""), verdict.compile_log  # the compiler tried, as the candidate
    assert "CANARY_round16" not in (verdict.compile_log or "") + verdict.message, verdict.compile_log


def test_the_compile_tool_as_root_reads_nothing_the_candidate_may_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import os
    import shutil

    from cuda_agent.sandbox.workspace_commands import compile_command
    from cuda_agent.workspace import create_workspace

    if os.geteuid() != 0:
        pytest.skip("needs root: run as a plain user, the tool compiles as that user, whose files the agent shares")
    secret = tmp_path / "closed" / "notes.h"
    secret.parent.mkdir(mode=0o700)
    secret.write_text(SECRET_LINE + "\n")
    secret.chmod(0o600)
    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu")
    for kernel in (_relu_workspace(tmp_path / "solution") / "kernels").iterdir():
        shutil.copyfile(kernel, root / "kernels" / kernel.name)
    assert compile_command([], root) == 0  # honest: built, as a user id leased for the build
    relu = root / "kernels" / "relu.cpp"
    honest = relu.read_text()
    relu.write_text(READ_BY_INCLUDE.format(secret=secret) + honest)
    assert compile_command([], root) == 1
    shown = capsys.readouterr().out
    assert str(secret) in shown and "CANARY_round16" not in shown, shown  # tried as the candidate, and refused
    relu.write_text(honest + "// edited\n")
    assert compile_command([], root) == 0  # its own cache kept in the workspace: the other units come from it


def test_a_workspace_build_writes_no_shared_compiler_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import uuid

    if os.geteuid() != 0:
        pytest.skip("needs root: unconfined, the build is the judge's own and writes the shared cache")
    monkeypatch.setenv("CUDA_AGENT_CACHE", str(tmp_path / "cache"))  # a cache of its own: other runs write ours
    from cuda_agent.workspace.build import ccache_dir, glue_store, seed_glue

    assert seed_glue("cpu") is None
    seeded = sorted(p.relative_to(glue_store()) for p in glue_store().rglob("*"))
    workspace = _relu_workspace(tmp_path, f"// {uuid.uuid4()}: a unit no cache has seen\n")
    config = JudgeConfig(device="cpu", time=False, verdict_cache=False)
    verdict = judge(Catalog().resolve("examples/relu"), workspace, config)
    assert (verdict.verdict, verdict.reward) == ("pass", 1), verdict.compile_log or verdict.message
    # Once: the build, as root, stored every unit's object in the machine's ccache, for every later build to take.
    assert not ccache_dir().exists() or not any(p.is_file() for p in ccache_dir().rglob("*"))
    assert sorted(p.relative_to(glue_store()) for p in glue_store().rglob("*")) == seeded


FORGE_AND_KILL = """
import json, os, signal
json.dump({"status": "ok", "timing": None}, open("../run_result.json", "w"))
pid = os.getpid()
while pid > 1:
    if b"cuda_agent.judge.child.grader" in open(f"/proc/{pid}/cmdline", "rb").read():
        os.kill(pid, signal.SIGKILL)
        break
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
"""
"""A passing result at the grader's path (the folder above the candidate's), then the grader killed."""

LEFT_BEHIND = """
import json, os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        started = open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]
        open({pid_file!r}, "w").write(f"{{os.getpid()}} {{started}}")
        path = os.path.abspath("../run_result.json")
        for _ in range(200000):
            try:
                seen = json.load(open(path))
            except (OSError, ValueError):
                time.sleep(0.0005)
                continue
            if seen.get("status") != "ok":
                json.dump({{"status": "ok", "timing": None}}, open(path + ".new", "w"))
                os.rename(path + ".new", path)
            break
        time.sleep(600)
    os._exit(0)
"""
"""A process in a session of its own that rewrites the grader's result once the grader has written it, then lives
on."""


def _alive(left: str) -> bool:
    """Whether the process `left` names ("PID START", START its start time in /proc) still runs: pids are reused
    within minutes where `pid_max` is 32768 and the machine is busy."""
    pid, started = left.split()
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == started and fields[0] not in ("Z", "X")


def test_unconfined_a_result_left_by_the_candidate_is_never_read(tmp_path: Path) -> None:
    verdict = judge_hack(
        tmp_path,
        "examples/relu",
        model_new("return torch.zeros_like(x)", init=FORGE_AND_KILL),
        static_policy=False,
        candidate_user=None,
    )
    # Once: pass (reward 3 when timed: the forged result's times against the baselines).
    assert (verdict.verdict, verdict.reward) == ("runtime_error", -1), verdict.message
    assert "died" in verdict.message, verdict.message


def test_unconfined_nothing_the_candidate_left_outlives_the_grader(tmp_path: Path) -> None:
    import os
    import signal

    pid_file = tmp_path / "left.pid"
    init = LEFT_BEHIND.format(pid_file=str(pid_file))
    try:
        verdict = judge_hack(
            tmp_path,
            "examples/relu",
            model_new("return torch.zeros_like(x)", init=init),
            static_policy=False,
            candidate_user=None,
        )
        left = pid_file.read_text()
        # Once: pass (the grader's `incorrect` rewritten), and the process ran on after the judgement.
        assert (verdict.verdict, verdict.reward) == ("incorrect", -1), verdict.message
        # Killed, it may still be tearing down its address space (state R, SIGKILL pending) for a moment: never its code.
        deadline = time.monotonic() + 20
        while _alive(left) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(left), f"the process the candidate left ({left}) is still running"
    finally:
        if pid_file.exists() and _alive(pid_file.read_text()):
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)


BOM = "\ufeff"


def test_an_honest_solution_saved_with_a_byte_order_mark_is_judged() -> None:
    # Once: rejected, "does not parse (invalid non-printable character U+FEFF)"; Python runs it as it is.
    verdict = _judge(BOM + _solution("", ""))
    assert (verdict.verdict, verdict.reward) == ("pass", 1), verdict.message


def test_an_include_behind_a_byte_order_mark_is_read_by_the_static_policy(tmp_path: Path) -> None:
    import shutil

    workspace = tmp_path / "ws"
    shutil.copytree(Path(__file__).parents[3] / "solutions" / "workspaces" / "examples_relu_cpu", workspace)
    relu = workspace / "kernels" / "relu.cpp"
    relu.write_text(BOM + '#include "/etc/hostname"\n' + relu.read_text())
    config = JudgeConfig(device="cpu", policy=_static.POLICY, time=False, verdict_cache=False)
    verdict = judge(Catalog().resolve("examples/relu"), workspace, config)
    # Once: the policy saw no include on the line after the mark, and the compiler read the file (compile_error,
    # with its line quoted back).
    assert (verdict.verdict, verdict.reward) == ("rejected", -1), verdict.message
    assert "forbidden_library" in {v.check for v in verdict.violations}, verdict.message
