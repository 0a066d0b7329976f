"""The episode loop: a full rewarded episode against a real local OpenAI-style server, the limits,
malformed calls, protected files and hung commands, and the demo."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cuda_agent.agent import OpenAIModel, ReplayModel, read_trajectory
from cuda_agent.agent.demo import scripted_turns
from cuda_agent.agent.episode import run_task_episode
from cuda_agent.agent.loop import EpisodeConfig, run_episode
from cuda_agent.agent.models.base import ModelTurn
from cuda_agent.agent.tools import ToolsConfig, build_toolset
from cuda_agent.cli import run_agent_episode
from cuda_agent.errors import JudgeInfraError
from cuda_agent.tasks import Catalog
from cuda_agent.types import Task, ToolCall, Verdict
from cuda_agent.workspace import create_workspace, is_editable
from cuda_agent.workspace.checks import CHECKS_FILE_ENV, CheckReader, WorkspaceCheck, editable_digest
from tests.agent.fake_openai import FakeOpenAI, completion

ROOT = Path(__file__).resolve().parents[2]
LEGIT = ROOT / "solutions" / "workspaces" / "examples_relu_cpu"


def _call(name: str, **arguments: object) -> ToolCall:
    return ToolCall(id="c", name=name, arguments=json.dumps(arguments))


def _turn(*calls: ToolCall, content: str = "") -> ModelTurn:
    return ModelTurn(content=content, tool_calls=[c.model_copy(update={"id": f"c{i}"}) for i, c in enumerate(calls)])


def _fake_score(folder: Path) -> Verdict:
    # A stand-in for the sandbox's judge (real in test_full_episode...): records what it was asked to judge.
    _fake_score.folders.append(folder)
    return Verdict(task="examples/relu", verdict="incorrect", reward=-1, correct=False, message="not judged here")


_fake_score.folders = []


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return create_workspace(Catalog().resolve("examples/relu"), tmp_path / "ws", device="cpu")


@pytest.mark.slow
def test_full_episode_from_a_real_http_model_to_a_passing_reward(
    tmp_path: Path,
) -> None:
    environ = dict(os.environ)
    kernels = {p.name: p.read_text() for p in (LEGIT / "kernels").iterdir()}
    script = scripted_turns(kernels, (LEGIT / "model_new.py").read_text(), "cpu")
    with FakeOpenAI().running() as server:
        for turn in script:
            calls = [{"name": c.name, "arguments": c.arguments} for c in turn.tool_calls]
            server.replies.append(completion(turn.content, calls or None))
        model = OpenAIModel(server.url, "scripted-model", api_key="test", backoff_s=0.01)
        result = run_agent_episode(Catalog().resolve("examples/relu"), model, "cpu", tmp_path / "run", max_turns=50)
        assert len(server.requests) == len(script)
    assert result.exit_status == "finished" and result.turns == len(script)
    assert result.verdict.verdict == "pass" and result.reward >= 1, result.verdict
    assert dict(os.environ) == environ  # the shell's PATH went to the episode's tools, not to this process
    trajectory = read_trajectory(result.trajectory)
    assert trajectory.complete and trajectory.reward == result.reward
    bash = [r.output for t in trajectory.turns for r in t.tool_results if r.name == "Bash"]
    assert any("compile: OK" in o for o in bash) and any("verification: PASS" in o for o in bash)
    # The model saw the tool results: the last request holds the profiling output.
    assert "profiling: reward" in json.dumps(server.requests[-1]["messages"])
    # The loop read the tools' recorded checks (not the printout) and snapshotted the passing kernels.
    checks = CheckReader(result.trajectory.parent / "checks.jsonl").new()
    assert [c.tool for c in checks if c.correct] == ["verification", "profiling"]
    assert (result.trajectory.parent / "snapshots").is_dir()


def test_turn_limit_ends_the_episode(ws: Path, tmp_path: Path) -> None:
    model = ReplayModel([_turn(_call("Glob", pattern="*.py"))] * 5)
    result = _run(model, ws, tmp_path / "out", _fake_score, EpisodeConfig(max_turns=3))
    assert result.exit_status == "turn_limit" and result.turns == 3
    trajectory = read_trajectory(result.trajectory)
    assert trajectory.truncated and not trajectory.terminated and trajectory.reward == -1
    assert result.cached_judgements == 0


def test_a_judgement_the_verdict_cache_answered_is_counted(ws: Path, tmp_path: Path) -> None:
    def cached_score(folder: Path) -> Verdict:
        return _fake_score(folder).model_copy(update={"env": {"verdict_cached": True}})

    result = _run(ReplayModel([_turn(content="done")]), ws, tmp_path / "out", cached_score)
    assert (len(result.judge_s), result.cached_judgements) == (1, 1)


def test_token_budget_ends_the_episode(ws: Path, tmp_path: Path) -> None:
    big = "x" * 20_000
    model = ReplayModel([_turn(_call("Grep", pattern=big))] * 10)
    config = EpisodeConfig(max_turns=10, max_tokens=8192, reserve_tokens=1024)
    result = _run(model, ws, tmp_path / "out", _fake_score, config)
    assert result.exit_status == "token_budget" and 0 < result.turns < 10


def test_malformed_call_and_protected_file_are_answered_and_the_episode_goes_on(ws: Path, tmp_path: Path) -> None:
    bad_json = ToolCall(id="c0", name="Write", arguments="{not json")
    protected = _call("Write", path="utils/verification.py", content="print('verification: PASS')")
    model = ReplayModel(
        [_turn(bad_json), _turn(_call("Read", path="utils/verification.py")), _turn(protected), _turn(content="done")]
    )
    before = (ws / "utils" / "verification.py").read_text()
    result = _run(model, ws, tmp_path / "out", _fake_score, EpisodeConfig(max_turns=10))
    assert result.exit_status == "finished" and result.turns == 4
    turns = read_trajectory(result.trajectory).turns
    assert turns[0].tool_results[0].is_error and "JSON" in turns[0].tool_results[0].output
    assert turns[2].tool_results[0].is_error and "model_new.py" in turns[2].tool_results[0].output
    assert (ws / "utils" / "verification.py").read_text() == before


def test_hung_command_is_killed_and_reported(ws: Path, tmp_path: Path) -> None:
    model = ReplayModel(
        [_turn(_call("Bash", command="sleep 600")), _turn(_call("Bash", command="echo alive")), _turn(content="done")]
    )
    config = EpisodeConfig(max_turns=5, tools=ToolsConfig(bash_timeout_s=2))
    result = _run(model, ws, tmp_path / "out", _fake_score, config)
    turns = read_trajectory(result.trajectory).turns
    assert turns[0].tool_results[0].is_error and turns[0].tools_s < 30
    assert "alive" in turns[1].tool_results[0].output


def _run(model, ws: Path, out: Path, score, config: EpisodeConfig | None = None, commands=None):
    """run_episode with the tools episode.py gives it: the checks file named in the shell's environment."""
    out.mkdir(parents=True, exist_ok=True)
    checks = out / "checks.jsonl"
    limits = (config or EpisodeConfig()).tools
    with build_toolset(ws, is_editable, limits, {CHECKS_FILE_ENV: str(checks)}, commands) as tools:
        return run_episode(model, tools, ws, "examples/relu", out, score, config, checks=checks)


