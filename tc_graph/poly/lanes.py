"""Which expressions have a vector form along an index: their values at consecutive
values of the index (the lanes of a float vector) are float32 arithmetic on reads of
consecutive elements. The contraction plans (poly/contraction.py) and the C printer's
loop forms (codegen/forms.py) ask the same question here; the printer's `vexpr`
prints what this admits. (The contraction plans' own copy took `c - k` for a read at
stride 1: a dot product over A(i, 299 - k) loaded A[299 - r0 .. 314 - r0], wrong sums and
reads past A's last row.)"""

from __future__ import annotations

from collections.abc import Mapping

from .. import ir


def no_vector_form(e: ir.Expr, lane: str, tensors: Mapping[str, ir.Tensor]) -> str | None:
    """Why e has no vector form with `lane` running over the lanes of a float vector
    (it would need a gather, or computes in another type); None when it has one, or
    does not depend on the lane. exp has one (the prelude's tc_vexpf)."""
    if lane not in ir.index_names(e):
        return None
    if e.dtype != "float32":
        return f"it computes in {e.dtype}"
    match e:
        case ir.Read(tensor=t) if tensors[t].dtype == "float32":
            return None if unit_stride(e, lane) else f"its read of {t} is not stride-1 in {lane}"
        case ir.Binary(op="+" | "-" | "*" | "/", left=a, right=b, compute="float32"):
            return no_vector_form(a, lane, tensors) or no_vector_form(b, lane, tensors)
        case ir.Unary(op="-", operand=a):
            return no_vector_form(a, lane, tensors)
        case ir.Cast(operand=a) if a.dtype == "float32":
            return no_vector_form(a, lane, tensors)
        case ir.Call(fn="exp", args=(a,)):
            return no_vector_form(a, lane, tensors)
    return f"{type(e).__name__} has no vector form"


def unit_stride(r: ir.Read, lane: str) -> bool:
    """r reads `lane` in its last subscript only, and there at stride 1: consecutive
    lanes read consecutive elements (`lane + c`, `c + lane`, `lane - c`; not `c - lane`,
    which reads backwards)."""
    *outer, last = r.subscripts
    return not any(lane in ir.index_names(x) for x in outer) and _unit(last, lane)


def _unit(e: ir.Expr, lane: str) -> bool:
    """e is `lane` plus a term without it: consecutive lanes read consecutive elements."""
    match e:
        case ir.Index(name=n):
            return n == lane
        case ir.Cast(operand=x):
            return _unit(x, lane)
        case ir.Binary(op="+", left=a, right=b):
            return (_unit(a, lane) and lane not in ir.index_names(b)) or (
                _unit(b, lane) and lane not in ir.index_names(a)
            )
        case ir.Binary(op="-", left=a, right=b):
            return _unit(a, lane) and lane not in ir.index_names(b)
    return False
