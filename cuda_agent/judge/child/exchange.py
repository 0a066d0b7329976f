"""What crosses between the grader and the candidate's process: messages on a socket, tensors in shared memory.

The grader (trusted) owns every buffer: it allocates them, fills the inputs, and reads the outputs the candidate's
process copied in. The candidate's process maps them and nothing else of the grader's: on the CPU each buffer is a
memfd of its own (its descriptor passed over the socket; a call's inputs in new ones, passed with the call), on CUDA an allocation of its own (`cuMemAlloc`, outside
torch's caching allocator, so an IPC handle exposes that buffer alone, never a segment that holds other tensors).

Messages are typed records (judge/protocol.py) sent as JSON, length-bounded, one per SOCK_SEQPACKET packet (an answer
with its question's id beside its fields); the reader validates each into its record (`protocol.read_question` in the
candidate's process, the grader's `answer_of`): the grader never unpickles or evaluates what the candidate's process
sends.
"""

from __future__ import annotations

import array
import ctypes
import json
import mmap
import os
import select
import socket
import struct
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from cuda_agent.judge.protocol import BufferHow

MAX_MESSAGE_BYTES = 1 << 18
"""Largest message either side sends; a longer one from the candidate's process is its protocol error."""
MAX_FDS = 253
"""Most descriptors one message carries (the kernel's SCM_MAX_FD): a CPU call brings one per input tensor, a
`profile` two sets."""

DTYPES = (
    "float32",
    "float64",
    "float16",
    "bfloat16",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "bool",
    "complex64",
)
"""The dtypes a tensor crossing the boundary may have (named as torch names them, without `torch.`)."""


_ANCILLARY = socket.CMSG_SPACE(MAX_FDS * 4) + socket.CMSG_SPACE(12)
"""Room for MAX_FDS descriptors and one `struct ucred` beside a message."""


class ChannelClosed(Exception):
    """The other side closed the socket or sent something unreadable."""


