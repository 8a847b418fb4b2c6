"""The house rule that no function runs past 80 lines (a longer one is a smell to fix),
checked on the source, so that a new one is named when it lands."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 80


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > MAX_LINES:
                out.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_is_longer_than_80_lines() -> None:
    files = [
        p for d in ("tc_graph", "scripts", "models", "tests") for p in (ROOT / d).rglob("*.py")
    ]
    assert len(files) > 50
    long = [entry for path in sorted(files) for entry in _long_functions(path)]
    assert not long, "split these functions:\n" + "\n".join(long)