def _recorded_pass(ws: Path) -> str:
    """A Bash command that records a passing check of the workspace as it is now, as utils/verification does."""
    check = WorkspaceCheck(tool="verification", verdict="pass", correct=True, reward=1, digest=editable_digest(ws))
    return f"echo '{check.model_dump_json()}' >> \"${CHECKS_FILE_ENV}\""


def test_best_checked_snapshot_is_scored_beside_the_final_workspace(ws: Path, tmp_path: Path) -> None:
    # A check is recorded (here written by hand: a forged record costs one extra judgement, no more), then the
    # agent breaks model_new.py: the snapshot is judged afresh beside the final workspace.
    model = ReplayModel(
        [
            _turn(_call("Bash", command=_recorded_pass(ws))),
            _turn(_call("Read", path="model_new.py")),
            _turn(_call("Write", path="model_new.py", content="broken = True\n")),
            _turn(content="done"),
        ]
    )
    _fake_score.folders.clear()
    result = _run(model, ws, tmp_path / "out", _fake_score, EpisodeConfig(max_turns=10))
    assert _fake_score.folders[0] == ws and _fake_score.folders[1].name == "turn_000"
    assert "broken" not in (_fake_score.folders[1] / "model_new.py").read_text()
    assert len(result.judge_s) == 2 and result.solution == ws  # a tie keeps the final workspace


def test_printed_results_and_checks_of_other_kernels_take_no_snapshot(ws: Path, tmp_path: Path) -> None:
    stale = _recorded_pass(ws)  # recorded for the kernels as they are now, then replayed after an edit
    model = ReplayModel(
        [
            _turn(_call("Bash", command="echo verification: PASS; echo 'profiling: reward 3'")),
            _turn(_call("Read", path="model_new.py")),
            _turn(_call("Write", path="model_new.py", content="changed = True\n"), _call("Bash", command=stale)),
            _turn(content="done"),
        ]
    )
    _fake_score.folders.clear()
    result = _run(model, ws, tmp_path / "out", _fake_score, EpisodeConfig(max_turns=10))
    assert "verification: PASS" in read_trajectory(result.trajectory).turns[0].tool_results[0].output
    assert "changed" in (ws / "model_new.py").read_text()
    assert not (tmp_path / "out" / "snapshots").exists() and _fake_score.folders == [ws]


def test_our_failure_while_judging_is_recorded_and_raised_never_scored(ws: Path, tmp_path: Path) -> None:
    def failing(folder: Path) -> Verdict:
        raise JudgeInfraError("the judge ran out of memory in its own comparison")

    with pytest.raises(JudgeInfraError):
        _run(ReplayModel([_turn(content="done")]), ws, tmp_path / "out", failing)
    trajectory = read_trajectory(tmp_path / "out" / "trajectory.jsonl")
    assert trajectory.complete and trajectory.verdict is None and trajectory.reward is None
    assert trajectory.judge_error == "JudgeInfraError: the judge ran out of memory in its own comparison"
    assert trajectory.exit_status == "finished"


