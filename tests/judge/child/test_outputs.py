"""outputs.py: the grader finds the process that answered, stops a confined candidate's processes, and reads
outputs from another process's memory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from cuda_agent.judge.child.exchange import Channel
from cuda_agent.judge.child.outputs import Outputs, Signaller, read_process, span
from cuda_agent.judge.child.stop import Stop
from cuda_agent.judge.protocol import CallAnswer, CudaShare, Done, OutputPlace, OutputShape
from cuda_agent.judge.uids import switches_if_stopped, threads_not_stopped

HOLDER = textwrap.dedent(
    """
    import array, ctypes, sys
    data = array.array("f", [float(i) for i in range(1024)])
    print(data.buffer_info()[0], flush=True)
    sys.stdin.read()
    """
)
"""A process that holds 1024 floats and says where (as the shim says where an output lies)."""


def test_the_answer_names_the_process_that_sent_it() -> None:
    channel, theirs = Channel.pair()
    code = "import sys; from cuda_agent.judge.child.exchange import Channel; from cuda_agent.judge.protocol import Done"
    code += "; Channel.from_fd(int(sys.argv[1])).send(Done(), ident=7)"
    child = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    try:
        message, _ = channel.receive(timeout_s=60)
        assert Done.model_validate({k: v for k, v in message.items() if k != "id"}) == Done()
        assert channel.sender == child.pid  # the kernel's word (SCM_CREDENTIALS), not the child's
    finally:
        child.wait(timeout=30)
        channel.close()


def test_the_grader_reads_another_process_memory_and_sees_an_unmapped_address() -> None:
    child = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        address = int(child.stdout.readline())
        ours = torch.empty(1024, dtype=torch.float32)
        assert read_process(child.pid, [(address, ours.data_ptr(), 4096)]) == 4096
        assert ours.tolist() == [float(i) for i in range(1024)]
        part = torch.zeros(8, dtype=torch.float32)
        pieces = [(address + 40, part.data_ptr(), 16), (8, part.data_ptr() + 16, 16)]  # the second: page 0
        assert read_process(child.pid, pieces) == 16
        assert part[:4].tolist() == [10.0, 11.0, 12.0, 13.0]
    finally:
        child.kill()
        child.wait()


def test_the_span_of_an_output_follows_its_strides() -> None:
    x = torch.empty(6, 8)
    assert span(tuple(x.shape), x.stride()) == 48
    assert span(tuple(x.t().shape), x.t().stride()) == 48
    assert span(tuple(x[:, ::2].shape), x[:, ::2].stride()) == 47  # gaps: first to last element
    assert span((6, 8), (0, 1)) == 8  # broadcast rows
    assert span((0, 8), (8, 1)) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the signaller drops to another user id")
def test_the_signaller_stops_and_lets_go_every_process_of_the_user(tmp_path: Path) -> None:
    uid = 61000 + os.getpid() % 500  # no account uses it; only this test's processes run as it
    code = (
        "import sys, threading; [threading.Thread(target=sys.stdin.read).start() for _ in range(2)]; sys.stdin.read()"
    )
    held = [
        subprocess.Popen(["/usr/bin/python3", "-c", code], user=uid, group=uid, extra_groups=[], stdin=subprocess.PIPE)
        for _ in range(2)
    ]
    signaller = Signaller(uid)
    try:
        time.sleep(0.3)
        assert signaller.send(b"S")
        deadline = time.monotonic() + 5
        while threads_not_stopped([p.pid for p in held]) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert threads_not_stopped([p.pid for p in held]) == 0
        assert signaller.send(b"C")
        time.sleep(0.05)
        assert threads_not_stopped([p.pid for p in held]) == 6  # three threads each, all running again
    finally:
        signaller.close()
        for proc in held:
            proc.kill()
            proc.wait()
    assert not signaller.send(b"S")  # a signaller that is gone says so: the candidate's verdict where it killed it


def test_two_looks_at_stopped_threads_differ_where_one_ran_between_them() -> None:
    code = (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\nwhile True: time.sleep(0.001)"
    )
    child = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)
        assert switches_if_stopped([child.pid]) is None  # sleeping in a system call is not stopped
        os.kill(child.pid, signal.SIGSTOP)
        while threads_not_stopped([child.pid]):
            time.sleep(0.001)
        first = switches_if_stopped([child.pid])
        assert first is not None and len(first) == 2
        assert switches_if_stopped([child.pid]) == first  # nothing ran: the same switches
        os.kill(child.pid, signal.SIGCONT)  # let go, as another process of the candidate's could, then stopped again
        time.sleep(0.02)
        os.kill(child.pid, signal.SIGSTOP)
        while threads_not_stopped([child.pid]):
            time.sleep(0.001)
        assert switches_if_stopped([child.pid]) != first
    finally:
        child.kill()
        child.wait()


def _answer(places: list[OutputPlace], shared: list[CudaShare] | None = None) -> CallAnswer:
    return CallAnswer(status="ok", ms=[0.0] * len(places), outputs=[[p] for p in places], shared=shared or [])


def test_the_grader_reads_outputs_with_their_strides_and_refuses_places_no_output_has() -> None:
    x = torch.randn(6, 8)
    t = x.t()  # a transposed output, read with its strides
    g = SimpleNamespace(channel=SimpleNamespace(sender=os.getpid()))  # this process stands for the candidate's
    spec = OutputShape(shape=(8, 6), dtype="float32")
    reader = Outputs(torch, "cpu")
    got = reader.read(g, _answer([OutputPlace(address=t.data_ptr(), strides=t.stride())]), [spec], "timing")
    assert torch.equal(got[0][0], t)
    wide = torch.randn(8, 6 * 1000)  # a sparse output (its span 1000 times its size): each run read alone
    sparse = wide[:, ::1000]
    where = OutputPlace(address=sparse.data_ptr(), strides=sparse.stride())
    assert torch.equal(reader.read(g, _answer([where]), [OutputShape(shape=(8, 6), dtype="float32")], "timing")[0][0],
                       sparse)  # fmt: skip
    refused = [
        OutputPlace(address=t.data_ptr(), strides=(1,)),  # another rank
        OutputPlace(address=8, strides=(1, 8)),  # not mapped there
        OutputPlace(address=8, strides=(6000, 1000)),  # sparse, not mapped there
    ]
    for where in refused:
        with pytest.raises(Stop) as ended:
            reader.read(g, _answer([where]), [spec], "timing")
        assert ended.value.result.status == "runtime_error"


CUDA_HOLDER = textwrap.dedent(
    """
    import sys, torch
    from cuda_agent.judge.child.outputs import place
    y = torch.arange(4096, dtype=torch.float32, device="cuda").view(64, 64).t()
    torch.cuda.synchronize()
    shared = []
    where = place(y, "cuda", shared, {})
    print(where.model_dump_json(), flush=True)
    print(shared[0].model_dump_json(), flush=True)
    sys.stdin.read()
    """
)


@pytest.mark.gpu
def test_the_grader_reads_a_cuda_output_from_the_allocation_it_lies_in() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CUDA_HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    reader = Outputs(torch, "cuda")
    try:
        where = OutputPlace.model_validate_json(child.stdout.readline())
        share = CudaShare.model_validate_json(child.stdout.readline())
        g = SimpleNamespace(channel=SimpleNamespace(sender=child.pid))
        spec = OutputShape(shape=(64, 64), dtype="float32")
        got = reader.read(g, _answer([where], [share]), [spec], "timing")
        expected = torch.arange(4096, dtype=torch.float32, device="cuda").view(64, 64).t()
        assert torch.equal(got[0][0], expected)
        past = where.model_copy(update={"address": share.nbytes})  # beyond the allocation as the driver maps it
        with pytest.raises(Stop):
            reader.read(g, _answer([past], [share]), [spec], "timing")
    finally:
        reader.close()
        child.kill()
        child.wait()
