"""Read a candidate solution from disk into one record, in either of its two forms.

1. A single Python file defining `class ModelNew` (KernelBench's form); its C++/CUDA code sits in
   string literals passed to `load_inline`, or its kernels are `@triton.jit` functions in the same file.
2. A workspace folder (CUDA Agent's form): `model_new.py` plus `kernels/*.cu`, `kernels/*.cpp`,
   `kernels/*_binding.cpp` and headers.
"""

from __future__ import annotations

import ast
import codecs
import hashlib
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from cuda_agent.errors import SolutionError
from cuda_agent.types import Language, Violation
from cuda_agent.workspace.layout import KERNEL_SUFFIXES, source_name, walk

BOM = "\ufeff"
MAX_SOLUTION_BYTES = 4 << 20
"""The most text a solution's files may hold (model_new.py and every kernel source, in UTF-8). The judge's own work on
them grows with their size and no time limit holds it (the static policy takes about 2.8 s a MiB on the 2-core VM: a
256 MiB kernel source would hold a pool's job for over 10 minutes); a solution written by hand, or by an
agent within its context, is far smaller."""


@dataclass(frozen=True)
class SolutionSource:
    """A candidate's source files, read once so that every stage judges the same bytes."""

    python: str
    """Text of the Python file that defines ModelNew."""
    python_name: str = "solution.py"
    """Name used in messages (e.g. 'model_new.py')."""
    sources: dict[str, str] = field(default_factory=dict)
    """Workspace form only: path relative to the workspace -> text of each kernel file."""
    root: Path | None = None
    """Workspace folder, or None for a single file."""

    def __post_init__(self) -> None:
        # A UTF-8 byte order mark opens a text for the interpreter and the compilers, never as a character of it: kept,
        # the static policy read an honest Python file as a syntax error, and a C++ unit's first `#include` as no
        # include at all (round 16's r4). Every reader of ours reads the text without it.
        object.__setattr__(self, "python", self.python.removeprefix(BOM))
        object.__setattr__(self, "sources", {name: text.removeprefix(BOM) for name, text in self.sources.items()})

    @property
    def language(self) -> Language:
        """'triton' when the Python file imports triton, else 'cuda': the one place the judge decides it (`Language`)."""
        return detect_language(self.python)

    @property
    def size_bytes(self) -> int:
        """The bytes of every file's text, in UTF-8."""
        return sum(len(text.encode()) for text in (self.python, *self.sources.values()))

    def too_large(self) -> Violation | None:
        """Why the solution is too large to judge (past `MAX_SOLUTION_BYTES`), or None."""
        if self.size_bytes <= MAX_SOLUTION_BYTES:
            return None
        message = (
            f"the solution's files hold {self.size_bytes / 2**20:.1f} MiB of text; at most "
            f"{MAX_SOLUTION_BYTES >> 20} MiB is judged"
        )
        return Violation(check="solution_too_large", message=message)

    def foreign_encoding(self) -> Violation | None:
        """Why Python would run another text than the one judged, or None.

        Every reader of the judge's (the static policy, the build and verdict keys, the build's copy of the file)
        reads `python` as it is; the interpreter decodes the file's UTF-8 bytes by the encoding its first two lines
        declare. A declaration of any other encoding (utf-7: `+AAo-` in a comment is a newline, and what follows it
        code that no reader of ours saw) makes the two differ; a solution has no use for one."""
        try:
            declared, _ = tokenize.detect_encoding(io.BytesIO(self.python.encode()).readline)
        except SyntaxError as exc:  # an encoding Python does not know: its import would fail
            declared = str(exc)
        try:
            if codecs.lookup(declared).name in ("utf-8", "utf-8-sig"):
                return None
        except LookupError:
            pass
        message = (
            f"{self.python_name} declares its encoding as {declared!r}: Python would decode it into another text than "
            "the one judged; write it in UTF-8 with no other coding declaration"
        )
        return Violation(check="source_encoding", message=message)

    @property
    def builds_inline(self) -> bool:
        """Whether model_new.py also compiles code itself (load_inline/load), so that its import builds."""
        return re.search(r"\bload(_inline)?\s*\(", self.python) is not None

    @property
    def content_hash(self) -> str:
        """sha256 over every file's name and bytes; keys the build cache."""
        digest = hashlib.sha256()
        for name, text in sorted({self.python_name: self.python, **self.sources}.items()):
            digest.update(name.encode() + b"\0" + text.encode() + b"\0")
        return digest.hexdigest()

    @property
    def build_hash(self) -> str:
        """Hash of what the build depends on: every file except the body of `class ModelNew`.

        Two candidates that differ only in ModelNew (the usual case between agent turns, and
        between our adversarial tests) share one build.
        """
        try:
            tree = ast.parse(self.python)
        except SyntaxError:
            return self.content_hash
        model_new = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        tree.body = [node for node in tree.body if node not in model_new]
        digest = hashlib.sha256(ast.dump(tree).encode())
        # Strings inside ModelNew still count: a source built lazily in forward must not share a build.
        for node in model_new:
            for const in ast.walk(node):
                if isinstance(const, ast.Constant) and isinstance(const.value, str | bytes):
                    digest.update(repr(const.value).encode())
        for name, text in sorted(self.sources.items()):
            digest.update(name.encode() + b"\0" + text.encode() + b"\0")
        return digest.hexdigest()

    @property
    def build_python(self) -> str:
        """The Python file as the build stage imports it: every top-level `class ModelNew` (decorators included)
        replaced by an empty class, line for line.

        The build is kept under `build_hash`, which leaves ModelNew out, and is then loaded by every candidate with
        that key; ModelNew's class body, bases and decorators run at import, so they would otherwise write into a
        build other candidates load (the judge keeps what the build stage's child left in its build folder). Only
        what the key covers runs there; ModelNew runs in the candidate's own process, on its private copy.
        """
        try:
            tree = ast.parse(self.python)
        except SyntaxError:
            return self.python
        lines = self.python.splitlines(keepends=True)
        model_new = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelNew"]
        for node in reversed(model_new):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)]) - 1
            last = node.end_lineno or node.lineno
            stub = "class ModelNew: pass  # none of it runs in the build stage (SolutionSource.build_python)\n"
            lines[first:last] = [stub, *["\n"] * (last - first - 1)]
        return "".join(lines)


