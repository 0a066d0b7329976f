"""The paper's training stages as one pipeline, each stage's artifact handed to the next: `cuda-agent train all`.

    single-turn PPO -> collect (agent loop, no update) -> rft-data (filter) -> rft (verl's SFT trainer)
      -> critic-data (the collected episodes as replay rows) -> critic-warmup (critic only) -> agentic PPO

The pipeline file names each stage's recipe and extra overrides; the pipeline sets what chains them
(model paths, data files, checkpoint and rollout folders, all under `run_dir`), so nothing is copied
by hand. A stage's checkpoint becomes a Hugging Face folder for the next (`hf_folder`): verl's own
`huggingface/` copy when the checkpoint holds weights there (`hf_model` in save_contents), else
verl's model merger (`python -m verl.model_merger merge`).

`run_dir/manifest.json` records every stage's status, artifact and attempts. Run again, a finished
stage is skipped and a half-done one is launched again with `--resume`: verl continues from its
latest checkpoint in the stage's checkpoint folder. Each launch logs its steps to a file of its own
(`<stage>/metrics.<n>.jsonl`, verl's `file` backend; `recipes.launch`), and a finished stage gets `steps.jsonl`
and `report.html` (`cuda_agent.rl.report`). A stage named under `skip:` is never launched: the artifact given
there is recorded as its own (status done) and handed on like one it made; stages already done stay done.

    run_dir: runs/pipeline
    stages:
      single-turn: {recipe: recipes/single_turn.yaml, set: [actor_rollout_ref.model.path=Qwen/Qwen3-8B]}
      rft-data: {extra_sft: [runs/curriculum/sft.parquet]}   # optional rows added to the kept trajectories
    skip:                                  # optional: stages not run, with the artifact each would have made
      single-turn: Qwen/Qwen3-8B           # collect (and rft) start from this model instead
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.errors import ConfigError
from cuda_agent.rl.launch import latest_checkpoint

ORDER = ("single-turn", "collect", "rft-data", "rft", "critic-data", "critic-warmup", "agentic-ppo")
TRAINED = {"single-turn": "actor", "rft": "", "critic-warmup": "critic", "agentic-ppo": "actor"}
"""Stages that checkpoint, and the role folder inside `global_step_N/` that the next stage takes ('' for SFT)."""


class StageSpec(BaseModel):
    """One stage of the pipeline file."""

    model_config = ConfigDict(extra="forbid")

    recipe: Path | None = Field(default=None, description="The stage's recipe (default: the bundled one).")
    set: list[str] = Field(default_factory=list, description="More verl overrides, after the pipeline's own.")
    extra_sft: list[Path] = Field(
        default_factory=list, description="rft-data only: SFT parquet rows added to the kept trajectories."
    )


class PipelineConfig(BaseModel):
    """The pipeline file (`cuda-agent train all --config FILE`)."""

    model_config = ConfigDict(extra="forbid")

    run_dir: Path = Field(default=Path("runs/pipeline"), description="Every stage's output goes under here.")
    stages: dict[str, StageSpec] = Field(default_factory=dict, description="Per stage name: recipe and overrides.")
    skip: dict[str, str] = Field(
        default_factory=dict,
        description="Stages not to run, each with the artifact it would have made (a model folder or hub id for a "
        "trained stage, the rollouts folder for collect, the parquet for rft-data and critic-data).",
    )


class StageRecord(BaseModel):
    """A stage's line in manifest.json."""

    status: Literal["started", "done"] = Field(description="done: its artifact exists; started: resume it.")
    attempts: int = Field(default=0, description="Launches so far.")
    artifact: str | None = Field(default=None, description="What the next stage takes (a folder or a file).")


class Manifest(BaseModel):
    """run_dir/manifest.json."""

    stages: dict[str, StageRecord] = Field(default_factory=dict)

    @staticmethod
    def load(path: Path) -> Manifest:
        return Manifest.model_validate_json(path.read_text()) if path.exists() else Manifest()

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(self.model_dump_json(indent=2) + "\n")
        tmp.replace(path)  # a kill mid-write leaves the previous manifest, never half of one


