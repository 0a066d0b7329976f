"""Round 15 (bench/results/cpu-2026-12-07-redteam-15/): what the grader stops and whom it reads, honest outputs
laid out sparsely, and the agent's workspace read after its check.

- A process in a PID namespace made inside the candidate's. Any user may make one (`unshare` with a user namespace
  of its own), and the per-request stop listed the processes of the candidate's namespace alone: a process there,
  sharing the candidate's memory (`clone(CLONE_VM)`), ran on while the grader stopped the rest and read the outputs
  (round 15's n1: forward only ordered relu from it, the claim was the order's, and the outputs were right). Here it
  spoils the outputs where it sees the candidate's process stopped while it runs itself: incorrect before, now it
  stops with the rest.
- An answer sent by another process than the one the grader started. The grader stopped the namespace of whichever
  process sent the answer and read its memory: the PID 1 of a namespace made inside the candidate's sent it, and
  nothing was stopped at all (n2); unconfined, a process outside the grader's tree could (n3). Now outputs are read
  from the process that answered before candidate code ran (`Channel.peer`), and another sender is the candidate's
  runtime_error.
- Honest sparse outputs: a column of a larger result (its span 1017 times its size) was refused as strides "no output
  can have" (runtime_error, -1) where the grader read an output's whole span; it reads each run alone now (n4).
- The agent's workspace: a kernel source whose name is not UTF-8 made the judge's hashing raise (a SandboxError,
  ours: the episode was dropped instead of scored, n6); a link made after the episode's check made the judge raise
  SolutionError out of the episode (n7). Both are the agent's rejected verdict now.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cuda_agent.agent import ReplayModel
from cuda_agent.agent.episode import run_task_episode
from cuda_agent.agent.models.base import ModelTurn
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task, Verdict
from tests.judge.threats import _static
from tests.judge.threats._hacks import COMMON_CPP, _header, judge_hack, model_new, task_file
from tests.judge.threats.test_shim_copy_and_gauge import FIND_SHIM

NAMESPACES = r"""
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

torch::Tensor relu(torch::Tensor x) { return relu_impl(x); }

void relu_out(torch::Tensor x, torch::Tensor out) {
    check_input(x);
    relu_into(x.data_ptr<float>(), out.data_ptr<float>(), x.numel());
}

static float* noted[256];
static std::atomic<int64_t> noted_count{0};

// relu, its output's address noted for the watcher (which shares this memory).
torch::Tensor relu_noted(torch::Tensor x) {
    auto out = relu_impl(x);
    noted[noted_count.load() % 256] = out.data_ptr<float>();
    noted_count.fetch_add(1);
    return out;
}

static long watched_pid;

static char state_of(long pid) {
    char path[64], text[512];
    std::snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    const long fd = syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return '?';
    const long got = syscall(SYS_read, fd, text, sizeof text - 1);
    syscall(SYS_close, fd);
    if (got <= 0) return '?';
    text[got] = 0;
    const char* end = std::strrchr(text, ')');
    return end && end[1] && end[2] ? end[2] : '?';
}

// Polls the candidate's process's state every 20 us; where it has seen it stopped 10 polls running (while itself
// running all along), it writes NaN into every output noted since, as a process the stop left out could write them.
static int watcher_main(void*) {
    int64_t done = 0;
    int seen = 0;
    const struct timespec pause = {0, 20000};
    for (;;) {
        syscall(SYS_nanosleep, &pause, nullptr);
        seen = state_of(watched_pid) == 'T' ? seen + 1 : 0;
        if (seen >= 10) {
            const int64_t count = noted_count.load();
            for (; done < count; ++done) noted[done % 256][0] = NAN;
            seen = 0;
        }
    }
    return 0;
}

