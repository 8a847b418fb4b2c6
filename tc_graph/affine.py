"""Typed TC expressions as isl quasi-affine functions, where they are ones."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

import islpy as isl

from . import ir
from .lang.types import is_integral

_CTX = isl.DEFAULT_CONTEXT

Extent = Callable[[str, int], isl.PwAff | None]


def constant(sp: isl.Space, v: int) -> isl.PwAff:
    return isl.PwAff.val_on_domain(isl.Set.universe(sp), isl.Val.int_from_si(_CTX, v))


def lift(pa: isl.PwAff, sp: isl.Space) -> isl.PwAff:
    """A parameter-only expression as a function on the space sp."""
    return pa if sp.is_params() else pa.insert_domain(sp)


def var(sp: isl.Space, k: int) -> isl.PwAff:
    return isl.PwAff.var_on_domain(isl.LocalSpace.from_space(sp), isl.dim_type.set, k)


def box(sp: isl.Space, bounds: Sequence[tuple[isl.PwAff, isl.PwAff]]) -> isl.Set:
    """The points of sp whose k-th coordinate lies in [lo, hi) of bounds[k] (expressions
    of the parameters only)."""
    out = isl.Set.universe(sp)
    for k, (lo, hi) in enumerate(bounds):
        v = var(sp, k)
        out = out.intersect(lift(lo, sp).le_set(v)).intersect(v.lt_set(lift(hi, sp)))
    return out


def constant_value(pa: isl.PwAff) -> int | None:
    """The value of a constant single-piece function, else None."""
    if not pa.is_cst():
        return None
    pieces = pa.get_pieces()
    if len(pieces) != 1:
        return None
    v = pieces[0][1].get_constant_val()
    return v.to_python() if v.is_int() else None


def to_pw_aff(
    e: ir.Expr,
    sp: isl.Space,
    iters: Sequence[str],
    *,
    params: Sequence[str],
    constants: Mapping[str, int],
    extent: Extent,
) -> isl.PwAff | None:
    """e as a quasi-affine function of iters (the set dims of sp) and the params,
    or None when it is not one (tensor reads, products of variables, ...)."""

    def go(e: ir.Expr) -> isl.PwAff | None:
        if not is_integral(e.dtype):
            return None
        match e:
            case ir.Const(value=v):
                return constant(sp, int(v))
            case ir.Index(name=n):
                return var(sp, list(iters).index(n)) if n in iters else None
            case ir.Size(name=n):
                if n in constants:
                    return constant(sp, constants[n])
                ls = isl.LocalSpace.from_space(sp)
                return isl.PwAff.var_on_domain(ls, isl.dim_type.param, list(params).index(n))
            case ir.DimSize(tensor=t, dim=k):
                ext = extent(t, k)
                return None if ext is None else lift(ext, sp)
            case ir.Unary(op="-", operand=x):
                a = go(x)
                return None if a is None else a.neg()
            case ir.Cast(operand=x):
                return go(x)
            case ir.Binary(op="+" | "-" | "*" | "/" | "%" as op, left=x, right=y):
                a, b = go(x), go(y)
                if a is None or b is None:
                    return None
                if op == "+":
                    return a.add(b)
                if op == "-":
                    return a.sub(b)
                if op == "*":
                    return a.mul(b) if a.is_cst() or b.is_cst() else None
                divisor = constant_value(b)
                if divisor is None or divisor == 0:
                    return None
                if op == "/":
                    return a.div(b).floor()
                if divisor < 0:
                    return None
                return a.mod_val(isl.Val.int_from_si(_CTX, divisor))
            case ir.Call(fn="min" | "max" as fn, args=(x, y)):
                a, b = go(x), go(y)
                if a is None or b is None:
                    return None
                return a.min(b) if fn == "min" else a.max(b)
        return None

    return go(e)


def quasi_affine(e: ir.Expr, constants: Collection[str] = ()) -> bool:
    """Whether e is quasi-affine in the index variables and the sizes together, as range
    inference reads subscripts (the sizes are parameters there, but those in
    `constants`): products by numbers, quotients and remainders by positive ones. A
    subscript that is not (`A(i * i)`, `A(M * i)`, `A(i % -3)`) is checked on its values,
    no inference covering it. Read off the program's own expression, with its sizes as
    names, by both the scop and the kernel's check table."""

    def number(x: ir.Expr) -> bool:
        return all(
            isinstance(n, ir.Const | ir.Unary | ir.Binary | ir.Cast)
            or (isinstance(n, ir.Size) and n.name in constants)
            for n in ir.walk(x)
        )

    def go(e: ir.Expr) -> bool:
        if not is_integral(e.dtype):
            return False
        match e:
            case ir.Const() | ir.Index() | ir.Size() | ir.DimSize():
                return True
            case ir.Unary(op="-", operand=x) | ir.Cast(operand=x):
                return go(x)
            case ir.Binary(op="+" | "-", left=x, right=y):
                return go(x) and go(y)
            case ir.Binary(op="*", left=x, right=y):
                return go(x) and go(y) and (number(x) or number(y))
            case ir.Binary(op="/" | "%" as op, left=x, right=y):
                sign = _sign(y) if number(y) else None
                return go(x) and (sign == 1 or (op == "/" and sign == -1))
            case ir.Call(fn="min" | "max", args=(x, y)):
                return go(x) and go(y)
        return False

    return go(e)


def _sign(e: ir.Expr) -> int | None:
    """The sign of a number's text: a nonzero literal or a size (1), negated (-1); None
    for anything else (a product, zero)."""
    match e:
        case ir.Const(value=v) if v != 0:
            return 1 if v > 0 else -1
        case ir.Size():
            return 1
        case ir.Unary(op="-", operand=x) | ir.Cast(operand=x):
            inner = _sign(x)
            return None if inner is None else (-inner if isinstance(e, ir.Unary) else inner)
    return None
