"""`cuda-agent train`: the training commands (data for verl, and the five stages), wired like cli.py.

    cuda-agent train data --suite ops6k [--single-turn] [--device cuda|cpu] [--out FILE]
    cuda-agent train rft-data [--rollouts DIR] [--out FILE]
    cuda-agent train critic-data [--rollouts DIR | --from-sft FILE] [--out FILE]
    cuda-agent train curriculum [--device cuda|cpu] [--out DIR]
    cuda-agent train agentic --model DIR [--device cuda|cpu] [--out DIR] [--scripts a,b] [--copies N]
    cuda-agent train report RUN_DIR [RUN_DIR ...] [--out DIR] [--held-out REF,...]
    cuda-agent train all --config PIPELINE [--dry-run]
    cuda-agent train STAGE [--config FILE] [--out DIR] [--set KEY=VALUE ...] [--dry-run] [--resume]
    cuda-agent plan --episodes B --checks T --seconds S [--rate R | --sandbox URL]

Kept beside cli.py (which adds these commands to its parser) to keep each module within its size budget.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_train_data(args: argparse.Namespace) -> int:
    from cuda_agent.evaluation.suites import select_tasks
    from cuda_agent.rl.data import default_out, rl_rows, write_rl_parquet
    from cuda_agent.tasks import Catalog

    levels = [int(level) for level in args.levels.split(",")] if args.levels else None
    tasks = select_tasks(args.suite, levels, Catalog(data_dir=args.data_dir))
    out = Path(args.out) if args.out else default_out(args.suite, args.single_turn, levels, args.lang)
    write_rl_parquet(rl_rows(tasks, single_turn=args.single_turn, device=args.device, language=args.lang), out)
    kind = "single-turn (single_turn_agent)" if args.single_turn else "agent-loop (cuda_agent)"
    print(f"wrote {len(tasks)} {kind} rows for {args.device} to {out}" + (" (Triton)" if args.lang == "triton" else ""))
    return 0


def cmd_train_rft_data(args: argparse.Namespace) -> int:
    from cuda_agent.rl.rft import read_collected, write_rft_data

    collected, unreadable = read_collected(Path(args.rollouts))
    for path in unreadable:
        print(f"warning: cannot read {path}; skipped", file=sys.stderr)
    result = write_rft_data(collected, Path(args.out))
    print(f"{result.summary()}; wrote {args.out}")
    return 0


def cmd_train_critic_data(args: argparse.Namespace) -> int:
    from cuda_agent.rl.rft import read_collected, write_replay_data, write_replay_from_sft

    if args.from_sft:
        rows = write_replay_from_sft(Path(args.from_sft), Path(args.out))
        print(f"wrote {rows} replay rows (the distinct episodes of {args.from_sft}) to {args.out}")
        return 0
    collected, _ = read_collected(Path(args.rollouts))
    rows = write_replay_data(collected, Path(args.out))
    print(f"wrote {rows} replay rows (of {len(collected)} episodes) to {args.out}")
    return 0


def cmd_train_curriculum(args: argparse.Namespace) -> int:
    from cuda_agent.rl.curriculum import write_curriculum

    manifest = write_curriculum(Path(args.out), args.device, copies=args.copies)
    print(f"wrote {manifest['sft']} (SFT: every variant in equal shares) and {manifest['rl']} (PPO prompts)")
    for name, answer in manifest["answers"].items():
        rewards = " or ".join(map(str, answer["rewards"]))
        print(f"  {name}: designed reward {rewards}; cuda-agent judge {answer['task']} {answer['folder']}")
    return 0


def cmd_train_agentic(args: argparse.Namespace) -> int:
    import json

    import transformers

    from cuda_agent.agent.models.gguf import chat_template_for_tools
    from cuda_agent.rl.agentic_sft import SCRIPTS, write_agentic_data

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.model)
    chat_template_for_tools(tokenizer)
    config = json.loads((Path(args.model) / "config.json").read_text())
    scripts = tuple(args.scripts.split(",")) if args.scripts else tuple(SCRIPTS)
    manifest = write_agentic_data(
        Path(args.out),
        tokenizer,
        args.device,
        scripts=scripts,
        copies=args.copies,
        context_tokens=args.context,
        parallel=args.parallel,
        hf_model_type=config.get("model_type"),
        sandbox_url=args.sandbox,
    )
    for episode in manifest["episodes"]:
        print(
            f"  {episode['task']} {episode['script']}: {episode['verdict']} (reward {episode['reward']}), "
            f"{episode['turns']} turns, {episode['tokens']} tokens"
        )
    print(f"wrote {args.out}/sft.parquet, rl.parquet (training tasks) and heldout.parquet")
    return 0


def cmd_train_report(args: argparse.Namespace) -> int:
    from cuda_agent.rl.learning import HELD_OUT_REFS
    from cuda_agent.rl.learning_report import report_runs

    runs = [Path(run) for run in args.run_dir]
    if len(runs) > 1 and args.out is None:
        print("error: several runs need --out DIR for their common report", file=sys.stderr)
        return 2
    held_out = frozenset(args.held_out.split(",")) if args.held_out else frozenset(HELD_OUT_REFS)
    page, validation = report_runs(runs, Path(args.out) if args.out else runs[0], held_out)
    for line in validation:
        print(line)
    print(f"wrote steps.jsonl and report.html in each run's folder, and {page}")
    return 0


def cmd_train_all(args: argparse.Namespace) -> int:
    from cuda_agent.rl.pipeline import Pipeline, load_pipeline

    pipeline = Pipeline(load_pipeline(Path(args.config)))
    if args.dry_run:
        problems = pipeline.dry_run()
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        print(f"dry run: every stage still to run composes against verl; {len(problems)} problem(s) to fix first")
        return 2 if problems else 0  # as a bad command line: nothing ran, and it would fail
    manifest = pipeline.run_all()
    print(f"all stages done; artifacts: {', '.join(f'{s}={r.artifact}' for s, r in manifest.stages.items())}")
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from cuda_agent.errors import ConfigError
    from cuda_agent.rl.recipes import bundled_recipe, check_plan, describe, launch, load_recipe, plan_training

    recipe = load_recipe(Path(args.config) if args.config else bundled_recipe(args.stage))
    if recipe.stage != args.stage:
        raise ConfigError(f"{args.config} is a recipe for {recipe.stage!r}, not {args.stage!r}")
    out = Path(args.out or Path("runs") / "train" / args.stage.replace("-", "_"))
    plan = plan_training(recipe, out, args.overrides)
    print(describe(plan))
    problems = check_plan(plan, launching=not args.dry_run)
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    if args.dry_run:
        print(f"dry run: the config composes against verl; {len(problems)} problem(s) to fix before launching")
        return 2 if problems else 0  # as a bad command line: nothing ran, and it would fail
    if problems:
        raise ConfigError(f"{len(problems)} problem(s) stop the launch (listed above)")
    return launch(plan, resume=args.resume)


def cmd_plan(args: argparse.Namespace) -> int:
    import os

    from cuda_agent.errors import ConfigError
    from cuda_agent.rl.preflight import fetch_stats, judge_gpus_needed
    from cuda_agent.sandbox.workspace_commands import SANDBOX_TOKEN_ENV, SANDBOX_URL_ENV

    if min(args.episodes, args.checks, args.seconds) <= 0:
        raise ConfigError("--episodes, --checks and --seconds must be above 0")
    rate, url = args.rate, args.sandbox or os.environ.get(SANDBOX_URL_ENV)
    if rate is None:
        if not url:
            raise ConfigError("give --rate (judgements an hour a GPU) or --sandbox URL of a `cuda-agent serve` to ask")
        stats = fetch_stats(url, args.token or os.environ.get(SANDBOX_TOKEN_ENV))
        if stats is None:
            raise ConfigError(f"the sandbox service {url} does not answer GET /stats; start it with `cuda-agent serve`")
        rate = stats.get("judgements_per_hour_per_gpu")
        if not rate:
            raise ConfigError(f"{url} has judged nothing yet: judge a warm-up batch there first (or give --rate)")
        print(
            f"judge: {rate:.0f} judgements an hour a GPU, measured at {url} over {stats['judgements']} judgements "
            f"(bound by its {stats['bottleneck']} workers)"
        )
    asked = args.episodes * args.checks
    print(
        f"a step: {args.episodes} episodes x {args.checks:g} checks = {asked:.0f} judgements within {args.seconds:g} s"
    )
    print(f"judge GPUs needed: {judge_gpus_needed(args.episodes, args.checks, args.seconds, rate)}")
    return 0


def add_plan_command(commands: argparse._SubParsersAction) -> None:
    """Add `plan`: how many judge GPUs a training step needs, from the judge's measured rate."""
    plan = commands.add_parser("plan", help="judge GPUs a training step needs, from measured judgements per GPU-hour")
    plan.add_argument("--episodes", type=int, required=True, help="episodes a step rolls out (batch x rollout.n)")
    plan.add_argument("--checks", type=float, required=True, help="judgements an episode asks for (verifications + 1)")
    plan.add_argument("--seconds", type=float, required=True, help="time a step may spend judging, in seconds")
    plan.add_argument("--rate", type=float, default=None, help="judgements an hour a GPU (default: ask --sandbox)")
    plan.add_argument(
        "--sandbox", default=None, metavar="URL", help="a `cuda-agent serve` (default $CUDA_AGENT_SANDBOX_URL)"
    )
    plan.add_argument("--token", default=None, help="the service's token (default $CUDA_AGENT_SANDBOX_TOKEN)")
    plan.set_defaults(func=cmd_plan)


