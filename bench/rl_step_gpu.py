"""One PPO step of actor and critic on verl, fed by agent episodes that the real sandbox judged (issue 9).

In one process, with `--device cuda` (the H200) or `--device cpu` (any machine):

1. Tokenizer and models, made here, nothing downloaded: a byte-level BPE trained on the episode texts
   and SKILL.md, with ChatML specials and a Hermes tool-call chat template; a tiny randomly initialised
   Qwen2 causal LM (the actor) and a Qwen2 token classifier with one label (the critic: what verl's
   `load_valuehead_model` builds); seeded.
2. Episodes of `examples/relu` through verl's `AgentLoopWorker.generate_sequences` and our `cuda_agent`
   agent loop (`cuda_agent.rl.agent_loop.CudaAgentLoop`: workspace, tools, builds, the real sandbox's
   judge in a LocalPool). A scripted token server stands in for vLLM: the tiny random model cannot write
   kernels, so the server replays a competent agent's turns as token ids of the tiny tokenizer (the
   bundled demo recording for the device, else the scripted demo turns with the bundled solution's
   kernels), plus two failing agents: one writes a wrong kernel, one a kernel that does not compile.
   The judge gives them different rewards; verl pads and batches the episodes into a DataProto.
3. The PPO step as verl's `RayPPOTrainer.fit` runs it, without Ray and without a rollout server:
   verl's own trainer methods (`_compute_old_log_prob`, `_compute_values`, `_update_critic`,
   `_update_actor`) and `compute_advantage` (GAE, gamma 1, lambda 0.95, from the agentic-ppo recipe)
   on verl's FSDP engine workers built in this process (`ActorRolloutRefWorker` role=actor with
   `ppo_loss`, `TrainingWorker` value_model with `value_loss`), torch.distributed at world size 1.
   Should that engine path fail, the step falls back to verl's loss functions (core_algos) on the
   plain Hugging Face models with torch AdamW; the JSON says which path ran and why.
4. `--out DIR`: rl_step.json and rl_step.log: per episode reward, verdict, turns and token counts;
   per model the loss before and after the step (same batch), grad norm, parameter change norm, and
   whether all are finite. Exit status 1 if anything is not finite or a model did not change.

On the CPU, verl's engines are registered for cuda/npu only: the script gives verl a CPU platform
(`verl.plugin.platform.set_platform`) and asks for the engine registered for cuda
(VERL_ENGINE_DEVICE=cuda), so that the same engine code runs. Other changes to verl, on both devices:
`load_valuehead_model` asks transformers for flash_attention_2, which is not installed here nor on
the H200, so the critic is loaded the same way but with sdpa (the actor gets sdpa through the config);
and, only if Hugging Face `datasets` cannot be imported, an empty stand-in module (verl imports it at
the top of its RL dataset module; nothing here loads a dataset). The JSON lists what was patched.

Usage (repository root):
    python bench/rl_step_gpu.py --device cpu --out /tmp/rl_step_cpu          # ~1.5-2 min on 2 cores
    python bench/rl_step_gpu.py --device cpu --batch handmade --out /tmp/x   # no episodes, ~20 s (tests/rl)
On the H200 (no network): `bash scripts/device_wheels.sh rl` here, carry .whl and .carry, and there run
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH CUDA_AGENT_DATA_DIR=$PWD/.carry TORCH_CUDA_ARCH_LIST=9.0
    python3 bench/rl_step_gpu.py --device cuda --out $OUT/rl_step --work /tmp/rl_step
Options: --path auto|engine|fallback (auto: the engine, then the fallback), --episodes verl|plain, --no-cross-check
(by default the engine's step is re-run on the plain HF models with verl's core_algos, to compare the numbers),
--actor-lr, --critic-lr (1e-4, 2e-4: the paper's 3e-6/6e-6 barely move a random model), --seed, --work DIR.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import json
import math
import os
import socket
import sys
import tempfile
import time
import traceback
import types
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cuda_agent.agent.models.tool_text import CHATML_TOOLS_TEMPLATE  # noqa: E402

TASK = "examples/relu"
SOLUTIONS = {  # the bundled solutions the scripted agents write (the same ones scripts/record_demo.py uses)
    "cpu": ROOT / "solutions" / "workspaces" / "examples_relu_cpu",
    "cuda": ROOT / "solutions" / "workspaces" / "kernelbench_L1_19",
}
WRONG = {  # (file, text, replacement): a kernel that compiles and runs but is not ReLU
    "cpu": ("relu.cpp", "x[i] > 0.f ? x[i] : 0.f", "x[i] > 0.f ? 0.f : x[i]"),
    "cuda": ("relu.cu", "return v < 0.0f ? 0.0f : v;", "return v < 0.0f ? v : 0.0f;"),
}
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


NOT_RUN = [
    "Ray: no ray.init, no RayWorkerGroup or actors; verl's worker methods are called in this process through a "
    "one-rank stand-in (OneRankGroup), so dispatch/collect over ranks did not run",
    "the rollout server (vLLM/SGLang) and LLMServerManager: a scripted token server replays fixed turns",
    "weight sync to the rollout (checkpoint engine update_weights), checkpoint saving, the tracking logger",
    "RayPPOTrainer.fit itself (dataloader, step loop, validation): its per-step calls are made here in its order",
    "the reward loop / reward model workers: the reward is the judge's, returned by our agent loop",
    "reference policy and KL (off in the recipe), sequence parallelism (Ulysses size 1 here, 8 in the recipe), "
    "sharding over several GPUs (world size 1)",
]
CPU_NOTE = (
    "on the CPU: verl's CUDA platform is replaced by a CPU one (set_platform) and the FSDP engine registered "
    "for cuda is used (VERL_ENGINE_DEVICE=cuda); autocast runs in bf16 on the CPU"
)


class Tee:
    """Print to the console and to the log file."""

    def __init__(self, path: Path) -> None:
        self.file = path.open("w")
        self.started = time.monotonic()

    def __call__(self, *parts: Any) -> None:
        text = f"[{time.monotonic() - self.started:6.1f} s] " + " ".join(str(p) for p in parts)
        print(text, flush=True)
        self.file.write(text + "\n")
        self.file.flush()


# ---------------------------------------------------------------------------------------------------------
# 1. Tokenizer and tiny models
# ---------------------------------------------------------------------------------------------------------


def training_texts(device: str) -> list[str]:
    """What the tokenizer learns from: the demo recording, SKILL.md and the task, the solutions' sources."""
    from cuda_agent.agent.demo import recording_path
    from cuda_agent.workspace.layout import skill_text

    texts = [skill_text(device), skill_text("cpu")]
    texts += [p.read_text() for p in sorted(recording_path("cpu").parent.glob("*.jsonl"))]
    for folder in SOLUTIONS.values():
        texts += [p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()]
    return texts


