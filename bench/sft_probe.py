"""What an SFT'd policy does on the first turn of the episodes it was trained on, before any PPO: a check that costs
seconds on the GPU, so that a PPO run does not start from a model that never learned its scripts.

For one SFT row per task (`sft.parquet` of `cuda-agent train agentic`, rows with exact tokens):
- the loss on the row's own tokens (nats per trained token, teacher-forced: what SFT's loss says), over the whole row
  and over its first reply;
- the first reply decoded greedily by the `hf` rollout's engine, every row in one left-padded batch, as the
  rollouts generate, and whether it is exactly one of the task's trained first replies;
- with `--other TAR` (the same episodes under other prompt tokens, e.g. another tool description), the same for
  those prompts: how much a change of prompt the model was not trained on moves it.

    python bench/sft_probe.py MODEL_DIR SFT_PARQUET [--other OTHER_SFT_PARQUET] [--out probe.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cuda_agent.rl.hf_rollout.engine import GenRequest, HFEngine  # noqa: E402


def first_reply(row: dict[str, Any]) -> tuple[int, int]:
    """[start, end) of the row's first trained span: the prompt's length and the end of the model's first reply."""
    mask = list(row["loss_mask"])
    start = mask.index(1)
    end = start
    while end < len(mask) and mask[end]:
        end += 1
    return start, end


@torch.no_grad()
def losses(model: Any, row: dict[str, Any], device: str) -> tuple[float, float]:
    """Mean nats per trained token over the row, and over its first reply (teacher-forced, one pass)."""
    ids = torch.tensor([row["input_ids"]], device=device)
    logprobs = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), dim=-1)
    taken = logprobs.gather(-1, ids[0, 1:, None]).squeeze(-1)
    mask = torch.tensor(row["loss_mask"][1:], device=device, dtype=torch.bool)
    start, end = first_reply(row)
    return -taken[mask].mean().item(), -taken[start - 1 : end - 1].mean().item()


def probe(
    engine: HFEngine, tokenizer: Any, rows: list[dict[str, Any]], max_new: int, replies_of: dict[str, list[list[int]]]
) -> list[dict[str, Any]]:
    """Per row: its losses, and its greedy first reply against those its task's rows were trained on (`replies_of`:
    every script's first reply, by task)."""
    spans = [first_reply(r) for r in rows]
    requests = [
        GenRequest(prompt_ids=r["input_ids"][:s], max_tokens=max_new, temperature=0.0)
        for r, (s, _) in zip(rows, spans, strict=True)
    ]
    replies = engine.generate(requests)
    out = []
    for row, reply in zip(rows, replies, strict=True):
        whole, first = losses(engine.model, row, str(engine.device))
        same = any(reply.token_ids[: len(t)] == t[: len(reply.token_ids)] for t in replies_of[row["task"]])
        out.append(
            {
                "task": row["task"],
                "script": row["script"],
                "loss_row": round(whole, 4),
                "loss_first_reply": round(first, 4),
                "greedy_is_trained_reply": bool(same),
                "greedy": tokenizer.decode(reply.token_ids)[:160],
            }
        )
    return out


def one_per_task(path: Path) -> tuple[list[dict[str, Any]], dict[str, list[list[int]]]]:
    """The first row of each task, and every row's first reply by task."""
    rows, replies = [], {}
    for row in pq.read_table(path).to_pylist():
        start, end = first_reply(row)
        if row["task"] not in replies:
            rows.append(row)
        replies.setdefault(row["task"], []).append(row["input_ids"][start:end])
    return rows, replies


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, help="the SFT'd model's Hugging Face folder")
    parser.add_argument("sft", type=Path, help="the sft.parquet it was trained on")
    parser.add_argument("--other", type=Path, help="the same episodes under other prompt tokens (an sft.parquet)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--max-new", type=int, default=48, help="tokens of each greedy reply")
    parser.add_argument("--out", type=Path, help="write the per-row results here (JSON)")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    engine = HFEngine.from_pretrained(args.model, args.device, dtype="float32")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    rows, replies = one_per_task(args.sft)
    result = {"trained": probe(engine, tokenizer, rows, args.max_new, replies)}
    if args.other:
        rows, replies = one_per_task(args.other)
        result["other"] = probe(engine, tokenizer, rows, args.max_new, replies)
    for name, rows in result.items():
        same = sum(r["greedy_is_trained_reply"] for r in rows)
        loss = sum(r["loss_row"] for r in rows) / len(rows)
        first = sum(r["loss_first_reply"] for r in rows) / len(rows)
        print(
            f"== SFT probe ({name} prompts): greedy first reply one of the trained {same}/{len(rows)}; loss {loss:.3f} nats "
            f"a trained token, {first:.3f} on the first reply; e.g. {rows[0]['greedy']!r}"
        )
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