def _add_data_command(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="write a task set as verl's RL parquet (the stages' data.train_files/val_files)")
    data.add_argument("--suite", required=True, help="ops6k, ops6k[0:100], kernelbench, kernelbench/L2, examples, ...")
    data.add_argument("--levels", default=None, help="comma-separated KernelBench levels, e.g. 1,2,3")
    data.add_argument("--single-turn", action="store_true", help="rows for stage 1 (single_turn_agent and its prompt)")
    data.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="kernel kind the prompt asks for")
    data.add_argument(
        "--lang",
        choices=("cuda", "triton"),
        default="cuda",
        help="kernel language the prompt asks for (the agent loop's `language` setting must match)",
    )
    data.add_argument(
        "--out",
        default=None,
        help="parquet path (default runs/data/<suite>[_L<levels>][_single_turn][_triton].parquet)",
    )
    data.set_defaults(func=cmd_train_data)


def _add_rft_data_command(sub: argparse._SubParsersAction) -> None:
    rft = sub.add_parser("rft-data", help="filter collected trajectories into the rft stage's SFT parquet")
    rft.add_argument("--rollouts", default="runs/collect/rollouts", help="the collect stage's work_dir")
    rft.add_argument("--out", default="runs/rft/rft.parquet", help="the rft recipe's data.train_files")
    rft.set_defaults(func=cmd_train_rft_data)