def build_tokenizer(texts: list[str], out_dir: Path, vocab_size: int):
    """A byte-level BPE trained on `texts`, as a transformers fast tokenizer with the chat template; saved."""
    import tokenizers
    import transformers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    tok.add_tokens(["<tool_call>", "</tool_call>"])
    fast = transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHATML_TOOLS_TEMPLATE
    )
    fast.save_pretrained(out_dir)
    return transformers.AutoTokenizer.from_pretrained(out_dir)


def build_models(tokenizer: Any, root: Path, seed: int, max_positions: int) -> tuple[Path, Path]:
    """A tiny random Qwen2 actor (causal LM) and critic (token classification, 1 label), with the tokenizer."""
    import torch
    import transformers

    def config(**extra: Any):
        return transformers.Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=max_positions,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
            tie_word_embeddings=False,
            **extra,
        )

    actor_dir, critic_dir = root / "actor", root / "critic"
    torch.manual_seed(seed)
    transformers.Qwen2ForCausalLM(config()).save_pretrained(actor_dir)
    torch.manual_seed(seed + 1)
    transformers.Qwen2ForTokenClassification(config(num_labels=1)).save_pretrained(critic_dir)
    for folder in (actor_dir, critic_dir):
        tokenizer.save_pretrained(folder)
    return actor_dir, critic_dir


# ---------------------------------------------------------------------------------------------------------
# verl's config: the agentic-ppo recipe, scaled down to one GPU and a tiny model
# ---------------------------------------------------------------------------------------------------------


def compose_config(args: argparse.Namespace, actor_dir: Path, critic_dir: Path, batch_size: int, work: Path):
    from cuda_agent.rl.recipes import bundled_recipe, load_recipe, plan_training

    recipe = load_recipe(bundled_recipe("agentic-ppo"))
    recipe.agent_loop = recipe.agent_loop.model_copy(
        update={"device": args.device, "work_dir": work / "rollouts", "max_turns": 50}
    )
    overrides = {
        "data.train_batch_size": batch_size,
        "data.max_prompt_length": args.prompt_length,
        "data.max_response_length": args.response_length,
        "actor_rollout_ref.model.path": str(actor_dir),
        # flash-attn is not installed (verl's default is flash_attention_2)
        "+actor_rollout_ref.model.override_config.attn_implementation": "sdpa",
        # FSDP2 (verl's newer FSDP): FSDP1 refuses CPU modules (sync_module_states), so both devices use FSDP2
        "actor_rollout_ref.actor.strategy": "fsdp2",
        "critic.strategy": "fsdp2",
        "actor_rollout_ref.actor.optim.lr": args.actor_lr,
        "actor_rollout_ref.actor.optim.total_training_steps": 1,
        "actor_rollout_ref.actor.ppo_mini_batch_size": batch_size,
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.actor.use_dynamic_bsz": False,
        "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz": False,
        "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
        "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": 1,
        "actor_rollout_ref.rollout.calculate_log_probs": False,
        "critic.model.path": str(critic_dir),
        "+critic.model.override_config.attn_implementation": "sdpa",
        "critic.optim.lr": args.critic_lr,
        "critic.optim.total_training_steps": 1,
        "critic.ppo_micro_batch_size_per_gpu": 1,
        "critic.ulysses_sequence_parallel_size": 1,
        "trainer.n_gpus_per_node": 1,
        "trainer.nnodes": 1,
        "trainer.critic_warmup": 0,
        "trainer.logger": ["console"],
        "data.train_files": str(work / "unused.parquet"),
        "data.val_files": str(work / "unused.parquet"),
    }
    if args.device == "cpu":
        overrides["trainer.device"] = "cpu"
    from cuda_agent.rl.recipes import hydra_value

    plan = plan_training(recipe, work / "plan", [f"{k}={hydra_value(v)}" for k, v in overrides.items()])
    return plan.config, overrides


# ---------------------------------------------------------------------------------------------------------
# verl on this machine: CPU platform (CPU runs only), torch.distributed at world size 1, critic loader
# ---------------------------------------------------------------------------------------------------------


def _zero(*args: Any, **kwargs: Any) -> int:
    return 0


class _CpuDeviceModule:
    """Stands in for torch.cuda on the CPU: memory statistics are 0, caches and streams are no-ops."""

    def current_device(self) -> str:
        return "cpu"

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def mem_get_info(self, *args: Any) -> tuple[int, int]:
        return 0, 0

    def get_device_name(self, *args: Any) -> str:
        return "CPU"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _zero


class _CpuPlatformMethods:
    """verl's PlatformBase interface for the CPU (mixed into a PlatformBase subclass by `use_cpu_platform`)."""

    device_name = "cpu"
    vendor_name = "cpu"
    device_module = _CpuDeviceModule()
    cudart = None

    def is_available(self) -> bool:
        return True

    def current_device(self) -> str:
        return "cpu"

    def device_count(self) -> int:
        return 1

    def get_device_capability(self, device_index: int = 0) -> tuple[None, None]:
        return None, None

    def communication_backend_name(self) -> str:
        return "gloo"

    def visible_devices_envvar(self) -> str:
        return "CUDA_VISIBLE_DEVICES"

    def ray_resource_name(self) -> str:
        return "CPU"

    def ray_noset_envvars(self) -> list[str]:
        return []

    def is_ipc_supported(self) -> bool:
        return False

    @contextlib.contextmanager
    def nvtx_range(self, msg: str):
        yield

    def _nothing(self, *args: Any, **kwargs: Any) -> None:
        return None

    set_device = synchronize = manual_seed = manual_seed_all = _nothing
    set_allocator_settings = empty_cache = profiler_start = profiler_stop = _nothing


def use_cpu_platform() -> None:
    """Make verl place its engines on the CPU: its platforms are cuda/npu/rocm only."""
    from verl.plugin.platform.platform_base import PlatformBase
    from verl.plugin.platform.platform_manager import set_platform

    set_platform(type("PlatformCPU", (_CpuPlatformMethods, PlatformBase), {})())
    os.environ["VERL_ENGINE_DEVICE"] = "cuda"  # the FSDP engines are registered for cuda/npu only


