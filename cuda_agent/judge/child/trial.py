"""One correctness trial, after the candidate's call answered: compare with the reference.

Called by the grader (grader.py) on its own copies of the candidate's outputs (outputs.py); the reference runs here, in the grader, on the grader's own copy of the inputs.
"""

from __future__ import annotations

import copy
from typing import Any

from cuda_agent.judge.child.compare import check_output, same_values
from cuda_agent.judge.child.reduction import longest_reduction
from cuda_agent.tasks.inspection import flatten_outputs


def _fail(trial: dict[str, Any], reason: str, violation: str | None = None) -> dict[str, Any]:
    trial.update(ok=False, reason=reason)
    if violation:
        trial["violation"] = violation
    return trial


def _reference64(run: Any, inputs: list[Any]) -> list[Any] | None:
    """The reference in float64, or None where it cannot run in float64 (the check is then skipped). Its longest
    reduction goes to `run.reduction_length` (the strict bound's float32 rounding allowance, reduction.py)."""
    torch = run.torch
    if run.reference64 is False:
        return None
    try:
        if run.reference64 is None:
            run.reference64 = copy.deepcopy(run.reference).double()
        doubled = [x.double() if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x for x in inputs]
        with torch.no_grad():
            try:
                result, run.reduction_length = longest_reduction(lambda: run.reference64(*doubled))
            except Exception:  # an operator the dispatch mode cannot see through: no allowance beyond the floor
                result, run.reduction_length = run.reference64(*doubled), 1
        return flatten_outputs(result)
    except Exception:  # an operator without a float64 kernel: precision is then not checkable
        run.reference64 = False
        return None


def plain_outputs(torch: Any, value: Any) -> list[Any] | None:
    """forward's result as a new flat list, if it is a plain tensor or a list or tuple of them (nested); None
    for anything else.

    Read through the builtins' own iteration, so a subclass's code (a `list` whose `__iter__` runs the kernel after
    the clock stopped) never runs. A subclass yields what it really holds (torch's named tuples such as
    `torch.max(x, 1)` pass as they are).
    """
    kind = type(value)
    if kind is torch.Tensor:
        return [value]
    base = list if issubclass(kind, list) else tuple if issubclass(kind, tuple) else None
    if base is None:
        return None
    try:
        items = list(base.__iter__(value))
    except TypeError:  # not a list or tuple underneath, whatever its class says
        return None
    flat: list[Any] = []
    for item in items:
        inner = plain_outputs(torch, item)
        if inner is None:
            return None
        flat += inner
    return flat


SAMPLED_POSITIONS = 2048
"""Positions of each CUDA output read in the candidate's memory after the grader's copy (`sample_outputs`)."""
SAMPLED_CALLS = 8
"""Calls of a request whose outputs are so read on CUDA, drawn after the answer, and read again before the next
request: a kernel left running on a share f of the calls escapes a request's reads with a chance of about
(1 - f) ** SAMPLED_CALLS. On the CPU nothing of the candidate's runs while the grader reads its outputs, and nothing
of its writes the grader's copies after (child/outputs.py)."""


def sample_outputs(run: Any, out: Any, seed: int) -> list[tuple[Any, tuple[Any, ...], Any]]:
    """What a timed call's outputs hold at `SAMPLED_POSITIONS` positions drawn from `seed`, read after the grader
    copied them (CUDA: in the candidate's memory).

    Read again later (`changed_since`), a position that changed shows work the candidate's process left running on
    its outputs after it answered. The positions are chosen after the call answered; the read is synchronised.
    """
    generator = run.torch.Generator().manual_seed(seed)
    samples = []
    for value in flatten_outputs(out):
        if value.numel() == 0:
            continue
        where = _positions(run.torch, value, SAMPLED_POSITIONS, generator)
        samples.append((value, where, value[where].clone()))  # a 0-dim tensor's `value[()]` is a view: cloned
    run.sync()
    return samples


