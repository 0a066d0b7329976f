"""A synthesis run: compose -> filter (worker pool) -> decontaminate -> deduplicate -> parquet + sidecar.

Every candidate decision is appended to the sidecar `<out>.measurements.jsonl` as it is made (one
`SynthRecord` a line), and the parquet is rewritten from the kept records every few problems and at the
end; `resume` reads the sidecar back and continues with the next candidate index, so a killed run
loses at most the problems in flight. Output columns are Ops-6K's: `ops` (JSON list), `data_source`
(`synth#<depth>`), `code`.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field

from cuda_agent.errors import ConfigError
from cuda_agent.synth.catalog import OpSpec
from cuda_agent.synth.compose import Candidate, ComposeConfig, compose, resize
from cuda_agent.synth.decontaminate import StructureIndex, exact_key, near_key, operator_signature
from cuda_agent.synth.filters import FilterConfig, FilterResult
from cuda_agent.synth.pool import FilterPool


class SynthConfig(BaseModel):
    """One synthesis run."""

    n: int = Field(gt=0)
    """Problems to keep."""
    seed: int = 0
    workers: int = 1
    compose: ComposeConfig = Field(default_factory=ComposeConfig)
    filters: FilterConfig = Field(default_factory=FilterConfig)
    max_similarity: float = 0.9
    """Drop a problem whose structural similarity to a KernelBench problem exceeds this (paper: 0.9)."""
    max_candidates: int | None = None
    """Give up after this many candidate indices (default 50 x n)."""
    checkpoint_every: int = 25
    """Rewrite the parquet after this many newly kept problems."""
    resize_to: float | None = Field(default=3.0, gt=0)
    """A candidate faster than the time window is tried once more with its batch scaled for about this many
    times the window's lower end (capped by `compose.resized_numel_cap()`); None: no second try."""


class SynthRecord(BaseModel):
    """One line of the sidecar: what happened to one candidate."""

    index: int
    ops: list[str]
    composer: str = "rules"
    scale: float = Field(default=1.0, description="Batch factor of a second try (the first try has 1.0, same index).")
    kept: bool
    reason: str | None = Field(description="Filter name, 'timeout', 'crash', 'kernelbench_similar', 'duplicate' ...")
    filter: FilterResult | None = None
    kb_similarity: float | None = Field(default=None, description="Exact when above max_similarity, else None.")
    kb_nearest: str | None = None
    kb_same_signature: str | None = Field(default=None, description="A KernelBench ref with the same operator set.")
    code: str | None = Field(default=None, description="Kept problems only (the parquet is rebuilt from these).")
    at_s: float | None = Field(default=None, description="Seconds from this run's start (or resume) to this record.")


def depth_quota(n: int, mix: dict[int, float]) -> dict[int, int]:
    """Problems per depth, summing to n (largest remainder)."""
    total = sum(mix.values())
    exact = {d: n * w / total for d, w in mix.items()}
    quota = {d: int(v) for d, v in exact.items()}
    for d in sorted(exact, key=lambda d: exact[d] - quota[d], reverse=True)[: n - sum(quota.values())]:
        quota[d] += 1
    return quota


def sidecar_path(out: Path) -> Path:
    return out.with_suffix(".measurements.jsonl")


def read_sidecar(out: Path) -> list[SynthRecord]:
    path = sidecar_path(out)
    if not path.is_file():
        return []
    return [SynthRecord.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]


