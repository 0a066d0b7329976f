"""The candidate's process: ModelNew alone, called on buffers the grader shares with it (grader.py).

The grader starts it ahead (standby.py); on `go` it enters its mount namespace, drops to the candidate's user, and
answers the grader's messages on its socket until the grader closes it. It holds the task's `get_init_inputs` (for
init arguments of its own), the candidate, and views of the grader's buffers (exchange.py): no reference, no seed,
no comparison, no result file. Everything it says (a call's time, the operators it saw, the flags it holds) is a
claim the grader checks or may only refuse on; the candidate's code can change any of it.

Every request is alike: the grader fills the input buffers of its calls (one or more, as many in every request of a
run), flushes the cache and sends `call` (on the CPU with the input buffers themselves, new for the request: no
buffer this process already maps holds them); this process times each call of forward with the clock it holds,
keeps what it returned where it lies, and answers with each call's time and where its outputs are (outputs.py): the
grader stops this process and reads them itself, and the next question lets them go. Nothing runs here after a call's
clock but that account, and where the request's calls are released one at a time (`CallQuestion.release`, CPU:
release.py) a store and a spin between two calls: the later calls' buffers come empty, each filled by the grader once
the call before has returned. A process of ours runs
the same loop on the task's reference (`reference`): the baselines are timed through it. Whether a call
is a trial, a timed call, or a timed call whose output the grader will judge is decided in the grader, after the
answer. Calls with `trace` run under the ATen tracer, which the candidate can see (its report can only refuse); under
kernelbench one trial drawn at random runs under the dataflow check instead (`dataflow`), in the same buffers as every
call: only the instrument itself tells it apart.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child.exchange import Buffer, Channel, ChannelClosed, dtype_name, dtype_of, open_buffer
from cuda_agent.judge.protocol import (
    BuffersQuestion,
    CallAnswer,
    CallQuestion,
    DataflowCheck,
    Done,
    InputRef,
    LoadAnswer,
    LoadQuestion,
    LockQuestion,
    OutputShape,
    ProfileAnswer,
    ProfileQuestion,
    ReferenceQuestion,
    ReturnedSpec,
    TensorRef,
    read_question,
)

if TYPE_CHECKING:
    from cuda_agent.judge.child.release import Control

SOCKET_FD_ENV = "CUDA_AGENT_SHIM_FD"
"""The shim finds its end of the grader's socket pair in this variable."""
MAX_TEXT = 20_000
"""The longest message an answer carries (protocol.CallAnswer): an exception's text beyond it is cut."""
DEVICE_ENV = "CUDA_AGENT_SHIM_DEVICE"
"""'cuda' or 'cpu', given on `go`."""