def init_distributed(device: str) -> None:
    """torch.distributed with one rank, as verl's workers expect (they read RANK, WORLD_SIZE, MASTER_*)."""
    import torch.distributed

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for key, value in {
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "RANK": "0",
        "WORLD_SIZE": "1",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "1",
    }.items():
        os.environ.setdefault(key, value)
    if device == "cuda":
        torch.cuda.set_device(0)
    if not torch.distributed.is_initialized():
        backend = "cpu:gloo,cuda:nccl" if device == "cuda" else "gloo"
        torch.distributed.init_process_group(backend=backend, rank=0, world_size=1)


def stub_datasets_if_missing() -> str | None:
    """verl's rl_dataset module imports Hugging Face `datasets` at the top, and verl's trainer and agent loop
    import that module; nothing here loads a dataset. If `datasets` cannot be imported (not carried, or built
    for another pyarrow), an empty stand-in module lets verl import."""
    try:
        import datasets  # noqa: F401

        return None
    except Exception as exc:
        stub = types.ModuleType("datasets")
        stub.Dataset = type("Dataset", (), {})  # rl_dataset's annotations name it at class definition

        def unavailable(*args: Any, **kwargs: Any) -> None:
            raise ImportError("datasets is not installed here (bench/rl_step_gpu.py stand-in)")

        stub.load_dataset = stub.concatenate_datasets = unavailable
        sys.modules["datasets"] = stub
        return f"datasets: empty stand-in module, the real one failed to import ({exc!r}); no dataset is loaded here"


def patch_valuehead_loader() -> str | None:
    """verl's `load_valuehead_model` hard-codes flash_attention_2; without flash-attn, load the critic with sdpa."""
    import importlib.util

    if importlib.util.find_spec("flash_attn") is not None:
        return None
    import verl.utils.model as verl_model

    def load_valuehead_model(local_path, torch_dtype, model_config, trust_remote_code):
        from transformers import AutoModelForTokenClassification

        return AutoModelForTokenClassification.from_pretrained(
            pretrained_model_name_or_path=local_path,
            torch_dtype=torch_dtype,
            config=model_config,
            attn_implementation="sdpa",
            trust_remote_code=trust_remote_code,
        )

    verl_model.load_valuehead_model = load_valuehead_model
    return "verl.utils.model.load_valuehead_model: sdpa instead of flash_attention_2 (flash-attn is not installed)"


# ---------------------------------------------------------------------------------------------------------
# 2. Episodes
# ---------------------------------------------------------------------------------------------------------


def agent_scripts(device: str) -> dict[str, list]:
    """The scripted agents' turns: 'solve' (the demo), 'wrong' (not ReLU), 'broken' (does not compile)."""
    from cuda_agent.agent import ReplayModel
    from cuda_agent.agent.demo import recording_path, scripted_turns

    solution = SOLUTIONS[device]
    kernels = {p.name: p.read_text() for p in sorted((solution / "kernels").iterdir())}
    model_new = (solution / "model_new.py").read_text()
    if recording_path(device).is_file():
        solve, solve_source = ReplayModel.from_file(recording_path(device)).turns, str(recording_path(device))
    else:
        solve, solve_source = scripted_turns(kernels, model_new, device), f"scripted_turns({solution})"
    name, old, new = WRONG[device]
    assert old in kernels[name], f"{name} changed; update WRONG"
    wrong = {**kernels, name: kernels[name].replace(old, new)}
    broken = {**kernels, name: kernels[name] + "\nthis line does not compile;\n"}
    scripts = {
        "solve": solve,
        "wrong": _without_checks(scripted_turns(wrong, model_new, device)),
        "broken": _without_checks(scripted_turns(broken, model_new, device)),
    }
    return scripts, solve_source


def _without_checks(turns: list) -> list:
    # The failing agents skip the verify and profile turns: the judge decides their reward anyway.
    return [
        t
        for t in turns
        if not any("utils.verification" in c.arguments or "utils.profiling" in c.arguments for c in t.tool_calls)
    ]


def hermes_text(turn: Any) -> str:
    """What a Qwen-style model generates for a turn: prose, <tool_call> blocks, end of turn."""
    blocks = [f'<tool_call>\n{{"name": "{c.name}", "arguments": {c.arguments}}}\n</tool_call>' for c in turn.tool_calls]
    return "\n".join([turn.content, *blocks]).strip() + "<|im_end|>"


class ScriptedTokenServer:
    """Stands in for verl's LLM server client (vLLM/SGLang): replies with a script's turns as token ids.

    Each new request id (one per episode) takes the next script, in the order given.
    """

    def __init__(self, tokenizer: Any, scripts: dict[str, list]) -> None:
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.unassigned = list(scripts)
        self.assigned: dict[str, str] = {}  # request id -> script name
        self.played: dict[str, int] = {}

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict, **kwargs: Any):
        if request_id not in self.assigned:
            self.assigned[request_id] = self.unassigned.pop(0)
            self.played[request_id] = 0
        script = self.scripts[self.assigned[request_id]]
        turn = script[min(self.played[request_id], len(script) - 1)]
        self.played[request_id] += 1
        ids = self.tokenizer.encode(hermes_text(turn), add_special_tokens=False)
        return SimpleNamespace(token_ids=ids, log_probs=None)


def run_episodes(config: Any, tokenizer: Any, scripts: dict[str, list], log: Tee):
    """Episodes through verl's AgentLoopWorker (in this process) and our agent loop; the padded DataProto."""
    import numpy as np
    from verl import DataProto
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker

    # Import our agent loop before the worker reads the agent-loop YAML: the module's @register("cuda_agent")
    # replaces the registry entry with a bare {_target_}, so importing it later (hydra does, at the first
    # episode) would drop the YAML's settings (work_dir, device, sandbox_url) for every later episode.
    import cuda_agent.rl.agent_loop  # noqa: F401

    server = ScriptedTokenServer(tokenizer, scripts)
    worker = AgentLoopWorker(config, llm_client=server)
    n = len(scripts)
    rows = DataProto(
        batch=None,
        non_tensor_batch={
            "agent_name": np.array(["cuda_agent"] * n, dtype=object),
            "extra_info": np.array([{"task": TASK} for _ in range(n)], dtype=object),
            "raw_prompt": _objects([[] for _ in range(n)]),
            "index": np.arange(n),
        },
        meta_info={"global_steps": 1, "validate": False},
    )
    started = time.monotonic()
    batch = asyncio.run(worker.generate_sequences(rows))
    log(f"episodes: {n} in {time.monotonic() - started:.0f} s (concurrently, verl's AgentLoopWorker)")
    names = []
    for path in batch.non_tensor_batch["trajectory"]:
        found = [name for rid, name in server.assigned.items() if rid[:12] in str(path)]
        names.append(found[0] if found else "?")
    batch.non_tensor_batch["agent"] = np.array(names, dtype=object)
    return batch