def write_parquet(records: list[SynthRecord], out: Path) -> None:
    """The kept problems in the Ops-6K layout, written atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kept = [r for r in records if r.kept]
    table = pa.table(
        {
            "ops": [json.dumps(r.ops) for r in kept],
            "data_source": [f"synth#{len(r.ops)}" for r in kept],
            "code": [r.code or "" for r in kept],
        }
    )
    tmp = out.with_suffix(".tmp.parquet")
    pq.write_table(table, tmp)
    tmp.replace(out)


class Synthesizer:
    """State of one run: what is kept, the duplicate keys seen, the depth counts."""

    def __init__(self, config: SynthConfig, ops: list[OpSpec], kernelbench: list[tuple[str, str]], out: Path) -> None:
        self.config, self.ops, self.out = config, ops, out
        self.index = StructureIndex(kernelbench)
        self.signatures = {operator_signature(code): ref for ref, code in kernelbench}
        self.quota = depth_quota(config.n, config.compose.depth_mix)
        self.records: list[SynthRecord] = []
        self.kept_by_depth: Counter[int] = Counter()
        self.seen_exact: set[str] = set()
        self.seen_near: set[str] = set()
        self.reasons: Counter[str] = Counter()
        self.next_index = 0
        self.started = time.perf_counter()
        self.pending: dict[int, Candidate] = {}
        """Candidates handed to the filters and not yet answered, by index."""
        self.resized: deque[Candidate] = deque()
        """Second tries at a larger size, filtered before new candidates (a kill loses them: resume goes on)."""

    @property
    def kept(self) -> int:
        return sum(self.kept_by_depth.values())

    def resume(self) -> None:
        """Load a previous run's sidecar and continue after its last candidate."""
        for record in read_sidecar(self.out):
            self._remember(record)
            self.next_index = max(self.next_index, record.index + 1)

    def _remember(self, record: SynthRecord) -> None:
        self.records.append(record)
        self.reasons[record.reason or "kept"] += 1
        if record.kept and record.code is not None:
            self.kept_by_depth[len(record.ops)] += 1
            self.seen_exact.add(exact_key(record.code))
            self.seen_near.add(near_key(record.code))

    def candidates(self, composer: Callable[[int], Candidate | None]) -> Iterator[tuple[int, str]]:
        """(index, code) of the candidates worth filtering, skipping full depths and repeats before any run."""
        limit = self.config.max_candidates or 50 * self.config.n
        while self.next_index < limit and self.kept < self.config.n:
            if self.resized:
                candidate = self.resized.popleft()
                if self.kept_by_depth[len(candidate.ops)] < self.quota.get(len(candidate.ops), 0):
                    self.pending[candidate.index] = candidate
                    yield candidate.index, candidate.code
                continue
            index = self.next_index
            self.next_index += 1
            depth = candidate_depth(self.config.seed, index, self.config.compose.depth_mix)
            if self.kept_by_depth[depth] >= self.quota.get(depth, 0):
                continue  # not recorded: it was never composed
            candidate = composer(index)
            if candidate is None:
                self._append(SynthRecord(index=index, ops=[], kept=False, reason="uncomposable"))
                continue
            reason = self._static_reason(candidate)
            if reason is not None:
                self._append(SynthRecord(index=index, ops=candidate.ops, composer=candidate.composer, kept=False,
                                         reason=reason))  # fmt: skip
                continue
            self.pending[index] = candidate
            yield index, candidate.code

    def _static_reason(self, candidate: Candidate) -> str | None:
        if exact_key(candidate.code) in self.seen_exact:
            return "duplicate"
        if near_key(candidate.code) in self.seen_near:
            return "near_duplicate"
        return None

    def accept(self, result: FilterResult) -> bool:
        """Record one filtered candidate; False once enough are kept."""
        candidate = self.pending.pop(result.index)
        record = SynthRecord(index=result.index, ops=candidate.ops, composer=candidate.composer, scale=candidate.scale,
                             kept=False, reason=result.reason, filter=result)  # fmt: skip
        depth = len(candidate.ops)
        if result.passed:
            nearest = self.index.nearest(candidate.code, at_least=self.config.max_similarity)
            # Computed exactly only above the threshold (difflib's bounds skip the rest): None means "at most".
            record.kb_similarity = nearest.similarity if nearest.ref is not None else None
            record.kb_nearest = nearest.ref
            record.kb_same_signature = self.signatures.get(operator_signature(candidate.code))
            if nearest.similarity > self.config.max_similarity:
                record.reason = "kernelbench_similar"
            elif self._static_reason(candidate) is not None:
                record.reason = self._static_reason(candidate)  # a twin kept while this one was in flight
            elif self.kept_by_depth[depth] >= self.quota.get(depth, 0):
                record.reason = "depth_quota"
            else:
                record.kept, record.code = True, candidate.code
        self._append(record)
        self._maybe_resize(candidate, result)
        if record.kept and self.kept % self.config.checkpoint_every == 0:
            write_parquet(self.records, self.out)
        return self.kept < self.config.n

    def _maybe_resize(self, candidate: Candidate, result: FilterResult) -> None:
        """Queue a second try of a candidate that failed only for running faster than the window."""
        config = self.config
        too_fast = result.reason == "time_window" and result.eager_ms is not None
        if config.resize_to is None or candidate.scale != 1.0 or not too_fast or result.eager_ms <= 0:
            return
        if result.eager_ms >= config.filters.min_ms:
            return  # too slow: a smaller batch would pass, but the window's top is 100x its bottom: rare
        resized = resize(candidate.code, config.resize_to * config.filters.min_ms / result.eager_ms,
                         config.compose.resized_numel_cap())  # fmt: skip
        if resized is not None:
            code, scale = resized
            self.resized.append(candidate.model_copy(update={"code": code, "scale": scale}))

    def _append(self, record: SynthRecord) -> None:
        record.at_s = round(time.perf_counter() - self.started, 3)
        self._remember(record)
        with sidecar_path(self.out).open("a") as f:
            f.write(record.model_dump_json() + "\n")


def candidate_depth(seed: int, index: int, mix: dict[int, float]) -> int:
    """The depth of candidate `index`, drawn apart from its composition so full depths are skipped cheaply."""
    depths = sorted(mix)
    return random.Random(f"{seed}:{index}:depth").choices(depths, weights=[mix[d] for d in depths])[0]


def rule_composer(ops: list[OpSpec], config: SynthConfig) -> Callable[[int], Candidate | None]:
    def draw(index: int) -> Candidate | None:
        depth = candidate_depth(config.seed, index, config.compose.depth_mix)
        return compose(ops, config.seed, index, config.compose.model_copy(update={"depth_mix": {depth: 1.0}}))

    return draw


def run_synthesis(
    synth: Synthesizer,
    composer: Callable[[int], Candidate | None],
    on_progress: Callable[[Synthesizer], None] | None = None,
    log_path: Path | None = None,
) -> Synthesizer:
    """Fill `synth` up to its `n` kept problems (or its candidate limit) and write the parquet."""
    config = synth.config
    if config.workers < 1:
        raise ConfigError(f"workers must be >= 1, got {config.workers}")

    def on_result(result: FilterResult) -> bool:
        go_on = synth.accept(result)
        if on_progress is not None:
            on_progress(synth)
        return go_on

    try:
        with FilterPool(config.filters, config.workers, log_path) as pool:
            pool.map(synth.candidates(composer), on_result)
    finally:
        write_parquet(synth.records, synth.out)  # also when interrupted: the parquet matches the sidecar
    return synth
