"""`cuda-agent synth`: make Ops-6K-style training problems, compare a data set with Ops-6K, audit one."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def checked_device(requested: str) -> str:
    """The device a command runs on; `--device cuda` without a GPU is bad usage (exit 2) before any work."""
    from cuda_agent.errors import ConfigError
    from cuda_agent.machine import detect_device

    if requested == "cuda" and detect_device("auto") != "cuda":
        raise ConfigError("--device cuda: no GPU is visible on this machine; use --device cpu or auto")
    return detect_device(requested)


def catalog_from_args(args: argparse.Namespace):  # the task catalog of --data-dir (or the default locations)
    from cuda_agent.tasks import Catalog

    return Catalog(data_dir=args.data_dir)


def _exit_on_sigterm() -> None:
    """SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so the filter workers are killed, not orphaned."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def _synth_config(args: argparse.Namespace, device: str):
    import os

    from cuda_agent.errors import ConfigError
    from cuda_agent.synth.compose import OPS6K_DEPTH_MIX, ComposeConfig
    from cuda_agent.synth.filters import FilterConfig
    from cuda_agent.synth.pipeline import SynthConfig

    if args.n is None or args.out is None:
        raise ConfigError(
            "synth needs --n and --out (e.g. cuda-agent synth --n 100 --out synth.parquet), or: synth report FILE"
        )
    mix = dict(OPS6K_DEPTH_MIX)
    if args.depth_mix:
        try:
            mix = {i + 1: float(w) for i, w in enumerate(args.depth_mix.split(","))}
        except ValueError:
            raise ConfigError(
                f"--depth-mix {args.depth_mix}: give five weights, e.g. 3.4,83.77,7.62,2.8,1.23"
            ) from None
    low, high = args.time_window_ms
    threads = max(1, (os.cpu_count() or 1) // args.workers) if device == "cpu" else 1
    return SynthConfig(
        n=args.n,
        seed=args.seed,
        workers=args.workers,
        compose=ComposeConfig(device=device, depth_mix=mix),
        filters=FilterConfig(device=device, min_ms=low, max_ms=high, threads=threads, timeout_s=args.timeout_s),
        resize_to=args.resize_to or None,
    )


def cmd_synth(args: argparse.Namespace) -> int:
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from cuda_agent.errors import ConfigError
    from cuda_agent.machine import cache_root
    from cuda_agent.synth.catalog import crawl_catalog, load_catalog
    from cuda_agent.synth.pipeline import Synthesizer, rule_composer, run_synthesis, sidecar_path

    _exit_on_sigterm()
    device = checked_device(args.device)
    config = _synth_config(args, device)
    out = Path(args.out)
    if sidecar_path(out).exists() and not args.resume:
        raise ConfigError(f"{sidecar_path(out)} exists: pass --resume to carry the run on, or choose another --out")
    # The run keeps its own copy of the catalogue: a resumed run must draw from the same operators to
    # continue the same seeded stream, even after torch or the probing rules changed.
    catalog_copy = out.with_suffix(".catalog.json")
    if args.resume and catalog_copy.is_file():
        catalog = load_catalog(catalog_copy)
    else:
        catalog = crawl_catalog(cache_root())
        catalog_copy.write_text(catalog.model_dump_json())
    ops = catalog.usable()
    kernelbench = [(t.ref, t.code) for t in catalog_from_args(args).tasks("kernelbench")]
    synth = Synthesizer(config, ops, kernelbench, out)
    if args.resume:
        synth.resume()
    composer = rule_composer(ops, config)
    if args.model:
        from cuda_agent.agent.models import get_model
        from cuda_agent.synth.model_compose import model_composer

        filters = config.filters
        composer = model_composer(
            get_model(args.model), ops, config.seed, config.compose, filters.min_ms, filters.max_ms
        )
    kept_before, start = synth.kept, time.monotonic()
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns) as progress:
        bar = progress.add_task("kept", total=config.n, completed=synth.kept)

        def show(s: Synthesizer) -> None:
            tried = len(s.records)
            progress.update(bar, completed=s.kept, description=f"kept ({tried} candidates filtered so far)")

        run_synthesis(synth, composer, on_progress=show, log_path=out.with_suffix(".workers.log"))
    hours = (time.monotonic() - start) / 3600
    rate = (synth.kept - kept_before) / hours if hours > 0 else 0.0
    print(f"kept {synth.kept}/{config.n} in {out}; this session {synth.kept - kept_before} in {hours * 60:.1f} min "
          f"({rate:.0f} kept/hour, {config.workers} workers, {device})")  # fmt: skip
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in synth.reasons.most_common()))
    second = [r for r in synth.records if r.scale != 1.0]
    if second:
        print(
            f"second tries with the batch scaled (too fast at first): {len(second)}, kept {sum(r.kept for r in second)}"
        )
    return 0