def run_episodes_plain(config: Any, tokenizer: Any, scripts: dict[str, list], device: str, work: Path, log: Tee):
    """Fallback without verl's agent loop: `run_rollout` with a replay model per script (threads), then each
    conversation tokenised message by message with the chat template; padded as verl's agent loop pads."""
    from concurrent.futures import ThreadPoolExecutor

    import torch
    from verl import DataProto
    from verl.utils.model import compute_position_id_with_mask

    from cuda_agent.agent import ReplayModel, read_trajectory
    from cuda_agent.agent.models.transformers_local import template_messages
    from cuda_agent.rl.config import CudaAgentLoopConfig
    from cuda_agent.rl.rollout import episode_fields, run_rollout, task_from_row, token_record

    loop_cfg = config.actor_rollout_ref.rollout
    prompt_length, response_length = int(loop_cfg.prompt_length), int(loop_cfg.response_length)
    settings = CudaAgentLoopConfig(device=device, work_dir=work, max_turns=50)
    task = task_from_row({"task": TASK})
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(scripts)) as pool:
        futures = {
            name: pool.submit(
                run_rollout, ReplayModel(turns, name=name), task, settings, work / name, prompt_length + response_length
            )
            for name, turns in scripts.items()
        }
        results = {name: f.result() for name, f in futures.items()}
    log(f"episodes: {len(scripts)} in {time.monotonic() - started:.0f} s (run_rollout in threads, no verl agent loop)")

    def render(messages: list, tools: list, generation: bool) -> str:
        return tokenizer.apply_chat_template(
            template_messages(messages), tools=tools, add_generation_prompt=generation, tokenize=False
        )

    rows, extra = [], {k: [] for k in ("agent", "verdict", "reward", "exit_status", "turns", "judge_s", "verdict_json")}
    for name, (result, latencies) in results.items():
        trajectory = read_trajectory(result.trajectory)
        messages, tools = trajectory.messages(), trajectory.tools or None
        prompt_ids = tokenizer.encode(render(messages[:2], tools, True), add_special_tokens=False)
        ids, mask, done = [], [], render(messages[:2], tools, True)
        for k in range(2, len(messages)):
            assistant = messages[k]["role"] == "assistant"
            text = render(messages[: k + 1], tools, generation=not assistant and k + 1 < len(messages))
            piece = text[len(done) :] if text.startswith(done) else text
            new = tokenizer.encode(piece, add_special_tokens=False)
            ids, mask, done = ids + new, mask + [int(assistant)] * len(new), text
        ids, mask, _ = token_record(ids, mask, None, response_length)
        fields = episode_fields(result, latencies, ids, False)
        rows.append((prompt_ids, ids, mask, fields["reward"]))
        for key in extra:
            extra[key].append(name if key == "agent" else fields[key])
    pad = tokenizer.pad_token_id
    t = {k: [] for k in ("prompts", "responses", "response_mask", "attention_mask", "rm_scores")}
    for prompt_ids, ids, mask, reward in rows:
        t["prompts"].append([pad] * (prompt_length - len(prompt_ids)) + prompt_ids)
        t["responses"].append(ids + [pad] * (response_length - len(ids)))
        t["response_mask"].append(mask + [0] * (response_length - len(mask)))
        t["attention_mask"].append(
            [0] * (prompt_length - len(prompt_ids))
            + [1] * (len(prompt_ids) + len(ids))
            + [0] * (response_length - len(ids))
        )
        scores = [0.0] * response_length
        scores[len(ids) - 1] = reward
        t["rm_scores"].append(scores)
    tensors = {k: torch.tensor(v, dtype=torch.float32 if k == "rm_scores" else torch.long) for k, v in t.items()}
    tensors["input_ids"] = torch.cat([tensors["prompts"], tensors["responses"]], dim=1)
    tensors["position_ids"] = compute_position_id_with_mask(tensors["attention_mask"])
    return DataProto.from_dict(tensors=tensors, non_tensors={k: _objects(v) for k, v in extra.items()}, meta_info={})


def _objects(items: list) -> Any:
    import numpy as np

    array = np.empty(len(items), dtype=object)
    array[:] = items
    return array


def handmade_batch(tokenizer: Any, prompt_length: int, response_length: int, seed: int):
    """Three episodes of random tokens: model tokens, tool tokens, padding; rewards 3, -1 and 1 (tests)."""
    import numpy as np
    import torch
    from verl import DataProto
    from verl.utils.model import compute_position_id_with_mask

    gen = torch.Generator().manual_seed(seed)
    shapes = [  # prompt tokens, then (tokens, mask value) runs of the response
        (40, [(12, 1), (20, 0), (8, 1)]),
        (33, [(5, 1), (9, 0), (6, 1), (4, 0), (10, 1)]),
        (47, [(18, 1)]),
    ]
    rewards = [3.0, -1.0, 1.0]
    pad = tokenizer.pad_token_id
    rows = {k: [] for k in ("prompts", "responses", "response_mask", "attention_mask")}
    vocab = len(tokenizer) - 8
    for prompt_len, runs in shapes:
        prompt = torch.randint(0, vocab, (prompt_len,), generator=gen)
        response_len = sum(k for k, _ in runs)
        response = torch.randint(0, vocab, (response_len,), generator=gen)
        mask = torch.cat([torch.full((k,), m) for k, m in runs])
        rows["prompts"].append(torch.cat([torch.full((prompt_length - prompt_len,), pad), prompt]))
        rows["responses"].append(torch.cat([response, torch.full((response_length - response_len,), pad)]))
        rows["response_mask"].append(torch.cat([mask, torch.zeros(response_length - response_len, dtype=mask.dtype)]))
        rows["attention_mask"].append(
            torch.cat(
                [
                    torch.zeros(prompt_length - prompt_len),
                    torch.ones(prompt_len + response_len),
                    torch.zeros(response_length - response_len),
                ]
            )
        )
    tensors = {k: torch.stack(v).long() for k, v in rows.items()}
    tensors["input_ids"] = torch.cat([tensors["prompts"], tensors["responses"]], dim=1)
    tensors["position_ids"] = compute_position_id_with_mask(tensors["attention_mask"])
    rm_scores = torch.zeros(len(shapes), response_length)
    for i, reward in enumerate(rewards):
        last = int(tensors["response_mask"][i].nonzero().max())
        rm_scores[i, last] = reward
    tensors["rm_scores"] = rm_scores
    non_tensors = {
        "agent": np.array(["handmade"] * len(shapes), dtype=object),
        "reward": np.array(rewards, dtype=object),
        "verdict": np.array(["handmade"] * len(shapes), dtype=object),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors, meta_info={})