def _add_critic_data_command(sub: argparse._SubParsersAction) -> None:
    critic = sub.add_parser("critic-data", help="the collected episodes as the critic warm-up's replay rows")
    critic.add_argument("--rollouts", default="runs/collect/rollouts", help="the collect stage's work_dir")
    critic.add_argument(
        "--from-sft",
        default=None,
        metavar="FILE",
        help="instead: an SFT parquet with exact tokens and rewards (`train agentic`'s sft.parquet); each episode's "
        "tokens.json goes under the --out file's folder, episodes/",
    )
    critic.add_argument("--out", default="runs/critic_warmup/replay.parquet", help="the critic-warmup recipe's data")
    critic.set_defaults(func=cmd_train_critic_data)


def _add_curriculum_command(sub: argparse._SubParsersAction) -> None:
    cur = sub.add_parser("curriculum", help="the learning demo's data: fast, slow and wrong answers for a tiny model")
    cur.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="kernel kind (cpu for CI)")
    cur.add_argument("--out", default="runs/curriculum", help="folder for sft.parquet, rl.parquet, answers/")
    cur.add_argument("--copies", type=int, default=8, help="SFT rows per variant")
    cur.set_defaults(func=cmd_train_curriculum)


def _add_agentic_command(sub: argparse._SubParsersAction) -> None:
    agentic = sub.add_parser(
        "agentic", help="the agentic curriculum's data: scripted multi-turn SFT episodes, PPO and held-out rows"
    )
    agentic.add_argument("--model", required=True, help="the policy's folder (its tokenizer and chat template)")
    agentic.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="kernel kind and judge device")
    agentic.add_argument("--out", default="runs/agentic", help="folder for sft.parquet, rl.parquet, heldout.parquet")
    agentic.add_argument("--scripts", default="", help="comma-separated scripts (default: all of agentic_sft.SCRIPTS)")
    agentic.add_argument("--copies", type=int, default=1, help="SFT rows per scripted episode")
    agentic.add_argument("--context", type=int, default=8192, help="the model's context in tokens (SmolLM2: 8192)")
    agentic.add_argument("--parallel", type=int, default=4, help="episodes played at a time")
    agentic.add_argument("--sandbox", default=None, help="a `cuda-agent serve` URL that judges (default: here)")
    agentic.set_defaults(func=cmd_train_agentic)


