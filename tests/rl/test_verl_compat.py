"""verl's internals are touched in one module, which names the verl versions it was written against."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cuda_agent.errors import ConfigError

pytest.importorskip("verl", reason="verl is not installed (pip install -e '.[rl]')")

from cuda_agent.rl import verl_compat  # noqa: E402

RL = Path(__file__).resolve().parents[2] / "cuda_agent" / "rl"
INTERNALS = re.compile(
    r"_agent_loop_registry|_ROLLOUT_REGISTRY|RolloutReplicaRegistry\.register|_performance_metrics|_compute_score"
    r"|agent_loop_workers_class|\.RayPPOTrainer = |logprobs_from_logits_v2 = |initialize_global_process_group = "
)


def test_only_verl_compat_touches_verls_internals() -> None:
    touching = sorted(
        str(path.relative_to(RL))
        for path in RL.rglob("*.py")
        if INTERNALS.search(path.read_text()) and path.name != "verl_compat.py"
    )
    assert touching == [], f"verl internals outside cuda_agent/rl/verl_compat.py: {touching}"


def test_another_verl_is_refused_naming_the_module_to_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import verl
    from omegaconf import OmegaConf

    assert verl.__version__ in verl_compat.VERL_VERSIONS and verl_compat.version_problem() is None
    monkeypatch.setattr(verl, "__version__", "0.10.0")
    with pytest.raises(ConfigError, match=r"verl 0\.10\.0 is installed.*cuda_agent/rl/verl_compat\.py"):
        verl_compat.replace_logprobs(lambda logits, labels: logits)
    problems = verl_compat.config_problems(OmegaConf.create({"trainer": {"use_v1": True}}))
    assert len(problems) == 2 and "0.10.0" in problems[0] and problems[1].startswith("trainer.use_v1=true")
