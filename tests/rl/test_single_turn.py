"""The single-turn stage: its prompt, reading one answer, and the reward function verl calls, judged by the
real sandbox (LocalPool) on the CPU variant of examples/relu."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from omegaconf import OmegaConf  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager  # noqa: E402
from verl.trainer.ppo.reward import get_custom_reward_fn  # noqa: E402

from cuda_agent.rl.recipes import bundled_recipe, load_recipe, plan_training  # noqa: E402
from cuda_agent.rl.single_turn import compute_score, parse_answer, single_turn_messages  # noqa: E402
from cuda_agent.tasks import Catalog  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
LEGIT = ROOT / "solutions" / "workspaces" / "examples_relu_cpu"
KEYS = {
    "score",
    "verdict",
    "passed",
    "faster_than_eager",
    "faster_than_compile",
    "speedup_vs_compile",
    "our_failure",
    "cached",
    "judge_s",
}


def answer_text(model_new: str | None = None) -> str:
    """How a model following the prompt answers: reasoning, then each file under its path."""
    parts = [
        "<think>draft: model_new.py\n```python\nclass ModelNew: pass\n```\n</think>",
        "Fuse the relu into one loop.",
    ]
    for path in sorted((LEGIT / "kernels").iterdir()):
        parts += [f"kernels/{path.name}", "```cpp", path.read_text().rstrip(), "```"]
    parts += ["model_new.py", "```python", (model_new or (LEGIT / "model_new.py").read_text()).rstrip(), "```"]
    return "\n".join(parts) + "\n"


@pytest.fixture
def relu_info() -> dict[str, Any]:
    task = Catalog().resolve("examples/relu")
    return {"index": 0, "task": task.ref, "code": task.code}


@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_AGENT_SANDBOX_URL", raising=False)


@pytest.mark.parametrize(
    ("text", "files"),
    [
        ("model_new.py\n```python\nA\n```\n", {"model_new.py": "A\n"}),
        (
            "```cpp kernels/a.cpp\nK\n```\n```python\nclass ModelNew:\n```\n",
            {"kernels/a.cpp": "K\n", "model_new.py": "class ModelNew:\n"},
        ),
        (
            "### File: `kernels/a_binding.cpp`\n\n```cpp\nB\n```\n**model_new.py**\n```\nM\n```\n",
            {"kernels/a_binding.cpp": "B\n", "model_new.py": "M\n"},
        ),
        (
            "```cuda\n// kernels/k.cu\nK\n```\n```python\n# model_new.py\nM\n```\n",
            {"kernels/k.cu": "// kernels/k.cu\nK\n", "model_new.py": "# model_new.py\nM\n"},
        ),
        ("model_new.py\n```python\nold\n```\nmodel_new.py\n```python\nnew\n```\n", {"model_new.py": "new\n"}),
        ("binding.cpp\n```cpp\nX\n```\n```bash\nmake\n```\nmodel_new.py\n```python\nM\n```\n", {"model_new.py": "M\n"}),
    ],
)
def test_parse_answer_reads_each_file_under_its_path(text: str, files: dict[str, str]) -> None:
    answer = parse_answer(text)
    assert answer.problem is None and answer.files == files


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("I would write a kernel that fuses the loops.", "no code block"),
        ("kernels/a.cpp\n```cpp\nK\n```\n", "no model_new.py"),
        ("model_new.py\n```python\nclass ModelNew:\n    def forward(self, x):\n", "ends inside a code block"),
        ("<think>model_new.py\n```python\nM\n```\n</think>Done.", "no code block"),
    ],
)
def test_malformed_answer_scores_minus_one_with_a_reason(relu_info: dict, text: str, problem: str) -> None:
    result = compute_score("examples", text, "examples/relu", relu_info)
    assert set(result) == KEYS | {"reason"}
    assert (result["score"], result["verdict"], result["passed"]) == (-1.0, "malformed", 0.0)
    assert problem in result["reason"]


def test_prompt_holds_the_rules_the_answer_form_and_the_task() -> None:
    task = Catalog().resolve("examples/relu")
    system, user = single_turn_messages(task, "cuda")
    assert (system["role"], user["role"]) == ("system", "user")
    assert "REGISTER_BINDING" in system["content"] and "getCurrentCUDAStream" in system["content"]
    assert "kernels/my_op.cu" in system["content"] and "more than 5% faster" in system["content"]
    assert task.code.strip() in user["content"] and task.ref in user["content"]
    cpu = single_turn_messages(task, "cpu")[0]["content"]
    assert "OpenMP" in cpu and "cudaStream_t" not in cpu


def test_rejected_answer_is_judged_by_the_sandbox(relu_info: dict, tmp_path: Path, on_path: None) -> None:
    cheat = (LEGIT / "model_new.py").read_text().replace("cuda_extension.relu(x.contiguous())", "torch.relu(x)")
    result = compute_score("examples", answer_text(cheat), "examples/relu", relu_info, work_dir=tmp_path, device="cpu")
    assert set(result) == KEYS | {"reason"}
    assert (result["verdict"], result["score"], result["passed"]) == ("rejected", -1.0, 0.0), result["reason"]
    assert "torch.relu" in result["reason"] and result["judge_s"] > 0
    (folder,) = tmp_path.iterdir()
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.*")) == [
        "kernels/relu.cpp",
        "kernels/relu_binding.cpp",
        "model_new.py",
    ]


@pytest.mark.integration
def test_correct_answer_through_verls_reward_manager(
    tiny_tokenizer: Any, relu_info: dict, tmp_path: Path, on_path: None
) -> None:
    """What verl's reward worker does: load compute_score as the single-turn recipe configures it, decode
    the response ids and call it; the judge's reward and our fields come back as reward_extra_info."""
    recipe = load_recipe(bundled_recipe("single-turn"))
    settings = recipe.reward_function.model_copy(update={"work_dir": tmp_path, "device": "cpu"})
    plan = plan_training(recipe.model_copy(update={"reward_function": settings}), tmp_path / "plan")
    manager = NaiveRewardManager(plan.config, tiny_tokenizer, get_custom_reward_fn(plan.config))
    prompt = torch.tensor([tiny_tokenizer.encode("relu please")])
    response = torch.tensor([tiny_tokenizer.encode(answer_text())])
    data = DataProto.from_dict(
        tensors={
            "prompts": prompt,
            "responses": response,
            "attention_mask": torch.ones(1, prompt.shape[1] + response.shape[1], dtype=torch.long),
        },
        non_tensors={
            "data_source": np.array(["examples"], dtype=object),
            "reward_model": np.array([{"style": "rule", "ground_truth": "examples/relu"}], dtype=object),
            "extra_info": np.array([relu_info], dtype=object),
        },
    )
    result = manager.loop.run_until_complete(manager.run_single(data))
    info = result["reward_extra_info"]
    assert result["reward_score"] == info["score"] >= 1, info["reason"]
    assert (info["verdict"], info["passed"], info["reason"]) == ("pass", 1.0, "")
    assert info["speedup_vs_compile"] > 0 and set(info) == KEYS | {"reason"}
    assert OmegaConf.select(plan.config, "reward.custom_reward_function.reward_kwargs.device") == "cpu"


