"""Threat 20: a candidate that outlives its judgement, or writes the caches every later judgement trusts.

A candidate may start a process with `clone` + `setsid`, which would escape a kill of its process group alone,
and rewrite its task's cached eager/compile baseline afterwards: reward 3 for every later judgement of that
task. Here the candidate (static policy off, as native code would be) tries it all from its
`__init__`: at once, it writes its task's cached baseline, the verdict cache and another candidate's build;
and it leaves a `setsid` daemon behind that tries the same 3 s later. It gains nothing: its process runs as
a user id of its own in namespaces of its own (judge/confine.py, uids.py, jail.py), where the cache is an empty
folder; the daemon dies with the namespace when the judgement ends, and what it left in /tmp and /dev/shm is
removed with its id's lease.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cuda_agent.judge import BaselineResult, JudgeConfig, baseline_key, judge
from cuda_agent.judge.confine import mounts_work
from cuda_agent.judge.solution import SolutionSource
from cuda_agent.judge.uids import leased
from cuda_agent.tasks import Catalog
from tests.judge import helpers
from tests.judge.threats import _static

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not mounts_work(),
    reason="needs root and PID and mount namespaces (unshare): the judge confines candidates only there",
)

DAEMON_NAME = "cuda-agent-esc"
"""The name the escaping daemon gives itself (prctl PR_SET_NAME), to look for it afterwards."""

ATTACK = """
class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        import ctypes, os, time
        targets = [BASELINE, VERDICTS + "/planted.json", OTHER_BUILD + "/planted", OTHER_BUILD + "/other.so"]
        said = []
        for target in targets:
            try:
                with open(target, "w") as f:
                    f.write("{}")
                said.append("wrote " + target)
            except OSError as exc:
                said.append(type(exc).__name__ + " " + target)
        with open(REPORT + "/at-once", "w") as f:
            f.write("\\n".join(said))
        for shared in ("/tmp", "/dev/shm"):  # left for a later candidate of the same user to find
            with open(shared + "/" + NAME.decode() + "-left", "w") as f:
                f.write(str(os.getuid()))
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                ctypes.CDLL(None).prctl(15, NAME, 0, 0, 0)
                open(REPORT + "/started", "w").close()
                time.sleep(3)
                for target in targets:
                    try:
                        with open(target, "w") as f:
                            f.write("{}")
                    except OSError:
                        pass
                open(REPORT + "/late", "w").close()
            os._exit(0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_forward(x.contiguous())
"""


@pytest.fixture(scope="module")
def machine() -> Iterator[dict[str, Path]]:
    """A cache as a grader left it (a baseline, a verdict, another build) and a folder anyone may write, in a
    folder nobody may enter (pytest's own folders are root's alone), under /dev/shm: the candidate's /tmp is its own
    (jail.private_folders). One for both policies' runs, so that their solutions are the same text and share one
    build."""
    with tempfile.TemporaryDirectory(prefix="cuda-agent-escape-", dir="/dev/shm") as tmp:
        root = Path(tmp)
        root.chmod(0o755)
        cache, report = root / "cache", root / "report"
        task = Catalog().resolve("examples/relu")
        baseline = cache / "baselines" / f"{baseline_key(task.code, 'cpu', JudgeConfig(device='cpu'))}.json"
        verdicts, other = cache / "verdicts", cache / "builds" / ("0" * 24)
        for folder in (baseline.parent, verdicts, other, report):
            folder.mkdir(parents=True)
        baseline.write_text(BaselineResult(compile_error="timed by the grader").model_dump_json())
        (verdicts / "kept.json").write_text("{}")
        (other / "other.so").write_bytes(b"\x7fELF")
        report.chmod(0o777)
        yield {"cache": cache, "report": report, "baseline": baseline, "verdicts": verdicts, "other": other}


def _attack(paths: dict[str, Path]) -> str:
    source = helpers.example_solution("relu")
    constants = (
        f"BASELINE = {str(paths['baseline'])!r}\nVERDICTS = {str(paths['verdicts'])!r}\n"
        f"OTHER_BUILD = {str(paths['other'])!r}\nREPORT = {str(paths['report'])!r}\nNAME = {DAEMON_NAME.encode()!r}\n"
    )
    return helpers.replace_model_new(source, constants + ATTACK)


def _trusted(paths: dict[str, Path]) -> dict[Path, bytes]:
    """Every file of the cache the grader left, with its bytes."""
    files = [paths["baseline"], *paths["verdicts"].rglob("*"), *paths["other"].rglob("*")]
    return {p: p.read_bytes() for p in files if p.is_file()}


def _daemons() -> list[int]:
    """The escaping daemons still running: a zombie (killed, its parent gone, not yet reaped by the machine's init)
    runs nothing; the kernel's kill of a namespace's processes is itself not instant, so look for up to 2 s."""
    deadline = time.monotonic() + 2.0
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "comm").read_text().strip() == DAEMON_NAME:
                    state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
                    if state != "Z":
                        found.append(int(entry.name))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.mark.slow
def test_a_candidate_leaves_nothing_running_and_writes_no_cache(machine: dict[str, Path]) -> None:
    report = machine["report"]
    for leftover in report.iterdir():
        leftover.unlink()
    before = _trusted(machine)
    config = JudgeConfig(
        device="cpu", time=False, cache_dir=machine["cache"], static_policy=False, policy=_static.POLICY
    )

    verdict = judge(Catalog().resolve("examples/relu"), SolutionSource(python=_attack(machine)), config)

    assert verdict.env.get("candidate_user") == "a user id of its own", verdict.env.get("candidate_isolation")
    assert leased(verdict.env["candidate_uid"])
    assert verdict.verdict == "pass", verdict.message  # its forward is honest: only its side effects are not
    said = (report / "at-once").read_text().splitlines()
    assert len(said) == 4 and not [line for line in said if line.startswith("wrote")], said
    assert (report / "started").exists()  # the daemon ran...
    assert _daemons() == []  # ...and is gone with its judgement
    assert not Path("/tmp", f"{DAEMON_NAME}-left").exists() and not Path("/dev/shm", f"{DAEMON_NAME}-left").exists()
    time.sleep(4)
    assert not (report / "late").exists()  # it never woke up to try again
    assert not (machine["verdicts"] / "planted.json").exists() and not (machine["other"] / "planted").exists()
    after = _trusted(machine)
    assert {p: after.get(p) for p in before} == before  # its own verdict was cached meanwhile, by the grader
