"""Outputs read where forward left them: the candidate's process copies nothing after its clock stops.

The shim keeps what each call of a request returned and says where it lies (`place`: an address in its memory on
the CPU, an offset in an exported allocation on CUDA). As the answer arrives, the grader stops every process of the
candidate's (`stopped`), and only then ends its outside view of the request: whatever the candidate's process ran
after its clock (a replaced method of the shim's, a thread, a child) ran inside that view, which no calibration
grants it, since the zero model's outputs are read the same way and nothing is copied on either side. With every
thread stopped the grader reads the outputs into memory of its own (`Outputs.read`: `process_vm_readv` on the CPU;
on CUDA the allocation opened over IPC and copied on the grader's stream), then lets the processes go on. The next
question lets the kept outputs go (`Shim.serve`). The baselines' process of ours runs the same shim loop and is read
the same way (`Grader.trusted`: its process alone is stopped).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cuda_agent.judge.child.exchange import DevicePointer, cuda_driver, dtype_of
from cuda_agent.judge.child.stop import stop
from cuda_agent.judge.protocol import CallAnswer, CudaShare, OutputPlace, OutputShape

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader

SPAN_FACTOR = 4
"""How many times its dense size an output's strides may span for the grader to read the whole span at once (a gapped
slice of a larger result); beyond, on the CPU, it reads each run of adjacent elements alone (`runs`: a column, a
diagonal, one chunk of a fused result are honest outputs); on CUDA, the candidate's runtime_error."""
IOV_MAX = 1024
"""The most pieces one `process_vm_readv` takes."""
STOP_WAIT_S = 5.0
"""How long the grader waits for the candidate's threads to stop (a thread in a system call stops as it returns from
it) before it calls those still running its `runtime_error`."""
OPEN_HANDLES = 64
"""CUDA allocations of the candidate's kept open in the grader (an open costs more than most kernels); the oldest is
closed beyond."""
RELEASE_SAMPLES = 16
"""Elements of each output read as its call is released (release.py), and compared with the request's final read: an
output a share f of which was written after its call returned differs at one of them with a chance of
1 - (1 - f) ** 16 a call (a request of 64 calls: at least one for f = 1 %, two in three), and always where all of it
was. Few, as the kernel pins a page of the candidate's for each: 64 elements took about 0.17 ms a call on the loaded
VM, a copy of a whole 512 KiB output 0.15-0.25 ms, where the call takes 0.03-0.08, and both sides pay it."""


SIGNALLER = r"""
import ctypes, os, signal, sys
uid, parent = int(sys.argv[1]), os.getppid()
os.setgroups([])
os.setresgid(uid, uid, uid)
os.setresuid(uid, uid, uid)
if ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != parent:
    os._exit(1)
for order in iter(lambda: os.read(0, 1), b""):
    try:
        os.kill(-1, signal.SIGSTOP if order == b"S" else signal.SIGCONT)
    except ProcessLookupError:
        pass
    os.write(1, order)
"""
"""A process of ours that drops to the candidate's user id and sends `kill(-1)` as it on each order: every process of
that id, wherever it went (the kernel finds them), at the cost of a pipe's round trip. `uids.frozen` forks the grader
for each signal and scans /proc for threads, 14 ms a stop on the loaded 2-core VM: more than a request."""


def span(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Elements from an output's first to its last, as its strides lay it out (0 for an empty one)."""
    if any(size == 0 for size in shape):
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True))


def place(value: Any, device: str, shared: list[CudaShare], bases: dict[int, int]) -> OutputPlace:
    """In the shim: where `value` (a plain tensor forward returned) lies. On CUDA its allocation is exported once a
    request (`shared`, indexed by base in `bases`); a handle is never kept across requests, as an allocation freed and
    made again at the same address is another."""
    strides = tuple(value.stride())
    if device != "cuda" or value.numel() == 0:
        return OutputPlace(address=value.data_ptr(), strides=strides)
    driver = cuda_driver()
    base, nbytes = driver.address_range(value.data_ptr())
    if base not in bases:
        bases[base] = len(shared)
        shared.append(CudaShare(handle=driver.handle(base).hex(), nbytes=nbytes))
    return OutputPlace(address=value.data_ptr() - base, strides=strides, allocation=bases[base])


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.process_vm_readv.restype = ctypes.c_ssize_t
    return libc


