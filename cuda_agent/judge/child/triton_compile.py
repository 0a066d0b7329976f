"""Triton's compiler told apart from its kernels' runs: what a compile failure is, and compiling without a GPU.

Triton compiles a kernel at its first launch, inside forward, in the candidate's process; an exception there is the
candidate's `compile_error`, one from the kernel's run its `runtime_error`. `mark_compiles()` wraps the launch's
compile (`JITFunction._do_compile`): whatever it raises (the front end's `CompilationError`, an MLIR pass's
`RuntimeError`, ptxas's `PTXASError`) is marked and raised on unchanged (autotune still skips a config that does not
compile, as it does unmarked), and `compile_failure` finds the mark on what forward raised.

The interpreter (`TRITON_INTERPRET=1`, the CPU judge) compiles nothing: it reports a front-end error and a kernel's
fault alike (`InterpreterError`), and it runs Python the compiler refuses. So `AheadCompiler` compiles each new
specialisation of an interpreted kernel for real first, for `TARGET` (the H100/H200: Triton's own LLVM and ptxas
need no GPU), with the signature and specialisation the CUDA backend would give the same arguments.

What this does not protect against: the mark is set in the candidate's process, whose code could set it on any
exception; that only turns one failure of its own into another (every verdict but pass earns -1).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from typing import Any

TARGET = ("cuda", 90, 32)
"""What kernels are compiled for where no GPU is: backend, compute capability (sm_90), warp size."""
_MARK = "cuda_agent_triton_compile"
"""The attribute set on an exception raised while compiling: the kernel's name."""
_MESSAGE_LINES = 30
"""A compile failure's message is cut to its first lines, as a compile log is (build.trim_compile_log)."""


def mark_compiles() -> None:
    """Mark every exception raised by a launch's compile (`JITFunction._do_compile`) as a compile failure."""
    from triton.runtime import jit

    compile_kernel = jit.JITFunction._do_compile
    if getattr(compile_kernel, _MARK, False):
        return

    def marked(kernel: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return compile_kernel(kernel, *args, **kwargs)
        except Exception as exc:
            setattr(exc, _MARK, kernel.__name__)
            raise

    setattr(marked, _MARK, True)
    jit.JITFunction._do_compile = marked


def compile_failure(exc: BaseException) -> str | None:
    """The compiler's message when `exc` (or an exception it was raised from) came from compiling a kernel, else None.

    Example:
        >>> compile_failure(ValueError("x")) is None
        True
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = getattr(current, _MARK, None)
        if isinstance(name, str):
            lines = f"{type(current).__name__}: {current}".strip().splitlines()
            more = f"\n({len(lines) - _MESSAGE_LINES} more lines)" if len(lines) > _MESSAGE_LINES else ""
            return f"Triton could not compile kernel {name!r}: " + "\n".join(lines[:_MESSAGE_LINES]) + more
        current = current.__cause__ or current.__context__
    return None


class AheadCompiler:
    """Compiles interpreted kernels for `TARGET`, once per specialisation, marking a failure as `mark_compiles` does."""

    def __init__(self) -> None:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import make_backend

        self.target = GPUTarget(*TARGET)
        self.backend = make_backend(self.target)
        self.kernels: dict[Callable[..., Any], Any] = {}
        """The Python function of each interpreted kernel -> its JITFunction (`jit_of`)."""
        self.binders: dict[Callable[..., Any], Any] = {}
        self.done: set[tuple[Callable[..., Any], str]] = set()
        self.compiled = 0
        """Specialisations compiled so far."""
        self.language: list[tuple[Any, str, Any]] | None = None
        """triton.language's InterpretedFunctions: (module, name, function), found at the first compile."""

    def compile(self, interpreted: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Compile `interpreted` (an InterpretedFunction) for the arguments of one launch, unless done already.

        Raises:
            Exception: the compiler's, marked (`compile_failure` reads it); an argument the binder refuses, unmarked
                (a compiled launch would refuse it too, before compiling).
        """
        from triton.compiler import ASTSource, compile
        from triton.runtime.jit import compute_cache_key, create_function_from_signature

        kernel = self.jit_of(interpreted)
        if interpreted.fn not in self.binders:
            self.binders[interpreted.fn] = create_function_from_signature(kernel.signature, kernel.params, self.backend)
        bound, specialization, options = self.binders[interpreted.fn](*args, **kwargs)
        key = (interpreted.fn, compute_cache_key({}, specialization, options))
        if key in self.done:
            return
        options, signature, constexprs, attrs = kernel._pack_args(self.backend, kwargs, bound, specialization, options)
        try:
            with self.language_compiled():
                compile(ASTSource(kernel, signature, constexprs, attrs), target=self.target, options=options.__dict__)
        except Exception as exc:
            setattr(exc, _MARK, kernel.__name__)
            raise
        self.done.add(key)
        self.compiled += 1

    @contextlib.contextmanager
    def language_compiled(self) -> Iterator[None]:
        """triton.language's own kernels (tl.max, tl.sum, tl.softmax: `@jit` functions, so InterpretedFunctions under
        the interpreter) as JITFunctions while a kernel compiles; as they were again after."""
        from triton.runtime.interpreter import InterpretedFunction

        if self.language is None:
            self.language = [
                (module, name, value)
                for key, module in list(sys.modules.items())
                if key == "triton.language" or key.startswith("triton.language.")
                for name, value in list(vars(module).items())
                if isinstance(value, InterpretedFunction)
            ]
        for module, name, value in self.language:
            setattr(module, name, self.jit_of(value))
        try:
            yield
        finally:
            for module, name, value in self.language:
                setattr(module, name, value)

    def jit_of(self, interpreted: Any) -> Any:
        """The JITFunction of an interpreted kernel, made once, that sees the kernels it calls as JITFunctions too
        (the compiler refuses to call an InterpretedFunction, and so does the hash of its dependencies)."""
        from triton.runtime.jit import JITFunction

        if interpreted.fn in self.kernels:
            return self.kernels[interpreted.fn]
        ahead = self

        class ScopedJIT(JITFunction):
            def __init__(self, fn: Callable[..., Any], **kwargs: Any) -> None:
                super().__init__(fn, **kwargs)
                self.__globals__ = _Scope(fn.__globals__, ahead)

            def get_capture_scope(self) -> dict[str, Any]:
                names = self.fn.__globals__ | inspect.getclosurevars(self.fn).nonlocals
                return {k: ahead.as_jit(v) for k, v in names.items()}

        self.kernels[interpreted.fn] = ScopedJIT(interpreted.fn, **interpreted.kwargs)
        return self.kernels[interpreted.fn]

    def as_jit(self, value: Any) -> Any:
        """`value` as the compiler must see it: an interpreted kernel as its JITFunction, anything else as it is."""
        from triton.runtime.interpreter import InterpretedFunction

        return self.jit_of(value) if isinstance(value, InterpretedFunction) else value


class _Scope(dict):
    """A kernel's globals as its dependencies' hash reads them (`.get`): interpreted kernels as JITFunctions."""

    def __init__(self, names: dict[str, Any], ahead: AheadCompiler) -> None:
        super().__init__()
        self.names, self.ahead = names, ahead

    def get(self, name: str, default: Any = None) -> Any:
        return self.ahead.as_jit(self.names.get(name, default))