def _positions(torch: Any, value: Any, count: int, generator: Any) -> tuple[Any, ...]:
    """`count` positions of a non-empty tensor, drawn uniformly (with repeats) from `generator`, as an index.

    An index of coordinates rather than a flat one: `reshape(-1)` of a non-contiguous output would copy all of it."""
    flat = torch.randint(value.numel(), (count,), generator=generator).to(value.device)
    return torch.unravel_index(flat, value.shape) if value.dim() else ()


def changed_since(run: Any, samples: list[tuple[Any, tuple[Any, ...], Any]]) -> bool:
    """Whether any output sampled by `sample_outputs` holds other values there now."""
    changed = any(not same_values(value[where], early) for value, where, early in samples)
    run.sync()
    return changed


TIMED_PRECISION_MARGIN = 2.0
"""How far past the trials' precision figures a timed output's error against float32 may go (inputs differ)."""


def _bound_by_the_trials(check: Any, trials: list[dict[str, Any]], index: int) -> None:
    """Fail a timed output (judged without float64) whose error against the float32 reference shows precision lost.

    A solution exact in the trials, where the float64 reference is, could compute in fp16 or TF32 in the timed calls
    only (it counts its calls): within rtol of the float32 reference, that passed (reward from a reduced-precision
    speed-up). From the trials, e = eager fp32's normwise error against float64 and b = the strict bound on the
    candidate's. By the triangle inequality the candidate's error against float64 is at least its error against
    float32 less e: beyond b + e, the strict check would have failed. The margin covers the inputs being others.
    """
    figures = [
        (output["eager_err_vs_fp64"], output.get("precision_bound"))
        for trial in trials
        if trial.get("label") != "timed"
        for output in trial.get("outputs", [])[index : index + 1]
        if output.get("eager_err_vs_fp64") is not None and output.get("precision_bound") is not None
    ]
    if not figures or check.norm_rel_err is None:
        return  # no trial had a float64 reference (an operator without a float64 kernel): nothing to go by
    eager = max(e for e, _ in figures)
    limit = TIMED_PRECISION_MARGIN * (max(b for _, b in figures) + eager)
    if check.norm_rel_err > limit:
        check.ok, check.precision = False, True
        check.reason = (
            f"error against the float32 reference {check.norm_rel_err:.3g} exceeds {limit:.3g}, beyond what the "
            f"trials' float64 checks allow (eager fp32 against float64: {eager:.3g}): reduced precision while timed"
        )


def _output_check(run: Any, index: int, out: Any, ref: Any, ref64: Any | None, bounded: bool) -> Any:
    """`check_output` under the run's tolerances; `bounded`: a float32 output judged without float64 (a timed one)
    is also held to the trials' precision figures (`_bound_by_the_trials`)."""
    req = run.req
    check = check_output(
        out,
        ref,
        ref64,
        atol=req.atol,
        rtol=req.rtol,
        norm_rtol=req.norm_rtol,
        strict_precision=req.strict_precision,
        precision_factor=req.precision_factor,
        precision_floor=req.precision_floor,
        reduction_length=run.reduction_length,
    )
    if bounded and check.ok and req.strict_precision and out.dtype == run.torch.float32:
        _bound_by_the_trials(check, run.trials, index)
    return check


SCREEN_POSITIONS = 1 << 16
"""Positions of each output and input a screened timed output is read at (`screen_trial`). An output wrong at a
fraction f of its elements passes the screen with a chance of (1 - f) ** 65536: 0.15% at f = 1e-4, so work skipped
on more than a sliver of an output is seen; a sliver saves no time worth a reward."""


