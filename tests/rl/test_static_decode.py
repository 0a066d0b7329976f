"""The `hf` rollout's static-cache decode: the eager path's tokens and log-probs, shape buckets, weight sync, and
(on a GPU) the same with each step replayed as a CUDA graph."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cuda_agent.rl.hf_rollout.engine import GenRequest, HFEngine  # noqa: E402
from cuda_agent.rl.hf_rollout.static_decode import StaticDecoder, length_bucket, rows_bucket  # noqa: E402

PROMPTS = [[5, 6, 7, 8, 9, 10, 11, 12, 13], [14, 15], [20, 21, 22, 23, 24]]  # left padding of 0, 7 and 4


def tiny_model(attention: str = "sdpa", device: str = "cpu"):
    """A two-layer random Qwen2 with grouped KV heads (seeded: every call builds the same weights)."""
    config = transformers.Qwen2Config(
        vocab_size=300,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation=attention)
    return model.to(device)


def replies(engine: HFEngine, requests: list[GenRequest], max_steps: int | None = None) -> list:
    return [(r.token_ids, r.log_probs, r.stopped) for r in engine.generate(requests, max_steps)]


def assert_same(expected: list, got: list, atol: float) -> None:
    for (tokens, logprobs, stopped), (tokens2, logprobs2, stopped2) in zip(expected, got, strict=True):
        assert (tokens2, stopped2) == (tokens, stopped)
        assert logprobs2 == pytest.approx(logprobs, abs=atol)


def actor_logprobs(model, prompt: list[int], response: list[int]) -> list[float]:
    """verl's actor's recomputation: one unpadded pass, log_softmax of each response token (temperature 1)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response], device=model.device)).logits
    targets = torch.tensor(response, device=model.device)[:, None]
    return torch.log_softmax(logits[0, len(prompt) - 1 : -1].float(), -1).gather(-1, targets).squeeze(-1).tolist()


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_static_decode_gives_the_eager_tokens_and_log_probs_for_a_mixed_length_batch(attention: str) -> None:
    model = tiny_model(attention)
    greedy = [GenRequest(prompt_ids=p, max_tokens=16, temperature=0.0) for p in PROMPTS]
    first = replies(HFEngine(model, set(), pad_token_id=0), greedy)[0][0]
    stop = next(t for i, t in enumerate(first) if i >= 3 and t not in first[:i])  # ends reply 0 mid-way
    eager = HFEngine(model, {stop}, pad_token_id=0, seed=3)
    static = HFEngine(model, {stop}, pad_token_id=0, seed=3, decode="static")
    expected = replies(eager, greedy)
    assert expected[0][2] and len(expected[0][0]) < 16
    assert_same(expected, replies(static, greedy), atol=1e-5)
    assert_same(replies(eager, greedy, max_steps=5), replies(static, greedy, max_steps=5), atol=1e-5)
    # Sampling draws from the same generator on the same rows (padding rows of the bucket sample nothing).
    sampled = [GenRequest(prompt_ids=p, max_tokens=10, temperature=0.8, top_k=50, top_p=0.9) for p in PROMPTS]
    assert_same(replies(eager, sampled), replies(static, sampled), atol=1e-5)
    for prompt, (tokens, logprobs, _) in zip(PROMPTS, expected, strict=True):
        assert logprobs == pytest.approx(actor_logprobs(model, prompt, tokens), abs=1e-4)


def test_the_steps_run_before_a_capture_leave_no_trace_in_the_batch() -> None:
    """A graph's capture first runs its step eagerly on the new bucket (writing the cache, the mask, the slot and
    positions); the batch that follows must not see any of it. Emulated on the CPU: a new bucket's step runs a few
    times before its first prefill."""
    model = tiny_model()
    greedy = [GenRequest(prompt_ids=p, max_tokens=12, temperature=0.0) for p in PROMPTS]
    expected = replies(HFEngine(model, set(), pad_token_id=0), greedy)
    engine = HFEngine(model, set(), pad_token_id=0, decode="static")
    decoder: StaticDecoder = engine._static
    get = decoder._get

    def get_after_warm_up(rows: int, length: int):
        new = (rows, length) not in decoder.buckets
        bucket = get(rows, length)
        for _ in range(5 if new else 0):
            decoder._forward(bucket)
        return bucket

    decoder._get = get_after_warm_up
    assert_same(expected, replies(engine, greedy), atol=1e-5)
    assert_same(expected[:2], replies(engine, greedy[:2]), atol=1e-5)  # a new bucket, its rows warmed over the old


def test_buckets_round_rows_to_powers_of_two_and_lengths_to_the_cache_step() -> None:
    assert [rows_bucket(n) for n in (1, 2, 3, 4, 5, 8, 9, 16, 17)] == [1, 2, 4, 4, 8, 8, 16, 16, 32]
    assert [length_bucket(n, 512) for n in (0, 1, 512, 513, 5000)] == [512, 512, 512, 1024, 5120]
    engine = HFEngine(tiny_model(), set(), pad_token_id=0, decode="static")
    decoder: StaticDecoder = engine._static
    decoder.CACHE_STEP = 16
    ask = lambda prompts, tokens: [GenRequest(prompt_ids=p, max_tokens=tokens, temperature=0.0) for p in prompts]  # noqa: E731
    engine.generate(ask(PROMPTS, 4))  # 9 prompt columns + 3 written by decode steps: 12
    engine.generate(ask(PROMPTS[:2] + [[1] * 12], 5))  # 3 rows again, 16 columns: the same bucket
    assert list(decoder.buckets) == [(4, 16)] and decoder.storage.capacity == 4 * 16
    engine.generate(ask(PROMPTS[:1], 8))  # fits the storage: a smaller bucket is a view of it
    assert list(decoder.buckets) == [(4, 16), (1, 16)] and decoder.storage.capacity == 4 * 16
    engine.generate(ask(PROMPTS, 9))  # needs 4 x 32: the storage grows and the old buckets go
    assert list(decoder.buckets) == [(4, 32)] and decoder.storage.capacity == 4 * 32
    engine.release()
    assert not decoder.buckets and decoder.storage.capacity == 0


