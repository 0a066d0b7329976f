"""Weight-sync probe for bench/train_gpu.sh: while verl trains, score one fixed sequence on the `hf` rollout server.

Connects to the running local Ray (the trainer's namespace), finds the rollout server `hf_server_0` and,
every `--every` seconds, asks it for the log-probs of a fixed prompt and continuation under its current
weights (`HFRolloutServer.score`). Each line of `--out` (JSONL) holds the time, the training step the
weights came from (`global_steps`), the number of weight syncs so far and the log-probs. If the actor's
weights reach the rollout after every update, the same tokens score differently after every step.

Usage: python bench/train_gpu_probe.py --tokenizer TINY/actor --out probe.jsonl [--namespace cuda-agent] [--every 2]
Stops when the trainer's Ray goes away.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

PROMPT = "Write a CUDA kernel for ReLU and bind it with pybind11."
RESPONSE = "__global__ void relu_kernel(const float* x, float* y, int n) { y[i] = x[i] > 0.f ? x[i] : 0.f; }"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", required=True, help="the policy's folder (its tokenizer encodes the probe)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--namespace", default="cuda-agent")
    parser.add_argument("--every", type=float, default=2.0)
    parser.add_argument("--wait", type=float, default=600.0, help="longest wait for the server to appear (s)")
    args = parser.parse_args()

    import ray
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    prompt, response = tokenizer.encode(PROMPT), tokenizer.encode(RESPONSE)
    started = time.monotonic()
    server = None
    while server is None:
        try:
            if not ray.is_initialized():
                ray.init(address="auto", namespace=args.namespace, log_to_driver=False)
            server = ray.get_actor("hf_server_0")
        except (ConnectionError, ValueError):
            if time.monotonic() - started > args.wait:
                print("probe: no hf_server_0 appeared; nothing probed")
                return 1
            time.sleep(args.every)
    with args.out.open("a") as out:
        while True:
            try:
                result = ray.get(server.score.remote(prompt, response), timeout=120)
            except ray.exceptions.GetTimeoutError:
                continue  # still loading its model, or busy with a long batch
            except Exception as exc:  # the trainer finished or was killed: the probe ends with it
                print(f"probe: server gone ({type(exc).__name__}); stopping")
                return 0
            row = {"t": round(time.monotonic() - started, 2), **result}
            row["mean_log_prob"] = sum(result["log_probs"]) / len(result["log_probs"])
            out.write(json.dumps(row) + "\n")
            out.flush()
            time.sleep(args.every)


if __name__ == "__main__":
    raise SystemExit(main())
