"""Settings of one judgement; every field has a default that follows the paper or KernelBench."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cuda_agent.machine import cache_root


class RunLimits(BaseModel):
    """The time limits a candidate's run got, and what they were derived from (recorded in `Verdict.env`)."""

    step_s: float
    """Longest one step of the run may take (a call, a comparison, the set-up): past it, a hang."""
    total_s: float
    """Longest the whole run may take."""
    eager_ms: float | None
    """The reference's eager time the limits were derived from; None: not known (floor and cap only)."""
    source: str
    """Where eager_ms came from: 'cached baseline', 'unknown' or 'fixed' (adaptive limits off)."""


class JudgeConfig(BaseModel):
    """How to judge a candidate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    device: Literal["auto", "cuda", "cpu"] = "auto"
    """'auto' picks cuda when a GPU is visible, else cpu."""
    candidate_user: str | None = "fresh"
    """When the judge runs as root: run the candidate's code as this user, in namespaces of its own (confine.py).
    "fresh": a user id of its own for this judgement alone, whose processes and shared-folder files are ended
    with the judgement (judge/uids.py); a name: that account (e.g. "nobody", shared by every candidate).
    None: as the judge (root), with nothing between the candidate and the caches: for tests of the runtime
    defences alone."""
    trials: int = Field(default=5, ge=1)
    """Correctness trials, each with fresh inputs from get_inputs() under a new seed (paper: 5)."""
    atol: float = 1e-2
    """Elementwise absolute tolerance (paper: 1e-2)."""
    rtol: float = 1e-2
    """Elementwise relative tolerance (paper: 1e-2)."""
    norm_rtol: float = 1e-2
    """Bound on ||out - ref|| / ||ref||; fails outputs that pass allclose only because atol dwarfs them."""
    precision: Literal["strict", "paper"] = "strict"
    """'strict' rejects fp32 tasks computed at lower precision; 'paper' keeps only the tolerance checks."""
    precision_factor: float = 10.0
    """strict: the candidate's error against float64 may be at most this times eager fp32's error...

    Calibrated on the H200 (bench/results/h200-2026-12-02/): over 18 KernelBench tasks TF32 was
    28x-1401x eager fp32's error where it applies, bf16 and fp16 at least 190x; the legit fp32
    kernels in solutions/kernelbench/ measured at most 1.8x."""
    precision_floor: float = 1e-5
    """...or this normwise relative error, whichever is larger (TF32 matmuls measured 2.3e-5 and up)."""
    policy: Literal["cuda-agent", "kernelbench"] = "cuda-agent"
    """Which solutions are legal. 'cuda-agent': SKILL.md's workspace rules (forward reaches only the compiled
    extension; training and workspaces). 'kernelbench': torch operators may mix with the candidate's own kernels,
    which must still do real work on the timed path; everything that fakes a speed-up or a result stays forbidden
    (judge/policy/)."""
    static_policy: bool = True
    """Run the static policy stage. False only to test the runtime defences on their own."""
    robustness_trials: bool = True
    """Add trials on sign-flipped and rescaled inputs where the reference stays finite (threat 12)."""
    time: bool = True
    """Time the candidate and the baselines (False: correctness only, reward at most 1)."""
    compile_mode: str | None = None
    """torch.compile mode of the compile baseline (None: the default mode)."""
    min_reps: int = Field(default=10, ge=1)
    """Fewest timed repetitions per phase."""
    max_reps: int = Field(default=200, ge=1)
    """Most timed repetitions per phase."""
    target_phase_s: float = 1.0
    """Repeat until a phase has spent this long (bounded by min/max reps): the baselines' timed calls, the candidate's
    phase in wall time (its fresh input draws included, the judging of its outputs not)."""
    timing_ci_width: float = Field(default=0.01, gt=0)
    """Past `target_phase_s`, a timed phase goes on until its median's 95 % interval is within this share of the
    median on either side (timing.median_interval)..."""
    max_phase_s: float = Field(default=2.0, gt=0)
    """...or until this many seconds are spent (`max_reps` still caps the calls)."""
    timing_noise_floor: dict[str, float] = Field(default_factory=lambda: {"cuda": 0.01, "cpu": 0.03})
    """Per device: the least half-width, as a share of the median, of the intervals the reward's 5 % margins are
    decided on (timing.decision_interval). Run-to-run drift that one phase's repetitions do not show: the CPU demo's
    candidate measured 0.0952 and 0.0991 ms in two runs minutes apart on a shared 2-core machine."""
    paired_eager: tuple[str, ...] = ("cpu",)
    """Devices on which the grader times eager again right after the candidate's phase (a quarter of its target),
    and the cached baselines are rescaled by eager's time now over its cached time (`env.timing.drift`): a shared
    machine's load moves both alike. On the CPU the demo's candidate measured 0.050 and 0.061 ms in two runs
    minutes apart against one cached eager time of 0.061 ms."""
    kernel_basis: bool = False
    """Let the reward decide on kernel times (the paper's basis) where eager's whole call is mostly overhead
    (judge/basis.py). Off by default: the candidate's kernel time is read by the profiler in its own process (CUPTI
    sees only the process that launched the kernels), a claim the grader can cap by the whole call but not check,
    so a reward in RL never rests on it. Kernel times are in every verdict either way."""
    screen_min_elems: int = Field(default=1 << 22, ge=1)
    """Timed outputs (those drawn at random, not the last call's) of at least this many elements are first read at
    `trial.SCREEN_POSITIONS` random positions, and judged in full only where those leave doubt (`trial.screen_trial`):
    ~75 ms less each at KernelBench L1/19's 1.6 G elements (H100, bench/results/h100-2026-12-06-d/). A huge value judges every one in full."""
    max_group_calls: int = Field(default=256, ge=1, le=256)
    """The most calls of forward one request to the candidate's process carries (child/timing.py's `group_size`
    chooses how many, from eager's time and the grader's overhead noise, before candidate code; every request of a
    run, trials included, carries as many, and the baselines are timed in groups of as many). 1: a call per
    request, and the outside view's resolution per call is the per-request overhead's noise."""
    release_per_call: bool = False
    """CPU device only: a request's calls get their inputs one at a time, each call's written into its buffer once
    the call before has returned (child/release.py), so that no call sees a later call's inputs (its first call
    could compute them all in one batch); the baselines' requests are released alike. Off by default: on the loaded
    2-core VM it made the outside view's per-call resolution 2.5 to 3.7 times coarser (a hand-off between two
    processes per call; bench/results/cpu-2026-12-07-release2/). Off: every call's inputs are in the candidate's
    process when its request starts. On CUDA they always are (DESIGN.md)."""
    warmup_reps: int = Field(default=3, ge=0)
    """Untimed calls before timing (after the first call's build and autotune)."""
    cpu_threads: int = Field(default=1, ge=1)
    """CPU device only: threads for the candidate and the baselines alike (OMP/MKL and torch). One by
    default: on a shared machine, multi-threaded timings swing by 10-100x with other load (an OpenMP
    barrier waits for a descheduled thread), and a baseline cached in such a moment would stick."""
    build_timeout_s: float = 600.0
    """Time limit of the build stage."""
    run_timeout_s: float = 600.0
    """Cap on the candidate's correctness-plus-timing process: its whole run, and each step of it."""
    adaptive_limits: bool = True
    """Derive the run's limits from the reference's eager time (`run_limits`); False: run_timeout_s alone."""
    step_floor_s: float = 30.0
    """Adaptive: a step of the run (one call of the candidate or the reference, a comparison, the set-up) may
    take this long plus `limit_margin` x `slowdown_allowed` x the reference's eager time; a step that takes
    longer is a hang (`timeout`). Covers process start and CUDA set-up on a loaded machine."""
    slowdown_allowed: float = 20.0
    """Adaptive: a correct kernel this many times slower than eager still finishes within the limits."""
    limit_margin: float = 2.0
    """Adaptive: slack on the expected time of such a slow kernel (a busy machine, the float64 reference)."""
    standby_worker: bool = True
    """Start the candidate's process while the judgement's earlier stages run (standby.py), so that the process
    start is off the GPU's time. False: start it when its turn comes."""
    baseline_timeout_s: float = 900.0
    """Time limit of the baseline timing process (torch.compile included)."""
    cache_dir: Path = Field(default_factory=cache_root)
    """Builds, baseline timings and verdicts are cached below this folder."""
    verdict_cache: bool = True
    """Answer a candidate judged before (same task, bytes, settings, judge, torch, driver, device) with its stored
    verdict (`env.verdict_cached`; a pass keeps its first timings). False: judge every time."""
    timing_lock: Path | None = None
    """A file that baseline processes lock (flock) around each timed phase, so that several can share one
    GPU: they start, build inputs and compile in parallel and time one at a time (`cuda-agent bench
    baselines --workers N`). None: no lock; the sandbox pool gives a judgement the GPU alone instead."""

    def run_limits(self, eager_ms: float | None, source: str = "cached baseline") -> RunLimits:
        """The run's limits for a reference that takes `eager_ms` per call (None: unknown).

        A step is at most one call of the candidate (allowed `slowdown_allowed` x eager) or of the reference
        (float64 included), so its limit is the floor plus `limit_margin` x that call. The whole run counts the
        candidate's calls (trials, robustness trials, recheck, warm-up and the fewest timed repetitions), the
        reference's and a timed phase's target time; it is capped by `run_timeout_s`, as a step is.
        """
        cap = self.run_timeout_s
        if not self.adaptive_limits:
            return RunLimits(step_s=cap, total_s=cap, eager_ms=eager_ms, source="fixed")
        if eager_ms is None:
            return RunLimits(step_s=min(self.step_floor_s, cap), total_s=cap, eager_ms=None, source="unknown")
        call_s = eager_ms / 1e3
        step = self.step_floor_s + self.limit_margin * self.slowdown_allowed * call_s
        trials = self.trials + (2 if self.robustness_trials else 0) + 1
        calls = trials + ((self.warmup_reps + self.min_reps) if self.time else 0)
        # The timed phase may go on to max_phase_s for a narrow interval; eager timed again after it (paired_eager)
        # spends a quarter of the target (grader.PAIRED_SHARE) besides its calls.
        phase_s = max(self.target_phase_s, self.max_phase_s) + self.target_phase_s / 4 if self.time else 0
        expected = calls * self.slowdown_allowed * call_s + trials * 4 * call_s + phase_s
        total = 2 * self.step_floor_s + self.limit_margin * expected
        return RunLimits(step_s=min(step, cap), total_s=min(max(total, step), cap), eager_ms=eager_ms, source=source)
