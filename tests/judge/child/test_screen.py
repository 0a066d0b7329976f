"""`trial.screen_trial`: a timed output read at sampled positions passes only where every check holds there, and
leaves anything else to the full comparison (None), so that it can only ever save time, never fail an output."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from cuda_agent.judge.child.trial import SCREEN_POSITIONS, screen_trial


def _run(screen_min_elems: int = 1, trials: list[dict[str, Any]] | None = None) -> SimpleNamespace:
    """The parts of grader.Grader that the screen reads (the real one runs it in tests/judge/threats)."""
    req = SimpleNamespace(
        atol=1e-2,
        rtol=1e-2,
        norm_rtol=1e-2,
        strict_precision=True,
        precision_factor=10.0,
        precision_floor=1e-5,
        screen_min_elems=screen_min_elems,
    )
    return SimpleNamespace(
        torch=torch,
        req=req,
        reference=torch.relu,
        trials=trials or [],
        reduction_length=1,
        sync=lambda: None,
        tick=lambda: None,
    )


def _x() -> torch.Tensor:
    return torch.randn(512, 1024, generator=torch.Generator().manual_seed(3))


def test_an_exact_output_passes_and_says_it_was_screened() -> None:
    x = _x()
    trial = screen_trial(_run(), [x], [x.clone()], [torch.relu(x)], 7, 11)
    assert trial is not None and trial["ok"] and trial["screened"] == SCREEN_POSITIONS
    assert (trial["label"], trial["seed"]) == ("timed", 7) and trial["outputs"][0]["max_abs_err"] == 0


def test_work_skipped_on_a_sliver_of_the_output_is_seen() -> None:
    # Wrong at 1 in 200 elements, spread out: 65,536 positions miss all of them with a chance of about 1e-142.
    x = _x()
    out = torch.relu(x)
    out.view(-1)[::200] += 1.0
    for positions_seed in range(5):
        assert screen_trial(_run(), [x], [x.clone()], [out], 7, positions_seed) is None


def test_inputs_changed_by_the_call_leave_it_to_the_full_check() -> None:
    x = _x()
    given = x.clone()
    given.relu_()  # computed in place into its input
    assert screen_trial(_run(), [x], [given], [given], 7, 11) is None


def test_values_too_small_for_atol_are_failed_normwise_on_the_sample_too() -> None:
    # Zeros for a wide softmax pass allclose at atol 1e-2; the sampled norms show the output carries nothing.
    x = torch.randn(4, 65_536, generator=torch.Generator().manual_seed(5))
    run = _run()
    run.reference = lambda t: torch.softmax(t, dim=-1)
    assert screen_trial(run, [x], [x.clone()], [torch.zeros(4, 65_536)], 7, 11) is None
    assert screen_trial(run, [x], [x.clone()], [torch.softmax(x, dim=-1)], 7, 11) is not None


def test_precision_lost_beyond_the_trials_bound_leaves_it_to_the_full_check() -> None:
    x = _x()
    rounded = (torch.relu(x).view(torch.int32) & ~0x1FFF).view(torch.float32)  # a 10-bit mantissa, as TF32
    trials = [{"label": "trial", "outputs": [{"eager_err_vs_fp64": 0.0, "precision_bound": 1e-5}]}]
    assert screen_trial(_run(trials=trials), [x], [x.clone()], [rounded], 7, 11) is None
    assert screen_trial(_run(trials=trials), [x], [x.clone()], [torch.relu(x)], 7, 11) is not None


def test_small_integer_or_misshapen_outputs_are_judged_in_full() -> None:
    x = _x()
    assert screen_trial(_run(screen_min_elems=x.numel() + 1), [x], [x.clone()], [torch.relu(x)], 7, 11) is None
    assert screen_trial(_run(), [x], [x.clone()], [torch.relu(x).to(torch.int32)], 7, 11) is None
    assert screen_trial(_run(), [x], [x.clone()], [torch.relu(x).t()], 7, 11) is None
    assert screen_trial(_run(), [x], [x.clone()], [torch.relu(x), torch.relu(x)], 7, 11) is None


def test_a_non_contiguous_output_is_read_in_place() -> None:
    x = _x()
    out = torch.relu(x).t().contiguous().t()  # the values of relu(x), laid out transposed
    assert not out.is_contiguous()
    assert screen_trial(_run(), [x], [x.clone()], [out], 7, 11) is not None
