"""Training metrics: per-sample fields, their batch aggregate, and the two ways they reach verl's logger
(the agent-loop manager's step metrics, verl's validation metrics over reward_extra_info)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from cuda_agent.rl.metrics import episode_metrics, judged_fields

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from verl import DataProto  # noqa: E402
from verl.trainer.ppo.metric_utils import process_validation_metrics  # noqa: E402

from cuda_agent.rl.agent_loop import CudaAgentLoopManager  # noqa: E402


def passing(solution: float, eager: float, compile_ms: float | None) -> dict:
    return {
        "verdict": "pass",
        "timings_ms": {"solution": solution, "eager": eager, "compile": compile_ms},
        "speedup_vs_compile": (compile_ms or eager) / solution,
    }


@pytest.mark.parametrize(
    ("verdict", "eager", "compile_"),
    [
        (passing(0.90, 1.0, 1.0), 1.0, 1.0),  # more than 5% faster than both
        (passing(0.96, 1.0, 2.0), 0.0, 1.0),  # 4% faster than eager is not faster
        (passing(0.90, 1.0, None), 1.0, 1.0),  # no compile time: eager is the bar
        ({"verdict": "incorrect", "timings_ms": {"solution": 0.1, "eager": 1.0, "compile": 1.0}}, 0.0, 0.0),
    ],
)
def test_judged_fields_flags_follow_the_papers_five_percent(verdict: dict, eager: float, compile_: float) -> None:
    fields = judged_fields(verdict, 3.0 if verdict["verdict"] == "pass" else -1.0)
    assert (fields["faster_than_eager"], fields["faster_than_compile"]) == (eager, compile_)
    assert fields["passed"] == float(verdict["verdict"] == "pass")
    assert (fields["speedup_vs_compile"] is None) == (verdict["verdict"] != "pass")


def test_episode_metrics_aggregates_hand_made_fields() -> None:
    samples = [
        {**judged_fields(passing(0.5, 1.0, 2.0), 3), "turns": 10, "clipped": 0.0, "judge_s": 2.0},
        {**judged_fields(passing(1.0, 1.0, 0.5), 1), "turns": 30, "clipped": 1.0, "judge_s": 4.0},
        {**judged_fields({"verdict": "rejected"}, -1), "turns": 20, "clipped": 0.0, "judge_s": 0.0},
        {**judged_fields({"verdict": "compile_error"}, -1), "turns": 40, "clipped": 1.0, "judge_s": 6.0},
    ]
    # The shape verl hands over: one numpy array per field, objects where None or text appear.
    columns = {key: np.array([s[key] for s in samples], dtype=object) for key in samples[0]}
    m = episode_metrics(columns)
    assert m["cuda_agent/reward/mean"] == pytest.approx(0.5)
    assert (m["cuda_agent/reward/min"], m["cuda_agent/reward/max"]) == (-1.0, 3.0)
    shares = [m[f"cuda_agent/reward/share_{r}"] for r in (-1, 1, 2, 3)]
    assert shares == [0.5, 0.25, 0.0, 0.25]
    assert (m["cuda_agent/pass_rate"], m["cuda_agent/faster_than_compile_rate"]) == (0.5, 0.25)
    assert m["cuda_agent/faster_than_eager_rate"] == 0.25
    assert m["cuda_agent/verdict/pass"] == 0.5 and m["cuda_agent/verdict/rejected"] == 0.25
    assert m["cuda_agent/speedup_vs_compile/geomean"] == pytest.approx(math.sqrt(4.0 * 0.5))
    assert (m["cuda_agent/turns/mean"], m["cuda_agent/turns/min"], m["cuda_agent/turns/max"]) == (25.0, 10.0, 40.0)
    assert m["cuda_agent/clipped_ratio"] == 0.5
    assert (m["cuda_agent/judge_s/mean"], m["cuda_agent/judge_s/max"]) == (3.0, 6.0)
    assert all(isinstance(value, float) for value in m.values())


def test_episode_metrics_skips_what_a_batch_lacks() -> None:
    assert episode_metrics({"turns": [3]}) == {}
    m = episode_metrics({"score": [1.0, -1.0], "speedup_vs_compile": [2.0, 9.0], "passed": [1.0, 0.0]})
    assert m["cuda_agent/speedup_vs_compile/geomean"] == 2.0  # the failed sample's timing does not count
    assert "cuda_agent/turns/mean" not in m and "cuda_agent/clipped_ratio" not in m


def test_manager_adds_episode_metrics_to_the_step_timing() -> None:
    output = DataProto.from_dict(
        tensors={"prompts": torch.zeros(2, 4, dtype=torch.long), "attention_mask": torch.ones(2, 9, dtype=torch.long)},
        non_tensors={
            "score": np.array([3.0, -1.0]),
            "passed": np.array([1.0, 0.0]),
            "verdict": np.array(["pass", "timeout"], dtype=object),
            "judge_s": np.array([5.0, 7.0]),
        },
    )
    per_sample = {"generate_sequences": 1.0, "tool_calls": 2.0, "compute_score": 5.0, "num_preempted": -1}
    manager = object.__new__(CudaAgentLoopManager)  # no Ray workers: only the metrics hook runs
    timing = manager._performance_metrics([[per_sample, per_sample]], output)
    assert timing["agent_loop/compute_score/mean"] == 5.0  # verl's own keys are kept
    assert timing["cuda_agent/pass_rate"] == 0.5 and timing["cuda_agent/verdict/timeout"] == 0.5
    assert timing["cuda_agent/judge_s/max"] == 7.0


def test_verls_validation_metrics_average_our_fields_per_data_source() -> None:
    infos = [judged_fields(passing(0.5, 1.0, 1.0), 3), judged_fields({"verdict": "incorrect"}, -1)] * 2
    columns = {key: [info[key] for info in infos] for key in infos[0]}
    assert "reward" not in columns  # verl's validation keeps its own 'reward' list
    metrics = process_validation_metrics(["kernelbench/L1"] * 4, ["a", "a", "b", "b"], columns)
    source = metrics["kernelbench/L1"]
    assert source["passed"]["mean@2"] == 0.5 and source["score"]["mean@2"] == 1.0
    assert source["faster_than_compile"]["mean@2"] == 0.5
    assert "verdict" not in source  # text fields are skipped, not averaged


def test_our_failures_are_masked_out_of_the_batch_and_counted_not_scored() -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput

    from cuda_agent.rl.metrics import dropped_fields, mask_our_failure

    infos = [judged_fields(passing(0.5, 1.0, 1.0), 3), dropped_fields("sandbox unreachable")]
    assert set(infos[0]) == set(infos[1])  # verl takes the keys from the first sample: every sample has all
    samples = [
        AgentLoopOutput(
            prompt_ids=[1],
            response_ids=[2] * 5,
            response_mask=[1] * 5,
            reward_score=info["score"],
            num_turns=2,
            metrics=AgentLoopMetrics(),
            extra_fields={"reward_extra_info": info},
        )
        for info in infos
    ]
    # The data step (our agent-loop worker, right after the reward): the dropped sample's mask is zeroed.
    assert [mask_our_failure([sample]) for sample in samples] == [False, True]
    rm_scores = torch.zeros(2, 5)
    rm_scores[:, -1] = torch.tensor([3.0, 0.0])
    output = DataProto.from_dict(
        tensors={
            "prompts": torch.zeros(2, 4, dtype=torch.long),
            "attention_mask": torch.ones(2, 9, dtype=torch.long),
            "response_mask": torch.tensor([sample.response_mask for sample in samples]),
            "rm_scores": rm_scores,
        },
        non_tensors={key: np.array([info[key] for info in infos], dtype=object) for key in infos[0]},
    )
    manager = object.__new__(CudaAgentLoopManager)
    per_sample = {"generate_sequences": 1.0, "tool_calls": 0.0, "compute_score": 1.0, "num_preempted": -1}
    timing = manager._performance_metrics([[per_sample, per_sample]], output)
    assert output.batch["response_mask"][0].sum() == 5 and output.batch["response_mask"][1].sum() == 0
    assert timing["cuda_agent/our_failures"] == 1.0
    assert timing["cuda_agent/reward/mean"] == 3.0 and timing["cuda_agent/pass_rate"] == 1.0  # the drop is not a -1

    # verl's seq-mean-token-mean (the recipes' loss aggregation) leaves a fully masked sequence out of the loss.
    from verl.trainer.ppo.core_algos import agg_loss

    losses = torch.tensor([[1.0] * 5, [100.0] * 5])
    loss = agg_loss(losses, output.batch["response_mask"].float(), "seq-mean-token-mean", global_batch_size=1)
    assert loss.item() == pytest.approx(1.0)


def test_verdicts_from_the_judges_cache_are_counted() -> None:
    cached = {**passing(0.5, 1.0, 1.0), "env": {"verdict_cached": True}}
    infos = [judged_fields(cached, 3), judged_fields(passing(0.5, 1.0, 1.0), 3)]
    assert [info["cached"] for info in infos] == [1.0, 0.0]
    m = episode_metrics({key: [info[key] for info in infos] for key in infos[0]})
    assert m["cuda_agent/verdict_cached_rate"] == 0.5


def _turn(index: int, *calls: tuple[str, dict | str, str]):
    import json as _json

    from cuda_agent.types import ToolCall, ToolResult, Turn

    tool_calls, results = [], []
    for number, (name, arguments, output) in enumerate(calls):
        call_id = f"c{index}_{number}"
        text = arguments if isinstance(arguments, str) else _json.dumps(arguments)
        tool_calls.append(ToolCall(id=call_id, name=name, arguments=text))
        results.append(ToolResult(tool_call_id=call_id, name=name, output=output))
    return Turn(index=index, tool_calls=tool_calls, tool_results=results)


def test_tool_use_fields_count_verification_after_the_last_edit_and_malformed_calls() -> None:
    from cuda_agent.rl.rollout import tool_use_fields
    from cuda_agent.types import ToolCall, Turn

    write = ("Write", {"path": "kernels/k.cpp", "content": "x"}, "Created 'kernels/k.cpp'.")
    verify = ("Bash", {"command": "python -m utils.verification"}, "verification: PASS")
    bad = ("Read", "{not json", "Error: the arguments of Read are not valid JSON: ...")
    checked = [_turn(0, write), _turn(1, verify), Turn(index=2, content="Done.")]
    assert tool_use_fields(checked) == {"verified": 1.0, "valid_tool_calls": 1.0, "tool_call_turns": 1.0,
                                        "tool_checks": 1.0}  # fmt: skip
    assert tool_use_fields(checked[:2])["verified"] == 0.0  # verified, then cut by the turn limit: never finished
    edited_after = [*checked[:2], _turn(2, write), _turn(3, bad)]
    assert tool_use_fields(edited_after) == {"verified": 0.0, "valid_tool_calls": 0.75, "tool_call_turns": 1.0,
                                             "tool_checks": 1.0}  # fmt: skip
    assert tool_use_fields([]) == {"verified": 0.0, "valid_tool_calls": 1.0, "tool_call_turns": 0.0, "tool_checks": 0.0}
    # A block the loop could not parse, then the finishing reply (no call): one turn of the two that should call.
    unparsed = Turn(index=1, tool_calls=[ToolCall(id="c1", name="Bash", arguments="{", error="not closed")])
    fields = tool_use_fields([_turn(0, write), unparsed, Turn(index=2, content="Done.")])
    assert (fields["tool_call_turns"], fields["valid_tool_calls"]) == (0.5, 0.5)
    assert tool_use_fields([Turn(index=0, content="Here is a kernel: ...")])["tool_call_turns"] == 0.0  # prose only
    m = episode_metrics({"score": [1, -1], "verified": [1.0, 0.0], "valid_tool_calls": [1.0, 0.5],
                         "tool_call_turns": [1.0, 0.0], "response_tokens": [100, 300]})  # fmt: skip
    assert (m["cuda_agent/verified_before_finish_rate"], m["cuda_agent/valid_tool_call_rate"]) == (0.5, 0.75)
    assert m["cuda_agent/tool_call_turn_rate"] == 0.5 and m["cuda_agent/response_tokens/mean"] == 200.0


def test_a_steps_judgements_are_counted_fresh_and_cached_with_the_episodes_time() -> None:
    m = episode_metrics({"score": [1, -1, 0], "judgements": [2.0, 1.0, 0.0], "cached_judgements": [1.0, 0.0, 0.0],
                         "tool_checks": [3.0, 0.0, 0.0], "model_s": [4.0, 2.0, 0.0], "tools_s": [10.0, 0.0, 0.0],
                         "our_failure": [0.0, 0.0, 1.0]})  # fmt: skip
    assert (m["cuda_agent/judgements/fresh"], m["cuda_agent/judgements/cached"]) == (2.0, 1.0)
    assert m["cuda_agent/judgements/tool_checks"] == 3.0
    assert (m["cuda_agent/model_s/mean"], m["cuda_agent/tools_s/mean"]) == (3.0, 5.0)  # the dropped sample is out


def test_the_manager_runs_our_worker_which_drops_our_failures_after_the_reward() -> None:
    from omegaconf import OmegaConf

    from cuda_agent.rl.agent_loop import CudaAgentLoopWorker

    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {}, "model": {}}})
    manager = CudaAgentLoopManager(config, llm_client=None)
    assert manager.agent_loop_workers_class.__ray_metadata__.modified_class.__mro__[1] is CudaAgentLoopWorker


def test_a_dropped_sample_carries_every_key_a_judged_one_does(tmp_path: Path) -> None:
    # verl builds the batch's reward columns from the first sample's keys and reads each from every sample.
    from cuda_agent.agent.loop import EpisodeResult
    from cuda_agent.rl.rollout import dropped_extra_info, reward_extra_info
    from cuda_agent.types import EpisodeEnd, Verdict

    verdict = Verdict(task="agentic/relu", verdict="pass", reward=1, correct=True)
    result = EpisodeResult(
        trajectory=tmp_path / "t.jsonl", verdict=verdict, final=verdict, solution=tmp_path,
        exit_status=EpisodeEnd.FINISHED, turns=3, judge_s=[2.0], cached_judgements=1,
    )  # fmt: skip
    fields = {"reward": 1.0, "turns": 3, "clipped": False, "judge_s": 2.0, "verified": 1.0, "valid_tool_calls": 1.0,
              "tool_call_turns": 1.0, "response_tokens": 900, "judgements": 1, "cached_judgements": 1,
              "tool_checks": 2.0, "model_s": 3.0, "tools_s": 4.0}  # fmt: skip
    judged, dropped = reward_extra_info(result, fields), dropped_extra_info("sandbox unreachable")
    assert set(judged) == set(dropped)
    assert (judged["cached_judgements"], judged["tool_checks"], dropped["our_failure"]) == (1.0, 2.0, 1.0)
