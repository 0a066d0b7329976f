"""The `hf` rollout backend: generation with a tiny random Qwen2, log-probs as the actor recomputes them,
weight sync, and registration in verl's rollout registries."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cuda_agent.rl.hf_rollout.engine import GenRequest, HFEngine, request_from_params  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model folder with seeded random weights saved (fp32)."""
    root = tmp_path_factory.mktemp("tiny-weights")
    for item in tiny_model_dir.iterdir():
        (root / item.name).write_bytes(item.read_bytes())
    torch.manual_seed(0)
    config = transformers.AutoConfig.from_pretrained(root)
    transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).save_pretrained(root)
    return root


@pytest.fixture
def engine(model_dir: Path) -> HFEngine:
    return HFEngine.from_pretrained(model_dir, device="cpu", dtype="float32", seed=3)


def actor_logprobs(model, prompt: list[int], response: list[int], temperature: float) -> torch.Tensor:
    """What verl's actor computes for a response: log_softmax(logits / T) at each response token, one pass."""
    from verl.utils.torch_functional import logprobs_from_logits

    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float() / temperature
    return logprobs_from_logits(logits, torch.tensor(response))


def test_batched_generation_logprobs_match_the_actor_recomputation(engine: HFEngine, tiny_tokenizer) -> None:
    prompts = [tiny_tokenizer.encode(text) for text in ("write a relu kernel", "hi", "a longer prompt, padded less")]
    requests = [GenRequest(prompt_ids=p, max_tokens=12, temperature=0.7) for p in prompts]
    results = engine.generate(requests)
    for prompt, result in zip(prompts, results, strict=True):
        assert 1 <= len(result.token_ids) <= 12 and len(result.log_probs) == len(result.token_ids)
        assert result.stopped == (result.token_ids[-1] in engine.stop_token_ids)
        expected = actor_logprobs(engine.model, prompt, result.token_ids, 0.7)
        assert torch.allclose(torch.tensor(result.log_probs), expected, atol=1e-3), (result.log_probs, expected)


def test_generation_keeps_only_the_last_positions_logits(engine: HFEngine, tiny_tokenizer) -> None:
    """The prefill of a long context must not make logits for every position (rows x context x vocab floats)."""
    widths = []
    forward = engine.model.forward

    def recording(*args, **kwargs):
        out = forward(*args, **kwargs)
        widths.append(out.logits.shape[1])
        return out

    engine.model.forward = recording
    try:
        prompts = [tiny_tokenizer.encode("a context of several tokens to prefill " * 4), tiny_tokenizer.encode("hi")]
        engine.generate([GenRequest(prompt_ids=p, max_tokens=4, temperature=1.0) for p in prompts])
    finally:
        del engine.model.forward
    assert widths and set(widths) == {1}, widths


def test_looking_at_the_tokens_every_few_steps_ends_each_reply_where_looking_every_step_does(
    engine: HFEngine, tiny_tokenizer
) -> None:
    """Tokens reach the host every CHECK_EVERY steps; a reply that stops between two looks ends at its stop token,
    and the others go on, exactly as with a look after every step."""
    prompts = [tiny_tokenizer.encode(text) for text in ("write a relu kernel", "hi", "a longer prompt, padded less")]
    requests = [GenRequest(prompt_ids=p, max_tokens=11, temperature=0.0) for p in prompts]
    first = engine.generate(requests)[0].token_ids
    stop = next(t for i, t in enumerate(first) if i >= 2 and t not in first[:i])  # ends reply 0 mid-way
    replies = {}
    for every in (1, 4):
        looking = HFEngine(engine.model, {stop}, engine.pad_token_id, seed=3)
        looking.CHECK_EVERY = every
        replies[every] = [(r.token_ids, r.log_probs, r.stopped) for r in looking.generate(requests)]
    assert replies[1] == replies[4]
    assert replies[4][0][2] and replies[4][0][0][-1] == stop and len(replies[4][0][0]) < 11