def test_a_weight_sync_between_two_batches_changes_the_static_decode() -> None:
    model = tiny_model()
    engine = HFEngine(model, set(), pad_token_id=0, decode="static")
    greedy = [GenRequest(prompt_ids=p, max_tokens=10, temperature=0.0) for p in PROMPTS]
    before = replies(engine, greedy)
    original = {name: p.detach().clone() for name, p in model.named_parameters()}
    torch.manual_seed(1)
    engine.load_weights((name, p + 0.5 * torch.randn_like(p)) for name, p in original.items())
    after = replies(engine, greedy)
    assert [r[0] for r in after] != [r[0] for r in before]
    for prompt, (tokens, logprobs, _) in zip(PROMPTS, after, strict=True):
        assert logprobs == pytest.approx(actor_logprobs(model, prompt, tokens), abs=1e-4)
    engine.load_weights(original.items())
    assert_same(before, replies(engine, greedy), atol=1e-6)


def test_the_decode_is_a_setting_and_graphs_need_cuda() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match="decode must be one of"):
        HFEngine(model, set(), 0, decode="compiled")
    with pytest.raises(ValueError, match="CUDA"):
        HFEngine(model, set(), 0, decode="graphs")
    with pytest.raises(ValueError, match="attention"):
        StaticDecoder(tiny_model("flex_attention"), 0, graphs=False)


def test_the_server_takes_the_decode_from_engine_kwargs(tiny_model_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
    from omegaconf import OmegaConf

    from cuda_agent.rl.hf_rollout.server import HFRolloutServer

    def config(hf: dict) -> object:
        return OmegaConf.create(
            {"prompt_length": 64, "response_length": 16, "max_model_len": None, "max_num_seqs": 8}
            | {"dtype": "float32", "load_format": "dummy", "seed": 0, "engine_kwargs": {"vllm": {}, "hf": hf}}
        )

    model = OmegaConf.create({"path": str(tiny_model_dir)})
    server = HFRolloutServer(config({"decode": "static"}), model, device="cpu")
    assert server.engine.decode == "static"
    params = {"temperature": 0.0, "logprobs": True, "max_tokens": 4}
    output = asyncio.run(server.generate([5, 6, 7], params, request_id="r"))
    assert len(output.token_ids) == 4 and server.engine._static.buckets
    asyncio.run(server.release_kv_cache())
    assert not server.engine._static.buckets
    assert HFRolloutServer(config({}), model, device="cpu").engine.decode == "eager"
    with pytest.raises(ValueError, match="takes only 'decode'"):
        HFRolloutServer(config({"decode": "static", "cuda_graphs": True}), model, device="cpu")


@pytest.mark.gpu
def test_graphs_give_the_eager_tokens_on_cuda_and_follow_a_weight_sync() -> None:
    model = tiny_model(device="cuda")
    eager = HFEngine(model, set(), pad_token_id=0, seed=3)
    graphs = HFEngine(model, set(), pad_token_id=0, seed=3, decode="graphs")
    greedy = [GenRequest(prompt_ids=p, max_tokens=40, temperature=0.0) for p in PROMPTS]
    expected = replies(eager, greedy)
    assert_same(expected, replies(graphs, greedy), atol=1e-4)
    assert_same(expected, replies(graphs, greedy), atol=1e-4)  # replayed, not captured again
    assert graphs._static.captures == 1
    sampled = [GenRequest(prompt_ids=p, max_tokens=40, temperature=1.0) for p in PROMPTS]
    assert_same(replies(eager, sampled), replies(graphs, sampled), atol=1e-4)
    torch.manual_seed(1)
    graphs.load_weights((name, p + 0.5 * torch.randn_like(p)) for name, p in model.named_parameters())
    synced = replies(eager, greedy)
    assert [r[0] for r in synced] != [r[0] for r in expected]
    assert_same(synced, replies(graphs, greedy), atol=1e-4)
    assert graphs._static.captures == 1
    for prompt, (tokens, logprobs, _) in zip(PROMPTS, synced, strict=True):
        assert logprobs == pytest.approx(actor_logprobs(model, prompt, tokens), abs=1e-4)


@pytest.mark.slow
def test_the_decode_benchmark_runs_on_the_cpu() -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "bench/hf_decode.py", "--device", "cpu", "--layers", "1", "--rows", "1", "3"]
    command += ["--contexts", "20", "--steps", "3", "--repeats", "1", "--modes", "eager", "static"]
    out = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# OK: log-probs within" in out.stdout and out.stdout.count(" | 20 | ") == 2