class Shim:
    """The candidate's process's state; each method answers one kind of message."""

    def __init__(self, channel: Channel, device: str) -> None:
        import torch

        from cuda_agent.judge import env
        from cuda_agent.judge.child import guards

        self.torch = torch
        self.channel = channel
        self.device = device
        self.flags = env.apply_precision_flags()
        self.l2 = guards.PersistingL2() if device == "cuda" else None
        self.buffers: dict[int, Buffer] = {}
        self.letting_go: list[Buffer | None] = []
        """Buffers a question released, held until its answer is sent (`serve`)."""
        self.kept: list[Any] = []
        """The last request's outputs, where forward left them, until the next question (the grader reads them)."""
        self.controls: dict[int, Control] = {}
        """The control block of requests whose calls are released one at a time (release.py), by its buffer."""
        self.model: Any = None
        self.eager: Any = None
        """The task's reference, in a process of ours that times it (`reference`); None in the candidate's."""
        self.compiled: Any = None
        self.held = contextlib.ExitStack()
        """The build folder's lock from `lock` until the import ends."""
        self.triton: Any = None
        """The launch count of a Triton solution (triton_launch.TritonLaunches); None for any other."""

    def serve(self) -> None:
        """Answer the grader's questions until it closes the socket.

        Raises:
            ProtocolError: a message that is no question (the grader is ours: our fault, said on stderr).
        """
        handlers = {
            "buffers": self.open_buffers,
            "lock": self.lock,
            "load": self.load,
            "reference": self.reference,
            "call": self.call,
            "profile": self.profile,
        }
        while True:
            try:
                data, fds = self.channel.receive_data()
            except ChannelClosed:
                return
            question = read_question(data)
            self.kept = []  # read by the grader before it asked again
            self.channel.send(handlers[question.op](question, fds), ident=question.id)
            self.letting_go.clear()  # unmapped after the answer: outside the grader's view of the next request

    def sync(self) -> None:
        if self.device == "cuda":
            self.torch.cuda.synchronize()

    def open_buffers(self, message: BuffersQuestion | CallQuestion | ProfileQuestion, fds: list[int]) -> Done:
        """Map the buffers the message brings (a call brings its inputs' on the CPU), let go the ones it releases."""
        for ident in [] if isinstance(message, BuffersQuestion) else message.released:
            self.letting_go.append(self.buffers.pop(ident, None))  # its memory goes with the last tensor viewing it
        for spec in message.buffers:
            fd = fds.pop(0) if spec.how.fd else None
            self.buffers[spec.id] = open_buffer(self.torch, self.device, spec.nbytes, spec.how, fd)
        return Done()

    def tensor(self, ref: TensorRef) -> Any:
        return self.buffers[ref.buffer].view(ref.shape, dtype_of(self.torch, ref.dtype))

    def argument(self, ref: InputRef) -> Any:
        return self.tensor(ref.tensor) if ref.tensor is not None else ref.value

    def lock(self, message: LockQuestion, fds: list[int]) -> Done:
        """Take the build folder's lock (build.loading_extensions), held until the solution is imported: a wait for
        another process's load of the same build happens here, before candidate code, and counts as the judge's."""
        from cuda_agent.judge.build import loading_extensions

        self.held.enter_context(loading_extensions(Path(message.ext_dir)))
        return Done()

    def load(self, message: LoadQuestion, fds: list[int]) -> LoadAnswer:
        """Import the solution and build ModelNew with init arguments of its own (the task's get_init_inputs)."""
        import importlib.util

        from cuda_agent.judge.child.stop import out_of_memory
        from cuda_agent.tasks.problem import call_inputs, load_problem

        if self.device == "cuda":
            self.torch.cuda.empty_cache()
        name = message.task_name
        problem = load_problem(message.task_code, f"{name} (init arguments)", module_name="_task", register=False)
        self.torch.manual_seed(0)
        init_args = call_inputs(problem, name, "get_init_inputs")
        os.environ["TORCH_EXTENSIONS_DIR"] = message.ext_dir
        sys.path[:0] = message.python_path
        if message.language == "triton":
            from cuda_agent.judge.child.triton_launch import TritonLaunches

            self.triton = TritonLaunches.install(self.device, Path(message.candidate_dir))
        spec = importlib.util.spec_from_file_location("cuda_agent_candidate", message.solution_path)
        module = importlib.util.module_from_spec(spec)
        try:
            with self.held:
                spec.loader.exec_module(module)
        except Exception as exc:
            status, text = _failure(exc, f"importing the solution raised {type(exc).__name__}: {exc}")
            return _load(status, "import", text, out_of_memory=out_of_memory(exc))
        model_cls = getattr(module, "ModelNew", None)
        if model_cls is None:
            return _load("runtime_error", "import", "the solution defines no ModelNew")
        if isinstance(model_cls, type) and issubclass(model_cls, problem.Model):
            return _load("rejected", "import", "ModelNew derives from the reference Model", "subclasses_reference")
        try:
            self.torch.manual_seed(0)
            self.model = model_cls(*init_args).to(self.device)
        except Exception as exc:
            status, text = _failure(exc, f"ModelNew(*get_init_inputs()) raised {type(exc).__name__}: {exc}")
            return _load(status, "init", text, out_of_memory=out_of_memory(exc))
        return LoadAnswer(status="ok", env=self.triton.env if self.triton else {})

    def reference(self, message: ReferenceQuestion, fds: list[int]) -> LoadAnswer:
        """Call the task's reference from now on (built at the first such question, as `load` builds ModelNew), eager
        or under torch.compile: the baselines timed by the candidate's protocol, in a process of ours."""
        from cuda_agent.tasks.problem import call_inputs, load_problem

        torch = self.torch
        if self.eager is None:
            problem = load_problem(message.task_code, message.task_name)
            torch.manual_seed(0)
            init_args = call_inputs(problem, message.task_name, "get_init_inputs")
            torch.manual_seed(0)
            self.eager = problem.Model(*init_args).to(self.device)
        if message.compiled and self.compiled is None:
            try:
                self.compiled = torch.compile(self.eager, mode=message.compile_mode)
            except Exception as exc:  # a reference torch.compile cannot handle: the baselines compare with eager only
                return _load("compile_error", "init", f"{type(exc).__name__}: {exc}"[:MAX_TEXT])
        self.model = self.compiled if message.compiled else self.eager
        return LoadAnswer(status="ok")

    def call(self, message: CallQuestion, fds: list[int]) -> CallAnswer:
        """The request's calls of forward in order (or, with `probe`, of a model that returns zeros: the grader's
        measure of its own overhead, before candidate code is loaded), each timed, its outputs kept where they lie;
        with `trace`, all under one ATen tracer (the views are allowed operators). The first call that fails answers
        for the request."""
        from cuda_agent.judge.child import guards

        self.open_buffers(message, fds)
        if self.triton is not None:
            self.triton.take()  # a profile's calls launched too
        tracer = guards.make_tracer() if message.trace else None  # one a request: a profiler's start costs ms
        with tracer if tracer is not None else contextlib.nullcontext():
            answer = self.calls(message)
        if tracer is not None and answer.status == "ok":
            answer.torch_ops = dict(tracer.disallowed)
        return answer

    def calls(self, message: CallQuestion) -> CallAnswer:
        from cuda_agent.judge.child.stop import out_of_memory
        from cuda_agent.judge.child.trial import plain_outputs

        times, launches, flow = [], [], []
        release, last = message.release, len(message.calls) - 1
        control = self.control(release.control) if release is not None else None
        for k, slots in enumerate(message.calls):
            inputs = [self.argument(ref) for ref in slots.inputs]
            model = self.probe(message.outputs) if message.probe else self.model
            if message.dataflow is not None:
                model = self.dataflow(model, inputs, message.dataflow, flow)
            try:
                ms, returned = self.timed(model, inputs)
                flat = plain_outputs(self.torch, returned)
                if flat is None or not _fits(flat, message.outputs, self.device):
                    return self.mismatch(returned, flat)
                self.kept.append(flat)
                returned = flat = None
            except Exception as exc:
                status, text = _failure(exc, f"ModelNew.forward raised {type(exc).__name__}: {exc}")
                raised = "compile_error" if status == "compile_error" else "raised"
                return CallAnswer(status=raised, message=text, out_of_memory=out_of_memory(exc))
            times.append(ms)
            if self.triton is not None:
                launches.append(self.triton.take())
            if control is not None and k < last:
                # No message, no mapping: the same few lines between any two calls of forward (release.py).
                control.call_returned(self.kept[-1], release.first + k + 1)
        answer = self.answer(times)
        if self.triton is not None and not message.probe:
            answer.launches = min(launches)
        answer.torch_only_reason = next((reason for reason in flow if reason is not None), None)
        return self.places(answer)

    def control(self, buffer: int) -> Control:
        """Our view of the control block (release.py), made at the first request that releases its calls."""
        from cuda_agent.judge.child.release import Control

        if buffer not in self.controls:
            self.controls[buffer] = Control(self.buffers[buffer].region)
        return self.controls[buffer]

    def places(self, answer: CallAnswer) -> CallAnswer:
        """`answer` with where each kept output lies (outputs.place); memory the grader cannot open (CUDA memory no
        IPC handle exports) answers as forward's failure."""
        from cuda_agent.judge.child.outputs import place

        bases: dict[int, int] = {}
        try:
            answer.outputs = [[place(v, self.device, answer.shared, bases) for v in flat] for flat in self.kept]
        except RuntimeError as exc:
            text = f"forward returned an output in memory the judge cannot read: {exc}"
            return CallAnswer(status="raised", message=text[:MAX_TEXT])
        return answer

    def dataflow(self, model: Any, inputs: list[Any], check: DataflowCheck, found: list[str | None]) -> Any:
        """`model` for one call under the kernelbench dataflow check (policy/runtime.py): whether its kernels reach
        its outputs goes into `found`. The check's sources are the call's inputs and the model's own tensors."""
        from cuda_agent.judge.child.trial import plain_outputs
        from cuda_agent.judge.policy import runtime

        torch = self.torch
        held = [*inputs, *self.model.parameters(), *self.model.buffers()]
        sources = [t for t in held if isinstance(t, torch.Tensor)]
        tolerance = runtime.Tolerance(check.atol, check.rtol, check.norm_rtol)

        def watched(*args: Any) -> Any:
            returned: list[Any] = []

            def once() -> list[Any]:
                returned.append(model(*args))
                return plain_outputs(torch, returned[0]) or []  # the builtins' reading: no subclass's code runs

            found.append(runtime.torch_only_reason(once, sources, self.sync, tolerance))
            return returned[0]

        return watched

    def timed(self, model: Any, inputs: list[Any]) -> tuple[float, Any]:
        """forward's result and its time on this process's clock: on CUDA from an event before the call to one after
        a device-wide synchronisation (work left on another stream counts)."""
        torch = self.torch
        with torch.no_grad():
            if self.device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize()
                start.record()
                returned = model(*inputs)
                torch.cuda.synchronize()
                end.record()
                end.synchronize()
                return start.elapsed_time(end), returned
            began = time.perf_counter()
            returned = model(*inputs)
            return (time.perf_counter() - began) * 1e3, returned

    def probe(self, outputs: list[OutputShape]) -> Any:
        """A model that does the least work: it returns new tensors of zeros shaped as the outputs (a fill kernel on
        CUDA), kept and read as an honest forward's results are."""
        torch, device = self.torch, self.device
        specs = [(tuple(o.shape), dtype_of(torch, o.dtype)) for o in outputs]
        return lambda *inputs: [torch.zeros(shape, dtype=dtype, device=device) for shape, dtype in specs]

    def mismatch(self, returned: Any, flat: list[Any] | None) -> CallAnswer:
        if flat is None:
            specs = [ReturnedSpec(kind=type(returned).__name__[:200])]
        else:
            specs = [ReturnedSpec(shape=tuple(v.shape), dtype=dtype_name(v.dtype)) for v in flat]
        return CallAnswer(status="mismatch", returned=specs)

    def answer(self, ms: list[float]) -> CallAnswer:
        from cuda_agent.judge import env

        flags = env.precision_flags()
        changed = {k: [self.flags[k], flags.get(k)] for k in self.flags if flags.get(k) != self.flags[k]}
        l2 = self.l2.limit_bytes() if self.l2 is not None else 0
        return CallAnswer(status="ok", ms=ms, changed_flags=changed, l2_limit_bytes=l2)

    def profile(self, message: ProfileQuestion, fds: list[int]) -> ProfileAnswer:
        """The share of forward's time in the candidate's own code; its kernel times on CUDA (child/kernel_time.py,
        a claim the grader bounds)."""
        from cuda_agent.judge.child import kernel_time
        from cuda_agent.judge.child.stop import out_of_memory
        from cuda_agent.judge.child.trial import plain_outputs
        from cuda_agent.judge.policy import runtime

        torch = self.torch
        self.open_buffers(message, fds)
        inputs = [self.argument(ref) for ref in message.inputs]

        def call(on: list[Any]) -> Any:
            with torch.no_grad():
                return plain_outputs(torch, self.model(*on)) or []

        answer = ProfileAnswer(status="ok")
        try:
            try:
                own_clock = (lambda: self.triton.interpreted_s) if self.triton is not None else None
                answer.fraction = runtime.custom_time_fraction(lambda: call(inputs), self.device, self.sync, own_clock)
            except runtime.ProfileUnreadable as exc:
                answer.fraction_error = str(exc)[:2000]
            answer.kernel_ms = kernel_time.kernel_times_ms(lambda: call(inputs), self.device, self.sync)
        except Exception as exc:
            text = f"ModelNew.forward raised {type(exc).__name__}: {exc}"
            return ProfileAnswer(status="raised", message=text[:MAX_TEXT], out_of_memory=out_of_memory(exc))
        return answer