def episode_rows(batch: Any) -> list[dict]:
    """Per episode: agent, verdict, reward, turns, and token counts (prompt, response, model, tool)."""
    ntb = batch.non_tensor_batch
    prompt_len = batch.batch["prompts"].shape[1]
    rows = []
    for i in range(len(batch)):
        attention = batch.batch["attention_mask"][i]
        mask = batch.batch["response_mask"][i]
        response_tokens = int(attention[prompt_len:].sum())
        model_tokens = int(mask.sum())
        rows.append(
            {
                "agent": str(ntb["agent"][i]),
                "verdict": str(_get(ntb, "verdict", i)),
                "reward": float(_get(ntb, "reward", i)),
                "reward_on_last_model_token": float(batch.batch["rm_scores"][i].sum()),
                "exit_status": _get(ntb, "exit_status", i),
                "turns": _get(ntb, "turns", i),
                "judge_s": _round(_get(ntb, "judge_s", i)),
                "message": (json.loads(_get(ntb, "verdict_json", i) or "{}") or {}).get("message"),
                "prompt_tokens": int(attention[:prompt_len].sum()),
                "response_tokens": response_tokens,
                "model_tokens": model_tokens,
                "tool_tokens": response_tokens - model_tokens,
            }
        )
    return rows


def _get(ntb: dict, key: str, i: int) -> Any:
    value = ntb[key][i] if key in ntb else None
    return value.item() if hasattr(value, "item") else value


def _round(value: Any) -> Any:
    return round(value, 2) if isinstance(value, float) else value


# ---------------------------------------------------------------------------------------------------------
# 3a. The step on verl's engine workers, through verl's own trainer methods
# ---------------------------------------------------------------------------------------------------------


class _Ready:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


class OneRankGroup:
    """verl's RayWorkerGroup for one rank in this process: calls the worker; non-blocking calls return a future."""

    def __init__(self, worker: Any) -> None:
        self.worker = worker

    def __getattr__(self, name: str) -> Any:
        from verl.single_controller.base.decorator import MAGIC_ATTR

        method = getattr(self.worker, name)
        if getattr(method, MAGIC_ATTR, {}).get("blocking", True):
            return method
        return lambda *args, **kwargs: _Ready(method(*args, **kwargs))


def parameter_snapshot(module: Any) -> dict:
    """Full (unsharded) fp32 copies of the parameters, on the CPU."""
    from torch.distributed.tensor import DTensor

    snapshot = {}
    for name, param in module.named_parameters():
        tensor = param.full_tensor() if isinstance(param, DTensor) else param
        snapshot[name] = tensor.detach().float().cpu().clone()
    return snapshot


def change_norm(before: dict, after: dict) -> float:
    return math.sqrt(sum(float((after[k] - before[k]).pow(2).sum()) for k in before))


def without_torch_compile(config: Any) -> Any:
    """The config with verl's torch.compile of the entropy function off (actor and critic engines)."""
    from omegaconf import OmegaConf, open_dict

    config = copy.deepcopy(config)
    with open_dict(config):
        OmegaConf.update(config, "actor_rollout_ref.actor.use_torch_compile", False)
        OmegaConf.update(config, "actor_rollout_ref.actor.fsdp_config.use_torch_compile", False)
        OmegaConf.update(config, "critic.fsdp.use_torch_compile", False)
    return config


def build_workers(config: Any) -> tuple[Any, Any, list[str]]:
    """The actor and critic workers, built as verl's trainer builds them, in this process."""
    from functools import partial

    from verl.utils.config import omega_conf_to_dataclass
    from verl.workers.config import CriticConfig
    from verl.workers.engine_workers import ActorRolloutRefWorker, TrainingWorker, TrainingWorkerConfig
    from verl.workers.utils.losses import value_loss

    started = time.monotonic()
    # The actor: ActorRolloutRefWorker(role=actor).init_model() -> TrainingWorker(language_model) with ppo_loss.
    actor = ActorRolloutRefWorker(config=config.actor_rollout_ref, role="actor")
    actor.init_model()
    # The critic, as RayPPOTrainer.init_workers builds it: TrainingWorker(value_model) with value_loss.
    critic_cfg: CriticConfig = omega_conf_to_dataclass(config.critic)
    engine_config = critic_cfg.engine
    engine_config.infer_max_token_len_per_gpu = critic_cfg.ppo_infer_max_token_len_per_gpu
    engine_config.max_token_len_per_gpu = critic_cfg.ppo_max_token_len_per_gpu
    critic = TrainingWorker(
        config=TrainingWorkerConfig(
            model_type="value_model",
            model_config=critic_cfg.model,
            engine_config=engine_config,
            optimizer_config=critic_cfg.optim,
            checkpoint_config=critic_cfg.checkpoint,
        )
    )
    critic.reset()
    critic.set_loss_fn(partial(value_loss, config=critic_cfg))
    actor_cfg = config.actor_rollout_ref.actor
    ran = [
        f"workers: ActorRolloutRefWorker(role=actor).init_model and TrainingWorker(value_model), engines "
        f"{type(actor.actor.engine).__name__} / {type(critic.engine).__name__} (strategy {actor_cfg.strategy}, "
        f"bf16 autocast, AdamW, grad clip {actor_cfg.optim.clip_grad}), built in {time.monotonic() - started:.0f} s",
        f"losses: verl.workers.utils.losses.ppo_loss ({actor_cfg.policy_loss.loss_mode}, clip "
        f"{actor_cfg.clip_ratio_low}/{actor_cfg.clip_ratio_high}, {actor_cfg.loss_agg_mode}) and value_loss "
        f"(cliprange_value {config.critic.cliprange_value})",
    ]
    return actor, critic, ran


