"""Give the agentic curriculum's SFT rows the Bash tool that RL's rollouts have (sandbox jobs, a fresh shell a command).

The committed H100 episodes (bench/results/h100-2026-12-07/agentic_data.tar) were played with a local persistent
shell, whose tool description the system prompt of every SFT row carries; agentic PPO's rollouts run their commands
through `cuda-agent serve`, whose Bash describes a fresh shell. The policy was SFT'd on one prompt and sampled under
another. Every episode of `CudaAgentLoop` now runs its commands as sandbox jobs (rl/rollout.py), so new data has the
service's description; this rewrites existing rows the same way without replaying them on a GPU: the first prompt is
rendered again by the token builder the loop uses, with the sandbox's Bash schema in place of the persistent shell's,
and the episode's tokens after it are kept as they were (the loop appends each turn's tokens to the prompt's, so
nothing after the prompt depends on the tool list). A row whose prompt does not render back to its own first tokens
is refused: then the tokens were not made the way this assumes.

    python bench/agentic_data_retool.py IN.tar OUT.tar --tokenizer .stage/tok
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cuda_agent.agent.models.transformers_local import template_messages  # noqa: E402
from cuda_agent.rl.rft import drop_nulls  # noqa: E402


def tool_schemas(sandboxed: bool) -> list[dict[str, Any]]:
    """The tool schemas an episode shows the model, in the toolset's order: with Bash's commands run as sandbox jobs
    (`sandboxed`) or in a local persistent shell. (Parquet gives every tool the union of their properties, in another
    key order, so the stored `tools` column cannot render the prompt again.)"""
    from cuda_agent.agent.tools import ToolsConfig, build_toolset
    from cuda_agent.rl.agentic_curriculum import TASKS, problem
    from cuda_agent.workspace import create_workspace, is_editable

    with tempfile.TemporaryDirectory() as tmp:
        root = create_workspace(problem(TASKS[0], "cuda"), Path(tmp) / "ws", device="cuda")
        runner = object() if sandboxed else None  # the schemas only: no command runs
        with build_toolset(root, is_editable, ToolsConfig(), {}, runner) as tools:  # type: ignore[arg-type]
            return tools.schemas()


def retool_row(row: dict[str, Any], builder: Any, old_tools: list[Any], new_tools: list[Any]) -> dict[str, Any]:
    """`row` with `new_tools`: its tools, and the first prompt's tokens and loss mask rendered again.

    Raises:
        ValueError: the row's first prompt, rendered with `old_tools`, is not its first tokens.
    """
    opening = template_messages(drop_nulls(row["messages"][:2]))
    old = list(builder.build_initial_tokens(opening, tools=old_tools))
    ids, mask = list(row["input_ids"]), list(row["loss_mask"])
    if ids[: len(old)] != old or any(mask[: len(old)]):
        raise ValueError(f"row of {row['task']} ({row['script']}): its first prompt does not render back to its tokens")
    new = list(builder.build_initial_tokens(opening, tools=new_tools))
    return {
        **row,
        "tools": new_tools,
        "input_ids": new + ids[len(old) :],
        "loss_mask": [0] * len(new) + mask[len(old) :],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="agentic_data.tar of `bash bench/agentic_gpu.sh data`")
    parser.add_argument("out", type=Path, help="the tar to write (the same files, sft.parquet rewritten)")
    parser.add_argument("--tokenizer", type=Path, default=Path(".stage/tok"), help="the policy's tokenizer folder")
    parser.add_argument("--model-type", default="llama", help="config.json model_type (picks verl's token builder)")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from cuda_agent.rl.agent_loop import CudaAgentLoop

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    builder = CudaAgentLoop.standalone(None, tokenizer, 2048, 6144, args.model_type).continuous_token_builder
    old_tools, new_tools = tool_schemas(sandboxed=False), tool_schemas(sandboxed=True)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with tarfile.open(args.source) as tar:
            tar.extractall(work, filter="data")
        table = pq.read_table(work / "sft.parquet")
        rows = [retool_row(row, builder, old_tools, new_tools) for row in table.to_pylist()]
        grown = [
            len(new["input_ids"]) - len(old)
            for new, old in zip(rows, table.column("input_ids").to_pylist(), strict=True)
        ]
        pq.write_table(pa.Table.from_pylist(rows), work / "sft.parquet")
        with tarfile.open(args.out, "w") as tar:
            for name in sorted(p.name for p in work.iterdir()):
                tar.add(work / name, arcname=name)
    print(f"{len(rows)} rows given the sandbox's Bash; their prompts changed by {min(grown)}..{max(grown)} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main())