// The watcher: a process sharing this one's memory (CLONE_VM), with `flags` (0: in this process's PID namespace).
int64_t start_watcher(int64_t pid, int64_t flags) {
    watched_pid = pid;
    const size_t size = 1 << 20;
    void* stack = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED) return -errno;
    const int child = clone(watcher_main, (char*)stack + size, CLONE_VM | (int)flags | SIGCHLD, nullptr);
    return child < 0 ? -errno : child;
}
"""
HEADER = _header(
    "judge_threat_round15_cpu", COMMON_CPP + NAMESPACES, ["relu", "relu_out", "relu_noted", "start_watcher"]
)
"""One build for the namespace tests (ModelNew bodies hold no string constants: they would be in the build key)."""

NEW_NAMESPACES = 0x10000000 | 0x20000000
"""CLONE_NEWUSER | CLONE_NEWPID: a PID namespace inside the candidate's, which any user may make."""

WATCHER_OUTSIDE_THE_STOP = model_new(
    "return ext.relu_noted(x.contiguous())",
    init=f"import os\nassert ext.start_watcher(os.getpid(), {NEW_NAMESPACES}) > 0",
)

NESTED_ANSWERS = model_new(
    "slot = self.slot\nself.slot = (slot + 1) % 64\nout = self.outs[slot]\next.relu_out(x.contiguous(), out)\n"
    "return out",
    init=f"""
import ctypes
import json
import mmap
import os
import socket
import struct
{FIND_SHIM}
n = 128 * 1024
self.region = mmap.mmap(-1, 64 * n * 4)
self.outs = [torch.frombuffer(self.region, dtype=torch.float32, count=n, offset=i * n * 4).view(128, 1024) for i in range(64)]
self.slot = 0
read, orders = os.pipe()
channel = shim.channel
if os.fork() == 0:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare({NEW_NAMESPACES}) != 0 or os.fork() != 0:
        os._exit(0)
    while True:
        head = os.read(read, 4)
        if len(head) < 4:
            os._exit(0)
        size, = struct.unpack("I", head)
        data = b""
        while len(data) < size:
            data += os.read(read, size - len(data))
        channel.sock.sendall(data)
def send(message, fds=None, ident=None):
    data = json.dumps({{**message.model_dump(), "id": ident}}).encode()
    os.write(orders, struct.pack("I", len(data)) + data)
channel.send = send
""",
)
"""relu into memory shared with the PID 1 of a namespace made inside the candidate's, which sends every answer."""


def _judge_nested(tmp_path: Path, attack: str) -> Verdict:
    return judge_hack(tmp_path, "examples/relu", attack, HEADER, static_policy=False, verdict_cache=False)


@pytest.mark.slow
def test_a_process_in_a_pid_namespace_made_inside_the_candidates_stops_with_it(tmp_path: Path) -> None:
    verdict = _judge_nested(tmp_path, WATCHER_OUTSIDE_THE_STOP)
    # Once: incorrect (the watcher, never stopped, saw the candidate's process stopped and wrote NaN before the read).
    assert verdict.verdict == "pass", verdict.message


@pytest.mark.slow
def test_the_same_watcher_in_the_candidates_own_namespace_stops_with_it(tmp_path: Path) -> None:
    """The control: what the stop always covered (relu_noted's NaN would show where it did not)."""
    verdict = _judge_nested(tmp_path, WATCHER_OUTSIDE_THE_STOP.replace(str(NEW_NAMESPACES), "0"))
    assert verdict.verdict == "pass", verdict.message


@pytest.mark.slow
def test_an_answer_sent_by_another_process_than_the_one_started_is_refused(tmp_path: Path) -> None:
    verdict = _judge_nested(tmp_path, NESTED_ANSWERS)
    # Once: pass, with nothing of the candidate's stopped as the grader read (the sender's namespace was stopped, but
    # its PID 1, the sender, was left out as the jail's own PID 1 is).
    assert verdict.verdict == "runtime_error", verdict.message
    assert "another process" in verdict.message or "other than the one" in verdict.message, verdict.message


