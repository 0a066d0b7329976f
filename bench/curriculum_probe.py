"""After the curriculum's SFT: sample the model's answers to the curriculum prompt and count which variant each is.

Prints one line: how many of N sampled answers are exactly the fast, slow or wrong answer, or none of them (the SFT
should leave roughly a third each and few others), and how many of those others still read as an answer
(`readable`: `parse_answer` finds its files; the judge then builds it, where a near-copy may still fail).
Used by bench/learning_gpu.sh.

Usage: python bench/curriculum_probe.py HF_MODEL_DIR CURRICULUM_DIR [--samples 32] [--temperature 1.0]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> int:
    import pyarrow.parquet as pq
    import torch
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("curriculum", type=Path)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=1.0, help="as the PPO rollout samples")
    args = parser.parse_args()
    tok = transformers.AutoTokenizer.from_pretrained(args.model)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).to(device).eval()
    rows = pq.read_table(args.curriculum / "sft.parquet").to_pylist()
    answers = {r["variant"]: tok.encode(r["messages"][2]["content"]) for r in rows}
    prompt = tok.apply_chat_template(rows[0]["messages"][:2], add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if hasattr(prompt, "keys") else prompt)
    ids = torch.tensor([prompt] * args.samples, device=device)
    with torch.no_grad():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=args.temperature,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max(map(len, answers.values())) + 8,
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
    from cuda_agent.rl.single_turn import parse_answer

    counts: Counter[str] = Counter()
    for row in out[:, len(prompt) :].tolist():
        name = next((name for name, a in answers.items() if row[: len(a)] == a), "none")
        counts[name] += 1
        if name == "none" and parse_answer(tok.decode(row, skip_special_tokens=True)).problem is None:
            counts["readable"] += 1
    print(
        json.dumps(
            {
                "samples": args.samples,
                "temperature": args.temperature,
                **{k: counts.get(k, 0) for k in (*answers, "none", "readable")},
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
