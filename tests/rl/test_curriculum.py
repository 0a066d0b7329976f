"""The learning demo's curriculum: three answers per task that read back as themselves, data in equal shares,
and the judge's rewards in the designed order (CPU variants, judged by the real sandbox)."""

from __future__ import annotations

import itertools
import os
import sys
from pathlib import Path

import pytest

from cuda_agent.rl.curriculum import VARIANTS, curriculum_task, prompt_messages, variants, write_curriculum
from cuda_agent.rl.single_turn import parse_answer, single_turn_messages
from cuda_agent.tasks import Catalog


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_answers_read_back_and_differ_from_their_first_line(device: str) -> None:
    found = variants(device)
    assert {v.name for v in found} == set(VARIANTS)
    for variant in found:
        answer = parse_answer(variant.answer(device))
        assert answer.problem is None and answer.files == variant.files
    first_lines = {v.answer(device).splitlines()[2] for v in found}  # the kernel's first line, after path and fence
    assert len(first_lines) == len(found)  # the policy chooses the variant within its first tokens


def test_the_cuda_answers_share_nothing_right_after_the_choice() -> None:
    """A tiny model chooses the variant at the first word of the kernel and must then copy that variant alone: where
    two answers went on with the same words ("// Fast variant: ...", "// Slow variant: ..."), the CPU-trained SFT
    model chose again three tokens later and wrote a mix of two answers in 24 of 32 samples."""
    found = variants("cuda")
    starts = [v.answer("cuda").splitlines()[2].split()[1:] for v in found]  # the first line's words after '//'
    assert len({words[0] for words in starts}) == len(found)
    bigrams = [set(itertools.pairwise(words)) for words in starts]
    for i, mine in enumerate(bigrams):
        for theirs in bigrams[i + 1 :]:
            assert not mine & theirs, (mine & theirs, starts)


