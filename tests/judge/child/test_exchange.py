"""exchange.py: messages and shared CPU buffers between two real processes (the grader's and the candidate's)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from cuda_agent.judge.child.exchange import Channel, ChannelClosed, allocate, open_buffer
from cuda_agent.judge.protocol import BufferHow, BufferSpec, BuffersQuestion

CHILD = textwrap.dedent(
    """
    import sys, torch
    from cuda_agent.judge.child.exchange import Channel, open_buffer
    from cuda_agent.judge.protocol import Done, read_question
    channel = Channel.from_fd(int(sys.argv[1]))
    data, fds = channel.receive_data()
    question = read_question(data)
    spec = question.buffers[0]
    buffer = open_buffer(torch, sys.argv[2], spec.nbytes, spec.how, fds[0] if fds else None)
    x = buffer.view((2, 3), torch.float32)
    x.mul_(2.0)  # what the other side sees: the same memory
    channel.send(Done(), ident=question.id)
    channel.receive()
    """
)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_buffer_is_the_same_memory_in_both_processes(device: str) -> None:
    channel, theirs = Channel.pair()
    argv = [sys.executable, "-c", CHILD, str(theirs.fileno()), device]
    child = subprocess.Popen(argv, pass_fds=(theirs.fileno(),))
    theirs.close()
    fd = None
    try:
        buffer, how, fd = allocate(torch, device, 4 * 6)  # a memfd on the CPU, a CUDA IPC handle on the GPU
        ours = buffer.view((2, 3), torch.float32)
        ours.copy_(torch.arange(6, dtype=torch.float32).view(2, 3))
        channel.send(BuffersQuestion(id=7, buffers=[BufferSpec(id=1, nbytes=24, how=how)]), [fd] if fd else None)
        answer, _ = channel.receive(timeout_s=60)
        assert answer == {"status": "ok", "id": 7}
        assert ours.flatten().tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    finally:
        if fd is not None:
            os.close(fd)
        channel.close()
        child.wait(timeout=60)


def test_a_closed_peer_and_nonsense_are_channel_errors() -> None:
    channel, theirs = Channel.pair()
    peer = Channel(theirs)
    peer.sock.sendall(b"[1, 2]")
    with pytest.raises(ChannelClosed, match="not a JSON object"):
        channel.receive(timeout_s=5)
    peer.sock.sendall(b"\xff\xfe")
    with pytest.raises(ChannelClosed, match="not JSON"):
        channel.receive(timeout_s=5)
    # Nested past the parser's stack (a candidate's answer once so made the grader fail: ours, not its verdict).
    peer.sock.sendall(b"[" * 200_000)
    with pytest.raises(ChannelClosed, match="RecursionError"):
        channel.receive(timeout_s=5)
    peer.close()
    with pytest.raises(ChannelClosed):
        channel.receive(timeout_s=5)


def test_a_view_never_reaches_past_its_buffer() -> None:
    buffer, _, fd = allocate(torch, "cpu", 16)
    try:
        with pytest.raises(ValueError, match="does not fit"):
            buffer.view((5,), torch.float32)
        assert buffer.view((2, 2), torch.float32).shape == (2, 2)
    finally:
        os.close(fd)
        buffer.close()
    other, _, fd2 = allocate(torch, "cpu", 8)
    reopened = open_buffer(torch, "cpu", 8, BufferHow(fd=True), fd2)
    other.view((2,), torch.float32).fill_(3.0)
    assert reopened.view((2,), torch.float32).tolist() == [3.0, 3.0]
