"""Rejection fine-tuning data: keep the good trajectories and write them as verl's multi-turn SFT parquet.

The paper's stage 3 fine-tunes the actor on collected trajectories with reward > 0, well-formed
tool calls and no repeated loops. A trajectory is kept only if all of these hold; otherwise it is
dropped for the first reason that applies, in this order:

- `incomplete`: the episode crashed before its last line was written (`complete` is False).
- `reward`: no reward, or reward <= 0 (the judge's -1, i.e. not a passing kernel).
- `malformed_tool_call`: a call the backend could not parse (`ToolCall.error`), or a tool result that
  says the call itself was malformed (unknown tool, arguments not a JSON object, wrong argument
  types; see `MALFORMED_RESULT`). A tool that ran and failed (a compile error) is not malformed.
- `repeated_loop`: the agent repeats itself, in one of two ways (`find_loop`):
  (1) the same call, same tool and identical arguments (compared as parsed JSON), `max_same_calls`
  (3) or more times in a row in the episode's sequence of calls; or (2) a window of N consecutive
  turns, N = 1..`max_window` (4), repeated back to back `min_repeats` (3) or more times, a turn being
  identified by its calls (names and arguments). Checking a kernel twice after the same edit is
  allowed; a third identical check without any change between is a loop.

The kept trajectories are written in the form `verl.utils.dataset.MultiTurnSFTDataset` reads: a
parquet file with a `messages` column (OpenAI-style messages) and a `tools` column (the tool
schemas offered), one row per trajectory. Tool-call arguments stay JSON text, as OpenAI's format
has them, which keeps one column type for every tool's arguments; and parquet merges the tools'
argument schemas into one struct type. So read the file with `cuda_agent.rl.sft_dataset.RFTDataset`
(verl's dataset, which turns both back into what the chat template saw during rollouts), not the
plain `MultiTurnSFTDataset`.

Exact tokens: an episode rolled out under verl also leaves `tokens.json` beside its trajectory
(`TokenRecord`: the prompt ids, and the response ids and mask exactly as the policy saw and
produced them). Where it exists, the row also carries `input_ids` and `loss_mask` (1 on the
model's own tokens only), and `RFTDataset` trains on those ids as they are: re-rendering the
messages through the chat template can give other tokens than the policy sampled (tool-call JSON
spacing, key order), and the fine-tuned policy must learn what it generated.

`cuda-agent train rft-data` runs all of it on the collect stage's episode folders. The same token
records are the critic warm-up's data (`replay_rows`, `cuda-agent train critic-data`), or, for SFT
rows that already hold an episode's exact tokens and reward (the agentic curriculum's scripted
episodes), `write_replay_from_sft` (`critic-data --from-sft`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.types import Trajectory, Turn

MALFORMED_RESULT = re.compile(
    r"^Error: (your tool call could not be parsed|there is no tool named|the arguments of \S+ (are not valid JSON|"
    r"must be a JSON object)|bad arguments for)"
)
"""Tool results (from agent/tools/toolset.py) that mean the call was malformed rather than that the tool failed."""

DROP_REASONS = ("incomplete", "reward", "malformed_tool_call", "repeated_loop")
TOKENS_FILE = "tokens.json"
EXTRA_SFT_COLUMNS = ("messages", "input_ids", "loss_mask")
"""What an extra SFT row (e.g. the curriculum's sft.parquet) contributes to the RFT data: the dataset's inputs."""
"""Written beside trajectory.jsonl by the agent loop: the episode's exact tokens (`TokenRecord`)."""


class TokenRecord(BaseModel):
    """One rolled-out episode's tokens as the trainer saw them (what RFT and the critic warm-up replay)."""

    model_config = ConfigDict(extra="forbid")

    prompt_ids: list[int] = Field(description="The first prompt's token ids.")
    response_ids: list[int] = Field(description="Generated and tool-output ids, as trained on.")
    response_mask: list[int] = Field(description="1 on generated ids, 0 on tool-output ids.")
    reward: float | None = Field(description="The judge's reward; None when the sample was dropped (our failure).")

    def write(self, folder: Path) -> Path:
        """Save as `folder/tokens.json`."""
        path = Path(folder) / TOKENS_FILE
        path.write_text(self.model_dump_json())
        return path


class Collected(BaseModel):
    """A collected episode: its trajectory and, when rolled out under verl, its exact tokens."""

    trajectory: Trajectory
    tokens: TokenRecord | None = None
    path: Path = Field(description="The trajectory.jsonl it was read from.")


class RFTFilterConfig(BaseModel):
    """What counts as a loop, and the reward a kept trajectory must exceed."""

    model_config = ConfigDict(extra="forbid")

    min_reward: float = Field(default=0.0, description="Keep only rewards strictly above this (the paper: > 0).")
    max_same_calls: int = Field(default=3, ge=2, description="This many identical calls in a row is a loop.")
    max_window: int = Field(default=4, ge=1, description="Longest window of turns checked for back-to-back repeats.")
    min_repeats: int = Field(default=3, ge=2, description="A window of turns repeated this many times is a loop.")


class RFTResult(BaseModel):
    """What the filter kept and why it dropped the rest."""

    kept: list[Trajectory] = Field(default_factory=list, description="Trajectories that passed every check.")
    dropped: dict[str, int] = Field(
        default_factory=lambda: dict.fromkeys(DROP_REASONS, 0), description="Count of trajectories dropped per reason."
    )
    reasons: list[str | None] = Field(default_factory=list, description="Per input trajectory: None if kept, else why.")
    extra_rows: int = Field(
        default=0, description="SFT rows written beside the kept ones (write_rft_data's extra_sft)."
    )

    def summary(self) -> str:
        """One line for logs, e.g. 'kept 3 of 7; dropped: reward 2, repeated_loop 2'."""
        total = len(self.reasons)
        dropped = ", ".join(f"{reason} {count}" for reason, count in self.dropped.items() if count)
        extra = f"; {self.extra_rows} extra rows" if self.extra_rows else ""
        return f"kept {len(self.kept)} of {total}" + (f"; dropped: {dropped}" if dropped else "") + extra


def _call_key(name: str, arguments: str) -> str:
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return f"{name}\0{arguments}"  # malformed text compares as written
    return f"{name}\0{json.dumps(parsed, sort_keys=True)}"


def _turn_key(turn: Turn) -> tuple[str, ...]:
    return tuple(_call_key(call.name, call.arguments) for call in turn.tool_calls)


def find_loop(turns: list[Turn], config: RFTFilterConfig | None = None) -> str | None:
    """Describe the first repetition found (see the module docstring), or None.

    Returns:
        e.g. "call Bash {...} 3 times in a row" or "turns 4-5 repeated 3 times".
    """
    config = config or RFTFilterConfig()
    calls = [_call_key(c.name, c.arguments) for turn in turns for c in turn.tool_calls]
    run = 1
    for index in range(1, len(calls)):
        run = run + 1 if calls[index] == calls[index - 1] else 1
        if run >= config.max_same_calls:
            return f"call {calls[index].replace(chr(0), ' ')} {run} times in a row"
    keys = [_turn_key(turn) for turn in turns]
    for size in range(1, config.max_window + 1):
        span = size * config.min_repeats
        for start in range(len(keys) - span + 1):
            window = keys[start : start + size]
            if not any(window):
                continue  # turns without calls (prose) are not a tool loop
            if all(keys[start + k * size : start + (k + 1) * size] == window for k in range(1, config.min_repeats)):
                return f"turns {start}-{start + size - 1} repeated {config.min_repeats} times"
    return None


def has_malformed_call(trajectory: Trajectory) -> bool:
    """A call the backend could not parse, or a tool result saying the call was malformed."""
    for turn in trajectory.turns:
        if any(call.error is not None for call in turn.tool_calls):
            return True
        if any(result.is_error and MALFORMED_RESULT.match(result.output) for result in turn.tool_results):
            return True
    return False


def drop_reason(trajectory: Trajectory, config: RFTFilterConfig | None = None) -> str | None:
    """Why `trajectory` is not RFT data (a name from DROP_REASONS), or None to keep it."""
    config = config or RFTFilterConfig()
    if not trajectory.complete:
        return "incomplete"
    if trajectory.reward is None or trajectory.reward <= config.min_reward:
        return "reward"
    if has_malformed_call(trajectory):
        return "malformed_tool_call"
    if find_loop(trajectory.turns, config) is not None:
        return "repeated_loop"
    return None


def filter_trajectories(trajectories: list[Trajectory], config: RFTFilterConfig | None = None) -> RFTResult:
    """Apply the RFT filter to every trajectory; counts per drop reason in the result."""
    result = RFTResult()
    counts: Counter[str] = Counter()
    for trajectory in trajectories:
        reason = drop_reason(trajectory, config)
        result.reasons.append(reason)
        if reason is None:
            result.kept.append(trajectory)
        else:
            counts[reason] += 1
    result.dropped.update(counts)
    return result


def sft_row(trajectory: Trajectory, tokens: TokenRecord | None = None) -> dict[str, Any]:
    """One row of verl's multi-turn SFT data: every message with one fixed set of keys, and the tools.

    With `tokens`, the row also holds the exact `input_ids` and `loss_mask` (see the module docstring).
    """
    messages = []
    for message in trajectory.messages():
        calls = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": call["function"]["arguments"]},
            }
            for call in message.get("tool_calls") or []
        ]
        messages.append(
            {
                "role": message["role"],
                "content": message.get("content") or "",
                "tool_calls": calls or None,
                "tool_call_id": message.get("tool_call_id"),
            }
        )
    row = {"messages": messages, "tools": trajectory.tools, "task": trajectory.task, "reward": trajectory.reward}
    if tokens is not None:
        row["input_ids"] = tokens.prompt_ids + tokens.response_ids
        row["loss_mask"] = [0] * len(tokens.prompt_ids) + tokens.response_mask
    else:
        row["input_ids"], row["loss_mask"] = None, None
    return row