def _add_report_command(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser(
        "report",
        help="runs' per-step metrics (steps.jsonl, report.html with the reward curve) and, over runs of several "
        "seeds, report.md: the before/after table from verl's validation dumps, the learning check per seed, "
        "the spread, per-step figures",
    )
    report.add_argument(
        "run_dir",
        nargs="+",
        help="a stage's --out folder (its metrics.<n>.jsonl, one per launch; validation_data/ and rollout_data/, "
        "verl's dumps, where the run wrote them), one per seed",
    )
    report.add_argument("--out", default=None, help="where report.md goes (default: the one RUN_DIR)")
    report.add_argument(
        "--held-out",
        default=None,
        help="comma-separated task references held out of training (default: the agentic curriculum's)",
    )
    report.set_defaults(func=cmd_train_report)


def _add_all_command(sub: argparse._SubParsersAction) -> None:
    everything = sub.add_parser("all", help="every stage in order, artifacts handed on; run again to resume")
    everything.add_argument("--config", required=True, help="a pipeline file (recipes/pipeline.yaml)")
    everything.add_argument(
        "--dry-run",
        action="store_true",
        help="compose and check every stage still to run; launch nothing, change no manifest (no GPU)",
    )
    everything.set_defaults(func=cmd_train_all)


def add_train_command(commands: argparse._SubParsersAction) -> None:
    """Add `train data` and `train STAGE` to the CLI's sub-commands."""
    from cuda_agent.rl import STAGES

    train = commands.add_parser(
        "train", help="data for verl, then compose, check and launch a training stage on verl (needs '.[rl]')"
    )
    sub = train.add_subparsers(
        dest="stage",
        required=True,
        metavar="{data,rft-data,critic-data,curriculum,agentic,report,all," + ",".join(STAGES) + "}",
    )
    _add_data_command(sub)
    _add_rft_data_command(sub)
    _add_critic_data_command(sub)
    _add_curriculum_command(sub)
    _add_agentic_command(sub)
    _add_report_command(sub)
    _add_all_command(sub)
    for stage in STAGES:
        run = sub.add_parser(stage, help=f"stage {STAGES.index(stage) + 1} of {len(STAGES)}: compose, check, launch")
        run.add_argument("--config", default=None, help="a recipe YAML (default: the bundled recipes/<stage>.yaml)")
        run.add_argument("--out", default=None, help="where the agent-loop YAML goes (default runs/train/<stage>)")
        run.add_argument("--dry-run", action="store_true", help="compose, check and print; do not launch (no GPU)")
        run.add_argument(
            "--resume", action="store_true", help="continue from the latest checkpoint in trainer.default_local_dir"
        )
        run.add_argument(
            "--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="a verl override"
        )
        run.set_defaults(func=cmd_train)
