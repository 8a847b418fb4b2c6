"""Dot-product contractions: `T(.., a, b) += f(.., r)` in float32 with one reduction
index `r` that every operand reads with unit stride (`tmm`, `MLP1`, `C3`, `tbmm`,
MLP3's layers).

Their vector form is a dot product per output, so the printer computes a tile of
outputs at once: the tile's dot products share their operand loads and end in one
combined lane reduction. Long ones (and short ones nothing else writes into) become a
kernel of their own, R x C tiles over (a, b), scheduled alone with their `!` folded in
(`plan`). The others keep their place in the fused nests, and their innermost loops
(b, then r) become a 1 x C tile (`inner_plan`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import ir


@dataclass(frozen=True)
class Contraction:
    rows: str | None  # a: the second-to-last left-hand index (None: a 1 x C tile)
    cols: str  # b: the last left-hand index
    red: str  # r: the reduction index, unit stride in every operand that reads it


def _unit_last(r: ir.Read, red: str) -> bool:
    """r reads `red` only in its last subscript, and there as `red` plus something else."""
    *outer, last = r.subscripts
    if any(red in ir.index_names(s) for s in outer):
        return False
    return last == ir.Index(red) or (
        isinstance(last, ir.Binary)
        and last.op in "+-"
        and (last.left == ir.Index(red)) != (last.right == ir.Index(red))
        and red not in ir.index_names(last.right if last.left == ir.Index(red) else last.left)
    )


# A contraction kernel is its own parallel region, outside any fusion: worth it for long
# dot products, and for shorter ones only when nothing else computes the same tensor
# (MLP3's layers, with their bias and relu statements, stay one fused nest).
LONG_REDUCTION = 256
MIN_REDUCTION = 64
MIN_TILE = 4


def _dot_form(program: ir.Program, st: ir.Statement) -> tuple[str, str] | None:
    """(b, r) when st is a float32 `+=` over one reduction index r whose right side has a
    vector form along r, and b is its last left-hand index."""
    if st.op != "+" or not st.lhs or len(st.reduction_vars) != 1:
        return None
    red = st.reduction_vars[0]
    if program.tensors[st.tensor].dtype != "float32" or st.rhs.dtype != "float32":
        return None
    if not any(red in ir.index_names(r) for r in ir.reads(st.rhs)):
        return None
    if not _vector_form(program, st.rhs, red):
        return None
    if any(isinstance(n, ir.Read) and n.tensor == st.tensor for n in ir.walk(st.rhs)):
        return None
    return st.lhs[-1], red


def plan(program: ir.Program, st: ir.Statement, extents: Mapping[str, int]) -> Contraction | None:
    """The kernel-of-its-own form of st, given each iterator's trip count, or None."""
    form = _dot_form(program, st)
    if form is None or len(st.lhs) < 2:
        return None
    cols, red = form
    if extents[red] < MIN_REDUCTION or min(extents[st.lhs[-2]], extents[cols]) < MIN_TILE:
        return None
    if not (_reused(st, red, st.lhs[-2]) or _reused(st, red, cols)):
        return None
    alone = sum(s.tensor == st.tensor for s in program.statements) == 1
    if extents[red] < LONG_REDUCTION and not alone:
        return None
    return Contraction(st.lhs[-2], cols, red)


def inner_plan(
    program: ir.Program, st: ir.Statement, extents: Mapping[str, int]
) -> Contraction | None:
    """The 1 x C tile form of a dot product that stays in the fused nests, or None."""
    form = _dot_form(program, st)
    if form is None:
        return None
    cols, red = form
    if extents[red] < MIN_TILE or extents[cols] < 2 or not _reused(st, red, cols):
        return None
    return Contraction(None, cols, red)


def _reused(st: ir.Statement, red: str, index: str) -> bool:
    """Some operand along `red` does not depend on `index`: the outputs of a tile along
    `index` share its loads. Without one (a row sum, `s(i) +=! E(i,k)`) a tile saves
    nothing, and the plain reduction keeps its place in the fused nests (Softmax's sum
    stays with the exp that writes its row)."""
    return any(
        red in ir.index_names(r) and index not in ir.index_names(r) for r in ir.reads(st.rhs)
    )


def _vector_form(program: ir.Program, e: ir.Expr, red: str) -> bool:
    """Every value that depends on `red` is float32 arithmetic on unit-stride reads (what
    the printer can evaluate on vectors of consecutive `red`)."""
    if red not in ir.index_names(e):
        return True
    if e.dtype != "float32":
        return False
    match e:
        case ir.Read(tensor=t):
            return program.tensors[t].dtype == "float32" and _unit_last(e, red)
        case ir.Binary(op="+" | "-" | "*" | "/", left=a, right=b, compute="float32"):
            return _vector_form(program, a, red) and _vector_form(program, b, red)
        case ir.Unary(op="-", operand=a) | ir.Cast(operand=a):
            return a.dtype == "float32" and _vector_form(program, a, red)
    return False