def screen_trial(
    run: Any, inputs: list[Any], given: list[Any], out: Any, seed: int, positions_seed: int
) -> dict[str, Any] | None:
    """A timed call's output (label `timed`, no float64 reference) judged at SCREEN_POSITIONS positions per output,
    drawn from `positions_seed` after the call returned: a passed trial record, or None where the screen leaves any
    doubt (then `judge_trial` decides on every element, so an honest output is never failed on a sample's figures).

    The same checks as `judge_trial`'s, on the sampled elements: inputs as drawn against as the call left them,
    outputs read before and after the reference ran (work left running), elementwise and normwise tolerances, and
    the trials' precision bound (`_bound_by_the_trials`). The reference itself runs in full: its outputs at the
    positions need all of it. Outputs under `screen_min_elems` elements (or not floating) are judged in full.
    """
    torch = run.torch
    req = run.req
    outputs = flatten_outputs(out)
    if not outputs or any(not o.is_floating_point() or o.numel() < req.screen_min_elems for o in outputs):
        return None
    generator = torch.Generator().manual_seed(positions_seed)
    for original, handed in zip(inputs, given, strict=True):
        if isinstance(original, torch.Tensor) and original is not handed and original.numel():
            if type(handed) is not type(original) or handed.shape != original.shape:
                return None
            where = _positions(torch, original, SCREEN_POSITIONS, generator)
            if not same_values(original[where], handed[where]):
                return None
    wheres = [_positions(torch, o, SCREEN_POSITIONS, generator) for o in outputs]
    early = [o[where] for o, where in zip(outputs, wheres, strict=True)]
    with torch.no_grad():
        reference = flatten_outputs(run.reference(*inputs))
    run.sync()
    run.tick()
    if len(reference) != len(outputs):
        return None
    checks = []
    for i, (value, where, sampled, ref) in enumerate(zip(outputs, wheres, early, reference, strict=True)):
        if (ref.shape, ref.dtype, ref.device.type) != (value.shape, value.dtype, value.device.type):
            return None
        if not same_values(value[where], sampled):
            return None
        check = _output_check(run, i, sampled, ref[where], None, bounded=True)
        if not check.ok:
            return None
        checks.append(check.as_dict())
    return {
        "label": "timed",
        "seed": seed,
        "transform": "identity",
        "ok": True,
        "reason": "",
        "outputs": checks,
        "screened": SCREEN_POSITIONS,
    }


def judge_trial(
    run: Any,
    inputs: list[Any],
    given: list[Any],
    out: Any,
    seed: int,
    transform: str,
    label: str,
    precision: bool = True,
) -> dict:
    """Check one trial's candidate output; returns a JSON-able record with ok/reason and figures.

    `precision`: False leaves out the strict-precision test (its float64 reference is the costliest part) where
    the trials already made it and only the values are in question (the timed calls' outputs).
    """
    torch = run.torch
    req = run.req
    trial: dict[str, Any] = {"label": label, "seed": seed, "transform": transform, "ok": True, "reason": ""}
    outputs = flatten_outputs(out)  # the grader's own copies (outputs.py): nothing of the candidate's writes them
    for original, handed in zip(inputs, given, strict=True):
        if isinstance(original, torch.Tensor) and original is not handed and not same_values(original, handed):
            return _fail(trial, "the solution modified its input tensors in place", "mutated_inputs")
    with torch.no_grad():
        reference = flatten_outputs(run.reference(*inputs))
    run.sync()
    run.tick()  # each step reports progress: the grader's time limit is per step (standby.py)
    if transform != "identity" and not all(bool(torch.isfinite(r).all()) for r in reference if r.is_floating_point()):
        trial.update(skipped="reference is not finite on these inputs")
        return trial
    wants64 = precision and req.strict_precision and any(r.dtype == torch.float32 for r in reference)
    reference64 = _reference64(run, inputs) if wants64 else None
    run.sync()
    run.tick()
    if len(outputs) != len(reference):
        return _fail(trial, f"forward returned {len(outputs)} outputs, the reference returns {len(reference)}")
    checks = []
    for i, (cand, ref) in enumerate(zip(outputs, reference, strict=True)):
        ref64 = reference64[i] if reference64 is not None and i < len(reference64) else None
        check = _output_check(run, i, cand, ref, ref64, bounded=not precision)
        checks.append(check.as_dict())
        run.tick()
        if not check.ok:
            trial.update(outputs=checks, precision=check.precision)
            prefix = f"output {i}: " if len(reference) > 1 else ""
            return _fail(trial, prefix + check.reason)
    trial["outputs"] = checks
    return trial