def test_greedy_is_deterministic_and_top_k_one_is_greedy(engine: HFEngine, tiny_tokenizer) -> None:
    prompt = tiny_tokenizer.encode("kernel")
    greedy = engine.generate([GenRequest(prompt_ids=prompt, max_tokens=8, temperature=0.0)])[0]
    again = engine.generate([GenRequest(prompt_ids=prompt, max_tokens=8, temperature=0.0)])[0]
    top1 = engine.generate([GenRequest(prompt_ids=prompt, max_tokens=8, temperature=1.0, top_k=1)])[0]
    assert greedy.token_ids == again.token_ids == top1.token_ids


def test_filters_apply_per_request_in_a_mixed_batch(engine: HFEngine, tiny_tokenizer) -> None:
    """A batch decides once which filters any request uses; each row still gets only its own."""
    prompt = tiny_tokenizer.encode("kernel")
    greedy = engine.generate([GenRequest(prompt_ids=prompt, max_tokens=8, temperature=0.0)])[0]
    plain = GenRequest(prompt_ids=prompt, max_tokens=8, temperature=1.0)
    nucleus = GenRequest(prompt_ids=prompt, max_tokens=8, temperature=1.0, top_p=1e-6)  # the top token only
    top1 = GenRequest(prompt_ids=prompt, max_tokens=8, temperature=1.0, top_k=1)
    batch = engine.generate([plain] * 6 + [nucleus, top1])
    assert batch[6].token_ids == batch[7].token_ids == greedy.token_ids
    assert any(r.token_ids != greedy.token_ids for r in batch[:6])  # unfiltered rows sample (8 tokens of 6 rows)


def test_weight_sync_changes_the_rollout_and_restores_it(engine: HFEngine, tiny_tokenizer) -> None:
    prompt = tiny_tokenizer.encode("fixed prompt")
    request = GenRequest(prompt_ids=prompt, max_tokens=6, temperature=0.0)
    before = engine.generate([request])[0]
    original = {name: p.detach().clone() for name, p in engine.model.named_parameters()}
    torch.manual_seed(1)
    changed = {name: p + 0.5 * torch.randn_like(p) for name, p in original.items()}
    assert engine.load_weights(changed.items()) == len(original)
    after = engine.generate([request])[0]
    assert (after.token_ids, after.log_probs) != (before.token_ids, before.log_probs)
    expected = actor_logprobs(engine.model, prompt, after.token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.log_probs), expected, atol=1e-3)
    assert engine.score(prompt, after.token_ids) == pytest.approx(expected.tolist(), abs=1e-5)
    engine.load_weights(original.items())
    restored = engine.generate([request])[0]
    assert restored.token_ids == before.token_ids
    assert restored.log_probs == pytest.approx(before.log_probs, abs=1e-5)
    with pytest.raises(KeyError, match="no parameter"):
        engine.load_weights([("not.a.weight", torch.zeros(1))])


def test_request_budget_follows_verl_vllm_server() -> None:
    assert request_from_params([1] * 10, {"max_tokens": 50}, 20, max_model_len=30).max_tokens == 20
    assert request_from_params([1] * 10, {}, 7, max_model_len=30).max_tokens == 7
    with pytest.raises(ValueError, match="no room"):
        request_from_params([1] * 30, {}, 7, max_model_len=30)
    with pytest.raises(ValueError, match="repetition_penalty"):
        request_from_params([1], {"repetition_penalty": 1.1}, 7, max_model_len=30)


