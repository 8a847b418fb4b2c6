"""Contractions that get a kernel of their own: `T(.., a, b) += f(.., r)` in float32 with
one reduction index `r` that every operand reads with unit stride (the dot-product form
of `tmm`, `MLP1`, `C3`).

Such a statement is scheduled alone, its `!` is folded into it (the accumulators start
at the identity instead of a separate pass writing zeros), and the printer emits an
R x C tile of outputs whose dot products share their operand loads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .. import ir


@dataclass(frozen=True)
class Contraction:
    rows: str  # a: the second-to-last left-hand index
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


def plan(program: ir.Program, st: ir.Statement, extents: Mapping[str, int]) -> Contraction | None:
    """The contraction form of st, given each iterator's trip count, or None."""
    if st.op != "+" or len(st.lhs) < 2 or len(st.reduction_vars) != 1:
        return None
    red = st.reduction_vars[0]
    if extents[red] < MIN_REDUCTION or min(extents[st.lhs[-2]], extents[st.lhs[-1]]) < MIN_TILE:
        return None
    alone = sum(s.tensor == st.tensor for s in program.statements) == 1
    if extents[red] < LONG_REDUCTION and not alone:
        return None
    if program.tensors[st.tensor].dtype != "float32" or st.rhs.dtype != "float32":
        return None
    operands = [r for r in ir.reads(st.rhs) if red in ir.index_names(r)]
    if not operands:
        return None
    if not _vector_form(program, st.rhs, red):
        return None
    if any(isinstance(n, ir.Read) and n.tensor == st.tensor for n in ir.walk(st.rhs)):
        return None
    return Contraction(st.lhs[-2], st.lhs[-1], red)


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
