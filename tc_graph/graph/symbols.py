"""Nodes for every size (docs/onnx.md, "Kernels for every size"): which dimensions of a
group's inputs and outputs are the model's symbolic dimensions, as TC size names.

A dimension follows a symbol when it is the symbol's first sample in the model pinned at
the samples and the symbol's other size in the model pinned there (rows.other_sizes
gives each symbol its own pair). A group whose values change in any other way (a
product of two symbols, a rank that changes) has no such node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .rows import Dynamic

_NOT_IDENT = re.compile(r"[^A-Za-z0-9]+")


def size_name(symbol: str) -> str:
    """The TC size name of a symbolic dimension: `S_` and its letters and digits, runs of
    anything else one underscore (a C identifier, and no name the generated C uses)."""
    return "S_" + _NOT_IDENT.sub("_", symbol).strip("_")


def named_shapes(dyn: Dynamic, values: Iterable[str]) -> dict[str, tuple[int | str, ...]] | str:
    """Each value's shape with its symbolic dimensions named (values the graph types in
    both pinnings; those of fixed shape are left out), or why a dimension follows no
    single symbol."""
    out: dict[str, tuple[int | str, ...]] = {}
    for v in values:
        if v not in dyn.pinned.types or v not in dyn.other.types:
            continue
        a, b = dyn.pinned.types[v][1], dyn.other.types[v][1]
        if len(a) != len(b):
            return f"the rank of '{v}' changes with the symbolic sizes"
        dims: list[int | str] = []
        for k, (x, y) in enumerate(zip(a, b, strict=True)):
            found = [
                s for s, sizes in dyn.samples.items() if sizes[0] == x and dyn.other_sizes[s] == y
            ]
            if x != y and len(found) != 1:
                at = ", ".join(f"{s}={n}" for s, n in dyn.other_sizes.items())
                return (
                    f"dimension {k} of '{v}' follows no single symbolic dimension "
                    f"({x} at the samples, {y} at {at})"
                )
            dims.append(x if x == y else size_name(found[0]))
        if any(isinstance(d, str) for d in dims):
            out[v] = tuple(dims)
    return out