def cmd_synth_report(args: argparse.Namespace) -> int:
    from cuda_agent.synth.audit import read_rows
    from cuda_agent.synth.report import attach_measurements, dataset_figures, print_table, to_markdown

    catalog = catalog_from_args(args)
    kernelbench = [(t.ref, t.code) for t in catalog.tasks("kernelbench")]
    path = Path(args.file)
    reference = Path(args.reference) if args.reference else catalog.locate("ops6k")
    figures = attach_measurements(dataset_figures(path.stem, read_rows(path), kernelbench), path, args.audit)
    ref_figures = dataset_figures(reference.stem, read_rows(reference), kernelbench)
    ref_figures = attach_measurements(ref_figures, reference, args.reference_audit)
    print_table(figures, ref_figures)
    markdown = Path(args.markdown) if args.markdown else path.with_suffix(".report.md")
    markdown.write_text(to_markdown(figures, ref_figures))
    print(f"wrote {markdown}")
    return 0


def cmd_synth_audit(args: argparse.Namespace) -> int:
    from cuda_agent.synth.audit import audit, dump_summary, read_rows, sample_rows, summarize
    from cuda_agent.synth.filters import FilterConfig

    _exit_on_sigterm()
    device = checked_device(args.device)
    rows = read_rows(Path(args.file))
    indices = sample_rows(len(rows), args.sample, args.seed)
    low, high = args.time_window_ms
    config = FilterConfig(device=device, min_ms=low, max_ms=high, timeout_s=args.timeout_s, threads=args.threads)
    out = Path(args.out)
    results = audit(rows, indices, config, args.workers, out, on_result=lambda r: print(r.index, r.reason or "pass"))
    summary = summarize(results)
    dump_summary(summary, out.with_suffix(".summary.json"))
    print(summary.model_dump_json(indent=1))
    return 0


def _add_synth_options(synth: argparse.ArgumentParser) -> None:
    synth.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="where the filters run")
    synth.add_argument("--workers", type=int, default=1, help="filter worker processes")
    synth.add_argument("--seed", type=int, default=0, help="the candidate stream (same seed, same problems)")
    synth.add_argument(
        "--time-window-ms", type=float, nargs=2, default=(1.0, 100.0), metavar=("LOW", "HIGH"), help="eager time window"
    )
    synth.add_argument("--timeout-s", type=float, default=180.0, help="per problem, including a cold torch.compile")


def add_synth_command(commands: argparse._SubParsersAction) -> None:
    synth = commands.add_parser("synth", help="synthesize Ops-6K-style training problems (filters, decontamination)")
    synth.add_argument("--n", type=int, default=None, help="problems to keep")
    synth.add_argument("--out", default=None, help="output parquet (ops, data_source, code); sidecar beside it")
    synth.add_argument("--resume", action="store_true", help="carry on the run recorded in the sidecar of --out")
    synth.add_argument("--depth-mix", default=None, help="weights of 1..5 operators (default Ops-6K's)")
    synth.add_argument(
        "--resize-to",
        type=float,
        default=3.0,
        help="a problem faster than the window is tried once more with its batch scaled for about this many times "
        "the window's low end (0: no second try)",
    )
    synth.add_argument(
        "--model", default=None, help="compose with a model: OpenAI-compatible URL, hf:PATH, replay:FILE"
    )
    _add_synth_options(synth)
    synth.set_defaults(func=cmd_synth)
    sub = synth.add_subparsers(dest="synth_command")
    report = sub.add_parser("report", help="compare a data set with Ops-6K; print a table and write markdown")
    report.add_argument("file", help="a parquet with ops, data_source, code (its sidecar is read if present)")
    report.add_argument("--reference", default=None, help="reference parquet (default: the bundled Ops-6K)")
    report.add_argument("--audit", type=Path, default=None, help="filter results of FILE from `synth audit`")
    report.add_argument("--reference-audit", type=Path, default=None, help="filter results of the reference")
    report.add_argument("--markdown", default=None, help="markdown path (default FILE.report.md)")
    report.set_defaults(func=cmd_synth_report)
    check = sub.add_parser("audit", help="run the four filters over an existing data set (resumable JSONL)")
    check.add_argument("file", help="a parquet with a code column, e.g. ../shared/ops6k/ops6k.parquet")
    check.add_argument("--out", required=True, help="JSONL of per-row filter results; a summary JSON beside it")
    check.add_argument("--sample", type=int, default=None, help="a seeded random sample of this many rows")
    check.add_argument("--threads", type=int, default=1, help="torch threads per worker")
    _add_synth_options(check)
    check.set_defaults(func=cmd_synth_audit)