def ppo_inputs(trainer: Any, config: Any, batch: Any, metrics: dict) -> Any:
    """RayPPOTrainer.fit between generation and the updates: reward, old log-probs, values, GAE (no KL, no ref)."""
    import torch
    from verl.trainer.ppo.core_algos import agg_loss
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer, compute_advantage
    from verl.trainer.ppo.reward import extract_reward

    batch.meta_info["temperature"] = config.actor_rollout_ref.rollout.temperature
    batch.non_tensor_batch["uid"] = _objects([uuid.uuid4().hex for _ in range(len(batch))])
    batch.meta_info["global_token_num"] = torch.sum(batch.batch["attention_mask"], dim=-1).tolist()
    batch.meta_info["images_seqlens"] = []
    reward_tensor, _ = extract_reward(batch)
    old_log_prob, _ = RayPPOTrainer._compute_old_log_prob(trainer, batch)
    actor_config = config.actor_rollout_ref.actor
    metrics["actor/entropy"] = agg_loss(
        loss_mat=old_log_prob.batch["entropys"],
        loss_mask=batch.batch["response_mask"],
        loss_agg_mode=actor_config.loss_agg_mode,
        loss_scale_factor=actor_config.loss_scale_factor,
    ).item()
    old_log_prob.batch.pop("entropys")
    batch = batch.union(old_log_prob)
    batch = batch.union(RayPPOTrainer._compute_values(trainer, batch))
    batch.batch["token_level_scores"] = reward_tensor
    batch.batch["token_level_rewards"] = batch.batch["token_level_scores"]
    return compute_advantage(
        batch,
        adv_estimator=config.algorithm.adv_estimator,
        gamma=config.algorithm.gamma,
        lam=config.algorithm.lam,
        num_repeat=config.actor_rollout_ref.rollout.n,
        config=config.algorithm,
    )


def batch_losses(actor: Any, critic: Any, batch: Any) -> dict[str, float]:
    """ppo_loss and value_loss of the whole batch under the current weights (the workers' infer_batch)."""
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    out = {}
    for name, worker, extra in (("actor", actor.actor, {"calculate_entropy": False}), ("critic", critic, {})):
        td = left_right_2_no_padding(batch.to_tensordict())
        tu.assign_non_tensor(td, compute_loss=True, global_batch_size=len(batch), **extra)
        out[name] = float(tu.get(worker.infer_batch(td), "metrics")["loss"])
    return out


def step_engine(config: Any, batch: Any, log: Tee) -> dict:
    """verl's RayPPOTrainer step (old log-probs, values, GAE, critic and actor updates) on in-process workers."""
    from verl.trainer.ppo.metric_utils import compute_data_metrics
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    actor, critic, ran = build_workers(config)
    trainer = SimpleNamespace(
        config=config, actor_rollout_wg=OneRankGroup(actor), critic_wg=OneRankGroup(critic), distillation_config=None
    )
    modules = {"actor": actor.actor.engine.module, "critic": critic.engine.module}
    before = {name: parameter_snapshot(module) for name, module in modules.items()}
    metrics: dict[str, Any] = {}
    batch = ppo_inputs(trainer, config, batch, metrics)
    ran.append(
        "trainer: RayPPOTrainer._compute_old_log_prob, _compute_values, compute_advantage "
        f"({config.algorithm.adv_estimator}, gamma {config.algorithm.gamma}, lam {config.algorithm.lam}), "
        "_update_critic, _update_actor (verl's methods, on a one-rank stand-in for the Ray worker groups)"
    )
    loss_before = batch_losses(actor, critic, batch)
    critic_output = RayPPOTrainer._update_critic(trainer, batch)
    actor_output = RayPPOTrainer._update_actor(trainer, batch)
    loss_after = batch_losses(actor, critic, batch)
    for output in (critic_output.meta_info["metrics"], actor_output.meta_info["metrics"]):
        metrics.update({k: _scalar(v) for k, v in output.items()})
    metrics.update({k: _scalar(v) for k, v in compute_data_metrics(batch=batch, use_critic=True).items()})
    descriptions = {"actor": "ppo_loss (vanilla PPO clip, token-mean)", "critic": "value_loss (clipped, token-mean)"}
    models = {
        name: {
            "loss": descriptions[name],
            "loss_before": loss_before[name],
            "loss_after": loss_after[name],
            "train_step_loss": metrics.get(f"{name}/loss"),
            "grad_norm": metrics.get(f"{name}/grad_norm"),
            "lr": metrics.get(f"{name}/lr"),
            "param_change_norm": change_norm(before[name], parameter_snapshot(module)),
            "params": sum(t.numel() for t in before[name].values()),
        }
        for name, module in modules.items()
    }
    return {"models": models, "metrics": metrics, "ran": ran, "batch": batch}


