"""Triton's compiler without a GPU: interpreted kernels compiled for sm_90, and a compile failure told from a run's."""

from __future__ import annotations

import pytest

triton = pytest.importorskip("triton", reason="needs triton: pip install -e '.[triton]'")
tl = pytest.importorskip("triton.language")
torch = pytest.importorskip("torch")

from triton.runtime.interpreter import InterpretedFunction  # noqa: E402

from cuda_agent.judge.child.triton_compile import AheadCompiler, compile_failure  # noqa: E402


def _clamp(v):
    return tl.maximum(v, 0.0)


def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, clamp(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


def _odd_range(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, 1000)  # the compiler takes powers of 2 only
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets))


def _bad_asm(x_ptr, y_ptr, BLOCK: tl.constexpr):
    x = tl.load(x_ptr + tl.arange(0, BLOCK))
    y = tl.inline_asm_elementwise("bogus.instr $0, $1;", "=r,r", [x], dtype=tl.int32, is_pure=True, pack=1)
    tl.store(y_ptr + tl.arange(0, BLOCK), y)


clamp = InterpretedFunction(_clamp)
"""A kernel called from another: in the interpreter's form, as `@triton.jit` makes it under TRITON_INTERPRET=1."""


def test_interpreted_kernels_compile_for_the_gpu_once_per_specialisation(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compiled here, not found in a cache
    ahead = AheadCompiler()
    x = torch.randn(1000)
    relu = InterpretedFunction(_relu)
    ahead.compile(relu, (x, torch.empty_like(x), x.numel()), {"BLOCK": 256})
    ahead.compile(relu, (x, torch.empty_like(x), x.numel()), {"BLOCK": 256})
    assert ahead.compiled == 1  # the same specialisation again: compiled once
    ahead.compile(relu, (x, torch.empty_like(x), x.numel()), {"BLOCK": 128})
    assert ahead.compiled == 2

    with pytest.raises(Exception) as raised:
        ahead.compile(InterpretedFunction(_odd_range), (x, torch.empty_like(x), 1000), {"BLOCK": 128})
    try:
        raise RuntimeError("forward failed") from raised.value  # as the candidate's forward might wrap it
    except RuntimeError as wrapped:
        message = compile_failure(wrapped)
    assert message is not None and "'_odd_range'" in message and "arange's range must be a power of 2" in message
    # ptxas's refusal (past the front end and MLIR) is one too, with ptxas's own lines.
    ints = torch.zeros(128, dtype=torch.int32)
    with pytest.raises(Exception) as raised:
        ahead.compile(InterpretedFunction(_bad_asm), (ints, ints), {"BLOCK": 128})
    message = compile_failure(raised.value)
    assert message is not None and "PTXASError" in message and "Not a name of any known instruction" in message
    # A failure outside the compiler is no compile failure.
    assert compile_failure(RuntimeError("illegal memory access")) is None