def test_the_episode_runner_gives_the_shell_its_python_without_changing_ours(tmp_path: Path) -> None:
    class Judge:
        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            self.asked = (task, workspace, config)
            return Verdict(task="examples/relu", verdict="rejected", reward=-1, correct=False)

    task, judge = Catalog().resolve("examples/relu"), Judge()
    model = ReplayModel([_turn(_call("Bash", command="command -v python; echo $EXTRA")), _turn(content="done")])
    environ = dict(os.environ)
    result = run_task_episode(task, model, judge, tmp_path / "ep", "cpu", env={"EXTRA": "per-episode"})
    assert dict(os.environ) == environ
    output = read_trajectory(result.trajectory).turns[0].tool_results[0].output
    assert output.split() == [str(Path(sys.executable).parent / "python"), "per-episode"]
    assert judge.asked == (task, tmp_path / "ep" / "workspace", {"device": "cpu"})  # the Task: its name travels
    assert result.verdict.verdict == "rejected" and result.final == result.verdict


@pytest.mark.parametrize(
    ("command", "said"),
    [
        ("rm model_new.py", "model_new.py is missing"),
        ("rm model_new.py && mkdir model_new.py", "model_new.py is missing"),
        ("printf '\\xff\\xfe' > kernels/relu.cpp", "kernels/relu.cpp is not a text file"),
        ("rm model_new.py && ln -s model.py model_new.py", "model_new.py is a symbolic link"),
        ("ln -s /etc/hostname kernels/host.cpp", "kernels/host.cpp is a symbolic link"),
    ],
)
def test_a_workspace_left_with_nothing_to_read_is_the_agents_failure_not_ours(
    tmp_path: Path, command: str, said: str
) -> None:
    """The judge raises for a solution folder it cannot read (a user's mistake there); at an episode's end the agent
    made it so, and the episode ends rejected at reward -1 instead of being lost as our failure."""

    class Judge:
        def judge_workspace(self, task: Task, workspace: Path, config: dict | None = None) -> Verdict:
            raise AssertionError("nothing readable was left to judge")

    task = Catalog().resolve("examples/relu")
    model = ReplayModel([_turn(_call("Bash", command=command)), _turn(content="done")])
    result = run_task_episode(task, model, Judge(), tmp_path / "ep", "cpu")
    assert result.verdict.verdict == "rejected" and result.verdict.reward == -1
    assert said in result.verdict.message
    assert read_trajectory(result.trajectory).reward == -1


@pytest.mark.slow
def test_demo_replays_the_recording_to_a_reward(tmp_path: Path) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    # A relative --out, as the README's command uses (the sandbox judges in another folder).
    done = subprocess.run(
        [sys.executable, "-m", "cuda_agent", "demo", "--device", "cpu", "--out", "runs/demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replaying a recorded episode" in done.stdout and "verdict: pass" in done.stdout
    times = next(line for line in done.stdout.splitlines() if line.startswith("times (ms): "))
    figures = [part.split()[1] for part in times.removeprefix("times (ms): ").split(", ")]
    assert len(figures) == 3 and all(len(f.replace(".", "").lstrip("0")) <= 4 for f in figures), (
        times
    )  # no 0.0831884999
    assert (tmp_path / "runs" / "demo" / "trajectory.html").is_file()


def test_the_loop_stays_readable_in_one_sitting() -> None:
    """STYLE.md 8.3: agent/loop.py within 200 lines (A1's agent loop is 190), so it is read whole."""
    import cuda_agent.agent.loop as loop

    assert len(Path(loop.__file__).read_text().splitlines()) <= 200


def test_a_replay_recorded_on_another_task_says_so_before_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Issue 41: a replay recorded for one task ran on another without a word."""
    from contextlib import nullcontext

    from cuda_agent.agent import TrajectoryWriter
    from cuda_agent.types import Turn

    path = tmp_path / "relu.jsonl"
    with TrajectoryWriter(path, "examples/relu", "m", [{"role": "user", "content": "go"}]) as writer:
        writer.append(Turn(index=0, content="Done."))
        writer.finish(reward=0.0, exit_status="finished", terminated=True)
    model = ReplayModel.from_file(path)
    assert model.recorded_task == "examples/relu" and model.mismatch("examples/relu") == ""
    ran = []
    monkeypatch.setattr("cuda_agent.sandbox.LocalPool", nullcontext)
    monkeypatch.setattr("cuda_agent.agent.episode.run_task_episode", lambda task, *_a, **_k: ran.append(task.ref))
    softmax = Catalog().resolve("examples/softmax")
    run_agent_episode(softmax, model, "cpu", tmp_path / "out", 1)
    assert ran == ["examples/softmax"]  # a warning, not a refusal: the replay still runs
    assert capsys.readouterr().err == (
        f"warning: replay:{path} was recorded on examples/relu, not examples/softmax; its turns may not fit\n"
    )