class Channel:
    """One end of a SOCK_SEQPACKET socket pair: JSON messages, file descriptors beside them."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sender = 0
        """The process that sent the last message, as the kernel says (`pair`'s end only; 0 elsewhere)."""
        self.peer = 0
        """The process that sent the first message (`pair`'s end only): the one the grader started, answering before
        any candidate code ran (the lock, a calibration's request). Outputs are read from it alone (outputs.py): any
        process holding the other end can send, and one that the stop did not cover would run on as the grader read."""

    @classmethod
    def pair(cls) -> tuple[Channel, socket.socket]:
        """Our end (every message it receives carries its sender's process id, SO_PASSCRED), and the other end's
        socket (to pass to the child with `pass_fds`)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        theirs.set_inheritable(True)
        return cls(ours), theirs

    @classmethod
    def from_fd(cls, fd: int) -> Channel:
        return cls(socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET, fileno=fd))

    def send(self, message: BaseModel, fds: list[int] | None = None, ident: int | None = None) -> None:
        """Send a record and descriptors beside it: a question (its id is one of its fields), or an answer with the id
        of the question it answers beside its fields (`ident`)."""
        if ident is None:
            data = message.model_dump_json().encode()
        else:  # json.dumps: an answer's infinite float crosses as itself, as the grader has always read it
            data = json.dumps({**message.model_dump(), "id": ident}).encode()
        if len(data) > MAX_MESSAGE_BYTES:
            raise ValueError(f"message of {len(data)} bytes is over {MAX_MESSAGE_BYTES}")
        try:
            if fds:
                socket.send_fds(self.sock, [data], fds)
            else:
                self.sock.sendall(data)
        except OSError as exc:
            raise ChannelClosed(f"the other side is gone ({exc})") from None

    def receive(
        self, timeout_s: float | None = None, idle: Callable[[], None] | None = None
    ) -> tuple[dict[str, Any], list[int]]:
        """The next message, a JSON object, and the descriptors that came with it (`receive_data`'s arguments).

        Raises:
            ChannelClosed: the other side closed its end, or sent what is not one JSON object.
            TimeoutError: nothing came within `timeout_s`.
        """
        data, fds = self.receive_data(timeout_s, idle)
        try:
            message = json.loads(data)
        except (ValueError, RecursionError) as exc:  # nesting deeper than the parser's stack is no JSON we read
            raise ChannelClosed(f"a message that is not JSON we read ({type(exc).__name__}: {exc})") from None
        if not isinstance(message, dict):
            raise ChannelClosed("a message that is not a JSON object")
        return message, fds

    def receive_data(
        self, timeout_s: float | None = None, idle: Callable[[], None] | None = None
    ) -> tuple[bytes, list[int]]:
        """The next message as it came, for its reader to validate, and the descriptors that came with it. `idle` runs
        each second while it waits.

        Raises:
            ChannelClosed: the other side closed its end.
            TimeoutError: nothing came within `timeout_s`.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout_s:.0f} s")
            readable, _, _ = select.select([self.sock], [], [], left)
            if readable:
                break
            if idle is not None:
                idle()
        try:
            data, extra, _, _ = self.sock.recvmsg(MAX_MESSAGE_BYTES + 1, _ANCILLARY)
        except OSError as exc:
            raise ChannelClosed(f"the socket failed ({exc})") from None
        fds, self.sender = [], 0
        for level, kind, payload in extra:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
            elif level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
                self.sender = struct.unpack("iII", payload[:12])[0]  # struct ucred: the kernel's, not the sender's word
        self.peer = self.peer or self.sender
        if not data:
            raise ChannelClosed("the other side closed the connection")
        if len(data) > MAX_MESSAGE_BYTES:
            raise ChannelClosed(f"a message over {MAX_MESSAGE_BYTES} bytes")
        return data, fds

    def readable(self) -> bool:
        """Whether a message (or the other side's close) waits to be received."""
        return bool(select.select([self.sock], [], [], 0)[0])

    def close(self) -> None:
        self.sock.close()


def dtype_of(torch: Any, name: str) -> Any:
    if name not in DTYPES:
        raise ValueError(f"dtype {name!r} cannot cross the judge's process boundary")
    return getattr(torch, name)


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


class _CudaDriver:
    """The few CUDA driver calls the exchange needs (torch exposes no IPC of an allocation of one's own)."""

    def __init__(self) -> None:
        self.lib = ctypes.CDLL("libcuda.so.1")

    def call(self, name: str, *args: Any) -> None:
        status = getattr(self.lib, name)(*args)
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            raise RuntimeError(f"{name} failed: {status} {text.value.decode() if text.value else ''}")

    def alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self.call("cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(nbytes))
        return ptr.value

    def free(self, ptr: int) -> None:
        self.call("cuMemFree_v2", ctypes.c_uint64(ptr))

    def address_range(self, ptr: int) -> tuple[int, int]:
        """(base, size) of the allocation that holds `ptr`."""
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        self.call("cuMemGetAddressRange_v2", ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr))
        return base.value, size.value

    def handle(self, ptr: int) -> bytes:
        handle = _IpcHandle()
        self.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(ptr))
        return bytes(handle)  # the raw 64 bytes (the field itself would stop at the first NUL)

    def open(self, handle: bytes) -> int:
        ptr = ctypes.c_uint64()
        raw = _IpcHandle.from_buffer_copy(handle)  # a struct: passed by value, as the driver takes it
        self.call("cuIpcOpenMemHandle_v2", ctypes.byref(ptr), raw, ctypes.c_uint(1))  # LAZY_ENABLE_PEER_ACCESS
        return ptr.value

    def close(self, ptr: int) -> None:
        self.call("cuIpcCloseMemHandle", ctypes.c_uint64(ptr))


_driver: _CudaDriver | None = None