def _fits(flat: list[Any], outputs: list[OutputShape], device: str) -> bool:
    return len(flat) == len(outputs) and all(
        tuple(v.shape) == tuple(o.shape) and dtype_name(v.dtype) == o.dtype and v.device.type == device
        for v, o in zip(flat, outputs, strict=True)
    )


def _failure(exc: BaseException, text: str) -> tuple[str, str]:
    """('compile_error', the compiler's message) when `exc` came from compiling a Triton kernel (a first launch's
    compile, triton_compile.py), else ('runtime_error', `text`); either cut to MAX_TEXT."""
    from cuda_agent.judge.child.triton_compile import compile_failure

    message = compile_failure(exc)
    return ("runtime_error", text[:MAX_TEXT]) if message is None else ("compile_error", message[:MAX_TEXT])


def _load(status: str, stage: str, message: str, check: str = "", out_of_memory: bool = False) -> LoadAnswer:
    return LoadAnswer(status=status, stage=stage, message=message, check=check, out_of_memory=out_of_memory)


def warm_up() -> None:
    """Before its request: imports, torch's lazy threads and CUDA's set-up (in a shared GPU turn), no kernel."""
    import torch

    from cuda_agent.judge import env
    from cuda_agent.judge.child import guards, trial  # noqa: F401
    from cuda_agent.judge.policy import runtime  # noqa: F401
    from cuda_agent.judge.standby import TURNS_ENV, set_up_turn
    from cuda_agent.tasks import problem  # noqa: F401

    guards.start_lazy_threads(torch)
    if os.environ.get(TURNS_ENV) and torch.cuda.is_available():
        with set_up_turn():
            torch.cuda.init()
            env.describe_device("cuda")


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
"""glibc's `mallopt` parameters (malloc.h)."""