def _scalar(value: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(value, list) and value:
        value = float(np.mean([_scalar(v) for v in value]))
    if isinstance(value, torch.Tensor | np.ndarray | np.generic):
        value = float(value.mean()) if getattr(value, "size", 1) else None
    return value


# ---------------------------------------------------------------------------------------------------------
# 3b. Fallback: verl's loss functions on the plain HF models, torch AdamW
# ---------------------------------------------------------------------------------------------------------


def step_fallback(config: Any, batch: Any, device: str, log: Tee) -> dict:
    """The same step without verl's engine: HF models, verl's core_algos losses and GAE, torch AdamW."""
    import torch
    import transformers
    from verl.trainer.ppo import core_algos
    from verl.utils.config import omega_conf_to_dataclass

    actor_cfg = omega_conf_to_dataclass(config.actor_rollout_ref.actor)
    critic_cfg = config.critic
    dev = torch.device(device)
    actor = transformers.AutoModelForCausalLM.from_pretrained(
        config.actor_rollout_ref.model.path, attn_implementation="sdpa", dtype=torch.float32
    ).to(dev)
    critic = transformers.AutoModelForTokenClassification.from_pretrained(
        config.critic.model.path, attn_implementation="sdpa", dtype=torch.float32, num_labels=1
    ).to(dev)
    b = batch.batch
    responses, response_mask = b["responses"].to(dev), b["response_mask"].to(dev).float()
    response_length = responses.shape[1]

    def forward(model: Any, kind: str) -> torch.Tensor:
        rows = []
        for i in range(len(batch)):  # one sequence at a time, unpadded (as verl's engine packs them)
            keep = b["attention_mask"][i].bool()
            ids = b["input_ids"][i][keep].unsqueeze(0).to(dev)
            out = model(input_ids=ids, use_cache=False).logits[0]
            prompt_len = int(b["attention_mask"][i][: b["prompts"].shape[1]].sum())
            n = ids.shape[1] - prompt_len
            if kind == "logprob":
                logits = out[prompt_len - 1 : -1].float()
                row = torch.log_softmax(logits, -1).gather(-1, ids[0, prompt_len:].unsqueeze(-1)).squeeze(-1)
            else:
                row = out[prompt_len - 1 : -1, 0].float()
            rows.append(torch.nn.functional.pad(row, (0, response_length - n)))
        return torch.stack(rows)

    def policy_loss(old: torch.Tensor, advantages: torch.Tensor) -> torch.Tensor:
        loss, _ = core_algos.get_policy_loss_fn(actor_cfg.policy_loss.get("loss_mode", "vanilla"))(
            old_log_prob=old,
            log_prob=forward(actor, "logprob"),
            advantages=advantages,
            response_mask=response_mask.bool(),
            loss_agg_mode=actor_cfg.loss_agg_mode,
            config=actor_cfg,
        )
        return loss

    def value_loss(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        loss, _ = core_algos.compute_value_loss(
            vpreds=forward(critic, "value"),
            values=values,
            returns=returns,
            response_mask=response_mask.bool(),
            cliprange_value=critic_cfg.cliprange_value,
            loss_agg_mode=critic_cfg.loss_agg_mode,
        )
        return loss

    before = {"actor": parameter_snapshot(actor), "critic": parameter_snapshot(critic)}
    with torch.no_grad():
        old = forward(actor, "logprob")
        values = forward(critic, "value") * response_mask
    rewards = b["rm_scores"].to(dev).float()
    advantages, returns = core_algos.compute_gae_advantage_return(
        token_level_rewards=rewards,
        values=values,
        response_mask=response_mask,
        gamma=config.algorithm.gamma,
        lam=config.algorithm.lam,
    )
    models = {}
    for name, model, optim_cfg, loss_fn, inputs in (
        ("critic", critic, config.critic.optim, value_loss, (values, returns)),
        ("actor", actor, config.actor_rollout_ref.actor.optim, policy_loss, (old, advantages)),
    ):
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=optim_cfg.lr, betas=tuple(optim_cfg.betas), weight_decay=optim_cfg.weight_decay
        )
        loss = loss_fn(*inputs)
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), optim_cfg.clip_grad)
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            loss_after = loss_fn(*inputs)
        models[name] = {
            "loss": "core_algos policy loss (vanilla PPO clip)" if name == "actor" else "core_algos.compute_value_loss",
            "loss_before": float(loss.detach()),
            "loss_after": float(loss_after),
            "train_step_loss": float(loss.detach()),
            "grad_norm": float(grad_norm),
            "lr": optim_cfg.lr,
            "param_change_norm": change_norm(before[name], parameter_snapshot(model)),
            "params": sum(t.numel() for t in before[name].values()),
        }
    batch.batch["advantages"], batch.batch["returns"], batch.batch["values"] = (
        advantages.cpu(),
        returns.cpu(),
        values.cpu(),
    )
    batch.batch["old_log_probs"] = old.cpu()
    ran = [
        "fallback: HF Qwen2ForCausalLM / Qwen2ForTokenClassification, verl.trainer.ppo.core_algos "
        "(compute_gae_advantage_return, get_policy_loss_fn('vanilla'), compute_value_loss), torch AdamW"
    ]
    return {"models": models, "metrics": {}, "ran": ran, "batch": batch}


# ---------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], required=True)
    parser.add_argument("--out", type=Path, required=True, help="folder for rl_step.json and rl_step.log")
    parser.add_argument("--work", type=Path, default=None, help="tiny models, episodes (default: a new temp folder)")
    parser.add_argument("--batch", choices=["episodes", "handmade"], default="episodes")
    parser.add_argument("--path", choices=["auto", "engine", "fallback"], default="auto")
    parser.add_argument("--actor-lr", type=float, default=1e-4, help="the paper's 3e-6 barely moves a random model")
    parser.add_argument("--critic-lr", type=float, default=2e-4, help="the paper's 6e-6, scaled as the actor's")
    parser.add_argument("--episodes", choices=["verl", "plain"], default="verl", help="plain: skip verl's agent loop")
    parser.add_argument("--no-cross-check", dest="cross_check", action="store_false", help="skip the HF re-run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--prompt-length", type=int, default=8192)
    parser.add_argument("--response-length", type=int, default=24576)
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace, work: Path, report: dict, log: Tee) -> tuple[Any, Any, dict, str | None]:
    """Tokenizer, tiny models, scripted agents and verl's config."""
    tiny = work / "tiny"
    texts = (
        training_texts(args.device) if args.batch == "episodes" else [CHATML_TOOLS_TEMPLATE, "def relu(x): pass\n" * 50]
    )
    tokenizer = build_tokenizer(texts, tiny / "tokenizer", args.vocab_size)
    actor_dir, critic_dir = build_models(tokenizer, tiny, args.seed, args.prompt_length + args.response_length)
    report["models"] = {
        "tokenizer": f"byte-level BPE trained here, {len(tokenizer)} tokens",
        "architecture": f"Qwen2, 2 layers, hidden 64, 4 heads (2 kv), random init, seed {args.seed}",
        "actor": str(actor_dir),
        "critic": str(critic_dir),
    }
    log(f"tokenizer: {len(tokenizer)} tokens; actor {actor_dir}, critic {critic_dir}")
    scripts, source = agent_scripts(args.device) if args.batch == "episodes" else ({}, None)
    config, overrides = compose_config(args, actor_dir, critic_dir, len(scripts) or 3, work)
    report["config"] = {"recipe": "recipes/agentic_ppo.yaml", "overrides": overrides}
    report["patches"] = [p for p in [stub_datasets_if_missing(), patch_valuehead_loader()] if p]
    return tokenizer, config, scripts, source


