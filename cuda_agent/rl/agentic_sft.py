"""Scripted multi-turn episodes of the agentic curriculum, played through `CudaAgentLoop`: the SFT data.

A scripted model plays a competent agent's turns (read model.py, write a kernel, build it, verify,
profile, finish) on each training task of `agentic_curriculum`, through the real agent loop:
workspace, tools, builds, the judge's verification and the final judgement all run, so every tool
output in the data is real. The turns are generated as the model itself would write them (its
chat template's tool-call blocks, `<tool_call>{"name": ..., "arguments": {...}}</tool_call>` then the
end-of-turn token), and each episode's exact tokens and loss mask come from `CudaAgentLoop`'s own
token record (tool output masked), so SFT trains on what PPO will later sample and score.

The scripts differ in what PPO must learn (`SCRIPTS`):

| script | turns after reading model.py | designed reward |
| --- | --- | --- |
| `fast`        | write fast, build, verify, profile, finish | 1-3 |
| `slow`        | write slow, build, verify, profile, finish | 1 |
| `fix_compile` | write broken, build (error printed), fix it, build, verify, profile, finish | 1-3 |
| `give_up`     | write broken, build (error printed), finish | -1 |
| `fix_wrong`   | write wrong, build, verify (fails), rewrite, build, verify, profile, finish | 1-3 |
| `unverified`  | write wrong, build, finish without verifying | -1 |

So verifying before finishing, and reading a printed error and fixing it, are what separates -1 from a
pass, and the fast kernel is what separates 1 from 2-3.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from cuda_agent.agent.models.base import ModelTurn
from cuda_agent.errors import ConfigError
from cuda_agent.rl.agentic_curriculum import AgenticTask, kernel_files, model_new
from cuda_agent.types import ToolCall

BUILD = "bash utils/compile.sh"
VERIFY = "python -m utils.verification"
PROFILE = "python -m utils.profiling"


@dataclass(frozen=True)
class Script:
    """One kind of scripted episode."""

    attempts: tuple[str, ...]
    """The kernels written in turn (agentic_curriculum.KERNELS); a failed build or check leads to the next."""
    verify: bool
    """Whether the episode runs `python -m utils.verification` before finishing."""
    passes: bool
    """Whether the final kernel is designed to pass the judge."""


SCRIPTS = {
    "fast": Script(("fast",), verify=True, passes=True),
    "slow": Script(("slow",), verify=True, passes=True),
    "fix_compile": Script(("broken", "fast"), verify=True, passes=True),
    "give_up": Script(("broken",), verify=True, passes=False),
    "fix_wrong": Script(("wrong", "fast"), verify=True, passes=True),
    "unverified": Script(("wrong",), verify=False, passes=False),
}
"""Script name -> what its episodes do (module docstring)."""


def _call(tool: str, **arguments: str) -> list[ToolCall]:
    return [ToolCall(id="call", name=tool, arguments=json.dumps(arguments))]


def scripted_turns(task: AgenticTask, script: str, device: str) -> list[ModelTurn]:
    """The assistant turns of one scripted episode of `task` (see `SCRIPTS`), tool-call ids left for the loop.

    Raises:
        ConfigError: unknown script.
    """
    if script not in SCRIPTS:
        raise ConfigError(f"unknown script {script!r}: use one of {', '.join(SCRIPTS)}")
    plan = SCRIPTS[script]
    steps: list[tuple[str, list[ToolCall]]] = [("I read the reference first.", _call("Read", path="model.py"))]
    for number, kernel in enumerate(plan.attempts):
        files = kernel_files(task, kernel, device)
        if number:  # a fix rewrites the kernel; a CUDA binding written the first time stays as it is
            files = dict(list(files.items())[:1])
        lead = _retry_note(plan.attempts[number - 1]) if number else f"I write the {task.name} kernel."
        steps += [(lead if i == 0 else "", _call("Write", path=p, content=t)) for i, (p, t) in enumerate(files.items())]
        if number == 0:  # the Write tool wants a file read before it is replaced
            steps.append(("", _call("Read", path="model_new.py")))
            steps.append(("ModelNew calls the kernel.", _call("Write", path="model_new.py", content=model_new(task))))
            steps.append(("", _call("Bash", command=f"rm -f kernels/example_scale* && {BUILD}")))
        else:
            steps.append(("", _call("Bash", command=BUILD)))
        last = number == len(plan.attempts) - 1
        if kernel == "broken":
            if last:
                return _turns(steps, "The build fails and I stop here.")
            continue
        if not plan.verify:
            return _turns(steps, "It builds, so I am done.")
        steps.append(("", _call("Bash", command=VERIFY)))
    steps.append(("Verification passes; now the timing.", _call("Bash", command=PROFILE)))
    return _turns(steps, f"Done: model_new.py calls my {task.name} kernel and verification passes.")


def _retry_note(failed: str) -> str:
    if failed == "broken":
        return "The compiler says 'd' is undeclared: the output array is c. I fix the kernel."
    return "Verification fails: the kernel computes the wrong function. I rewrite it."


def _turns(steps: Sequence[tuple[str, list[ToolCall]]], final: str) -> list[ModelTurn]:
    return [ModelTurn(content=text, tool_calls=calls) for text, calls in steps] + [ModelTurn(content=final)]


def assistant_text(turn: ModelTurn) -> str:
    """What the model writes for `turn`: its prose, then each call as the tool-call block `parse_tool_calls` reads."""
    blocks = [
        f'<tool_call>\n{{"name": "{call.name}", "arguments": {call.arguments}}}\n</tool_call>'
        for call in turn.tool_calls
    ]
    return "\n".join([turn.content, *blocks]).strip()


class ScriptedTokenServer:
    """A token server (verl's `LLMServerClient` as `VerlTokenModel` uses it) that plays scripted turns.

    Each reply is the turn's `assistant_text` in the tokenizer's ids, then its end-of-turn token, as a
    model would generate it; log-probs are None (there was no sampling).

    Args:
        tokenizer: the policy's tokenizer (its eos token ends each reply).
        turns: the replies, in order.
    """

    def __init__(self, tokenizer: Any, turns: Sequence[ModelTurn]) -> None:
        self.tokenizer, self.turns = tokenizer, list(turns)
        self.replies: list[list[int]] = []
        self.prompts: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any) -> Any:
        if len(self.replies) >= len(self.turns):
            raise ConfigError(f"the script holds {len(self.turns)} turns and the episode asked for more")
        ids = self.tokenizer.encode(assistant_text(self.turns[len(self.replies)]), add_special_tokens=False)
        ids.append(self.tokenizer.eos_token_id)
        self.prompts.append(list(prompt_ids))
        self.replies.append(ids)
        return SimpleNamespace(token_ids=ids, log_probs=None)


def scripted_row(output: Any, script: str) -> dict[str, Any]:
    """One SFT row from a scripted episode's `AgentLoopOutput`: its messages (for reading), its exact tokens and
    loss mask (1 on the model's tokens only: tool output is masked), and what it did."""
    from cuda_agent.agent import read_trajectory
    from cuda_agent.rl.rft import TokenRecord, sft_row

    fields = output.extra_fields
    tokens = TokenRecord(
        prompt_ids=list(output.prompt_ids),
        response_ids=list(output.response_ids),
        response_mask=list(output.response_mask),
        reward=output.reward_score,
    )
    row = sft_row(read_trajectory(fields["trajectory"]), tokens)
    row.update(script=script, verdict=fields["verdict"], turns=fields["turns"], clipped=bool(fields["clipped"]))
    row.update(verified=fields["verified"], valid_tool_calls=fields["valid_tool_calls"])
    return row


def check_prompt_budget(tokenizer: Any, prompt_tokens: int, device: str, compact: bool) -> int:
    """The first prompt's length (system, tools and task, as the agent loop renders it) for the curriculum's
    longest task name; raises if it does not fit `prompt_tokens`.

    Raises:
        ConfigError: one line naming the length, the budget and the fix.
    """
    import tempfile
    from pathlib import Path

    from cuda_agent.agent.prompt import opening_messages
    from cuda_agent.agent.tools import ToolsConfig, build_toolset
    from cuda_agent.rl.agentic_curriculum import TASKS, problem
    from cuda_agent.workspace import create_workspace, is_editable

    task = max(TASKS, key=lambda t: len(t.ref))
    with tempfile.TemporaryDirectory() as tmp:
        root = create_workspace(problem(task, device), Path(tmp) / "ws", device=device)
        with build_toolset(root, is_editable, ToolsConfig(), {}, None) as tools:
            schemas = tools.schemas()
            messages = opening_messages(root, [s["function"]["name"] for s in schemas], task.ref, compact)
    text = tokenizer.apply_chat_template(messages, tools=schemas, add_generation_prompt=True, tokenize=False)
    length = len(tokenizer.encode(text, add_special_tokens=False))
    if length > prompt_tokens:
        raise ConfigError(
            f"the first prompt is {length} tokens, over the prompt budget of {prompt_tokens} "
            f"({'compact' if compact else 'SKILL.md'} prompt); "
            + ("use a model with a longer context" if compact else "set compact_prompt: true")
        )
    return length


def play_scripts(
    tokenizer: Any,
    episodes: Sequence[tuple[AgenticTask, str]],
    device: str,
    work_dir: Any,
    context_tokens: int = 8192,
    parallel: int = 4,
    hf_model_type: str | None = None,
    sandbox_url: str | None = None,
) -> list[dict[str, Any]]:
    """Play scripted episodes through `CudaAgentLoop` (real tools and judge) and return their SFT rows, in order.

    Args:
        tokenizer: the policy's tokenizer, with a chat template that renders tools and tool calls.
        episodes: (task, script) pairs.
        device: 'cpu' or 'cuda': the kernels written and the judge's device.
        work_dir: the episode folders go under it.
        context_tokens: the model's context; the compact prompt must fit its first quarter.
        parallel: episodes at a time (each runs in a thread of its own; builds and judging are processes).
        hf_model_type: the model's config.json model_type (verl's token builder follows it).
        sandbox_url: a `cuda-agent serve` that judges; None judges in a LocalPool here.

    Raises:
        ConfigError: the first prompt does not fit, or a scripted episode did not end as designed.
    """
    import asyncio

    from cuda_agent.rl.agent_loop import CudaAgentLoop
    from cuda_agent.rl.agentic_curriculum import problem

    prompt_tokens = context_tokens // 4
    check_prompt_budget(tokenizer, prompt_tokens, device, compact=True)
    settings = {
        "work_dir": work_dir,
        "device": device,
        "compact_prompt": True,
        "max_turns": 24,
        "sandbox_url": sandbox_url,
    }

    async def play_all() -> list[Any]:
        gate = asyncio.Semaphore(parallel)

        async def one(task: AgenticTask, script: str) -> Any:
            async with gate:
                server = ScriptedTokenServer(tokenizer, scripted_turns(task, script, device))
                loop = CudaAgentLoop.standalone(
                    server, tokenizer, prompt_tokens, context_tokens - prompt_tokens, hf_model_type, **settings
                )
                case = problem(task, device)
                return await loop.run({}, task=case.ref, code=case.code)

        return await asyncio.gather(*(one(task, script) for task, script in episodes))

    rows = [scripted_row(output, script) for output, (_, script) in zip(asyncio.run(play_all()), episodes, strict=True)]
    for row, (task, script) in zip(rows, episodes, strict=True):
        if (row["verdict"] == "pass") != SCRIPTS[script].passes or row["clipped"]:
            raise ConfigError(
                f"the scripted episode {task.name}:{script} ended {row['verdict']} (clipped: {row['clipped']}), "
                f"not as designed; see its trajectory"
            )
    return rows


def held_out_leaks(rows: Sequence[dict[str, Any]]) -> list[str]:
    """What ties a training row to a held-out task: its task reference, or a held-out kernel's name in its text.

    Returns:
        One line per leak (empty when the rows are clean).
    """
    from cuda_agent.rl.agentic_curriculum import split

    held = split(held_out=True)
    leaks = []
    for number, row in enumerate(rows):
        text = json.dumps(row.get("messages") or row.get("prompt") or [], default=str)
        ref = str(row.get("task") or (row.get("extra_info") or {}).get("task") or "")
        code = str((row.get("extra_info") or {}).get("code") or "")
        for task in held:
            if ref == task.ref or f"cuda_extension.{task.name}(" in text + code:
                leaks.append(f"row {number} ({ref}) is held-out task {task.ref}")
    return leaks


def write_agentic_data(
    out: Any,
    tokenizer: Any,
    device: str,
    scripts: Sequence[str] = tuple(SCRIPTS),
    copies: int = 1,
    **play: Any,
) -> dict[str, Any]:
    """Write the curriculum's data under `out`: sft.parquet (scripted episodes of the training tasks, `copies`
    rows each), rl.parquet (the training tasks, for agentic PPO), heldout.parquet (the held-out tasks, for
    evaluation only) and agentic.json (per episode: script, verdict, reward, turns, tokens).

    Args:
        out: the folder.
        tokenizer: the policy's tokenizer (`play_scripts`).
        device: 'cpu' or 'cuda'.
        scripts: which `SCRIPTS` to play on every training task.
        copies: rows per episode in sft.parquet.
        **play: more `play_scripts` arguments (work_dir defaults to out/episodes).

    Raises:
        ConfigError: a training row holds a held-out task (`held_out_leaks`), or `play_scripts`' errors.
    """
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    from cuda_agent.rl.agentic_curriculum import split
    from cuda_agent.rl.data import write_rl_parquet
    from cuda_agent.rl.rft import drop_nulls

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    episodes = [(task, script) for task in split(held_out=False) for script in scripts]
    rows = play_scripts(tokenizer, episodes, device, play.pop("work_dir", out / "episodes"), **play)
    train = agent_rows(split(held_out=False), device)
    leaks = held_out_leaks(rows) + held_out_leaks(train)
    if leaks:
        raise ConfigError("held-out tasks in the training data: " + "; ".join(leaks))
    pq.write_table(pa.Table.from_pylist([drop_nulls(r) for r in rows for _ in range(copies)]), out / "sft.parquet")
    write_rl_parquet(train, out / "rl.parquet")
    held = agent_rows(split(held_out=True), device)
    write_rl_parquet(held, out / "heldout.parquet")
    keys = ("task", "script", "verdict", "reward", "turns", "verified", "valid_tool_calls")
    manifest = {
        "device": device,
        "episodes": [{**{k: r[k] for k in keys}, "tokens": len(r["input_ids"])} for r in rows],
    }
    (out / "agentic.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def agent_rows(tasks: Sequence[AgenticTask], device: str) -> list[dict[str, Any]]:
    """verl rows for `CudaAgentLoop`. The loop renders its own prompt; the row's is the task line alone, so that
    verl's over-long prompt filter measures about what the compact prompt costs, not SKILL.md."""
    from cuda_agent.agent.prompt import task_prompt
    from cuda_agent.rl.agentic_curriculum import problem
    from cuda_agent.rl.data import rl_rows

    rows = rl_rows([problem(t, device) for t in tasks], single_turn=False, device=device)
    for row in rows:
        row["prompt"] = [{"role": "user", "content": task_prompt(row["extra_info"]["task"])}]
    return rows
