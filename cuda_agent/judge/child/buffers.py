"""The grader's shared buffers with the candidate's process (`Exchange`): where each call's inputs lie, and when a
call's inputs are handed over. Outputs are not shared: the grader reads them where forward left them (outputs.py).

An `Exchange` belongs to one grader's state (grader.py's `Grader`), which it asks to map what it allocates.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from cuda_agent.errors import TaskError
from cuda_agent.judge.child.exchange import Buffer, allocate, dtype_name
from cuda_agent.judge.protocol import (
    BufferSpec,
    BuffersQuestion,
    CallQuestion,
    Done,
    InputRef,
    ProfileQuestion,
    TensorRef,
)

if TYPE_CHECKING:
    from cuda_agent.judge.child.grader import Grader


class Exchange:
    """The grader's shared buffers, one per input position.

    On the CPU, a call's input buffers are new for every load and
    reach the candidate's process with the call itself (`handover`): a buffer it already maps never holds another
    call's inputs, so nothing of its own (a thread, a child) can read a call's inputs before the call starts, while
    the grader flushes the cache. On CUDA an input buffer is reused (an IPC handle per call would cost more than
    most kernels); see DESIGN.md."""

    def __init__(self, grader: Grader) -> None:
        self.grader = grader
        self.buffers: dict[str, tuple[int, Buffer]] = {}
        self.refs: dict[str, TensorRef] = {}
        """Each slot's last reference, given again while its buffer, shape and dtype stay (a record less per call)."""
        self.next_id = 0
        self.pending: list[tuple[BufferSpec, int | None]] = []
        """Input buffers made since the last call, with their descriptors: handed over with the next call."""
        self.released: list[int] = []
        """Input buffers of earlier calls that the candidate's process may let go with the next call."""

    def ref(self, slot: str, shape: tuple[int, ...], dtype: Any, fresh: bool = False) -> tuple[TensorRef, Any]:
        """The reference the candidate's process gets for a tensor in `slot`, and our view of it. `fresh`: a new
        buffer, handed over with the next call (`handover`)."""
        g = self.grader
        nbytes = dtype.itemsize
        for size in shape:
            nbytes *= size
        held = self.buffers.get(slot)
        if held is None or held[1].nbytes < nbytes or fresh:
            if held is not None and fresh:
                # Not closed: our views of it (the last call's inputs, judged later) hold its memory until they go.
                self.released.append(held[0])
            elif held is not None:
                held[1].close()
            buffer, how, fd = allocate(g.torch, g.device, nbytes)
            self.next_id += 1
            self.buffers[slot] = (self.next_id, buffer)
            spec = BufferSpec(id=self.next_id, nbytes=nbytes, how=how)
            if fresh:
                self.pending.append((spec, fd))
            else:
                g.answer_of(Done, g.ask(BuffersQuestion(buffers=[spec]), [fd] if fd is not None else None), "buffers")
        ident, buffer = self.buffers[slot]
        ref, name = self.refs.get(slot), dtype_name(dtype)
        if ref is None or (ref.buffer, ref.shape, ref.dtype) != (ident, shape, name):
            ref = self.refs[slot] = TensorRef(buffer=ident, shape=shape, dtype=name)
        return ref, buffer.view(shape, dtype)

    def load(self, inputs: list[Any], slots: str = "in", fill: bool = True) -> tuple[list[InputRef], list[Any]]:
        """`inputs` copied into the input buffers of `slots` (call k of a request: `in{k}_`): (what the candidate's
        process is told, our views of them). Every request's call k takes the same slots, whatever the request.
        `fill` False: the buffers are made and left empty (the grader writes them at the call's release:
        release.py)."""
        torch = self.grader.torch
        fresh = self.grader.device == "cpu"
        refs, views = [], []
        for i, value in enumerate(inputs):
            if isinstance(value, torch.Tensor):
                ref, view = self.ref(f"{slots}{i}", tuple(value.shape), value.dtype, fresh)
                if fill:
                    view.copy_(value)
                refs.append(InputRef(tensor=ref))
                views.append(view)
            elif value is None or isinstance(value, bool | int | float | str):
                refs.append(InputRef(value=value))
                views.append(value)
            else:
                raise TaskError(f"get_inputs() returned a {type(value).__name__}: tensors and plain numbers only")
        return refs, views

    def handover(self, message: CallQuestion | ProfileQuestion) -> list[int]:
        """Put the input buffers made and let go since the last call in `message`; return their descriptors."""
        message.buffers = [spec for spec, _ in self.pending]
        message.released = self.released
        fds = [fd for _, fd in self.pending if fd is not None]
        self.pending, self.released = [], []
        return fds

    def close(self) -> None:
        for _, buffer in self.buffers.values():
            buffer.close()
        for _, fd in self.pending:
            if fd is not None:
                os.close(fd)
        self.pending = []