def test_curriculum_data_holds_every_variant_in_equal_shares(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    manifest = write_curriculum(tmp_path, "cpu", copies=4)
    rows = pq.read_table(manifest["sft"]).to_pylist()
    assert sorted(r["variant"] for r in rows) == sorted(list(VARIANTS) * 4)
    assert all([m["role"] for m in r["messages"]] == ["system", "user", "assistant"] for r in rows)
    rl = pq.read_table(manifest["rl"]).to_pylist()
    assert [r["extra_info"]["task"] for r in rl] == ["examples/scale_add"]
    assert rl[0]["prompt"] == rows[0]["messages"][:2]  # PPO asks exactly what SFT answered


def test_the_cuda_curriculum_is_judged_where_memory_traffic_outweighs_launches(tmp_path: Path) -> None:
    """At examples/scale_add's 128x1024 the H200 judged fast 0.060 ms, eager 0.039 ms: both launch-bound, fast and
    slow both reward 1 (2026-12-05). The CUDA task must move enough bytes that the kernels' traffic decides."""
    torch = pytest.importorskip("torch")
    pq = pytest.importorskip("pyarrow.parquet")
    task = curriculum_task("scale_add", "cuda")
    namespace: dict = {}
    exec(compile(task.code, task.ref, "exec"), namespace)
    with torch.device("meta"):  # the shapes only: 1 GiB of inputs is not drawn here
        inputs = namespace["get_inputs"]()
    numel = inputs[0].numel()
    assert [tuple(t.shape) for t in inputs] == [tuple(inputs[0].shape)] * 2
    # eager moves 20 bytes an element (mul: read x, write a temporary; add: read it and y, write out); at the
    # H200's 4.8 TB/s that must take at least 20 launches of ~20 us, so fast's 12 bytes win by far more than 5 %.
    assert 20 * numel / 4.8e12 > 20 * 20e-6
    # The same problem as the example, only larger: the curriculum still teaches examples/scale_add's operation.
    example = Catalog().resolve("examples/scale_add").code
    assert task.code.split("# examples/scale_add")[0] == example.split("batch_size")[0]
    manifest = write_curriculum(tmp_path, "cuda", copies=1)
    rl = pq.read_table(manifest["rl"]).to_pylist()
    assert [r["extra_info"]["code"] for r in rl] == [task.code]  # PPO's reward judges at these sizes
    assert task.code.rstrip() in rl[0]["prompt"][1]["content"]
    # `cuda-agent judge` on the manifest's task judges the same problem
    assert {Catalog().resolve(a["task"]).code for a in manifest["answers"].values()} == {task.code}
    # The prompt names the task, not where the package or the data lie: SFT and PPO may run on two machines.
    assert (
        str(tmp_path) not in rl[0]["prompt"][1]["content"] and "curriculum_kernels" not in rl[0]["prompt"][1]["content"]
    )


def test_the_cpu_curriculum_is_short_and_cuda_keeps_stage_one() -> None:
    task = Catalog().resolve("examples/scale_add")
    assert prompt_messages(task, "cuda") == single_turn_messages(task, "cuda")  # the H200 demo asks stage 1's prompt
    cpu = prompt_messages(task, "cpu")
    assert "examples/scale_add" in cpu[1]["content"]
    # Short enough to train on 2 cores (bench/results/cpu-2026-12-05-learning): prompt and answer a fraction of CUDA's.
    assert sum(len(m["content"]) for m in cpu) < sum(len(m["content"]) for m in single_turn_messages(task, "cpu")) / 10
    for variant in variants("cpu"):
        assert list(variant.files) == ["kernels/scale_add.cpp", "model_new.py"]
        assert "REGISTER_BINDING(scale_add" in variant.files["kernels/scale_add.cpp"]
        assert len(variant.answer("cpu")) < len(variants("cuda")[0].answer("cuda")) / 2


def test_every_answer_fits_the_ppo_recipes_response_limit(tmp_path: Path) -> None:
    """A longer answer is cut at data.max_response_length and judged malformed (-1): the variant would vanish from
    PPO. Counted with the tokenizer the learning demo's tiny model uses (bench/tiny_model.py, the script's vocab)."""
    import importlib.util

    import yaml

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("tiny_model", root / "bench" / "tiny_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tok = module.build_tokenizer(tmp_path, 4096)
    limit = yaml.safe_load((root / "recipes" / "curriculum_ppo.yaml").read_text())["overrides"]
    for device in ("cuda", "cpu"):
        lengths = {v.name: len(tok.encode(v.answer(device))) + 1 for v in variants(device)}  # + the end token
        # cuda: the recipe's limit; cpu: bench/learning_gpu.sh's MAX_RESPONSE default
        assert max(lengths.values()) <= (limit["data.max_response_length"] if device == "cuda" else 448), lengths


@pytest.mark.integration
@pytest.mark.slow
def test_the_judge_rewards_the_variants_as_designed_on_cpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cuda_agent.rl.single_turn import compute_score

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_AGENT_SANDBOX_URL", raising=False)
    info = {"task": "examples/scale_add"}
    scores = {
        v.name: compute_score("examples", v.answer("cpu"), v.ref, info, device="cpu", work_dir=str(tmp_path))
        for v in variants("cpu")
    }
    assert scores["wrong"]["score"] == -1 and scores["wrong"]["verdict"] == "incorrect"
    assert scores["slow"]["score"] == 1  # correct, and far (2x) from beating eager
    # fast is 2x faster than eager here (bench/results/cpu-2026-12-05-learning/judge_fast.json); on a loaded machine
    # its margin may shrink, so this test asserts only that it passes and is never below slow.
    assert scores["fast"]["passed"] == 1.0 and scores["fast"]["score"] >= scores["slow"]["score"]


@pytest.mark.gpu
@pytest.mark.integration
def test_the_judge_rewards_the_variants_as_designed_on_cuda(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from cuda_agent.rl.single_turn import compute_score

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_AGENT_SANDBOX_URL", raising=False)
    task = curriculum_task("scale_add", "cuda")
    info = {"task": task.ref, "code": task.code}
    scores = {
        v.name: compute_score("curriculum", v.answer("cuda"), v.ref, info, device="cuda", work_dir=str(tmp_path))
        for v in variants("cuda")
    }
    assert {name: score["score"] in VARIANTS[name] for name, score in scores.items()} == dict.fromkeys(VARIANTS, True)
