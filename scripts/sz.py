"""Line budget: lines of code per module and per subpackage of cuda_agent, with the hard limits.

Run: python scripts/sz.py   (exit 1 if a module passes 600 lines or a function 80, unless the
module carries a `# size-exempt: <reason>` comment). Printed in every PR.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "cuda_agent"
MODULE_LIMIT, FUNCTION_LIMIT = 600, 80


def main() -> int:
    per_package: Counter[str] = Counter()
    problems = []
    for path in sorted(ROOT.rglob("*.py")):
        if "examples" in path.parts:
            continue
        text = path.read_text()
        lines = sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
        rel = path.relative_to(ROOT.parent)
        per_package[rel.parts[1] if len(rel.parts) > 2 else "(top)"] += lines
        exempt = "# size-exempt:" in text
        if lines > MODULE_LIMIT and not exempt:
            problems.append(f"{rel}: {lines} lines > {MODULE_LIMIT}")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LIMIT and not exempt:
                    problems.append(f"{rel}:{node.lineno} {node.name}: {length} lines > {FUNCTION_LIMIT}")
    for package, lines in sorted(per_package.items()):
        print(f"{package:<12} {lines:>6}")
    print(f"{'total':<12} {sum(per_package.values()):>6}")
    for problem in problems:
        print("over budget:", problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
