"""The checked, lowered program that every stage after range inference reads.

Expressions are typed trees of frozen dataclasses; a `Program` adds the
tensors with symbolic shapes and the statements with their isl domains. isl
objects are values too: nothing here is mutated after construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace

import islpy as isl

from .errors import Span

INDEX_DTYPE = "int32"


@dataclass(frozen=True)
class Const:
    value: int | float | bool
    dtype: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Index:
    """An index variable of the enclosing statement."""

    name: str
    dtype: str = INDEX_DTYPE
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Size:
    """A size name (or an integer scalar parameter used as a compile-time size)."""

    name: str
    dtype: str = INDEX_DTYPE
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class DimSize:
    """`T.d` of a tensor whose extent range inference computes."""

    tensor: str
    dim: int
    dtype: str = INDEX_DTYPE
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Read:
    tensor: str
    subscripts: tuple[Expr, ...]
    dtype: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Unary:
    op: str  # "-" or "!"
    operand: Expr
    dtype: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Binary:
    """`compute` is the type the operation happens in; `dtype` the result (bool for comparisons)."""

    op: str
    left: Expr
    right: Expr
    dtype: str
    compute: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Select:
    cond: Expr
    then: Expr
    other: Expr
    dtype: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Call:
    """A builtin; arguments are converted to `dtype` first."""

    fn: str
    args: tuple[Expr, ...]
    dtype: str
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Cast:
    operand: Expr
    dtype: str
    span: Span | None = field(default=None, compare=False)


Expr = Const | Index | Size | DimSize | Read | Unary | Binary | Select | Call | Cast

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGICAL = frozenset({"&&", "||"})


def children(e: Expr) -> tuple[Expr, ...]:
    match e:
        case Read(subscripts=subs):
            return subs
        case Unary(operand=x) | Cast(operand=x):
            return (x,)
        case Binary(left=a, right=b):
            return (a, b)
        case Select(cond=c, then=a, other=b):
            return (c, a, b)
        case Call(args=args):
            return args
    return ()


def walk(e: Expr) -> Iterator[Expr]:
    """Every node of e, parents before children."""
    yield e
    for c in children(e):
        yield from walk(c)


def map_expr(e: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild e bottom-up, applying fn to every node after its children."""
    match e:
        case Read():
            e = replace(e, subscripts=tuple(map_expr(s, fn) for s in e.subscripts))
        case Unary() | Cast():
            e = replace(e, operand=map_expr(e.operand, fn))
        case Binary():
            e = replace(e, left=map_expr(e.left, fn), right=map_expr(e.right, fn))
        case Select():
            e = replace(
                e, cond=map_expr(e.cond, fn), then=map_expr(e.then, fn), other=map_expr(e.other, fn)
            )
        case Call():
            e = replace(e, args=tuple(map_expr(a, fn) for a in e.args))
    return fn(e)


def reads(e: Expr) -> Iterator[Read]:
    return (n for n in walk(e) if isinstance(n, Read))


def reads_tensor(e: Expr) -> bool:
    """e reads a tensor: as a subscript, an indirect one (its values come from memory)."""
    return next(reads(e), None) is not None


def index_names(e: Expr) -> set[str]:
    return {n.name for n in walk(e) if isinstance(n, Index)}


def to_text(e: Expr) -> str:
    """TC-like text of an expression, for messages."""
    match e:
        case Const(value=v):
            return repr(v) if isinstance(v, float) else str(v)
        case Index(name=n) | Size(name=n):
            return n
        case DimSize(tensor=t, dim=d):
            return f"{t}.{d}"
        case Read(tensor=t, subscripts=subs):
            return t if not subs else f"{t}({', '.join(to_text(s) for s in subs)})"
        case Unary(op=op, operand=x):
            return f"{op}{_paren(x)}"
        case Binary(op=op, left=a, right=b):
            return f"{_paren(a)} {op} {_paren(b)}"
        case Select(cond=c, then=a, other=b):
            return f"{_paren(c)} ? {_paren(a)} : {_paren(b)}"
        case Call(fn=f, args=args):
            return f"{f}({', '.join(to_text(a) for a in args)})"
        case Cast(operand=x, dtype=t):
            return f"{t}({to_text(x)})"
    raise TypeError(e)