def read_process(pid: int, pieces: list[tuple[int, int, int]]) -> int:
    """Copy `pieces` ((their address in process `pid`, ours, bytes)) from that process's memory into ours; the bytes
    copied, fewer where one of its addresses is not mapped there."""
    libc = _libc()
    total = 0
    for first in range(0, len(pieces), IOV_MAX):
        chunk = pieces[first : first + IOV_MAX]
        local = (_IoVec * len(chunk))(*[_IoVec(ours, n) for _, ours, n in chunk])
        remote = (_IoVec * len(chunk))(*[_IoVec(theirs, n) for theirs, _, n in chunk])
        got = libc.process_vm_readv(pid, local, len(chunk), remote, len(chunk), 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        total += got
        if got < sum(n for _, _, n in chunk):
            break
    return total


def runs(address: int, strides: tuple[int, ...], shape: tuple[int, ...], itemsize: int, torch: Any) -> Any:
    """The runs of adjacent elements an output's strides lay out, in its elements' order: an int64 tensor of (address
    in the answering process, bytes) rows, as `struct iovec`s lie in memory (`read_runs`). The innermost dimensions
    whose strides make them adjacent are one run; the others' offsets are computed, not listed by Python."""
    run, depth = 1, len(shape)
    while depth and (shape[depth - 1] == 1 or strides[depth - 1] == run):
        run *= shape[depth - 1]
        depth -= 1
    offsets = torch.zeros(1, dtype=torch.int64)
    for size, stride in zip(shape[:depth], strides[:depth], strict=True):
        offsets = (offsets[:, None] + torch.arange(size, dtype=torch.int64) * stride).reshape(-1)
    found = torch.empty(offsets.numel(), 2, dtype=torch.int64)
    found[:, 0] = address + offsets * itemsize
    found[:, 1] = run * itemsize
    return found


def read_runs(pid: int, found: Any, ours: int) -> int:
    """Copy each run of `found` (`runs`) from process `pid`'s memory into ours from address `ours` on, one after the
    other; the bytes copied, fewer where one of its addresses is not mapped there."""
    libc, total = _libc(), 0
    size = int(found[0, 1]) if found.numel() else 0
    for first in range(0, found.shape[0], IOV_MAX):
        count = min(IOV_MAX, found.shape[0] - first)
        local = _IoVec(ours + first * size, count * size)
        remote = ctypes.c_void_p(found.data_ptr() + first * found.stride(0) * found.element_size())
        got = libc.process_vm_readv(pid, ctypes.byref(local), 1, remote, count, 0)
        if got < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        total += got
        if got < count * size:
            break
    return total


class Signaller:
    """`SIGNALLER`, started at the first stop of a confined candidate's processes."""

    def __init__(self, uid: int) -> None:
        from cuda_agent.subproc import start_child

        argv = [sys.executable, "-I", "-S", "-c", SIGNALLER, str(uid)]
        self.proc = start_child(argv, None, stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def send(self, order: bytes) -> bool:
        """Whether the order was carried out: the candidate's processes may see this one (no PID namespace, CUDA) and
        kill or stop it; nothing of ours does."""
        try:
            os.write(self.proc.stdin.fileno(), order)
            return os.read(self.proc.stdout.fileno(), 1) == order
        except (OSError, ValueError):  # ValueError: closed
            return False

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.proc.stdin.close()
        self.proc.stdout.close()


def _threads_running(pid: int, deadline: float) -> int:
    """Threads of `pid` not stopped yet once all are, or `deadline` passed."""
    from cuda_agent.judge.uids import threads_not_stopped

    while (running := threads_not_stopped([pid])) and time.monotonic() < deadline:
        time.sleep(0)
    return running


def _namespace(sender: int) -> str | None:
    """The sender's PID namespace where it is not ours; None where it is ours; '' where the sender is gone (its
    outputs then cannot be read: its verdict)."""
    try:
        own = os.readlink(f"/proc/{sender}/ns/pid")
    except OSError:
        return ""
    return None if own == os.readlink("/proc/self/ns/pid") else own


NS_GET_PARENT = 0xB702
"""ioctl on a namespace's descriptor: a descriptor of its parent namespace (`_IO(0xb7, 0x2)`, linux/nsfs.h)."""


def _members(own: str) -> list[int]:
    """Every process of the PID namespace `own`, or of one made inside it, but own's PID 1 (ours: jail.py), found by
    the namespace of each (a readlink a process, 0.25 ms for 75 on the VM, where reading every thread's status took
    5 ms). Any user may make a PID namespace inside its own (with a user namespace of its own, `unshare`), and a
    process there, sharing the candidate's memory or not, is the candidate's as much as one in `own` (left out, it
    could write the outputs on while the grader reads them)."""
    from cuda_agent.judge.uids import proc_status

    ours, found = os.readlink("/proc/self/ns/pid"), []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, KeyError):  # gone, or a kernel without NSpid: not one of its
                pid = int(entry.name)
                space = os.readlink(f"/proc/{pid}/ns/pid")
                if space == own:
                    if proc_status(pid)["NSpid"][-1] != "1":
                        found.append(pid)
                elif space != ours and _inside(pid, own):
                    found.append(pid)
    return found


def _inside(pid: int, own: str) -> bool:
    """Whether the PID namespace of process `pid` was made inside `own` (at any depth): its parents, up to the first
    one we may not see (above ours), looked up through the kernel (NS_GET_PARENT), never by number alone."""
    fd = os.open(f"/proc/{pid}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        while True:
            try:
                parent = fcntl.ioctl(fd, NS_GET_PARENT)
            except OSError:  # the machine's namespace, or one above ours: own is not among its parents
                return False
            os.close(fd)
            fd = parent
            if f"pid:[{os.fstat(fd).st_ino}]" == own:
                return True
    finally:
        os.close(fd)


def _user_stopped(sender: int, uid: int, deadline: float, cpu: bool) -> int:
    """After the signaller's stop: threads of the answering process not stopped by `deadline`; on the CPU (whose view
    ends at the stop, so that nothing may run on as the grader reads) of every process of `uid`."""
    from cuda_agent.judge.uids import running_threads

    running = _threads_running(sender, deadline)
    while cpu and (running := running_threads(uid)) and time.monotonic() < deadline:
        time.sleep(0)
    return running


@contextlib.contextmanager
def stopped(g: Grader, sender: int, stage: str) -> Iterator[None]:
    """Every process of the candidate's stopped while the block runs (`Grader.trusted`, a process of ours: that one
    alone, its threads seen stopped). Confined in a PID namespace (the CPU): every process of it and of the namespaces
    made inside it, by us (`uids.stop_until_still`, `_members`); confined without one (CUDA): every process of its user,
    by `Signaller`, and the answering one's threads seen stopped (the view ends after the grader's copy there);
    unconfined: every process below the grader but ours (`uids.stopped_below`). The answer must come from the process
    the grader started (`Channel.peer`; the namespace it started in is the one stopped): the outputs are read there,
    and any process holding the socket's other end could send one (a process outside what the stop covers, running as
    the grader reads). A stop that fails, an answer from another process, or threads still running after STOP_WAIT_S,
    are the candidate's runtime_error."""
    from cuda_agent.judge.uids import stop_until_still, stopped_below

    if sender != g.channel.peer:
        message = "the answer came from a process other than the one the judge started for your code (it reads there)"
        raise stop("runtime_error", stage, message)
    uid = g.req.confine_user
    deadline = time.monotonic() + STOP_WAIT_S
    with contextlib.ExitStack() as resume:
        if g.trusted:
            os.kill(sender, signal.SIGSTOP)
            resume.callback(os.kill, sender, signal.SIGCONT)
            running = _threads_running(sender, deadline)
        elif uid is None:
            running = resume.enter_context(stopped_below(os.getpid(), g.ours_pids))
        elif (own := _namespace(sender)) is not None:
            held: list[int] = []
            resume.callback(_resume, held)
            listing = functools.partial(_members, own) if own else list  # gone: nothing to stop, its read fails
            running = 0 if stop_until_still(listing, held, deadline) else 1
        else:
            if g.signaller is None:
                g.signaller = Signaller(uid)
            if not g.signaller.send(b"S"):
                raise stop("runtime_error", stage, "the judge could not stop your processes to read their outputs")
            resume.callback(g.signaller.send, b"C")
            running = _user_stopped(sender, uid, deadline, g.device == "cpu")
        _refuse_running(running, stage)
        yield


def _resume(held: list[int]) -> None:
    for pid in reversed(held):  # the last stopped goes on first, as uids.stopped_below
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGCONT)


def _refuse_running(running: int, stage: str) -> None:
    if running:
        message = (
            f"threads of your processes kept running for {STOP_WAIT_S:.0f} s after they were stopped for their "
            "outputs to be read (in a system call the kernel works on, or let go again)"
        )
        raise stop("runtime_error", stage, message)


@dataclass(frozen=True)
class Released:
    """A call's outputs as its next call was released (release.py): where it said they lie, and a sample of them."""

    places: list[tuple[int, tuple[int, ...]]]
    """(address, strides) of each output, as the shim wrote them in the control block (a claim, checked)."""
    offsets: list[Any]
    """Per output, the elements read (offsets in elements from its address, a tensor); None for an empty one."""
    indices: list[Any]
    """The same elements' places in the output's own order (row-major), where a dense copy of ours holds them."""
    seen: Any
    """Those elements' bytes as read then, one output's after another's (a uint8 tensor)."""

    def unchanged(self, outputs: Outputs, call: int, specs: list[OutputShape]) -> bool:
        """Whether our final read of the call (`Outputs.read`, into `outputs.room`) holds the same bytes there."""
        torch, at = outputs.torch, 0
        for i, (offsets, spec) in enumerate(zip(self.offsets, specs, strict=True)):
            if offsets is None:
                continue
            dtype = dtype_of(torch, spec.dtype)
            nbytes = len(offsets) * dtype.itemsize
            room = outputs.room[(call, i)]
            whole = room[: room.numel() // dtype.itemsize * dtype.itemsize].view(dtype)
            at_ours = self.indices[i] if (call, i) in outputs.dense else offsets  # read run by run: a dense copy
            now = whole[at_ours].view(torch.uint8)  # compared as bytes: a NaN equals itself
            if not torch.equal(now, self.seen[at : at + nbytes]):
                return False
            at += nbytes
        return True


def _element_offsets(
    torch: Any, shape: tuple[int, ...], strides: tuple[int, ...], count: int, draw: Any
) -> tuple[Any, Any]:
    """`count` elements of an output drawn with `draw` (at most all of them): their indices in the output's own order,
    and their offsets in elements from its first along `strides`."""
    numel = _numel(shape)
    index = (
        torch.randperm(numel, generator=draw)[:count]
        if numel <= count
        else torch.randint(numel, (count,), generator=draw)
    )
    offsets, left = torch.zeros_like(index), index
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        offsets += (left % size) * stride
        left = left // size
    return index, offsets


class Outputs:
    """The grader's own copies of each call's outputs (one buffer per call and output position, reused from request
    to request and grown as needed), and the CUDA allocations of the candidate's it has opened."""

    def __init__(self, torch: Any, device: str) -> None:
        self.torch, self.device = torch, device
        self.room: dict[tuple[int, int], Any] = {}
        self.opened: dict[str, tuple[int, int]] = {}
        """CUDA: an exported allocation's handle -> (its base in our context, its size as mapped here)."""
        self.remote: list[Any] = []
        """CUDA: the last request's outputs in the candidate's allocations, as bytes (read again for late writes)."""
        self.drawn: dict[tuple[int, tuple[int, ...]], tuple[Any, Any]] = {}
        """The elements read as a call is released (`mark`), per output and strides: drawn anew each request."""
        self.dense: set[tuple[int, int]] = set()
        """The last read's outputs copied run by run into a dense copy of ours ((call, output); the CPU's sparse ones)."""

    def mine(self, slot: tuple[int, int], nbytes: int) -> Any:
        held = self.room.get(slot)
        if held is None or held.numel() < nbytes:
            held = self.room[slot] = self.torch.empty(max(nbytes, 1), dtype=self.torch.uint8, device=self.device)
        return held

    def read(
        self,
        g: Grader,
        answer: CallAnswer,
        specs: list[OutputShape],
        stage: str,
        released: tuple[Released, ...] | list[Released] = (),
    ) -> list[list[Any]]:
        """Our copies of each call's outputs (views with the strides they had), from the process that answered (its
        processes stopped); a call released before the answer (`released`: release.py) is read where it said as it
        returned, and must still hold what it held then. A place the candidate's process gave that is none (strides
        of another rank, a span past `SPAN_FACTOR` times the output, memory not mapped there) is its runtime_error; an
        output changed after its call returned is incorrect."""
        self.remote, self.dense = [], set()
        if len(answer.outputs) != len(answer.ms) or any(len(call) != len(specs) for call in answer.outputs):
            raise stop("runtime_error", stage, "the candidate's process answered with places for other outputs")
        views, pieces, scattered = [], [], []
        for k, call in enumerate(answer.outputs):
            places = released[k].places if k < len(released) else [(where.address, where.strides) for where in call]
            views.append(self.views(k, places, specs, stage, pieces, scattered))
        if self.device == "cuda":
            self.copy_shared(answer, [(answer.outputs[k][i], raw, n) for (k, i), _, raw, n in pieces], stage)
        else:
            self.copy_process(g.channel.sender, [(address, raw, n) for _, address, raw, n in pieces], scattered, stage)
        for k, marked in enumerate(released):
            if not marked.unchanged(self, k, specs):
                message = (f"call {k} of a request changed its outputs after it returned (read as the next call's "
                           "inputs were released): each call's outputs must be final when forward returns")  # fmt: skip
                g.trials.append({"label": stage, "ok": False, "reason": message})
                raise stop("incorrect", stage, message)
        return views

    def new_request(self) -> None:
        """Elements to `mark` drawn anew from here on (once a request)."""
        self.drawn = {}

    def mark(
        self, pid: int, places: list[tuple[int, tuple[int, ...]]], specs: list[OutputShape], stage: str, draw: Any
    ) -> Released:
        """As a call is released (release.py): its outputs' places checked, and `RELEASE_SAMPLES` elements of each
        (drawn with `draw`, a generator of ours, once a request) read from process `pid` as they are now (it runs
        on). A place that is none, or memory not mapped there, is its runtime_error."""
        torch = self.torch
        offsets, indices, pieces = [], [], []
        for i, ((address, strides), spec) in enumerate(zip(places, specs, strict=True)):
            itemsize = dtype_of(torch, spec.dtype).itemsize
            if self.checked(address, strides, spec, stage) == 0:
                offsets.append(None)
                indices.append(None)
                continue
            key = (i, strides)
            if key not in self.drawn:
                self.drawn[key] = _element_offsets(torch, spec.shape, strides, RELEASE_SAMPLES, draw)
            index, offset = self.drawn[key]
            offsets.append(offset)
            indices.append(index)
            pieces.append((address, offset, itemsize))
        return Released(places, offsets, indices, self.gather(pid, pieces, stage))

    def gather(self, pid: int, pieces: list[tuple[int, Any, int]], stage: str) -> Any:
        """The elements at `pieces` ((an output's address, element offsets, element size) each) in process `pid`,
        one after another as bytes."""
        torch = self.torch
        count = sum(len(offsets) for _, offsets, _ in pieces)
        remote = (_IoVec * count)()
        table = torch.frombuffer(remote, dtype=torch.int64).view(count, 2) if count else None
        at = 0
        for address, offsets, size in pieces:
            table[at : at + len(offsets), 0] = offsets * size + address
            table[at : at + len(offsets), 1] = size
            at += len(offsets)
        wanted = sum(len(offsets) * size for _, offsets, size in pieces)
        seen = torch.empty(max(wanted, 1), dtype=torch.uint8)
        got = 0
        for first in range(0, count, IOV_MAX):
            chunk = min(IOV_MAX, count - first)
            nbytes = int(table[first : first + chunk, 1].sum())
            local = _IoVec(seen.data_ptr() + got, nbytes)
            part = _libc().process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote, 16 * first), chunk, 0)
            if part != nbytes:
                raise stop("runtime_error", stage, "the judge could not read the outputs your process said a call "
                           f"returned ({max(part, 0)} of {nbytes} bytes)")  # fmt: skip
            got += part
        return seen[:wanted]

    def checked(self, address: int, strides: tuple[int, ...], spec: OutputShape, stage: str) -> int:
        """The elements an output's place spans (0 for an empty output); a place that is none is the runtime_error (on
        CUDA, a span past `SPAN_FACTOR` times the output too; on the CPU such an output is read run by run)."""
        ranked = len(strides) == len(spec.shape) and all(s >= 0 for s in strides)  # before `span`, which zips them
        count = span(spec.shape, strides) if ranked and address >= 0 else 0
        if not ranked or address < 0 or (count > SPAN_FACTOR * _numel(spec.shape) and self.device == "cuda"):
            raise stop("runtime_error", stage, f"the candidate's process answered strides {strides} "
                       f"that no {list(spec.shape)} output it returned can have")  # fmt: skip
        return count

    def views(
        self,
        call: int,
        places: list[tuple[int, tuple[int, ...]]],
        specs: list[OutputShape],
        stage: str,
        pieces: list[tuple[tuple[int, int], int, Any, int]],
        scattered: list[tuple[Any, Any]],
    ) -> list[Any]:
        """Our views of a call's outputs at `places` ((address, strides) each, a claim) in our own buffers; what to
        copy into them goes into `pieces` (((call, output), its address, our buffer, bytes) each), or, for an output
        spread past `SPAN_FACTOR` times its size (the CPU), into `scattered` (its runs, `runs`, and our dense copy)."""
        views = []
        for i, ((address, strides), spec) in enumerate(zip(places, specs, strict=True)):
            dtype = dtype_of(self.torch, spec.dtype)
            count, dense = self.checked(address, strides, spec, stage), _numel(spec.shape)
            if count > SPAN_FACTOR * dense:
                self.dense.add((call, i))
                raw = self.mine((call, i), dense * dtype.itemsize)
                scattered.append((runs(address, strides, spec.shape, dtype.itemsize, self.torch), raw))
                views.append(raw[: dense * dtype.itemsize].view(dtype).view(spec.shape))
                continue
            raw = self.mine((call, i), count * dtype.itemsize)
            if count:
                pieces.append(((call, i), address, raw, count * dtype.itemsize))
            views.append(raw[: count * dtype.itemsize].view(dtype).as_strided(spec.shape, strides))
        return views

    def copy_process(
        self, pid: int, pieces: list[tuple[int, Any, int]], scattered: list[tuple[Any, Any]], stage: str
    ) -> None:
        """`pieces` (each output's span) and `scattered` (each sparse output's runs, `runs`, into our dense copy) read
        from process `pid`; an address not mapped there is the candidate's runtime_error."""
        wanted = sum(n for _, _, n in pieces) + sum(int(found[:, 1].sum()) for found, _ in scattered)
        try:
            got = read_process(pid, [(address, raw.data_ptr(), n) for address, raw, n in pieces])
            for found, raw in scattered:
                got += read_runs(pid, found, raw.data_ptr())
        except OSError as exc:
            got, why = 0, str(exc)
        else:
            why = "an address it gave is not mapped there"
        if got != wanted:
            raise stop("runtime_error", stage, f"the judge could not read the outputs your process answered with: "
                       f"{got} of {wanted} bytes ({why})")  # fmt: skip

    def copy_shared(self, answer: CallAnswer, pieces: list[tuple[OutputPlace, Any, int]], stage: str) -> None:
        """Each output copied from the candidate's allocation (opened over IPC) on our stream, then synchronised."""
        bases = []
        for share in answer.shared:
            try:
                bases.append(self.open(share))
            except RuntimeError as exc:
                raise stop("runtime_error", stage, f"the judge could not open your output's memory: {exc}") from None
        for where, raw, n in pieces:
            if where.allocation is None or where.allocation >= len(bases):
                raise stop("runtime_error", stage, "the candidate's process answered a CUDA output with no allocation")
            base, size = bases[where.allocation]
            if where.address + n > size:
                raise stop("runtime_error", stage, "the candidate's process answered an output past its allocation")
            self.remote.append(self.torch.as_tensor(DevicePointer(base + where.address, n), device="cuda"))
            raw[:n].copy_(self.remote[-1])
        self.torch.cuda.synchronize()

    def open(self, share: CudaShare) -> tuple[int, int]:
        """(base, size) of an exported allocation in our context, opened once while it stays among OPEN_HANDLES; its
        size is the driver's, never the claim's."""
        if share.handle in self.opened:
            return self.opened[share.handle]
        driver = cuda_driver()
        if len(self.opened) >= OPEN_HANDLES:
            self.torch.cuda.synchronize()
            driver.close(self.opened.pop(next(iter(self.opened)))[0])
        base = driver.open(bytes.fromhex(share.handle))
        self.opened[share.handle] = (base, driver.address_range(base)[1])
        return self.opened[share.handle]

    def close(self) -> None:
        if self.opened:
            self.torch.cuda.synchronize()
        for base, _ in self.opened.values():
            with contextlib.suppress(RuntimeError):
                cuda_driver().close(base)
        self.opened = {}


def _numel(shape: tuple[int, ...]) -> int:
    count = 1
    for size in shape:
        count *= size
    return count