def test_server_batches_concurrent_requests(model_dir: Path, tiny_tokenizer) -> None:
    from omegaconf import OmegaConf

    from cuda_agent.rl.hf_rollout.server import HFRolloutServer

    config = OmegaConf.create(
        {"prompt_length": 64, "response_length": 16, "max_model_len": None, "max_num_seqs": 8}
        | {"dtype": "float32", "load_format": "auto", "seed": 0}
    )
    server = HFRolloutServer(config, OmegaConf.create({"path": str(model_dir)}), device="cpu")
    prompts = [tiny_tokenizer.encode(f"prompt {i}") for i in range(5)]
    batch_sizes, generate = [], server.engine.generate

    def recording_generate(requests: list, *args: object) -> list:
        batch_sizes.append(len(requests))
        return generate(requests, *args)

    server.engine.generate = recording_generate

    async def run() -> list:
        params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True, "max_tokens": 5}
        return await asyncio.gather(
            *[server.generate(p, dict(params), request_id=str(i)) for i, p in enumerate(prompts)]
        )

    outputs = asyncio.run(run())
    for prompt, output in zip(prompts, outputs, strict=True):
        assert 1 <= len(output.token_ids) <= 5 and len(output.log_probs) == len(output.token_ids)
        expected = actor_logprobs(server.engine.model, prompt, output.token_ids, 1.0)
        assert torch.allclose(torch.tensor(output.log_probs), expected, atol=1e-3)
    assert sum(batch_sizes) == len(prompts) and max(batch_sizes) > 1  # requests that waited together ran together


def test_server_waits_for_a_burst_of_requests_before_a_batch(model_dir: Path, tiny_tokenizer) -> None:
    """verl's agent-loop workers send a step's requests a few ms apart: they must share one batch, not leave the
    first to run alone while the rest wait for it (which doubled generation on the H100)."""
    from omegaconf import OmegaConf

    from cuda_agent.rl.hf_rollout.server import HFRolloutServer

    config = OmegaConf.create(
        {"prompt_length": 64, "response_length": 16, "max_model_len": None, "max_num_seqs": 8}
        | {"dtype": "float32", "load_format": "auto", "seed": 0}
    )
    server = HFRolloutServer(config, OmegaConf.create({"path": str(model_dir)}), device="cpu")
    batch_sizes, generate = [], server.engine.generate

    def recording_generate(requests: list, *args: object) -> list:
        batch_sizes.append(len(requests))
        return generate(requests, *args)

    server.engine.generate = recording_generate
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True, "max_tokens": 3}

    async def staggered(i: int) -> object:
        await asyncio.sleep(0.01 * i)  # arrivals 10 ms apart, well inside the gather window
        return await server.generate(tiny_tokenizer.encode(f"prompt {i}"), dict(params), request_id=str(i))

    async def run() -> list:
        return await asyncio.gather(*[staggered(i) for i in range(6)])

    assert len(asyncio.run(run())) == 6
    assert batch_sizes == [6]

    # A full batch starts at once; what is left over goes into the next one.
    batch_sizes.clear()

    async def burst() -> list:
        return await asyncio.gather(*[staggered(0) for _ in range(10)])

    asyncio.run(burst())
    assert batch_sizes == [8, 2]


