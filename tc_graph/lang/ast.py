"""The syntax tree of TC source, exactly as written (names not yet resolved)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Span


@dataclass(frozen=True)
class Num:
    text: str
    value: int | float
    is_float: bool
    span: Span


@dataclass(frozen=True)
class Ident:
    name: str
    span: Span


@dataclass(frozen=True)
class Unary:
    op: str
    operand: Expr
    span: Span


@dataclass(frozen=True)
class Binary:
    op: str
    left: Expr
    right: Expr
    span: Span


@dataclass(frozen=True)
class Ternary:
    cond: Expr
    then: Expr
    other: Expr
    span: Span


@dataclass(frozen=True)
class Apply:
    """`name(args)`: a tensor read, a builtin call or a cast; sema decides which."""

    name: str
    args: tuple[Expr, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class DimOf:
    """`T.d`: the size of dimension d of tensor T."""

    tensor: str
    dim: int
    span: Span


Expr = Num | Ident | Unary | Binary | Ternary | Apply | DimOf


@dataclass(frozen=True)
class RangeWhere:
    var: str
    lo: Expr
    hi: Expr
    span: Span


@dataclass(frozen=True)
class LetWhere:
    var: str
    value: Expr
    span: Span


@dataclass(frozen=True)
class ExistsWhere:
    expr: Expr
    span: Span


Where = RangeWhere | LetWhere | ExistsWhere


@dataclass(frozen=True)
class Assign:
    """`T(i, j) op rhs where ...`; op is `=` or a reduction such as `+=`."""

    tensor: str
    indices: tuple[Ident, ...]
    op: str
    init: bool
    rhs: Expr
    wheres: tuple[Where, ...]
    span: Span
    tensor_span: Span
    op_span: Span


@dataclass(frozen=True)
class CallStmt:
    """`(C1, C2) = f(A, B)`: a call of another def, inlined by sema."""

    outputs: tuple[Ident, ...]
    callee: str
    args: tuple[Ident, ...]
    span: Span
    callee_span: Span


Stmt = Assign | CallStmt


@dataclass(frozen=True)
class TensorType:
    dtype: str
    dims: tuple[Ident | Num, ...] | None
    span: Span


@dataclass(frozen=True)
class Param:
    type: TensorType
    name: str
    span: Span


@dataclass(frozen=True)
class Return:
    name: str
    type: TensorType | None
    span: Span


@dataclass(frozen=True)
class Def:
    name: str
    params: tuple[Param, ...]
    returns: tuple[Return, ...]
    body: tuple[Stmt, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class Module:
    defs: tuple[Def, ...]
    source: str