def cuda_driver() -> _CudaDriver:
    global _driver
    if _driver is None:
        _driver = _CudaDriver()
    return _driver


class DevicePointer:
    """A device allocation as `__cuda_array_interface__` bytes, so torch can view it without owning it."""

    def __init__(self, ptr: int, nbytes: int) -> None:
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 2}


class Buffer:
    """One shared buffer of `nbytes`, as a uint8 tensor (`raw`); `view(shape, dtype)` reads it as a tensor."""

    def __init__(self, torch: Any, raw: Any, nbytes: int, release: Callable[[], None], keep: Any = None) -> None:
        self.torch = torch
        self.raw = raw
        self.nbytes = nbytes
        self._release = release
        self._keep = keep  # what the tensor's memory belongs to (an mmap), alive as long as the buffer

    def view(self, shape: list[int] | tuple[int, ...], dtype: Any) -> Any:
        count = 1
        for size in shape:
            count *= size
        size = count * dtype.itemsize
        if size > self.nbytes:
            raise ValueError(f"a {list(shape)} {dtype} tensor does not fit a buffer of {self.nbytes} bytes")
        return self.raw[:size].view(dtype).view(tuple(shape))

    @property
    def region(self) -> mmap.mmap:
        """A CPU buffer's mapping (the control block's words are read and written through it: release.py)."""
        if not isinstance(self._keep, mmap.mmap):
            raise ValueError("only a CPU buffer has a mapping of its own")
        return self._keep

    def close(self) -> None:
        self.raw = None
        self._release()


def allocate(torch: Any, device: str, nbytes: int) -> tuple[Buffer, BufferHow, int | None]:
    """A new buffer for the grader: (the buffer, how the other side opens it, a descriptor to send and then close,
    or None)."""
    size = max(nbytes, 1)
    if device == "cuda":
        driver = cuda_driver()
        torch.cuda.synchronize()  # the primary context is current on this thread (the driver calls need it)
        torch.cuda.empty_cache()  # memory torch's allocator keeps cached is not ours to allocate otherwise
        ptr = driver.alloc(size)
        raw = torch.as_tensor(DevicePointer(ptr, size), device="cuda")
        return Buffer(torch, raw, nbytes, lambda: driver.free(ptr)), BufferHow(ipc=driver.handle(ptr).hex()), None
    fd = os.memfd_create("cuda-agent-exchange", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    # Its pages mapped now: a later call's inputs are written between two calls of forward (release.py).
    region = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    raw = torch.frombuffer(region, dtype=torch.uint8)
    return Buffer(torch, raw, nbytes, lambda: _close_region(region), keep=region), BufferHow(fd=True), fd


def open_buffer(torch: Any, device: str, nbytes: int, how: BufferHow, fd: int | None) -> Buffer:
    """The candidate's side of a buffer the grader allocated (`allocate`)."""
    size = max(nbytes, 1)
    if device == "cuda":
        driver = cuda_driver()
        torch.cuda.synchronize()  # this thread's context made current (torch makes it lazily)
        if how.ipc is None:
            raise ValueError("a CUDA buffer came without its IPC handle")
        ptr = driver.open(bytes.fromhex(how.ipc))
        raw = torch.as_tensor(DevicePointer(ptr, size), device="cuda")
        return Buffer(torch, raw, nbytes, lambda: driver.close(ptr))
    if fd is None:
        raise ValueError("a CPU buffer came without its descriptor")
    # Its pages mapped now (a new buffer per call's inputs): a first touch inside forward would bill the candidate.
    region = mmap.mmap(fd, size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    os.close(fd)  # the mapping holds the memory
    raw = torch.frombuffer(region, dtype=torch.uint8)
    return Buffer(torch, raw, nbytes, lambda: _close_region(region), keep=region)


def _close_region(region: mmap.mmap) -> None:
    try:
        region.close()
    except BufferError:  # a tensor still views it: the mapping goes with the process
        pass
