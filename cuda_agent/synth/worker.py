"""A long-lived filter worker: `python -m cuda_agent.synth.worker CONFIG_JSON`.

Reads one order per line on stdin (`filters.FilterRequest`, `subproc.read_order`) and writes each
result as JSON to the request's file (written aside, then renamed into place, so the parent never reads
half of one), as the sandbox's runner writes its outcome: problem code runs in this process and may print
anything, and nothing it prints is taken for a result. Stdout carries only the two signals below. One process handles
many problems so that torch's import and inductor's warm state (about 20 s cold on this CPU) are paid
once per worker, not once per problem; the parent kills and replaces a worker that hangs or dies.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

READY_LINE = "@@synth-ready@@"
"""Written once set up and warmed up: the parent starts a problem's clock only after it."""
WAIT_PREFIX = "@@synth-wait@@ "
"""Followed by 1 when a wait for a GPU turn starts and 0 when it ends: the parent stops the clock meanwhile."""


def warm_up(device: str, compile_: bool) -> None:
    """Pay the cold start of CUDA and inductor before the first problem, whose time limit it would eat.

    On the H200 with 12 workers starting at once, cold starts counted against first problems marked
    7 of 257 candidates 'timeout' at 120 s. A failure here is not the worker's: the problem's own
    filters meet it and record it.
    """
    import torch

    try:
        x = torch.ones(64, device=device)
        if compile_:
            torch.compile(lambda t: torch.relu(t) * 2.0)(x)
        if device == "cuda":
            torch.cuda.synchronize()
    except Exception:  # noqa: BLE001 - recorded by the first problem that meets it
        pass


def main(argv: list[str]) -> int:
    import faulthandler
    import resource
    import signal

    from cuda_agent.subproc import read_order
    from cuda_agent.synth.filters import FilterConfig, FilterRequest, run_filters

    config = FilterConfig.model_validate_json(argv[0])
    if config.memory_cap_bytes is not None and config.device == "cpu":
        # Before torch is imported, as `tasks show --inspect` does: every mapping counts against the cap from here.
        resource.setrlimit(resource.RLIMIT_AS, (config.memory_cap_bytes, config.memory_cap_bytes))

    import torch

    from cuda_agent.judge import Clock, apply_precision_flags, describe_device, make_flusher

    faulthandler.register(signal.SIGTERM)  # a hang killed by the parent leaves its stack in the log
    # On CUDA too: a worker's CPU side (building the model, its weight init) with torch's default of one
    # thread per core, times 12 workers, oversubscribes the cores many times over.
    torch.set_num_threads(config.threads)
    apply_precision_flags()  # the judge's flags, so eager times mean the same as the judge's
    cuda = config.device == "cuda"
    clock = Clock(time.perf_counter, torch.cuda.synchronize if cuda else None, torch.cuda.Event if cuda else None)
    l2_bytes = describe_device(config.device).get("l2_bytes") if cuda else None
    flush = make_flusher(config.device, l2_bytes)
    warm_up(config.device, config.compile)
    out = sys.stdout

    def on_wait(waiting: bool) -> None:
        out.write(f"\n{WAIT_PREFIX}{int(waiting)}\n")  # own line, even after a problem's unfinished print
        out.flush()

    out.write(READY_LINE + "\n")
    out.flush()
    while (request := read_order(FilterRequest)) is not None:
        result = run_filters(request.index, request.code, config, clock, flush, on_wait)
        if cuda:
            torch.cuda.empty_cache()
        path = Path(request.result)
        aside = path.with_name(path.name + ".part")
        aside.write_text(result.model_dump_json())
        os.replace(aside, path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