def detect_language(python: str) -> Language:
    """'triton' when `python` imports triton anywhere (its kernels are then `@triton.jit` functions), else 'cuda'.

    A file that does not parse is read line by line, so that its syntax error is reported under its language.
    """
    try:
        tree = ast.parse(python)
    except (SyntaxError, ValueError):
        return "triton" if re.search(r"^\s*(import|from)\s+triton\b", python, re.MULTILINE) else "cuda"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "triton" for a in node.names):
            return "triton"
        if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "triton":
            return "triton"
    return "cuda"


def read_solution(path: Path) -> SolutionSource:
    """Read a single-file solution or a workspace folder.

    Raises:
        SolutionError: the path does not exist, is not text (its content, or a kernel source's name), or a folder has
            no model_new.py.
    """
    path = Path(path)
    if not path.exists():
        raise SolutionError(f"{path}: no such solution file or folder")
    if path.is_file():
        return SolutionSource(python=_read(path), python_name=path.name)
    model_new = path / "model_new.py"
    if not model_new.is_file():
        raise SolutionError(f"{path}: a workspace solution needs model_new.py at its top level")
    kernels = path / "kernels"
    # A link would let whoever writes the workspace (an agent, as an unprivileged user) choose a file of the
    # machine for the judge to read as its source, and see it back in compile and syntax errors.
    for link in (model_new, kernels):
        if link.is_symlink():
            raise SolutionError(f"{link}: a symbolic link; a solution's files and kernels/ must be plain")
    sources = {}
    if kernels.is_dir():
        files, failed = walk(kernels)
        if failed is not None:
            raise SolutionError(f"{kernels}: cannot be read whole ({failed.strerror})")
        for file in files:
            if file.is_symlink():
                raise SolutionError(f"{file}: a symbolic link; a solution's files and kernels/ must be plain")
            if file.is_file() and file.suffix in KERNEL_SUFFIXES:
                sources[source_name(file, path)] = _read(file)
    return SolutionSource(python=_read(model_new), python_name="model_new.py", sources=sources, root=path)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except UnicodeDecodeError:
        raise SolutionError(f"{path}: not a text file") from None
    except OSError as exc:
        raise SolutionError(f"{path}: cannot read ({exc.strerror})") from None