def settle_allocator() -> None:
    """Keep the C heap's freed memory and its large blocks in the heap (glibc): a request's K outputs are alive at
    once until the grader reads them, and with glibc's own thresholds (which move as blocks are freed) each call's
    output was at times a fresh `mmap`, its page faults inside forward's clock (a 256 KiB relu 7 times slower, kept
    64 at a time), at times reused heap. Both sides' processes run this, before any candidate code."""
    import ctypes

    libc = ctypes.CDLL(None)
    if hasattr(libc, "mallopt"):  # not glibc: its allocator's own ways
        libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)  # glibc's most: larger blocks are mmapped whatever is set
        libc.mallopt(M_TRIM_THRESHOLD, 1 << 30)


def main(argv: list[str]) -> int:
    import faulthandler
    import signal

    from cuda_agent.judge.standby import serve_once

    faulthandler.register(signal.SIGTERM, all_threads=True)  # the grader's kill shows where a call hung
    settle_allocator()
    if argv[:1] == ["--standby"]:
        serve_once(warm_up)
    channel = Channel.from_fd(int(os.environ[SOCKET_FD_ENV]))
    try:
        Shim(channel, os.environ[DEVICE_ENV]).serve()
    except ChannelClosed:
        pass
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: the candidate's atexit hooks and a broken CUDA context can hang it