def drop_nulls(value: Any) -> Any:
    """`value` with every dict key whose value is None removed, recursively (undoes parquet's struct union)."""
    if isinstance(value, dict):
        return {key: drop_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [drop_nulls(item) for item in value]
    return value


def read_collected(root: Path) -> tuple[list[Collected], list[Path]]:
    """Every episode under `root` (trajectory.jsonl, and tokens.json beside it where present), in path order.

    Returns:
        The episodes, and the files that could not be read (listed, not fatal).
    """
    from cuda_agent.agent import TrajectoryError, read_trajectory

    collected, unreadable = [], []
    for path in sorted(Path(root).rglob("trajectory.jsonl")):
        try:
            trajectory = read_trajectory(path)
            tokens_path = path.parent / TOKENS_FILE
            tokens = TokenRecord.model_validate_json(tokens_path.read_text()) if tokens_path.exists() else None
        except (TrajectoryError, ValueError, OSError):
            unreadable.append(path)
            continue
        collected.append(Collected(trajectory=trajectory, tokens=tokens, path=path))
    return collected, unreadable


def write_rft_data(
    collected: list[Collected], out: Path, config: RFTFilterConfig | None = None, extra_sft: Sequence[Path] = ()
) -> RFTResult:
    """Filter collected episodes (`read_collected` of the collect stage's work_dir) and write the kept ones to `out`.

    Args:
        extra_sft: SFT parquet files whose rows (messages, input_ids, loss_mask) are added after the kept ones.

    Returns:
        The filter's result, with `extra_rows` counted.

    Raises:
        ConfigError: nothing to write: no episode passes the filter (or none was collected) and no extra rows.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cuda_agent.errors import ConfigError

    result = filter_trajectories([c.trajectory for c in collected], config)
    kept = [c for c, reason in zip(collected, result.reasons, strict=True) if reason is None]
    rows = [sft_row(c.trajectory, c.tokens) for c in kept]
    for path in extra_sft:
        rows += [{key: row.get(key) for key in EXTRA_SFT_COLUMNS} for row in pq.read_table(path).to_pylist()]
    result.extra_rows = len(rows) - len(kept)
    if not collected and not rows:
        raise ConfigError("no trajectory.jsonl was collected: run `cuda-agent train collect` first")
    if not rows:
        raise ConfigError(f"no trajectory passes the RFT filter ({result.summary()}); nothing to fine-tune on")
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)
    return result


def write_replay_data(collected: list[Collected], out: Path) -> int:
    """Write `replay_rows(collected)` to `out` (the critic warm-up's data); returns the row count.

    Raises:
        ConfigError: no collected episode has tokens.json and a reward.
    """
    from cuda_agent.errors import ConfigError

    rows = replay_rows(collected)
    if not rows:
        raise ConfigError("no collected episode has tokens.json and a reward: run `cuda-agent train collect` first")
    _write_rows(rows, out)
    return len(rows)


def replay_rows(collected: list[Collected]) -> list[dict[str, Any]]:
    """verl RL rows for the critic warm-up: one per collected episode with exact tokens and a reward.

    Each row names its `tokens.json`; `cuda_agent.rl.critic_warmup.ReplayAgentLoop` hands those tokens
    and the reward to the trainer instead of rolling out again (the paper pre-trains the value model
    on the collected trajectories). Dropped samples (our failures, no reward) are left out.
    """
    return [
        _replay_row(index, episode.trajectory.prompt[-1:], episode.trajectory.task, episode.path.parent)
        for index, episode in enumerate(collected)
        if episode.tokens is not None and episode.tokens.reward is not None
    ]


def _replay_row(index: int, prompt: list[dict[str, Any]], task: str, folder: Path) -> dict[str, Any]:
    return {
        "data_source": "collected",
        "prompt": prompt,  # the task line; only for verl's length filter and logs
        "ability": "cuda",
        "reward_model": {"style": "rule", "ground_truth": task},
        "extra_info": {"index": index, "task": task, "tokens": str(folder)},
        "agent_name": "cuda_agent_replay",
    }


def _write_rows(rows: list[dict[str, Any]], out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out)


def sft_token_record(row: dict[str, Any]) -> TokenRecord | None:
    """The episode an SFT row with exact tokens holds (`sft_row`'s input_ids and loss_mask, and its reward), or None
    for a row without them. The prompt ends where the loss mask first turns 1: an episode's response starts with
    the model's first reply.

    Raises:
        ConfigError: input_ids and loss_mask differ in length, or the mask covers no model token.
    """
    from cuda_agent.errors import ConfigError

    ids, mask, reward = row.get("input_ids"), row.get("loss_mask"), row.get("reward")
    if ids is None or mask is None or reward is None:
        return None
    if len(ids) != len(mask) or 1 not in mask:
        raise ConfigError(
            f"an SFT row of task {row.get('task')} has {len(ids)} ids and a {len(mask)}-long loss mask "
            f"with {sum(mask)} model tokens: not an episode's exact tokens"
        )
    start = list(mask).index(1)
    return TokenRecord(
        prompt_ids=list(ids[:start]), response_ids=list(ids[start:]), response_mask=list(mask[start:]), reward=reward
    )


def write_replay_from_sft(sft: Path, out: Path) -> int:
    """The critic warm-up's data from SFT rows with exact tokens and rewards (the agentic curriculum's scripted
    episodes, `cuda-agent train agentic`): each distinct episode's `tokens.json` under `out`'s folder
    (`episodes/NNNNN/`) and its replay row in `out`; returns the row count. No episode is played again.

    Raises:
        ConfigError: no row has exact tokens and a reward (`sft_token_record`'s errors too).
    """
    import pyarrow.parquet as pq

    from cuda_agent.errors import ConfigError

    rows, seen = [], set()
    for row in pq.read_table(sft).to_pylist():
        record = sft_token_record(row)
        key = None if record is None else (tuple(record.prompt_ids + record.response_ids), record.reward)
        if record is None or key in seen:  # `copies` repeats an episode for SFT; the value model needs it once
            continue
        seen.add(key)
        folder = (out.parent / "episodes" / f"{len(rows):05d}").absolute()  # Ray's workers run in other folders
        folder.mkdir(parents=True, exist_ok=True)
        record.write(folder)
        messages = row.get("messages") or []
        first_reply = next((i for i, m in enumerate(messages) if m["role"] == "assistant"), len(messages))
        prompt = [{"role": m["role"], "content": m["content"] or ""} for m in messages[:first_reply][-1:]]
        rows.append(_replay_row(len(rows), prompt, str(row.get("task") or ""), folder))
    if not rows:
        raise ConfigError(f"no row of {sft} has exact tokens (input_ids, loss_mask) and a reward")
    _write_rows(rows, out)
    return len(rows)