def load_pipeline(path: Path) -> PipelineConfig:
    """Read a pipeline file.

    Raises:
        ConfigError: unreadable, unknown fields, or a stage name not in ORDER.
    """
    try:
        config = PipelineConfig.model_validate(yaml.safe_load(Path(path).read_text()) or {})
    except (OSError, yaml.YAMLError, ValueError) as exc:
        raise ConfigError(f"cannot read the pipeline {path}: {exc}") from exc
    unknown = [name for name in (*config.stages, *config.skip) if name not in ORDER]
    if unknown:
        raise ConfigError(f"unknown stage(s) {', '.join(unknown)} in {path}; stages: {', '.join(ORDER)}")
    skip = {}
    for stage, artifact in config.skip.items():
        local = Path(artifact).expanduser()
        if stage not in TRAINED and not local.exists():  # a model may be a hub id; data must be here
            raise ConfigError(f"skip: {stage}'s artifact {artifact} does not exist ({path}); give the file or run it")
        # Absolute: the stages that take it run in other working folders (Ray's workers, torchrun).
        skip[stage] = str(local.absolute()) if local.exists() else artifact
    return config.model_copy(update={"skip": skip})


def _has_weights(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def hf_folder(ckpt_dir: Path, role: str, out: Path, source_model: str | None = None) -> Path:
    """A Hugging Face folder of the latest checkpoint's `role` ('actor', 'critic', or '' for SFT), at `out`.

    verl's `huggingface/` copy is used when it holds weights; otherwise verl's model merger writes `out`.
    Python files of the source model (a `trust_remote_code` class) are copied along, as verl saves
    only the config and tokenizer beside the weights.

    Raises:
        ConfigError: no checkpoint, or the merger fails (its output in the message).
    """
    latest = latest_checkpoint(ckpt_dir)
    if latest is None:
        raise ConfigError(f"no complete checkpoint in {ckpt_dir}: the stage saved none (trainer.save_freq)")
    folder = latest / role if role else latest
    own = folder / "huggingface"
    if _has_weights(own):
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(own, out)
    else:
        command = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp"]
        command += ["--local_dir", str(folder), "--target_dir", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not _has_weights(out):
            raise ConfigError(f"verl's model merger failed on {folder}: {(done.stderr or done.stdout)[-2000:]}")
    if source_model and Path(source_model).is_dir():
        for code in Path(source_model).glob("*.py"):
            if not (out / code.name).exists():
                shutil.copy2(code, out / code.name)
    return out


Launcher = Callable[[Any, bool], int]
"""(TrainingPlan, resume) -> exit code: `recipes.launch` (tests pass their own)."""


class Pipeline:
    """Runs the stages of a `PipelineConfig` in order, recording and handing on their artifacts."""

    def __init__(self, config: PipelineConfig, launcher: Launcher | None = None, echo: Callable[[str], None] = print):
        from cuda_agent.rl.recipes import launch

        self.config, self.run = config, config.run_dir
        self.manifest_path = self.run / "manifest.json"
        self.manifest = Manifest.load(self.manifest_path)
        self.launch = launcher or (lambda plan, resume: launch(plan, resume=resume))
        self.echo = echo
        self.planned: dict[str, Path | str] = {}
        """A dry run's artifacts: what each stage not done yet would hand on, where it would put it."""

    def artifact(self, stage: str) -> str:
        record = self.manifest.stages.get(stage)
        if stage in self.planned and (record is None or record.status != "done"):
            return str(self.planned[stage])
        if record is None or record.status != "done" or not record.artifact:
            raise ConfigError(f"stage {stage} has no artifact yet: run it, or name its artifact under skip:")
        return record.artifact

    def run_all(self) -> Manifest:
        """Run every stage not done yet, in order; returns the manifest.

        Raises:
            ConfigError: a stage failed or produced nothing (the manifest keeps it 'started' for a resume).
        """
        for stage in ORDER:
            record = self.manifest.stages.get(stage)
            given = self.config.skip.get(stage)
            if given is not None:  # recorded as done, so the next stages take it like a made artifact
                attempts = record.attempts if record else 0
                self.manifest.stages[stage] = StageRecord(status="done", attempts=attempts, artifact=given)
                self.manifest.save(self.manifest_path)
                self.echo(f"== {stage}: skipped, given {given}")
                continue
            if record is not None and record.status == "done":
                self.echo(f"== {stage}: already done, {record.artifact}")
                continue
            resume = record is not None and record.status == "started"
            started = time.monotonic()
            artifact = str(
                self._run_stage(stage, resume, lambda s=stage, r=record, again=resume: self._begin(s, r, again))
            )
            record = self.manifest.stages[stage]
            record.artifact, record.status = artifact, "done"
            self.manifest.save(self.manifest_path)
            self.echo(f"== {stage}: done in {time.monotonic() - started:.0f} s, {record.artifact}")
        return self.manifest

    def _begin(self, stage: str, record: StageRecord | None, resume: bool) -> None:
        """Record a stage as started, one attempt more, as its work begins: after its checks, so that a launch they
        stop leaves the manifest as it was (not 'started', no attempt counted)."""
        record = StageRecord(status="started", attempts=(record.attempts if record else 0) + 1)
        self.manifest.stages[stage] = record
        self.manifest.save(self.manifest_path)
        self.echo(f"== {stage}: {'resuming' if resume else 'starting'} (attempt {record.attempts})")

    def dry_run(self) -> list[str]:
        """Compose and check every stage still to run, as `run_all` would launch it, launching nothing and leaving
        the manifest as it is; a later stage takes the artifact an earlier one would make (`planned`), so a path
        that does not exist yet only because its stage has not run is no problem. Returns the problems found."""
        from cuda_agent.rl.recipes import check_plan

        problems: list[str] = []
        upcoming: list[str] = []  # artifacts of stages that have not run: missing for now, by design
        for stage in ORDER:
            record, given = self.manifest.stages.get(stage), self.config.skip.get(stage)
            if given is not None or (record is not None and record.status == "done"):
                self.planned[stage] = given or self.artifact(stage)
                self.echo(f"== {stage}: {'skipped, given' if given else 'already done,'} {self.planned[stage]}")
                continue
            out = self.run / stage.replace("-", "_")
            if stage in ("rft-data", "critic-data"):
                spec = self.config.stages.get(stage, StageSpec())
                self.planned[stage] = out / ("rft.parquet" if stage == "rft-data" else "replay.parquet")
                found = [f"{path} does not exist" for path in spec.extra_sft if not Path(path).exists()]
            else:
                plan, recipe = self._plan(stage, out, self.config.stages.get(stage, StageSpec()))
                self.planned[stage] = Path(recipe.agent_loop.work_dir) if stage == "collect" else out / "hf"
                found = [p for p in check_plan(plan, launching=False) if not any(a in p for a in upcoming)]
            upcoming.append(str(self.planned[stage]))
            self.echo(f"== {stage}: would make {self.planned[stage]}" + (f"; {len(found)} problem(s)" if found else ""))
            problems += [f"{stage}: {problem}" for problem in found]
        return problems

    def _run_stage(self, stage: str, resume: bool, begin: Callable[[], None]) -> Path:
        out = self.run / stage.replace("-", "_")
        out.mkdir(parents=True, exist_ok=True)
        spec = self.config.stages.get(stage, StageSpec())
        if stage in ("rft-data", "critic-data"):
            begin()
            return self._rft_data(out, spec) if stage == "rft-data" else self._critic_data(out)
        return self._train(stage, out, spec, resume, begin)

    def _rft_data(self, out: Path, spec: StageSpec) -> Path:
        from cuda_agent.rl.rft import read_collected, write_rft_data

        collected, _ = read_collected(Path(self.artifact("collect")))
        path = out / "rft.parquet"
        result = write_rft_data(collected, path, extra_sft=spec.extra_sft)
        self.echo(f"   rft-data: {result.summary()}; {path}")
        return path

    def _critic_data(self, out: Path) -> Path:
        from cuda_agent.rl.rft import read_collected, write_replay_data

        path = out / "replay.parquet"
        write_replay_data(read_collected(Path(self.artifact("collect")))[0], path)
        return path

    def _chain(self, stage: str, out: Path) -> tuple[list[str], dict[str, Any]]:
        """The overrides that hand the previous stages' artifacts to `stage`, and recipe field updates."""
        ckpt = f"trainer.default_local_dir={out / 'checkpoints'}"
        if stage == "single-turn":
            return [ckpt], {"reward_function": {"work_dir": out / "answers"}}
        if stage == "collect":
            return [f"actor_rollout_ref.model.path={self.artifact('single-turn')}"], {
                "agent_loop": {"work_dir": out / "rollouts", "save_tokens": True}  # rft and critic-data read them
            }
        if stage == "rft":
            data = self.artifact("rft-data")
            return [ckpt, f"model.path={self.artifact('single-turn')}", f"data.train_files={data}"], {}
        if stage == "critic-warmup":
            actor, data = self.artifact("rft"), self.artifact("critic-data")
            return [
                ckpt,
                f"actor_rollout_ref.model.path={actor}",
                f"critic.model.path={actor}",
                f"data.train_files={data}",
                f"data.val_files={data}",
            ], {}
        actor, critic = self.artifact("rft"), self.artifact("critic-warmup")
        loop = {"agent_loop": {"work_dir": out / "rollouts"}}
        return [ckpt, f"actor_rollout_ref.model.path={actor}", f"critic.model.path={critic}"], loop

    def _plan(self, stage: str, out: Path, spec: StageSpec) -> tuple[Any, Any]:
        """The stage's plan (its recipe with what the earlier stages hand on, then the pipeline file's values) and
        recipe; says what it takes from the earlier stages."""
        from cuda_agent.rl.recipes import bundled_recipe, load_recipe, plan_training

        recipe = load_recipe(spec.recipe or bundled_recipe(stage))
        if recipe.stage != stage:
            raise ConfigError(f"{spec.recipe} is a recipe for {recipe.stage!r}, not {stage!r}")
        overrides, updates = self._chain(stage, out)
        for field, values in updates.items():
            current = getattr(recipe, field)
            if current is not None:
                recipe = recipe.model_copy(update={field: current.model_copy(update=values)})
        plan = plan_training(recipe, out, [*overrides, *spec.set])
        mine = {item.split("=", 1)[0] for item in spec.set}  # the pipeline file's own values win: not taken
        taken = [item for item in overrides if item.split("=", 1)[0] not in mine]
        self.echo(f"   {stage}: {recipe.entrypoint} takes {' '.join(taken)}")
        return plan, recipe

    def _train(self, stage: str, out: Path, spec: StageSpec, resume: bool, begin: Callable[[], None]) -> Path:
        from cuda_agent.rl.recipes import check_plan
        from cuda_agent.rl.report import report_run

        plan, recipe = self._plan(stage, out, spec)
        problems = check_plan(plan)
        if problems:
            raise ConfigError(f"stage {stage} cannot launch: " + "; ".join(problems))
        begin()
        code = self.launch(plan, resume)
        if code != 0:
            raise ConfigError(f"stage {stage} exited {code}; run `cuda-agent train all` again to resume it")
        if any(out.glob("metrics*.jsonl")):
            report_run(out)
        if stage == "collect":
            return Path(recipe.agent_loop.work_dir)
        source = (
            plan.config.critic.model.path
            if stage == "critic-warmup"
            else (plan.config.model.path if stage == "rft" else plan.config.actor_rollout_ref.model.path)
        )
        return hf_folder(out / "checkpoints", TRAINED[stage], out / "hf", str(source))
