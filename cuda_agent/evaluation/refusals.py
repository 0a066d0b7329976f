"""Every refusal of a run, one line each: the rule, whether KernelBench's own evaluation would refuse it too, why, and
what the author can do about it (the parity report of `cuda-agent bench --policy kernelbench`).

A static policy violation's message already ends with its advice (judge/policy); the runtime rules and the verdicts
without a rule get theirs here. "Differs from KernelBench" is this judge's own list (policy.KERNELBENCH_DIFFERENCES
for the static rules, `_RUNTIME_DIFFERENCES` below for the runtime rules and the static ones that policy keeps
under both), so a reader comparing with KernelBench's verdicts can tell a
refusal of ours from one both would make.
"""

from __future__ import annotations

from cuda_agent.evaluation.records import Refusal, TaskResult
from cuda_agent.judge import KERNELBENCH_DIFFERENCES, KERNELBENCH_RELAXED
from cuda_agent.types import Verdict

REASON_CHARS = 240
"""A reason longer than this is cut (the verdict in results.json keeps it whole)."""

_RUNTIME_ADVICE = {
    "reduced_precision": "compute the float32 task in float32 (no fp16/bf16/TF32), or judge with --precision paper",
    "no_custom_kernel": "have forward call your compiled kernels on the path that makes its outputs",
    "torch_compute_at_runtime": "move the torch operators forward runs into your own kernels (or judge with "
    "--policy kernelbench)",
    "late_output_write": "finish every kernel (synchronise your streams) before forward returns",
    "mutated_inputs": "leave forward's inputs as they are: write results to tensors of your own",
    "global_state_changed": "leave torch's flags as they are",
    "l2_persistence": "leave the persisting-L2 set-aside and access windows as they are",
    "non_tensor_output": "return a tensor, or a list or tuple of plain tensors, as the reference does",
    "protected_file_modified": "edit only kernels/ and model_new.py; restore the protected files",
}
_RUNTIME_DIFFERENCES = {
    "reduced_precision": "KernelBench's 1e-2 tolerance lets reduced precision pass",
    "no_custom_kernel": "KernelBench does not look whether your kernels make the outputs",
    "forward_calls_no_kernel": "KernelBench does not look whether forward calls your kernels: torch alone passes",
    "subclasses_reference": "KernelBench does not look; a ModelNew derived from Model can run the reference's forward",
    "try_except": "KernelBench does not look; a try in forward can fall back to torch when your kernel fails",
    "late_output_write": "KernelBench reads the outputs after a device-wide synchronisation",
    "mutated_inputs": "KernelBench does not compare the inputs after the call",
    "global_state_changed": "KernelBench does not look at torch's flags",
    "l2_persistence": "KernelBench does not look at the persisting L2",
}
_VERDICT_ADVICE = {
    "compile_error": "fix the build error (the verdict's compile_log holds the compiler's output)",
    "incorrect": "make the outputs match the reference within atol/rtol on fresh inputs",
    "runtime_error": "fix the exception or crash in import, __init__ or forward",
    "timeout": "make the solution finish: it ran past the judge's time limit (a hang, or far slower than eager)",
    "missing": "add a solution file for this task",
    "failed": "fix the solution's file: it could not be read as a solution",
}


def refusals(results: list[TaskResult], kernelbench: bool) -> list[Refusal]:
    """One Refusal per task that did not pass (errors of ours, which have no verdict, left out).

    Args:
        results: the run's task results.
        kernelbench: the run judged under the kernelbench policy (rules it relaxes are then not refusals).
    """
    found = []
    for result in results:
        verdict = result.verdict
        if result.status in ("missing", "failed"):
            reason = result.error or ("no solution file" if result.status == "missing" else "unreadable solution")
            found.append(_refusal(result.ref, result.status, result.status, reason, "", _VERDICT_ADVICE[result.status]))
        elif verdict is not None and verdict.verdict != "pass":
            found.append(_from_verdict(result.ref, verdict, kernelbench))
    return found


def _from_verdict(ref: str, verdict: Verdict, kernelbench: bool) -> Refusal:
    if verdict.violations:
        first = verdict.violations[0]
        rule = first.check
        differs = KERNELBENCH_DIFFERENCES.get(rule) or _RUNTIME_DIFFERENCES.get(rule, "")
        if not kernelbench and rule in KERNELBENCH_RELAXED | {"torch_compute_at_runtime"}:
            differs = "KernelBench lets torch compute beside your kernels (the cuda-agent policy does not)"
        reason, advice = (first.message, "") if rule in _RUNTIME_ADVICE else _split_advice(first.message)
        return _refusal(ref, verdict.verdict, rule, reason, differs, advice or _RUNTIME_ADVICE.get(rule, ""))
    differs = _incorrect_difference(verdict) if verdict.verdict == "incorrect" else ""
    return _refusal(ref, verdict.verdict, verdict.verdict, verdict.message, differs, _VERDICT_ADVICE[verdict.verdict])


def _incorrect_difference(verdict: Verdict) -> str:
    """Why KernelBench's allclose on its own inputs could have passed an output this judge found wrong, if it could."""
    failed = next((c for c in reversed(verdict.checks) if not c.get("ok", True)), {})
    if failed.get("label") == "robustness":
        return f"KernelBench draws inputs as get_inputs() does; this judge also tries {failed.get('transform')}d ones"
    if "normwise" in str(failed.get("reason", "")):
        return "KernelBench checks allclose alone; this judge also bounds the normwise error"
    return ""


def _split_advice(message: str) -> tuple[str, str]:
    """A static violation's message is 'where: what; advice.' (policy._violation) and may end with
    ' Differs from KernelBench: ...' (said in its own column here): (where and what, advice)."""
    text = message.split(" Differs from KernelBench: ", 1)[0].strip()
    head, sep, advice = text.rpartition("; ")
    return (head, advice.rstrip(".")) if sep else (text, "")


def _refusal(ref: str, verdict: str, rule: str, reason: str, differs: str, advice: str) -> Refusal:
    line = " ".join(reason.split())
    if len(line) > REASON_CHARS:
        line = line[: REASON_CHARS - 3] + "..."
    return Refusal(ref=ref, verdict=verdict, rule=rule, reason=line, differs_from_kernelbench=differs, action=advice)