def test_our_failure_while_judging_is_dropped_and_counted_not_scored(relu_info: dict, tmp_path: Path) -> None:
    # Nothing listens on port 9: the sandbox service is unreachable (ours, not the candidate's).
    settings = {"device": "cpu", "work_dir": str(tmp_path), "sandbox_url": "http://127.0.0.1:9"}
    result = compute_score("examples", answer_text(), "examples/relu", relu_info, **settings)
    assert result["our_failure"] == 1.0 and result["verdict"] == "dropped" and result["score"] == 0.0
    assert "cannot reach the sandbox" in result["reason"]
    judged = compute_score("examples", "no code here", "examples/relu", relu_info, **settings)
    assert set(judged) == set(result) and judged["our_failure"] == 0.0  # the same keys for every sample


TRITON_RELU = ROOT / "cuda_agent" / "tasks" / "examples" / "solutions" / "triton" / "relu.py"


def triton_answer(source: str | None = None) -> str:
    """How a model following the Triton prompt answers: reasoning, then model_new.py under its path."""
    return f"One kernel.\n\nmodel_new.py\n```python\n{(source or TRITON_RELU.read_text()).rstrip()}\n```\n"


def test_triton_prompt_asks_for_one_file_of_triton_kernels() -> None:
    task = Catalog().resolve("examples/relu")
    system, user = single_turn_messages(task, "cuda", "triton")
    assert "@triton.jit" in system["content"] and "kernel[grid](...)" in system["content"]
    assert "Only `model_new.py` is used" in system["content"] and "REGISTER_BINDING" not in system["content"]
    assert "untimed call" in system["content"] and task.code.strip() in user["content"]
    assert "interpreter" in single_turn_messages(task, "cpu", "triton")[0]["content"]


def test_answer_in_the_other_language_scores_minus_one_unjudged(relu_info: dict, tmp_path: Path) -> None:
    triton_row = {**relu_info, "language": "triton"}
    result = compute_score("examples", answer_text(), "examples/relu", triton_row, work_dir=tmp_path, device="cpu")
    assert (result["score"], result["verdict"], result["judge_s"]) == (-1.0, "malformed", 0.0)
    assert "asks for Triton kernels" in result["reason"] and "cuda" in result["reason"]
    result = compute_score("examples", triton_answer(), "examples/relu", relu_info, work_dir=tmp_path, device="cpu")
    assert result["verdict"] == "malformed" and "the answer's kernels are triton" in result["reason"]
    assert not list(tmp_path.iterdir())  # nothing was written, nothing judged


@pytest.mark.slow
def test_triton_answer_is_judged_as_triton_on_the_cpu_interpreter(
    relu_info: dict, tmp_path: Path, on_path: None
) -> None:
    pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
    row = {**relu_info, "language": "triton"}
    # The CUDA kernels a model may add beside its Triton file are not the answer: model_new.py alone is judged.
    extra = "kernels/relu.cu\n```cuda\nthis is not compiled\n```\n"
    result = compute_score("examples", extra + triton_answer(), "examples/relu", row, work_dir=tmp_path, device="cpu")
    assert (result["verdict"], result["passed"]) == ("pass", 1.0) and result["score"] >= 1, result["reason"]
    # A kernel Triton's compiler refuses scores as a C++/CUDA compile error does.
    broken = TRITON_RELU.read_text().replace("tl.arange(0, BLOCK)", "tl.arange(0, 1000)")
    result = compute_score("examples", triton_answer(broken), "examples/relu", row, work_dir=tmp_path, device="cpu")
    assert (result["verdict"], result["score"], result["passed"]) == ("compile_error", -1.0, 0.0), result["reason"]
    for folder in tmp_path.iterdir():
        assert [p.name for p in folder.rglob("*.*")] == ["model_new.py"]
