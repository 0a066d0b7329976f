"""Milliseconds per decode step of the `hf` rollout's `HFEngine`: eager (DynamicCache) against CUDA graphs.

The model is SmolLM2-135M's architecture with random weights, built from its config (no download): Llama, hidden
576, 30 layers, 9 heads, 3 KV heads, intermediate 1536, vocabulary 49152, tied embeddings. For each row count and
context, a batch of left-padded prompts (lengths context, context - 7, context - 14, ...: padding as in the rollout)
decodes greedily with no stop token; a step's cost (the fastest of --repeats runs) is (time for 1 + STEPS tokens - time for 1 token) / STEPS, so the
prefill cancels out and the step includes sampling and the engine's looks at the tokens (every 16 steps), as in
the rollout. Each configuration runs once untimed first (the graphs' capture is reported apart). The two paths'
tokens and log-probs are compared on the same batches (`compare`): log-probs within 1e-4, greedy tokens equal but
for ties to float rounding.

Usage (repository root):
    python bench/hf_decode.py                      # CUDA: rows 1 4 8 16 at contexts 2048 and 5120, fp32
    python bench/hf_decode.py --device cpu --layers 2 --rows 1 4 --contexts 64 --steps 8 --modes eager static
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import transformers  # noqa: E402

from cuda_agent.rl.hf_rollout.engine import GenRequest, HFEngine  # noqa: E402

SMOLLM2_135M = {
    "hidden_size": 576,
    "num_hidden_layers": 30,
    "num_attention_heads": 9,
    "num_key_value_heads": 3,
    "intermediate_size": 1536,
    "vocab_size": 49152,
    "max_position_embeddings": 8192,
    "rope_theta": 100000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}


def build_model(device: str, dtype: str, layers: int | None) -> torch.nn.Module:
    config = transformers.LlamaConfig(**SMOLLM2_135M)
    if layers is not None:
        config.num_hidden_layers = layers
    config._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
    return model.to(device=device, dtype=getattr(torch, dtype)).eval()


def batch(rows: int, context: int, tokens: int) -> list[GenRequest]:
    generator = torch.Generator().manual_seed(rows * 100_003 + context)
    lengths = [max(1, context - 7 * i) for i in range(rows)]
    prompts = [torch.randint(1, SMOLLM2_135M["vocab_size"], (n,), generator=generator).tolist() for n in lengths]
    return [GenRequest(prompt_ids=p, max_tokens=tokens, temperature=0.0) for p in prompts]


def timed(engine: HFEngine, requests: list[GenRequest]) -> tuple[float, list]:
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    results = engine.generate(requests)
    if engine.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, results


def measure(engine: HFEngine, rows: int, context: int, steps: int, repeats: int) -> tuple[float, float, list]:
    """(ms per decode step, seconds of the untimed first run, a timed run's results); the fastest of `repeats`."""
    long, short = batch(rows, context, 1 + steps), batch(rows, context, 1)
    first, results = timed(engine, long)  # captures this bucket's graph on the graphs path
    seconds_long = min(timed(engine, long)[0] for _ in range(repeats))
    seconds_short = min(timed(engine, short)[0] for _ in range(repeats))
    return 1000 * (seconds_long - seconds_short) / steps, first, results


def compare(expected: list, got: list) -> tuple[int, float]:
    """(rows with the same tokens, largest log-prob gap), the gap taken up to and including a row's first differing
    token: greedy picks the same token unless two are tied to float rounding, and then the two paths' picks have
    log-probs within that rounding (a larger gap there is a real difference)."""
    same, gap = 0, 0.0
    for a, b in zip(expected, got, strict=True):
        same += a.token_ids == b.token_ids
        for x, y, tx, ty in zip(a.log_probs, b.log_probs, a.token_ids, b.token_ids, strict=True):
            gap = max(gap, abs(x - y))
            if tx != ty:
                break
    return same, gap


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8, 16])
    parser.add_argument("--contexts", type=int, nargs="+", default=[2048, 5120])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2, help="timed runs of each length; the fastest counts")
    parser.add_argument("--layers", type=int, default=None, help="fewer layers than SmolLM2's 30 (a CPU smoke run)")
    parser.add_argument("--modes", nargs="+", default=["eager", "graphs"], choices=HFEngine.DECODE)
    args = parser.parse_args()
    model = build_model(args.device, args.dtype, args.layers)
    engines = {mode: HFEngine(model, set(), pad_token_id=0, decode=mode) for mode in args.modes}
    where = torch.cuda.get_device_name() if args.device == "cuda" else args.device
    print(
        f"# {where}, torch {torch.__version__}, transformers {transformers.__version__}, {args.dtype}, "
        f"{model.config.num_hidden_layers} layers, {args.steps} steps"
    )
    base = args.modes[0]
    header = ["rows", "context"] + [f"{m} ms/step" for m in args.modes] + [f"{m} first s" for m in args.modes[1:]]
    header += [f"x vs {base}", "rows same tokens", "max |dlogp|"]
    print(" | ".join(header))
    worst, differing = 0.0, 0
    for context in args.contexts:
        for rows in args.rows:
            runs = {mode: measure(engine, rows, context, args.steps, args.repeats) for mode, engine in engines.items()}
            cells = [str(rows), str(context)] + [f"{runs[m][0]:.2f}" for m in args.modes]
            cells += [f"{runs[m][1]:.2f}" for m in args.modes[1:]]
            last = args.modes[-1]
            same, gap = compare(runs[base][2], runs[last][2])
            worst, differing = max(worst, gap), differing + rows - same
            cells += [f"{runs[base][0] / runs[last][0]:.1f}", f"{same}/{rows}", f"{gap:.1e}"]
            print(" | ".join(cells), flush=True)
    static = next((e._static for e in engines.values() if e._static is not None), None)
    if static is not None:
        print(
            f"# {static.captures} graphs captured, {len(static.buckets)} buckets, cache storage for "
            f"{static.storage.capacity} row-columns"
        )
    ok = worst <= 1e-4
    print(
        f"# {'OK' if ok else 'MISMATCH'}: log-probs within {worst:.1e}; {differing} rows took another greedy token "
        "somewhere (a tie to float rounding when the log-probs agree there)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