def test_a_long_reply_continues_in_later_batches_beside_new_requests(model_dir: Path, tiny_tokenizer) -> None:
    """A batch decodes at most ROUND_STEPS tokens: a reply not finished by then goes on in the next batch, beside a
    request that arrived meanwhile, instead of holding it until the reply ends; the reply and its log-probs are
    the same kind as one batch's (every token scored by the policy at the step it was sampled)."""
    from omegaconf import OmegaConf

    from cuda_agent.rl.hf_rollout.server import HFRolloutServer

    config = OmegaConf.create(
        {"prompt_length": 64, "response_length": 16, "max_model_len": None, "max_num_seqs": 8}
        | {"dtype": "float32", "load_format": "auto", "seed": 0}
    )
    server = HFRolloutServer(config, OmegaConf.create({"path": str(model_dir)}), device="cpu")
    server.ROUND_STEPS = 3
    batches, generate = [], server.engine.generate

    def recording_generate(requests: list, max_steps: int | None = None) -> list:
        batches.append([len(r.prompt_ids) for r in requests])
        assert max_steps == 3
        return generate(requests, max_steps)

    server.engine.stop_token_ids = set()  # no early stop: each reply runs to its max_tokens
    long_prompt, short_prompt = tiny_tokenizer.encode("a long reply"), tiny_tokenizer.encode("late")
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True}
    late: list = []

    def first_batch_then_a_late_request(requests: list, max_steps: int | None = None) -> list:
        if not late:  # the late request arrives while the first batch decodes
            ask = server.generate(short_prompt, params | {"max_tokens": 2}, request_id="short")
            late.append(asyncio.run_coroutine_threadsafe(ask, loop))
        return recording_generate(requests, max_steps)

    server.engine.generate = first_batch_then_a_late_request

    async def run() -> list:
        nonlocal loop
        loop = asyncio.get_running_loop()
        long = await server.generate(long_prompt, params | {"max_tokens": 8}, request_id="long")
        return [long, await asyncio.wrap_future(late[0])]

    loop = None
    long, short = asyncio.run(run())
    assert len(long.token_ids) == 8 and len(short.token_ids) == 2
    # batch 1: the long reply alone; batch 2: it continues (3 tokens longer), first, beside the late request; then
    # alone
    assert batches[0] == [len(long_prompt)]
    assert batches[1] == [len(long_prompt) + 3, len(short_prompt)]
    assert batches[2:] == [[len(long_prompt) + 6]]
    for prompt, output in ((long_prompt, long), (short_prompt, short)):
        expected = actor_logprobs(server.engine.model, prompt, output.token_ids, 1.0)
        assert torch.allclose(torch.tensor(output.log_probs), expected, atol=1e-3)


def test_importing_the_package_registers_hf_with_verl() -> None:
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    import cuda_agent.rl.hf_rollout  # noqa: F401
    from cuda_agent.rl.hf_rollout.adapter import HFServerAdapter
    from cuda_agent.rl.hf_rollout.replica import HFReplica

    assert get_rollout_class("hf", "async") is HFServerAdapter
    assert get_rollout_replica_class("hf") is HFReplica


def test_sampling_restarts_from_the_synced_step_so_a_resumed_run_samples_alike(model_dir: Path, tiny_tokenizer) -> None:
    from omegaconf import OmegaConf

    from cuda_agent.rl.hf_rollout.server import HFRolloutServer

    config = OmegaConf.create(
        {"prompt_length": 64, "response_length": 16, "max_model_len": None, "max_num_seqs": 8}
        | {"dtype": "float32", "load_format": "auto", "seed": 0}
    )
    prompt = tiny_tokenizer.encode("same prompt")
    params = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True, "max_tokens": 8}

    async def sample(server: HFRolloutServer, step: int) -> list[int]:
        await server.finish_weight_sync(step)
        return (await server.generate(prompt, dict(params), request_id="r")).token_ids

    first, second = (HFRolloutServer(config, OmegaConf.create({"path": str(model_dir)}), "cpu") for _ in range(2))
    assert asyncio.run(sample(first, 7)) == asyncio.run(sample(second, 7))
    assert asyncio.run(sample(first, 7)) != asyncio.run(sample(first, 8))


def test_tied_embeddings_take_the_lm_head_the_actor_sends(tiny_model_dir: Path, tmp_path: Path, tiny_tokenizer) -> None:
    """SmolLM2 ties its LM head to the embeddings: the actor's state dict names both, the rollout model one tensor."""
    for item in tiny_model_dir.iterdir():
        (tmp_path / item.name).write_bytes(item.read_bytes())
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    config.tie_word_embeddings = True
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).save_pretrained(tmp_path)
    engine = HFEngine.from_pretrained(tmp_path, device="cpu", dtype="float32", seed=3)
    actor = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
    sent = dict(actor.state_dict())
    assert "lm_head.weight" in sent
    assert engine.load_weights(sent.items()) == len(sent)
    assert torch.equal(engine.model.get_output_embeddings().weight, actor.get_output_embeddings().weight)