def collect(args: argparse.Namespace, work: Path, setup: tuple, report: dict, errors: list, log: Tee) -> Any:
    """The batch: judged episodes (verl's agent loop, else our own), or the hand-made one."""
    tokenizer, config, scripts, source = setup
    if args.batch == "handmade":
        batch = handmade_batch(tokenizer, args.prompt_length, args.response_length, args.seed)
    else:
        report["generation"] = (
            "scripted token server in place of vLLM (the tiny random model cannot write kernels): "
            f"'solve' replays {source}; 'wrong' and 'broken' are scripted failing agents"
        )
        batch = None
        if args.episodes == "verl":
            try:
                batch = run_episodes(config, tokenizer, scripts, log)
                report["episodes_via"] = "verl AgentLoopWorker + cuda_agent CudaAgentLoop"
            except Exception as exc:  # verl's agent loop failed: our own loop and tokenisation, same sandbox
                errors.append(f"verl's agent loop failed: {exc!r}\n{traceback.format_exc()}")
                log(errors[-1])
        if batch is None:
            batch = run_episodes_plain(config, tokenizer, scripts, args.device, work / "plain", log)
            report["episodes_via"] = "cuda_agent run_rollout + chat-template tokenisation (fallback)"
    report["episodes"] = episode_rows(batch)
    for row in report["episodes"]:
        log(
            f"  {row['agent']:7s} verdict {row['verdict']:14s} reward {row['reward']:+.0f} turns {row['turns']} "
            f"tokens prompt {row['prompt_tokens']} response {row['response_tokens']} "
            f"(model {row['model_tokens']}, tool {row['tool_tokens']})  {str(row['message'] or '')[:80]}"
        )
    return batch


def train(args: argparse.Namespace, config: Any, batch: Any, report: dict, errors: list, log: Tee) -> dict | None:
    """verl's engine (again without torch.compile if that failed), else the fallback; the optional cross-check."""
    init_distributed(args.device)
    result = None
    if args.path in ("auto", "engine"):
        for attempt in ("as configured", "without torch.compile"):
            if attempt != "as configured":
                config = without_torch_compile(config)
            try:
                result = step_engine(config, copy.deepcopy(batch), log)
                report["path"] = "engine" + ("" if attempt == "as configured" else f" ({attempt})")
                break
            except Exception as exc:  # the fallback below says what failed
                errors.append(f"engine path ({attempt}) failed: {exc!r}\n{traceback.format_exc()}")
                log(errors[-1])
        if result is None and args.path == "engine":
            return None
    if result is None:
        result = step_fallback(config, copy.deepcopy(batch), args.device, log)
        report["path"] = "fallback"
    elif args.cross_check:
        try:  # the same step on the plain HF models with verl's core_algos: do the engine's numbers agree?
            check = step_fallback(config, copy.deepcopy(batch), args.device, log)["models"]
            keys = ("loss_before", "loss_after", "grad_norm", "param_change_norm")
            report["cross_check"] = {name: {k: check[name][k] for k in keys} for name in check}
            for name, row in report["cross_check"].items():
                log(
                    f"cross-check {name:6s} (HF + core_algos, fp32): loss {row['loss_before']:+.6f} -> "
                    f"{row['loss_after']:+.6f}  grad norm {row['grad_norm']:.4g}"
                )
        except Exception as exc:
            errors.append(f"cross-check failed: {exc!r}\n{traceback.format_exc()}")
            log(errors[-1])
    return result


def summarize(args: argparse.Namespace, result: dict, report: dict, log: Tee) -> bool:
    """What of verl ran, the step's numbers per model, and whether all are finite and both models changed."""
    ran = ["config: verl's ppo_trainer config composed by hydra with recipes/agentic_ppo.yaml and the overrides"]
    if str(report.get("episodes_via", "")).startswith("verl"):
        ran.append(
            "rollout side: AgentLoopWorker.generate_sequences in this process (agent-loop YAML -> hydra-instantiated "
            "CudaAgentLoop, verl's Continuous Token builder for qwen2, _agent_loop_postprocess padding, _postprocess "
            "into a DataProto with rm_scores on the last response token)"
        )
    report["verl_ran"] = ran + result["ran"]
    report["verl_not_run"] = NOT_RUN + ([CPU_NOTE] if args.device == "cpu" else [])
    report["step"] = result["models"]
    report["metrics"] = {k: v for k, v in result["metrics"].items() if isinstance(v, int | float | None)}
    b = result["batch"].batch
    mask = b["response_mask"].bool()
    report["advantages"] = {
        "mean": float(b["advantages"][mask].mean()),
        "std": float(b["advantages"][mask].std()),
        "returns_mean": float(b["returns"][mask].mean()),
        "values_mean": float(b["values"][mask].mean()),
    }
    ok = True
    for name, row in report["step"].items():
        numbers = [row[k] for k in ("loss_before", "loss_after", "grad_norm", "param_change_norm")]
        row["all_finite"] = all(v is not None and math.isfinite(v) for v in numbers)
        row["changed"] = row["all_finite"] and row["param_change_norm"] > 0
        ok = ok and row["all_finite"] and row["changed"]
        log(
            f"{name:6s} loss {row['loss_before']:+.6f} -> {row['loss_after']:+.6f}  grad norm {row['grad_norm']:.4g}  "
            f"param change {row['param_change_norm']:.4g} ({row['params']} params)  finite {row['all_finite']}"
        )
    for line in report["verl_ran"]:
        log("  verl: " + line)
    return ok


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the CPU variant everywhere: sandbox, judge and verl
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    log = Tee(out / "rl_step.log")
    started = time.monotonic()
    report: dict[str, Any] = {"device": args.device, "batch": args.batch, "seed": args.seed, "ok": False}
    errors: list[str] = []
    report["errors"] = errors
    try:
        import torch
        import transformers
        import verl

        report["versions"] = {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "verl": verl.__version__,
        }
        if args.device == "cuda":
            report["gpu"] = torch.cuda.get_device_name(0)  # fails here, early, without a GPU
            for key, value in {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1"}.items():
                os.environ.setdefault(key, value)  # the lent machines' rule: no NVLink multicast
            os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "{}.{}".format(*torch.cuda.get_device_capability(0)))
        else:
            use_cpu_platform()
        log(f"rl_step: device {args.device}, batch {args.batch}, versions {report['versions']}")
        torch.manual_seed(args.seed)
        work = (args.work or Path(tempfile.mkdtemp(prefix="rl_step-"))).resolve()
        report["work"] = str(work)
        setup = prepare(args, work, report, log)
        batch = collect(args, work, setup, report, errors, log)
        result = train(args, setup[1], batch, report, errors, log)
        report["ok"] = result is not None and summarize(args, result, report, log)
    except Exception as exc:
        errors.append(f"crashed: {exc!r}\n{traceback.format_exc()}")
        log(errors[-1])
    finally:
        report["wall_s"] = round(time.monotonic() - started, 1)
        log(f"path {report.get('path')}; ok {report['ok']}; {report['wall_s']} s; {len(errors)} error(s)")
        (out / "rl_step.json").write_text(json.dumps(report, indent=2, default=str))
        import torch.distributed

        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