def _paren(e: Expr) -> str:
    text = to_text(e)
    return f"({text})" if isinstance(e, Binary | Select) else text


# --------------------------------------------------------------------------
# Programs


@dataclass(frozen=True)
class Tensor:
    """A tensor of a program. `shape` holds one isl.PwAff over the program's
    parameters per dimension (symbolic extents)."""

    name: str
    dtype: str
    role: str  # "input", "output" or "temp"
    shape: tuple[isl.PwAff, ...] = field(compare=False)
    zero_fill: bool = True

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class Statement:
    """`tensor(lhs) op rhs` over `domain`, an isl.Set over `iterators`.

    `op` is "=" or a reduction ("+", "*", "min", "max"); `init` is the `!`.
    `bounds[k]` is the (lo, hi) pair of isl.PwAff of iterators[k]: lo <= v < hi.
    """

    tensor: str
    lhs: tuple[str, ...]
    iterators: tuple[str, ...]
    op: str
    init: bool
    rhs: Expr
    domain: isl.Set = field(compare=False)
    bounds: tuple[tuple[isl.PwAff, isl.PwAff], ...] = field(compare=False)
    span: Span | None = field(default=None, compare=False)

    @property
    def reduction_vars(self) -> tuple[str, ...]:
        return self.iterators[len(self.lhs) :]


@dataclass(frozen=True)
class Precondition:
    """Parameter values for which an access of the program would go out of bounds."""

    message: str
    violated: isl.Set = field(compare=False)
    span: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Program:
    """One def after inlining and range inference.

    `params` are the isl parameter names: the size names of the inputs, then the
    integer scalars used as sizes (compile-time constants). `constants` holds the
    values of those already specialized.
    """

    name: str
    source: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tensors: Mapping[str, Tensor]
    statements: tuple[Statement, ...]
    params: tuple[str, ...]
    context: isl.Set = field(compare=False)
    preconditions: tuple[Precondition, ...] = ()
    constants: Mapping[str, int] = field(default_factory=dict)
    size_params: tuple[str, ...] = ()  # the params that are sizes (the rest are scalars)

    @property
    def temporaries(self) -> tuple[str, ...]:
        return tuple(n for n, t in self.tensors.items() if t.role == "temp")


def param_point(program: Program, values: Mapping[str, int]) -> isl.Set:
    """The parameter set holding exactly `values`, in the program's parameter space."""
    space = program.context.get_space()
    s = isl.Set.universe(space)
    for i, name in enumerate(program.params):
        s = s.fix_val(isl.dim_type.param, i, isl.Val.int_from_si(s.get_ctx(), values[name]))
    return s


def eval_pw(pa: isl.PwAff, point: isl.Set) -> int:
    """The value of a parameter-only PwAff at a point (see param_point)."""
    fixed = pa.intersect_params(point)
    if fixed.is_empty():
        raise ValueError("piecewise expression undefined at this point")
    return fixed.max_val().to_python()


def isl_name(name: str) -> str:
    """isl refuses names that look like numbers; TC allows `2LUT`. `$` is no TC character."""
    return f"${name}" if name[:1].isdigit() else name


def pw_to_text(pa: isl.PwAff, program: Program) -> str:
    """A parameter expression as C-like text (`I / 2`, `M >= N ? M - N + 1 : 0`).
    The text assumes every size is at least 1, which keeps it short; the
    program itself stays exact for empty sizes."""
    shown = program.context
    for k, name in enumerate(program.params):
        if name in program.size_params:
            shown = shown.lower_bound_val(isl.dim_type.param, k, isl.Val.one(shown.get_ctx()))
    build = isl.AstBuild.from_context(shown)
    return build.expr_from_pw_aff(pa.gist_params(shown)).to_C_str().replace("$", "")