HONEST_CPP = (
    COMMON_CPP
    + r"""
// Row-wise running sums: out[i][j] = x[i][0] + ... + x[i][j].
torch::Tensor prefix_rows(torch::Tensor x) {
    check_input(x);
    auto out = torch::empty_like(x);
    const float* src = x.data_ptr<float>();
    float* dst = out.data_ptr<float>();
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    for (int64_t r = 0; r < rows; ++r) {
        float acc = 0.0f;
        for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = (acc += src[r * cols + c]);
    }
    return out;
}
"""
)
HONEST_HEADER = _header("judge_threat_round15_honest_cpu", HONEST_CPP, ["prefix_rows"])

ROW_SUMS = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)


def get_inputs():
    return [torch.randn(128, 1024)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_an_honest_output_that_is_a_column_of_a_larger_result_is_read(tmp_path: Path) -> None:
    task = task_file(tmp_path, "row_sums", ROW_SUMS)
    honest = model_new("return ext.prefix_rows(x.contiguous())[:, -1]")  # a view of stride 1024
    verdict = judge_hack(tmp_path, task, honest, HONEST_HEADER, verdict_cache=False)
    # Once: runtime_error, "strides (1024,) that no [128] output it returned can have".
    assert verdict.verdict == "pass", verdict.message


@pytest.mark.slow
def test_an_honest_column_output_is_read_run_by_run_where_each_call_was_released(tmp_path: Path) -> None:
    # With calls released one at a time (child/release.py), each released call's sample and the final read meet the
    # same sparse output: read where the shim said as the call returned, its runs copied into a dense copy of ours.
    task = task_file(tmp_path, "row_sums", ROW_SUMS)
    honest = model_new("return ext.prefix_rows(x.contiguous())[:, -1]")
    timed = {"time": True, "trials": 3, "warmup_reps": 2, "release_per_call": True}
    verdict = judge_hack(tmp_path, task, honest, HONEST_HEADER, verdict_cache=False, **timed)
    assert verdict.verdict == "pass", verdict.message
    assert verdict.env["timing"]["solution"]["calls_per_request"] > 1


def _episode(tmp_path: Path, judge: object, command: str | None = None) -> Verdict:
    from tests.agent.test_loop import _call, _turn

    turns: list[ModelTurn] = [_turn(_call("Bash", command=command))] if command else []
    model = ReplayModel([*turns, _turn(content="done")])
    return run_task_episode(Catalog().resolve("examples/relu"), model, judge, tmp_path / "ep", "cpu").verdict


def test_a_kernel_source_whose_name_is_not_text_is_the_agents_verdict(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the workspace is read alike under either policy")

    class Judge:
        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            raise AssertionError("a workspace with a source the judge cannot name was judged")

    verdict = _episode(tmp_path, Judge(), "printf '// notes\\n' > kernels/$(printf 'notes\\377.h')")
    # Once: judged, and the judge's hashing of the name raised (a SandboxError: ours, the episode dropped).
    assert verdict.verdict == "rejected" and verdict.reward == -1, verdict.message
    assert "not UTF-8" in verdict.message, verdict.message


def test_a_workspace_changed_after_its_check_is_the_agents_verdict(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the workspace is read alike under either policy")
    from cuda_agent.judge.solution import read_solution

    class Judge:
        """Reads the workspace as the sandbox's judge does, after a process the agent left made a link there."""

        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            os.symlink("/etc/hostname", workspace / "kernels" / "late.h")
            read_solution(workspace)
            raise AssertionError("a workspace with a link was read")

    verdict = _episode(tmp_path, Judge())
    # Once: SolutionError out of the episode (neither a verdict nor our InfraError).
    assert verdict.verdict == "rejected" and verdict.reward == -1, verdict.message
    assert "symbolic link" in verdict.message, verdict.message


def test_a_snapshot_keeps_the_agents_links_and_leaves_special_files_out(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the workspace is read alike under either policy")

    class Judge:
        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            raise AssertionError("a workspace with a link was judged")

    record = (
        "from pathlib import Path; from cuda_agent.workspace.checks import WorkspaceCheck, editable_digest, "
        "record_check; record_check(WorkspaceCheck(tool='verification', verdict='pass', correct=True, reward=1, "
        "digest=editable_digest(Path.cwd())))"
    )
    command = f'mkfifo kernels/pipe.cu && ln -s /etc/hostname kernels/host.h && python -c "{record}"'
    verdict = _episode(tmp_path, Judge(), command)
    # Once: the snapshot of the checked workspace copied the link's target in as a plain file (a file of the
    # machine's, read as the trainer's user, then judged as the agent's source) and raised on the FIFO (shutil.Error
    # out of the episode: neither a verdict nor ours).
    assert verdict.verdict == "rejected" and verdict.reward == -1, verdict.message
    snapshot = next((tmp_path / "ep" / "snapshots").iterdir())
    assert (snapshot / "kernels" / "host.h").is_symlink()
    assert not (snapshot / "kernels" / "pipe.cu").exists()


def test_a_solution_too_large_to_judge_is_rejected_before_any_stage(tmp_path: Path) -> None:
    from cuda_agent.judge import JudgeConfig, judge
    from cuda_agent.judge.solution import SolutionSource

    # The judge's work on a solution grows with its text, and no time limit holds the static policy (2.8 s a MiB on
    # the 2-core VM: a 256 MiB kernel source held a pool's job past 10 minutes). Once: judged in full, whatever its size.
    padding = ("# " + "x" * 125 + "\n") * (5 * 1024 * 1024 // 128)
    source = SolutionSource(python=HONEST_HEADER + model_new("return ext.prefix_rows(x.contiguous())") + padding)
    verdict = judge(
        Catalog().resolve("examples/relu"), source, JudgeConfig(device="cpu", policy=_static.POLICY, time=False)
    )
    assert verdict.verdict == "rejected" and verdict.reward == -1, verdict.message
    assert [v.check for v in verdict.violations] == ["solution_too_large"], verdict.message


DEEP_TREE = "cd kernels && d=$(printf 'd%.0s' $(seq 200)) && for i in $(seq 25); do mkdir $d && cd $d; done"
"""A tree under kernels/ deeper than a path may be long (25 folders of 200 characters: past PATH_MAX, 4096)."""


def test_a_tree_too_deep_to_walk_is_the_agents_verdict(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the workspace is read alike under either policy")

    class Judge:
        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            raise AssertionError("a workspace that cannot be read whole was judged")

    verdict = _episode(tmp_path, Judge(), DEEP_TREE)
    # Once: OSError (File name too long) out of the episode's own check of the workspace, as from the judge's read.
    assert verdict.verdict == "rejected" and verdict.reward == -1, verdict.message
    assert "cannot be read whole" in verdict.message, verdict.message


@pytest.mark.slow
def test_a_tree_too_deep_to_walk_leaves_the_sandboxs_commands_working(tmp_path: Path) -> None:
    if _static.POLICY == "kernelbench":
        pytest.skip("the workspace is read alike under either policy")
    from cuda_agent.sandbox.local import LocalPool
    from cuda_agent.workspace import create_workspace

    root = create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu")
    with LocalPool(build_workers=1, spares=0) as pool:
        made = pool.run_command(["bash", "-c", DEEP_TREE], str(root), timeout_s=120)
        after = pool.run_command(["echo", "still here"], str(root), timeout_s=120)
    # Once: both jobs failed as the sandbox's (SandboxError: its walk of the workspace, to hand it over and back,
    # raised), and every later command of the episode with them: the episode lost as ours, never scored.
    assert made.exit_code == 0 and after.exit_code == 0, (made, after)
    assert "still here" in after.stdout
