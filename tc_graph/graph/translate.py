"""Translation of a group of ONNX nodes into one multi-statement TC.

Every supported op type has a TC template in the `operators/` library (shipped in the
wheel as `tc_graph/operators`). A template is a def with `${fields}`: TC defs are
rank-specific, so the fields (parameter declarations, index lists, literals) are filled
from the node's attributes and the static shapes. The group becomes one entry def that
calls the instantiated defs in topological order, `y = gemm_1(x, w, b)`; the compiler
inlines the calls, so the whole group is one TC program it can fuse.

Shapes are static and concrete: the entry's parameters and outputs are declared with
integer dimensions (the compiled kernel is specialized on them anyway), which also makes
tc_graph check at each call that its inferred output shapes are ONNX's.
"""

from __future__ import annotations

import importlib.resources
import math
import re
import string
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import TcError
from ..lang.builtins import resolve as _builtin
from ..lang.lexer import KEYWORDS
from ..lang.types import BY_NUMPY, TYPE_NAMES
from ..onnx_domain import ONNX_DOMAINS

__all__ = [
    "TRANSLATABLE",
    "Translation",
    "Untranslatable",
    "opset_version",
    "translatable",
    "translate",
]

ValueType = tuple[np.dtype, tuple[int, ...]]

_FLOAT32 = np.dtype(np.float32)
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))
_FLOAT16 = np.dtype(np.float16)


class Untranslatable(TcError):
    """A node (or group) that has no TC translation with these types and attributes.

    The partitioner leaves such nodes to onnxruntime; the message says why.
    """


@dataclass(frozen=True)
class Translation:
    """One group as a TC program: the source, its entry def and how it binds to ONNX values."""

    source: str
    entry: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: tuple[onnx.TensorProto, ...]


# ---------------------------------------------------------------------------------------
# The operator library


def _operators_dir() -> Traversable:
    """The `operators/` library: package data in a wheel, the top-level folder in a checkout."""
    installed = importlib.resources.files("tc_graph") / "operators"
    if installed.is_dir():
        return installed
    checkout = Path(__file__).resolve().parents[2] / "operators"
    if checkout.is_dir():
        return checkout
    raise TcError(
        "the TC operator library (operators/*.tc) is missing",
        hint="reinstall tc_graph (pip install --force-reinstall . in its checkout), which "
        "installs it as tc_graph/operators",
    )


@cache
def _table() -> dict[str, dict[str, Any]]:
    """operators/operators.toml: op type -> def prefix, accepted dtypes, template files."""
    return tomllib.loads((_operators_dir() / "operators.toml").read_text(encoding="utf-8"))


@cache
def _template_file(file: str) -> string.Template:
    return string.Template((_operators_dir() / file).read_text(encoding="utf-8"))


def _instantiate(op: str, variant: str, /, **fields: object) -> str:
    """The template of `op`'s `variant` with its fields filled; `${name}` is left for later."""
    file = _table()[op]["templates"][variant]
    try:
        return _template_file(file).substitute(name="${name}", **fields)
    except (KeyError, ValueError) as exc:  # a template and this module disagree
        raise TcError(
            f"operator template '{file}' has a field translate.py does not fill: {exc}"
        ) from exc


# ---------------------------------------------------------------------------------------
# Small TC text helpers


def _decl(dtype: str, dims: Sequence[str | int]) -> str:
    """A parameter type: `float32(M, K)`, or `float32` for a 0-d tensor."""
    return f"{dtype}({', '.join(map(str, dims))})" if dims else dtype


def _ref(tensor: str, idx: Sequence[str]) -> str:
    """An access `A(i, j)`, or `A` for a 0-d tensor."""
    return f"{tensor}({', '.join(idx)})" if idx else tensor


def _lit(value: float) -> str:
    """A float32 TC literal; it rounds back to the same float32."""
    v = float(np.float32(value))
    if not math.isfinite(v):
        raise Untranslatable(f"the constant {value} has no TC literal")
    text = repr(v)
    return f"({text})" if v < 0 else text


def _scaled(factor: int, index: str) -> str:
    return index if factor == 1 else f"{factor} * {index}"


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else v
    return out


def _normalize_axis(axis: int, rank: int, what: str) -> int:
    if not -rank <= axis < rank:
        raise Untranslatable(f"{what} {axis} is out of range for rank {rank}")
    return axis % rank


def _broadcast(shape: tuple[int, ...], out: tuple[int, ...], sizes: str = "D", index: str = "i"):
    """Declared dims and subscripts of an operand broadcast (numpy rules) to `out`.

    A dimension of size 1 where the output is larger is declared as the literal 1 and read at
    index 0; the others share the output's size name and index.
    """
    dims: list[str] = []
    idx: list[str] = []
    for j, d in enumerate(shape):
        o = j + len(out) - len(shape)
        if d == 1 and out[o] != 1:
            dims.append("1")
            idx.append("0")
        else:
            dims.append(f"{sizes}{o}")
            idx.append(f"{index}{o}")
    return dims, idx


# ---------------------------------------------------------------------------------------
# Per-op translations


@dataclass(frozen=True)
class _Call:
    """One node as a call of an instantiated def."""

    op: str  # the op type (its table entry gives the def name prefix)
    text: str  # the def's text, with `${name}` still to fill
    args: tuple[str, ...]  # ONNX values passed to it, in parameter order
    outputs: tuple[str, ...]  # the ONNX values it produces, in the def's output order


@dataclass
class _Ctx:
    """What the translations of one group share: static types, constants, packed weights."""

    types: Mapping[str, ValueType]
    constants: Mapping[str, np.ndarray]
    pack_weights: bool = True
    opset: int | None = None  # the default domain's version, where semantics depend on it
    # original weight name -> (new initializer name, array)
    packed: dict[str, tuple[str, np.ndarray]] = field(default_factory=dict)

    def type(self, value: str) -> tuple[np.dtype, tuple[int, ...]]:
        if not value:
            raise Untranslatable("a required input is missing")
        if value not in self.types:
            raise Untranslatable(f"value '{value}' has no static type")
        dtype, shape = self.types[value]
        shape = tuple(shape)
        if not all(isinstance(d, int | np.integer) and d >= 0 for d in shape):
            raise Untranslatable(f"value '{value}' has no static shape ({shape})")
        return np.dtype(dtype), tuple(int(d) for d in shape)

    def shape(self, value: str, op: str) -> tuple[int, ...]:
        """The shape of a data operand of `op`, which must have one of the op's dtypes."""
        dtype, shape = self.type(value)
        allowed = _table()[op]["dtypes"]
        if dtype.name not in allowed:
            raise Untranslatable(
                f"'{value}' has dtype {dtype.name}; the {op} translation takes {', '.join(allowed)}"
            )
        return shape

    def common_dtype(self, values: Sequence[str], op: str) -> np.dtype:
        """The one dtype of an arithmetic op's data operands (ONNX's `T` is shared by
        them), which must be one of the op's dtypes in the table."""
        for v in values:
            self.shape(v, op)
        dtypes = {self.type(v)[0] for v in values}
        if len(dtypes) != 1:
            names = ", ".join(sorted(d.name for d in dtypes))
            raise Untranslatable(f"{op} of operands of different dtypes ({names})")
        return dtypes.pop()

    def check_output(
        self, node: onnx.NodeProto, shape: tuple[int, ...], dtype: np.dtype = _FLOAT32
    ) -> str:
        """The node's (single) output, after checking ONNX's type for it against ours."""
        outs = [o for o in node.output if o]
        if len(outs) != 1 or node.output[0] != outs[0]:
            raise Untranslatable(f"{node.op_type} must have exactly one output")
        self.check_type(outs[0], shape, dtype)
        return outs[0]

    def check_type(self, value: str, shape: tuple[int, ...], dtype: np.dtype) -> None:
        """ONNX's type for a value the translation computes must be the one it computes."""
        onnx_dtype, onnx_shape = self.type(value)
        if onnx_dtype != dtype or onnx_shape != shape:
            raise Untranslatable(
                f"output '{value}' is typed {onnx_dtype.name}{list(onnx_shape)}, but the "
                f"translation computes {dtype.name}{list(shape)}"
            )

    def constant(self, value: str, what: str) -> np.ndarray:
        """An input that the translation reads as an attribute: it must be a constant."""
        if value not in self.constants:
            raise Untranslatable(f"the {what} '{value}' are not a constant")
        return np.asarray(self.constants[value])

    def pack_transposed(self, weight: str) -> str | None:
        """A constant 2-D weight transposed once, ahead of time, under a new name (or None)."""
        if not self.pack_weights or weight not in self.constants:
            return None
        if weight not in self.packed:
            array = np.ascontiguousarray(np.asarray(self.constants[weight]).T)
            taken = {*self.types, *self.constants, *(n for n, _ in self.packed.values())}
            name = f"{weight}__tc_t"
            k = 2
            while name in taken:
                name, k = f"{weight}__tc_t{k}", k + 1
            self.packed[weight] = (name, array)
        return self.packed[weight][0]


def _inputs(node: onnx.NodeProto, low: int, high: int) -> list[str]:
    """The node's inputs, checking there are between `low` and `high` of them."""
    if not low <= len(node.input) <= high:
        raise Untranslatable(f"{node.op_type} with {len(node.input)} inputs")
    return list(node.input)


def _indices(rank: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{j}" for j in range(rank)]


def _sizes(rank: int) -> list[str]:
    return [f"D{j}" for j in range(rank)]


def _tc_type(dtype: np.dtype) -> str:
    name = BY_NUMPY.get(np.dtype(dtype))
    if name is None:
        raise Untranslatable(f"dtype {np.dtype(dtype).name} has no TC type")
    return name


def _attr_fields(op: str, at: Mapping[str, Any]) -> dict[str, str]:
    """The table's numeric attributes of `op` (with their defaults) as TC literals."""
    return {k: _lit(float(at.get(k, d))) for k, d in _table()[op].get("attrs", {}).items()}


def _expression(op: str, at: Mapping[str, Any]) -> string.Template:
    """The table's element expression of an elementwise op, for the node's attributes."""
    entry = _table()[op]
    expr = entry["expr"]
    if isinstance(expr, dict):
        choice = str(at.get(entry["variant"], next(iter(expr))))
        if choice not in expr:
            raise Untranslatable(f"{entry['variant']}={choice!r}")
        expr = expr[choice]
    return string.Template(expr)


def _elementwise_call(
    op: str,
    node: onnx.NodeProto,
    ctx: _Ctx,
    operands: Sequence[str],
    expr: Callable[[list[str]], str],
    *,
    scalars: Sequence[str] = (),
) -> _Call:
    """One elementwise def over broadcast operands (lets x0, x1, ... name their elements)
    and 0-d scalar inputs (read by name); `expr` builds the result from the let names."""
    shapes = [ctx.shape(v, op) for v in operands]
    try:
        shape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise Untranslatable(
            f"shapes {', '.join(str(list(s)) for s in shapes)} do not broadcast"
        ) from None
    dtype = ctx.common_dtype([*operands, *scalars], op)
    tc_type = _tc_type(dtype)
    out = ctx.check_output(node, shape, dtype)
    params, lets, names = [], [], []
    for k, s in enumerate(shapes):
        dims, idx = _broadcast(s, shape)
        params.append(f"{_decl(tc_type, dims)} X{k}")
        lets.append(f"x{k} = {_ref(f'X{k}', idx)}")
        names.append(f"x{k}")
    for k, v in enumerate(scalars):
        if ctx.shape(v, op) != ():
            raise Untranslatable(f"'{v}' is not a scalar")
        params.append(f"{tc_type} s{k}")
    text = _instantiate(
        op,
        "default",
        op=op,
        params=", ".join(params),
        Y=_ref("Y", _indices(len(shape))),
        Yt=tc_type,
        expr=expr(names),
        lets=", ".join(lets),
    )
    return _Call(op, text, (*operands, *scalars), (out,))


def _elementwise(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Ops whose table entry gives the expression: one, two or any number of operands."""
    op = node.op_type
    entry = _table()[op]
    arity = entry["arity"]
    at = _attrs(node)
    fields = _attr_fields(op, at)
    template = _expression(op, at)
    if arity == "variadic":
        ins = _inputs(node, 1, 1 << 16)
        if not all(ins):
            raise Untranslatable(f"{op} with a missing input")

        def fold(names: list[str]) -> str:
            acc = names[0]
            for name in names[1:]:
                acc = f"({template.substitute(a=acc, b=name)})"
            if "post" in entry:
                acc = string.Template(entry["post"]).substitute(y=acc, n=_lit(len(names)))
            return acc

        return _elementwise_call(op, node, ctx, ins, fold)
    ins = _inputs(node, arity, arity)
    if arity == 1:
        return _elementwise_call(
            op, node, ctx, ins, lambda n: template.substitute(x=n[0], **fields)
        )
    return _elementwise_call(
        op, node, ctx, ins, lambda n: template.substitute(a=n[0], b=n[1], **fields)
    )


def _clip(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Clip: bounds from attributes (opset < 11) or optional inputs, each possibly absent;
    a bound that is a runtime input is passed as a 0-d parameter."""
    ins = _inputs(node, 1, 3)
    at = _attrs(node)
    bounds: list[str | None] = []
    scalars: list[str] = []
    for k, (attr, default) in enumerate((("min", -math.inf), ("max", math.inf))):
        if k + 1 < len(ins) and ins[k + 1]:
            v = ins[k + 1]
            if v in ctx.constants:
                bounds.append(_lit(float(ctx.constant(v, "bound"))))
            else:
                bounds.append(f"s{len(scalars)}")
                scalars.append(v)
        else:
            value = float(at.get(attr, default))
            bounds.append(None if math.isinf(value) else _lit(value))

    def expr(names: list[str]) -> str:
        (x,) = names
        lo, hi = bounds
        if lo is not None:
            x = f"({x} < {lo} ? {lo} : {x})"
        if hi is not None:
            x = f"({x} > {hi} ? {hi} : {x})"
        return x

    return _elementwise_call("Clip", node, ctx, ins[:1], expr, scalars=scalars)


def _copy_call(op: str, node: onnx.NodeProto, ctx: _Ctx, x: str) -> _Call:
    """An identity copy of any TC dtype (Identity, a reduction over no axes)."""
    dtype, shape = ctx.type(x)
    ctx.shape(x, op)
    out = ctx.check_output(node, shape, dtype)
    dims, idx = _sizes(len(shape)), _indices(len(shape))
    text = _instantiate(
        "Identity",
        "default",
        X=_decl(_tc_type(dtype), dims),
        Xr=_ref("X", idx),
        Y=_ref("Y", idx),
    )
    return _Call("Identity", text, (x,), (out,))


def _wide(dtype: np.dtype, ref: str) -> str:
    """A read that products accumulate from: float16 is cast to float32 (the language
    computes float16 in float32, but a product of two float16 values is rounded to 16 bits
    before it is added)."""
    return f"float32({ref})" if dtype == _FLOAT16 else ref


def _accumulator(dtype: np.dtype, idx: Sequence[str]) -> tuple[str, str]:
    """The tensor a contraction accumulates into (Y, or for float16 a float32 temporary
    acc) and the statement that then stores it into Y."""
    if dtype != _FLOAT16:
        return "Y", ""
    return "acc", f"  {_ref('Y', idx)} = {_ref('acc', idx)}\n"


def _identity(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    (x,) = _inputs(node, 1, 1)
    return _copy_call("Identity", node, ctx, x)


def _matmul(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    a, b = _inputs(node, 2, 2)
    sa, sb = ctx.shape(a, "MatMul"), ctx.shape(b, "MatMul")
    dtype = ctx.common_dtype([a, b], "MatMul")
    if not sa or not sb:
        raise Untranslatable("MatMul of a 0-d operand")
    k_b = sb[-2] if len(sb) >= 2 else sb[0]
    if sa[-1] != k_b:
        raise Untranslatable(f"MatMul of shapes {list(sa)} and {list(sb)}: inner sizes differ")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        raise Untranslatable(
            f"batch dimensions {list(sa)} and {list(sb)} do not broadcast"
        ) from None
    # A 1-D operand has no m (resp. n): numpy promotes it to a matrix and drops that axis.
    shape = batch + sa[-2:-1] + sb[-1:] * (len(sb) >= 2)
    out = ctx.check_output(node, shape, dtype)
    da, ia = _broadcast(sa[:-2], batch, "B", "b")
    db, ib = _broadcast(sb[:-2], batch, "B", "b")
    y_idx = [f"b{j}" for j in range(len(batch))]
    if len(sa) >= 2:
        da, ia, y_idx = [*da, "M"], [*ia, "m"], [*y_idx, "m"]
    da, ia = [*da, "K"], [*ia, "k"]
    db, ib = [*db, "K"], [*ib, "k"]
    if len(sb) >= 2:
        db, ib, y_idx = [*db, "N"], [*ib, "n"], [*y_idx, "n"]
    acc, store = _accumulator(dtype, y_idx)
    text = _instantiate(
        "MatMul",
        "default",
        A=_decl(_tc_type(dtype), da),
        B=_decl(_tc_type(dtype), db),
        Ar=_wide(dtype, _ref("A", ia)),
        Br=_wide(dtype, _ref("B", ib)),
        Yt=_tc_type(dtype),
        T=_ref(acc, y_idx),
        store=store,
    )
    return _Call("MatMul", text, (a, b), (out,))


def _gemm(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 2, 3)
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else ""
    at = _attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
    sa, sb = ctx.shape(a, "Gemm"), ctx.shape(b, "Gemm")
    dtype = ctx.common_dtype([a, b, c] if c else [a, b], "Gemm")
    t = _tc_type(dtype)
    if len(sa) != 2 or len(sb) != 2:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: operands must be 2-D")
    m, k = sa[::-1] if trans_a else sa
    k_b, n = sb[::-1] if trans_b else sb
    if k != k_b:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: inner sizes differ")
    out = ctx.check_output(node, (m, n), dtype)
    if trans_b and len(ctx.type(b)[1]) == 2:
        packed = ctx.pack_transposed(b)
        if packed is not None:  # weights (N, K) become (K, N): n is contiguous in memory
            b, trans_b = packed, 0
    alpha_text = "" if alpha == 1.0 else f"{_lit(alpha)} * "
    acc, store = _accumulator(dtype, ["m", "n"])
    fields = {
        "A": _decl(t, ("K", "M") if trans_a else ("M", "K")),
        "B": _decl(t, ("N", "K") if trans_b else ("K", "N")),
        "Ar": _wide(dtype, "A(k, m)" if trans_a else "A(m, k)"),
        "Br": _wide(dtype, "B(n, k)" if trans_b else "B(k, n)"),
        "alpha": alpha_text,
        "Yt": t,
        "T": acc,
        "store": store,
    }
    if not c or beta == 0.0:  # ONNX: beta * C is dropped with beta = 0 (onnxruntime too)
        return _Call("Gemm", _instantiate("Gemm", "nobias", **fields), (a, b), (out,))
    sc = ctx.shape(c, "Gemm")
    if len(sc) > 2 or any(d not in (1, o) for d, o in zip(sc[::-1], (n, m), strict=False)):
        raise Untranslatable(f"C of shape {list(sc)} does not broadcast to {[m, n]}")
    dc, ic = _broadcast(sc, (m, n))
    # _broadcast names dimensions D0/D1 and indices i0/i1; Gemm's are M/N and m/n.
    dc = [{"D0": "M", "D1": "N"}.get(d, d) for d in dc]
    ic = [{"i0": "m", "i1": "n"}.get(i, i) for i in ic]
    beta_text = "" if beta == 1.0 else f"{_lit(beta)} * "
    text = _instantiate(
        "Gemm", "bias", C=_decl(t, dc), Cr=beta_text + _wide(dtype, _ref("C", ic)), **fields
    )
    return _Call("Gemm", text, (a, b, c), (out,))


def _gather(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    x, i = _inputs(node, 2, 2)
    sx = ctx.shape(x, "Gather")
    dtype = ctx.type(x)[0]
    idtype, si = ctx.type(i)
    if idtype not in _INDEX_DTYPES:
        raise Untranslatable(f"indices '{i}' have dtype {idtype.name}; Gather takes int32/int64")
    if not sx:
        raise Untranslatable("Gather from a 0-d tensor")
    axis = _normalize_axis(int(_attrs(node).get("axis", 0)), len(sx), "axis")
    extent = sx[axis]
    shape = sx[:axis] + si + sx[axis + 1 :]
    out = ctx.check_output(node, shape, dtype)
    # ONNX allows negative indices (-N..-1 count from the end). Unless the indices are a
    # constant without negative values, the subscript maps them with a select: a subscript
    # is checked on its final value, so an index outside [-N, N) is still reported.
    negative = True
    if i in ctx.constants:
        values = np.asarray(ctx.constants[i])
        if values.size and (values.min() < -extent or values.max() >= extent):
            raise Untranslatable(f"constant indices '{i}' fall outside [-{extent}, {extent})")
        negative = bool(values.size) and bool(values.min() < 0)
    ax = f"D{axis}"
    select = f"ix < 0 ? ix + {ax} : ix" if negative else "ix"
    x_idx = [f"i{j}" for j in range(len(sx))]
    x_idx[axis] = select
    y_idx = [f"i{j}" for j in range(axis)]
    y_idx += [f"j{t}" for t in range(len(si))]
    y_idx += [f"i{j}" for j in range(axis + 1, len(sx))]
    text = _instantiate(
        "Gather",
        "default",
        axis=axis,
        negatives=(
            "a select maps them to ix + N"
            if negative
            else "none, the indices are a constant without negative values"
        ),
        X=_decl(_tc_type(dtype), [f"D{j}" for j in range(len(sx))]),
        I=_decl(BY_NUMPY[idtype], [f"J{t}" for t in range(len(si))]),
        Ir=_ref("I", [f"j{t}" for t in range(len(si))]),
        x_idx=", ".join(x_idx),
        Y=_ref("Y", y_idx),
    )
    return _Call("Gather", text, (x, i), (out,))


def _reduce_axes(node: onnx.NodeProto, ctx: _Ctx, rank: int) -> set[int]:
    """The axes a Reduce* node reduces: attribute (older opsets) or constant input."""
    ins = list(node.input)
    at = _attrs(node)
    if "axes" in at:
        axes: list[int] = [int(a) for a in at["axes"]]
    elif len(ins) > 1 and ins[1]:
        axes = [int(a) for a in ctx.constant(ins[1], "axes").ravel()]
    else:
        axes = []
    if not axes:
        return set() if int(at.get("noop_with_empty_axes", 0)) else set(range(rank))
    axes_set = {_normalize_axis(a, rank, "axis") for a in axes}
    if len(axes_set) != len(axes):
        raise Untranslatable(f"repeated axes {axes}")
    return axes_set


def _reduce(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Reduce* and the global pools, from the table's reducer, pre- and post-expression."""
    op = node.op_type
    entry = _table()[op]
    if op.startswith("Global"):
        (x,) = _inputs(node, 1, 1)
        sx = ctx.shape(x, op)
        if len(sx) < 3:
            raise Untranslatable(f"{op} of rank {len(sx)}: needs (N, C, spatial...)")
        axes_set, keepdims = set(range(2, len(sx))), 1
    else:
        x = _inputs(node, 1, 2)[0]
        sx = ctx.shape(x, op)
        axes_set = _reduce_axes(node, ctx, len(sx))
        keepdims = int(_attrs(node).get("keepdims", 1))
    if not axes_set:  # nothing to reduce: a copy, unless the op maps each element
        if "pre" in entry or "post" in entry:
            raise Untranslatable(f"{op} over no axes")
        return _copy_call(op, node, ctx, x)
    shape = tuple(
        1 if j in axes_set else d for j, d in enumerate(sx) if keepdims or j not in axes_set
    )
    dtype = ctx.common_dtype([x], op)
    out = ctx.check_output(node, shape, dtype)
    x_idx = [f"k{j}" if j in axes_set else f"i{j}" for j in range(len(sx))]
    y_idx = [
        (f"r{j}" if j in axes_set else f"i{j}")
        for j in range(len(sx))
        if keepdims or j not in axes_set
    ]
    kept = [f"r{j} in 0:1" for j in sorted(axes_set)] if keepdims else []
    y = _ref("Y", y_idx)
    count = math.prod(sx[j] for j in axes_set)
    pre = string.Template(entry.get("pre", "${x}")).substitute(x="x")
    # float16 accumulates in a float32 temporary (the language computes float16 in float32;
    # 16-bit partial sums would lose the precision), stored as 16 bits at the end.
    acc = _ref("acc", y_idx) if dtype == _FLOAT16 else y
    if acc != y:
        pre = f"float32({pre})"
    result = acc
    if "post" in entry:
        if count == 0 and "${count}" in entry["post"]:
            # A mean of nothing divides by zero: left to onnxruntime, before any measuring.
            raise Untranslatable(f"{op} over an empty set (a reduced axis has size 0)")
        result = string.Template(entry["post"]).substitute(y=acc, count=_lit(count))
    text = _instantiate(
        op,
        "default",
        op=op,
        axes=sorted(axes_set),
        X=_decl(_tc_type(dtype), _sizes(len(sx))),
        Xr=_ref("X", x_idx),
        Yt=_tc_type(dtype),
        acc=acc,
        reducer=entry["reducer"],
        pre=pre,
        ranges="".join(f", {r}" for r in kept),
        post=f"  {y} = {result}\n" if result != y else "",
    )
    return _Call(op, text, (x,), (out,))


def _transpose(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    (x,) = _inputs(node, 1, 1)
    sx = ctx.shape(x, "Transpose")
    dtype = ctx.type(x)[0]
    rank = len(sx)
    perm = [int(p) for p in _attrs(node).get("perm", range(rank - 1, -1, -1))]
    if sorted(perm) != list(range(rank)):
        raise Untranslatable(f"perm {perm} is not a permutation of the {rank} axes")
    out = ctx.check_output(node, tuple(sx[p] for p in perm), dtype)
    text = _instantiate(
        "Transpose",
        "default",
        perm=perm,
        X=_decl(_tc_type(dtype), [f"D{j}" for j in range(rank)]),
        Xr=_ref("X", [f"i{j}" for j in range(rank)]),
        Y=_ref("Y", [f"i{p}" for p in perm]),
    )
    return _Call("Transpose", text, (x,), (out,))


def _concat(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = list(node.input)
    if not ins or not all(ins):
        raise Untranslatable("Concat with no inputs or a missing input")
    shapes = [ctx.shape(v, "Concat") for v in ins]
    dtypes = {ctx.type(v)[0] for v in ins}
    if len(dtypes) != 1:
        raise Untranslatable("Concat of different dtypes")
    (dtype,) = dtypes
    rank = len(shapes[0])
    if rank == 0:
        raise Untranslatable("Concat of 0-d tensors")
    axis = _normalize_axis(int(_attrs(node).get("axis", 0)), rank, "axis")
    for s in shapes:
        if len(s) != rank or any(s[j] != shapes[0][j] for j in range(rank) if j != axis):
            raise Untranslatable(f"Concat of shapes {[list(s) for s in shapes]} along {axis}")
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    out = ctx.check_output(node, tuple(shape), dtype)
    params, statements = [], []
    y = _ref("Y", [f"i{j}" for j in range(rank)])
    for k in range(len(ins)):
        dims = [f"D{j}" for j in range(rank)]
        dims[axis] = f"C{k}"
        params.append(f"{_decl(_tc_type(dtype), dims)} X{k}")
        idx = [f"i{j}" for j in range(rank)]
        if k:
            offset = " + ".join(f"C{t}" for t in range(k))
            idx[axis] = f"i{axis} - ({offset})" if k > 1 else f"i{axis} - {offset}"
        statements.append(f"  {y} = {_ref(f'X{k}', idx)}")
    text = _instantiate(
        "Concat",
        "default",
        axis=axis,
        params=", ".join(params),
        statements="\n".join(statements),
    )
    return _Call("Concat", text, tuple(ins), (out,))


def _conv_pads(at: dict[str, Any], size: Sequence[int], kernel: Sequence[int], stride, dilation):
    """(top, left, bottom, right) from `pads` or, shapes being static, from `auto_pad`."""
    auto_pad = at.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = [int(p) for p in at.get("pads", (0, 0, 0, 0))]
        if len(pads) != 4 or min(pads) < 0:
            raise Untranslatable(f"pads {pads} are not 4 non-negative numbers")
        return pads
    if auto_pad == "VALID":
        return [0, 0, 0, 0]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise Untranslatable(f"auto_pad {auto_pad!r}")
    if any(d != 1 for d in dilation):  # onnxruntime refuses it too: no agreed semantics
        raise Untranslatable(f"auto_pad {auto_pad} with dilations {list(dilation)}")
    begin, end = [], []
    for d, k, s, dl in zip(size, kernel, stride, dilation, strict=True):
        total = max((-(-d // s) - 1) * s + (k - 1) * dl + 1 - d, 0)
        small, large = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else large)
        end.append(large if auto_pad == "SAME_UPPER" else small)
    return begin + end


def _conv_padding(pt: int, pl: int, pb: int, pr: int) -> str:
    """The statement of the zero-padded copy Xp ("" without padding): the convolution
    itself then has only affine reads (vectorizable, no bounds test); the copy's reads are
    clamped, since tc_graph checks subscripts regardless of the condition that guards them."""
    if not (pt or pl or pb or pr):
        return ""
    conds, subs = [], []
    for i, size, lo, hi in (("h", "H", pt, pb), ("w", "W", pl, pr)):
        sub = f"{i} - {lo}" if lo else i
        if lo:
            conds.append(f"{i} >= {lo}")
            sub = f"max({sub}, 0)"
        if hi:
            conds.append(f"{i} < {lo} + {size}" if lo else f"{i} < {size}")
            sub = f"min({sub}, {size} - 1)"
        subs.append(sub)
    return (
        f"  Xp(n, c, h, w) = {' && '.join(conds)} ? X(n, c, {subs[0]}, {subs[1]}) : 0.0\n"
        f"      where h in 0:H + {pt + pb}, w in 0:W + {pl + pr}\n"
    )


def _conv(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 2, 3)
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else ""
    sx, sw = ctx.shape(x, "Conv"), ctx.shape(w, "Conv")
    dtype = ctx.common_dtype([x, w, bias] if bias else [x, w], "Conv")
    t = _tc_type(dtype)
    if len(sx) != 4 or len(sw) != 4:
        raise Untranslatable(
            f"Conv of shapes {list(sx)} and {list(sw)}: only 2-D convolutions (NCHW) translate"
        )
    n, c, h, wd = sx
    f, cg, kh, kw = sw
    at = _attrs(node)
    group = int(at.get("group", 1))
    if group < 1 or c != cg * group or f % group:
        raise Untranslatable(f"group {group} does not divide {c} input and {f} output channels")
    if list(at.get("kernel_shape", (kh, kw))) != [kh, kw]:
        raise Untranslatable(f"kernel_shape {at['kernel_shape']} differs from the weights'")
    strides = [int(s) for s in at.get("strides", (1, 1))]
    dilations = [int(d) for d in at.get("dilations", (1, 1))]
    if len(strides) != 2 or len(dilations) != 2 or min(strides + dilations) < 1:
        raise Untranslatable(f"strides {strides} / dilations {dilations}")
    pt, pl, pb, pr = _conv_pads(at, (h, wd), (kh, kw), strides, dilations)
    oh = (h + pt + pb - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (wd + pl + pr - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    if oh < 1 or ow < 1:
        raise Untranslatable("the convolution's output is empty")
    out = ctx.check_output(node, (n, f, oh, ow), dtype)
    acc, store = _accumulator(dtype, ["n", "f", "oh", "ow"])
    args: tuple[str, ...] = (x, w)
    bias_param = bias_stmt = ""
    if bias:
        if ctx.shape(bias, "Conv") != (f,):
            raise Untranslatable(f"bias '{bias}' is not of shape [{f}]")
        bias_param, args = f", {t}(F) B", (*args, bias)
        bias_stmt = f"  {acc}(n, f, oh, ow) = {_wide(dtype, 'B(f)')}\n"
    pad_stmt = _conv_padding(pt, pl, pb, pr)
    src = "Xp" if pad_stmt else "X"
    fg = f // group
    ih = f"{_scaled(strides[0], 'oh')} + {_scaled(dilations[0], 'kh')}"
    iw = f"{_scaled(strides[1], 'ow')} + {_scaled(dilations[1], 'kw')}"
    if group == 1:
        chan = "c"
    else:
        block = "f" if fg == 1 else f"(f / {fg})"
        chan = f"{block} + c" if cg == 1 else f"{block} * {cg} + c"
    text = _instantiate(
        "Conv",
        "default",
        pad_comment=(
            f"Padding (top, left, bottom, right) = ({pt}, {pl}, {pb}, {pr}), through the "
            "zero-padded copy Xp."
            if src == "Xp"
            else "No padding."
        ),
        chan=chan,
        fg=fg,
        cg="C" if group == 1 else cg,
        bias_param=bias_param,
        pad_stmt=pad_stmt,
        bias_stmt=bias_stmt,
        acc="+=" if bias else "+=!",
        t=t,
        T=acc,
        Xr=_wide(dtype, f"{src}(n, {chan}, {ih}, {iw})"),
        Wr=_wide(dtype, "Wt(f, c, kh, kw)"),
        store=store,
    )
    return _Call("Conv", text, args, (out,))


def _remap(src: tuple[int, ...], dst: tuple[int, ...]) -> list[str]:
    """Subscripts into a row-major tensor of shape `src` that read element (i0, i1, ...) of
    the same elements seen as shape `dst`.

    Dimensions of size 1 are dropped, the rest are matched in runs whose products agree:
    within a run, the output indices make one linear index, and each input dimension
    reads it back with / and % by constants (a run of one dimension on each side is a
    plain index). So Squeeze, Unsqueeze, Flatten and most Reshapes stay affine.
    """
    subs = ["0"] * len(src)
    s_dims = [j for j, d in enumerate(src) if d != 1]
    d_dims = [j for j, d in enumerate(dst) if d != 1]
    si = di = 0
    while si < len(s_dims) or di < len(d_dims):
        s_run, d_run = [s_dims[si]], [d_dims[di]]
        si, di = si + 1, di + 1
        ps, pd = src[s_run[0]], dst[d_run[0]]
        while ps != pd:
            if ps < pd:
                s_run.append(s_dims[si])
                ps *= src[s_dims[si]]
                si += 1
            else:
                d_run.append(d_dims[di])
                pd *= dst[d_dims[di]]
                di += 1
        terms, stride = [], 1
        for j in reversed(d_run):
            terms.append(_scaled(stride, f"i{j}"))
            stride *= dst[j]
        flat = " + ".join(reversed(terms))
        if len(s_run) == 1:
            subs[s_run[0]] = flat
            continue
        flat = f"({flat})" if len(d_run) > 1 else flat
        stride = ps
        for pos, j in enumerate(s_run):
            stride //= src[j]
            sub = flat if stride == 1 else f"{flat} / {stride}"
            if pos:
                sub = f"({sub}) % {src[j]}" if stride != 1 else f"{sub} % {src[j]}"
            subs[j] = sub
    return subs


def _reshape(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Reshape, Flatten, Squeeze, Unsqueeze: the output's static type gives the shape, so
    the shape or axes input is not read (it need not even be a constant)."""
    op = node.op_type
    x = _inputs(node, 1, 2)[0]
    sx = ctx.shape(x, op)
    dtype = ctx.type(x)[0]
    outs = [o for o in node.output if o]
    if len(outs) != 1:
        raise Untranslatable(f"{op} must have exactly one output")
    shape = ctx.type(outs[0])[1]
    if math.prod(sx) != math.prod(shape):
        raise Untranslatable(f"{op} from {list(sx)} to {list(shape)}: the sizes differ")
    if math.prod(sx) == 0:
        raise Untranslatable(f"{op} of an empty tensor")
    out = ctx.check_output(node, shape, dtype)
    y_idx = _indices(len(shape))
    ranges = ", ".join(f"i{j} in 0:{d}" for j, d in enumerate(shape))
    text = _instantiate(
        op,
        "default",
        op=op,
        shape=list(shape),
        X=_decl(_tc_type(dtype), _sizes(len(sx))),
        Xr=_ref("X", _remap(sx, shape)),
        Y=_ref("Y", y_idx),
        ranges=f" where {ranges}" if ranges else "",
    )
    return _Call(op, text, (x,), (out,))


def _cast(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    (x,) = _inputs(node, 1, 1)
    sx = ctx.shape(x, "Cast")
    to = int(_attrs(node).get("to", 0))
    try:
        target = np.dtype(helper.tensor_dtype_to_np_dtype(to))
    except Exception:
        raise Untranslatable(f"Cast to ONNX type {to}") from None
    if target not in BY_NUMPY or target.kind == "V":
        raise Untranslatable(f"Cast to {target.name}: no TC type")
    out = ctx.check_output(node, sx, target)
    idx = _indices(len(sx))
    text = _instantiate(
        "Cast",
        "default",
        to=_tc_type(target),
        X=_decl(_tc_type(ctx.type(x)[0]), _sizes(len(sx))),
        Xr=_ref("X", idx),
        Y=_ref("Y", idx),
    )
    return _Call("Cast", text, (x,), (out,))


def _dropout(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Dropout at inference is the identity (its mask all true); training is refused."""
    ins = _inputs(node, 1, 3)
    at = _attrs(node)
    if "is_test" in at and not int(at["is_test"]):
        raise Untranslatable("Dropout with is_test=0 (training)")
    if len(ins) > 2 and ins[2]:
        if bool(np.asarray(ctx.constant(ins[2], "training_mode")).any()):
            raise Untranslatable("Dropout in training mode")
    x = ins[0]
    sx = ctx.shape(x, "Dropout")
    dtype = ctx.type(x)[0]
    y = node.output[0] if node.output else ""
    if not y:
        raise Untranslatable("Dropout without its output")
    ctx.check_type(y, sx, dtype)
    mask = node.output[1] if len(node.output) > 1 else ""
    idx = _indices(len(sx))
    mask_text = ""
    if mask:
        ctx.check_type(mask, sx, np.dtype(np.bool_))
        mask_text = f"  {_ref('M', idx)} = bool(1) where exists {_ref('X', idx)}\n"
    text = _instantiate(
        "Dropout",
        "default",
        mask_doc=", its mask all true" if mask else "",
        outputs="Y, M" if mask else "Y",
        X=_decl(_tc_type(dtype), _sizes(len(sx))),
        Xr=_ref("X", idx),
        Y=_ref("Y", idx),
        mask=mask_text,
    )
    return _Call("Dropout", text, (x,), (y, mask) if mask else (y,))


def _softmax(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """Softmax and LogSoftmax: opset < 13 normalizes over every axis from `axis` on (the
    input flattened to 2-D there, default axis 1), opset >= 13 over `axis` alone (-1)."""
    op = node.op_type
    (x,) = _inputs(node, 1, 1)
    sx = ctx.shape(x, op)
    if ctx.opset is None:
        raise Untranslatable(f"{op}'s axes depend on the opset, which is not known")
    rank = len(sx)
    if rank == 0:
        raise Untranslatable(f"{op} of a 0-d tensor")
    at = _attrs(node)
    if ctx.opset < 13:
        axis = _normalize_axis(int(at.get("axis", 1)), rank, "axis")
        axes = set(range(axis, rank))
    else:
        axes = {_normalize_axis(int(at.get("axis", -1)), rank, "axis")}
    if math.prod(sx) == 0:
        raise Untranslatable(f"{op} of an empty tensor")
    dtype = ctx.common_dtype([x], op)
    out = ctx.check_output(node, sx, dtype)
    all_idx = _indices(rank)
    k_idx = [f"k{j}" if j in axes else f"i{j}" for j in range(rank)]
    outer = ", ".join(f"i{j}" for j in range(rank) if j not in axes)
    fields = {"all": ", ".join(all_idx), "outer": outer, "Xi": _ref("X", all_idx)}
    text = _instantiate(
        op,
        "default",
        op=op,
        axes=sorted(axes),
        X=_decl(_tc_type(dtype), _sizes(rank)),
        Yt=_tc_type(dtype),
        Xk=_ref("X", k_idx),
        Xi=fields["Xi"],
        ek=", ".join(k_idx),
        Y=_ref("Y", all_idx),
        result=string.Template(_table()[op]["result"]).substitute(fields),
        **{k: v for k, v in fields.items() if k != "Xi"},
    )
    # 0-d temporaries (every axis reduced) are written without parentheses.
    text = text.replace("mx()", "mx").replace("s()", "s")
    return _Call(op, text, (x,), (out,))


def _pool_geometry(
    at: Mapping[str, Any], size: Sequence[int]
) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
    """kernel, strides, dilations, pads before, output sizes of a pooling node."""
    n = len(size)
    kernel = [int(k) for k in at.get("kernel_shape", ())]
    if len(kernel) != n:
        raise Untranslatable(f"kernel_shape {kernel} for {n} spatial dimensions")
    strides = [int(v) for v in at.get("strides", [1] * n)]
    dilations = [int(v) for v in at.get("dilations", [1] * n)]
    if len(strides) != n or len(dilations) != n or min(strides + dilations) < 1:
        raise Untranslatable(f"strides {strides} / dilations {dilations}")
    ceil_mode = int(at.get("ceil_mode", 0))
    auto_pad = at.get("auto_pad", "NOTSET")
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        outs = [-(-d // s) for d, s in zip(size, strides, strict=True)]
        begin = []
        for d, o, s, w in zip(size, outs, strides, span, strict=True):
            total = max((o - 1) * s + w - d, 0)
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
        return kernel, strides, dilations, begin, outs
    if auto_pad == "VALID":
        pads = [0] * (2 * n)
    elif auto_pad == "NOTSET":
        pads = [int(p) for p in at.get("pads", [0] * (2 * n))]
        if len(pads) != 2 * n or min(pads) < 0:
            raise Untranslatable(f"pads {pads}")
    else:
        raise Untranslatable(f"auto_pad {auto_pad!r}")
    outs = []
    for j in range(n):
        room = size[j] + pads[j] + pads[n + j] - span[j]
        o = (-(-room // strides[j]) if ceil_mode else room // strides[j]) + 1
        if ceil_mode and (o - 1) * strides[j] >= size[j] + pads[j]:
            o -= 1  # a last window that would start in the end padding is dropped
        outs.append(o)
    return kernel, strides, dilations, pads[:n], outs


def _pool_input(node: onnx.NodeProto, ctx: _Ctx) -> tuple[str, tuple[int, ...], dict[str, Any]]:
    """A pool's input, its shape and the node's attributes; what no TC pool does refused."""
    op = node.op_type
    (x,) = _inputs(node, 1, 1)
    sx = ctx.shape(x, op)
    if len(sx) < 3:
        raise Untranslatable(f"{op} of rank {len(sx)}: needs (N, C, spatial...)")
    at = _attrs(node)
    if int(at.get("storage_order", 0)):
        raise Untranslatable("storage_order=1")
    if op == "MaxPool" and len([o for o in node.output if o]) != 1:
        raise Untranslatable("MaxPool's Indices output")
    return x, sx, at


def _pool_positions(
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    begin: Sequence[int],
    outs: Sequence[int],
) -> tuple[list[str], Callable[[Sequence[int], Sequence[int]], list[str]]]:
    """The input position each window element reads, per spatial dimension (TC text),
    and `within(lo, hi)`: the tests that keep each position in [lo, hi), only where some
    window leaves it (so a pool without padding has no select)."""
    pos = [
        f"{_scaled(s, f'o{j}')}{f' - {b}' if b else ''} + {_scaled(d, f'k{j}')}"
        for j, (s, b, d) in enumerate(zip(strides, begin, dilations, strict=True))
    ]
    last = [
        (o - 1) * s - b + (k - 1) * d
        for o, s, b, k, d in zip(outs, strides, begin, kernel, dilations, strict=True)
    ]

    def within(lo: Sequence[int], hi: Sequence[int]) -> list[str]:
        tests = []
        for j, p in enumerate(pos):
            if -begin[j] < lo[j]:
                tests.append(f"{p} >= {lo[j]}")
            if last[j] >= hi[j]:
                tests.append(f"{p} < {hi[j]}")
        return tests

    return pos, within


def _pool(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """MaxPool and AveragePool over any number of spatial dimensions. A window position
    outside the input is skipped by a select (its read clamped, since subscripts are
    checked whatever guards them); AveragePool divides by the count of positions inside
    the input, or inside the padded input with count_include_pad, computed by a second
    reduction over the windows when padding or ceil_mode make it vary."""
    op = node.op_type
    x, sx, at = _pool_input(node, ctx)
    size = sx[2:]
    n = len(size)
    kernel, strides, dilations, begin, outs = _pool_geometry(at, size)
    if min(outs) < 1 or math.prod(sx) == 0:
        raise Untranslatable(f"{op} with an empty output")
    dtype = ctx.common_dtype([x], op)
    out = ctx.check_output(node, (*sx[:2], *outs), dtype)
    pos, within = _pool_positions(kernel, strides, dilations, begin, outs)
    inside = within([0] * n, size)
    subs = [f"min(max({p}, 0), {size[j] - 1})" if inside else p for j, p in enumerate(pos)]
    o_idx = [f"o{j}" for j in range(n)]
    xr = _ref("X", ["n", "c", *subs])
    yr = _ref("Y", ["n", "c", *o_idx])
    ranges = ", ".join(
        [f"o{j} in 0:{o}" for j, o in enumerate(outs)]
        + [f"k{j} in 0:{k}" for j, k in enumerate(kernel)]
    )
    cond = " && ".join(inside)
    if op == "MaxPool":
        low = "-3.4028234663852886e38"  # the lowest float32: TC has no infinity literal
        value = f"{cond} ? {xr} : {low}" if cond else xr
        lines = [f"  {yr} max=! {value}\n      where {ranges}"]
        window = "Positions outside the input read the lowest float32."
    else:
        value = f"{cond} ? {xr} : 0.0" if cond else _wide(dtype, xr)
        sums = _ref("acc" if dtype == _FLOAT16 else "Y", ["n", "c", *o_idx])  # _accumulator
        lines = [f"  {sums} +=! {value}\n      where {ranges}"]
        if int(at.get("count_include_pad", 0)):
            if at.get("auto_pad", "NOTSET") != "NOTSET":
                raise Untranslatable("count_include_pad with auto_pad")
            pads = [int(p) for p in at.get("pads", [0] * (2 * n))]
            counted = within(
                [-b for b in begin], [d + e for d, e in zip(size, pads[n:], strict=True)]
            )
            window = "The divisor counts the padding as well."
        else:
            counted = inside
            window = "The divisor counts the positions inside the input."
        if counted:
            cnt = _ref("cnt", o_idx)
            lines.insert(0, f"  {cnt} +=! {' && '.join(counted)} ? 1.0 : 0.0\n      where {ranges}")
            lines.append(f"  {yr} = {sums} / {cnt}")
        else:
            lines.append(f"  {yr} = {sums} / {_lit(math.prod(kernel))}")
    text = _instantiate(
        op,
        "default",
        op=op,
        kernel=kernel,
        strides=strides,
        dilations=dilations,
        pads_begin=begin,
        window=window,
        X=_decl(_tc_type(dtype), ["N", "C", *(f"S{j}" for j in range(n))]),
        Yt=_tc_type(dtype),
        statements="\n".join(lines),
    )
    return _Call(op, text, (x,), (out,))


def _batch_norm(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 5, 5)
    at = _attrs(node)
    if int(at.get("training_mode", 0)) or len([o for o in node.output if o]) != 1:
        raise Untranslatable("BatchNormalization in training mode (more than one output)")
    if not int(at.get("spatial", 1)):
        raise Untranslatable("BatchNormalization with spatial=0")
    x = ins[0]
    sx = ctx.shape(x, "BatchNormalization")
    if len(sx) < 2:
        raise Untranslatable("BatchNormalization of rank < 2")
    for v in ins[1:]:
        if ctx.shape(v, "BatchNormalization") != (sx[1],):
            raise Untranslatable(f"'{v}' is not of shape [{sx[1]}]")
    dtype = ctx.common_dtype(ins, "BatchNormalization")
    out = ctx.check_output(node, sx, dtype)
    idx = ["n", "c", *_indices(len(sx))[2:]]
    text = _instantiate(
        "BatchNormalization",
        "default",
        epsilon=_lit(float(at.get("epsilon", 1e-5))),
        X=_decl(_tc_type(dtype), ["N", "C", *_sizes(len(sx))[2:]]),
        t=_tc_type(dtype),
        Xr=_ref("X", idx),
        Y=_ref("Y", idx),
    )
    return _Call("BatchNormalization", text, tuple(ins), (out,))


def _layer_norm(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    """LayerNormalization over the axes from `axis` on, with its optional Mean and
    InvStdDev outputs (shape: the input's, reduced axes kept as 1)."""
    op = "LayerNormalization"
    ins = _inputs(node, 2, 3)
    at = _attrs(node)
    x = ins[0]
    sx = ctx.shape(x, op)
    rank = len(sx)
    if rank == 0:
        raise Untranslatable(f"{op} of a 0-d tensor")
    axis = _normalize_axis(int(at.get("axis", -1)), rank, "axis")
    axes = range(axis, rank)
    count = math.prod(sx[axis:])
    if count == 0 or math.prod(sx) == 0:
        raise Untranslatable(f"{op} of an empty tensor")
    outputs = list(node.output) + [""] * (3 - len(node.output))
    if not outputs[0]:
        raise Untranslatable(f"{op} without its output Y")
    dtype = ctx.common_dtype([v for v in ins if v], op)
    t = _tc_type(dtype)
    ctx.check_type(outputs[0], sx, dtype)
    stat_shape = tuple(d if j < axis else 1 for j, d in enumerate(sx))
    for v in outputs[1:]:
        if v:
            ctx.check_type(v, stat_shape, _FLOAT32)
    all_idx = _indices(rank)
    k_idx = [f"k{j}" if j >= axis else f"i{j}" for j in range(rank)]
    outer = ", ".join(all_idx[:axis])
    params = [f"{_decl(t, _sizes(rank))} X"]
    args = [x]
    scale = bias = ""
    for name, v, sep in (("S", ins[1], " * "), ("B", ins[2] if len(ins) > 2 else "", " + ")):
        if not v:
            continue
        sv = ctx.shape(v, op)
        if len(sv) > rank or any(d not in (1, o) for d, o in zip(sv[::-1], sx[::-1], strict=False)):
            raise Untranslatable(f"'{v}' of shape {list(sv)} does not broadcast to {list(sx)}")
        dims, idx = _broadcast(sv, sx)
        params.append(f"{_decl(t, dims)} {name}")
        args.append(v)
        term = f"{sep}{_ref(name, idx)}"
        scale, bias = (scale + term, bias) if name == "S" else (scale, bias + term)
    # Y has X's type; the statistics are float32 (ONNX's U), cast from float64.
    names, extra = [f"{t} Y"], []
    r_idx = [f"r{j}" if j >= axis else f"i{j}" for j in range(rank)]
    kept = ", ".join(f"r{j} in 0:1" for j in axes)
    for v, tc_name, expr in ((outputs[1], "Mean", "mu"), (outputs[2], "InvStdDev", "r")):
        if v:
            names.append(f"float32 {tc_name}")
            stat = _ref(expr, all_idx[:axis])
            stat = f"float32({stat})" if dtype == np.float64 else stat
            extra.append(f"  {_ref(tc_name, r_idx)} = {stat} where {kept}\n")
    text = _instantiate(
        op,
        "default",
        axes=list(axes),
        epsilon=_lit(float(at.get("epsilon", 1e-5))),
        params=", ".join(params),
        outputs=", ".join(names),
        outer=outer,
        all=", ".join(all_idx),
        Xk=_wide(dtype, _ref("X", k_idx)),
        Xi=_ref("X", all_idx),
        dk=", ".join(k_idx),
        count=_lit(count),
        Y=_ref("Y", all_idx),
        scale=scale,
        bias=bias,
        extra="".join(extra),
    )
    text = text.replace("mu()", "mu").replace("r()", "r")
    return _Call(op, text, tuple(args), tuple(v for v in outputs if v))


_TRANSLATORS: dict[str, Callable[[onnx.NodeProto, _Ctx], _Call]] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Gather": _gather,
    "Transpose": _transpose,
    "Concat": _concat,
    "Identity": _identity,
    "Conv": _conv,
    "Clip": _clip,
    "Cast": _cast,
    "Dropout": _dropout,
    "Softmax": _softmax,
    "LogSoftmax": _softmax,
    "MaxPool": _pool,
    "AveragePool": _pool,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    **dict.fromkeys(("Reshape", "Flatten", "Squeeze", "Unsqueeze"), _reshape),
    **{op: _reduce for op, e in _table().items() if "reducer" in e},
    **{op: _elementwise for op, e in _table().items() if "arity" in e and "expr" in e},
}

TRANSLATABLE: frozenset[str] = frozenset(_TRANSLATORS)


def _translate_node(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    if node.domain not in ONNX_DOMAINS:
        raise Untranslatable(f"op {node.domain}::{node.op_type} is not a standard ONNX op")
    translator = _TRANSLATORS.get(node.op_type)
    if translator is None:
        raise Untranslatable(f"no TC translation for op type {node.op_type}")
    return translator(node, ctx)


def opset_version(model: onnx.ModelProto) -> int | None:
    """The version of the default ONNX domain the model imports (None if it imports none)."""
    for o in model.opset_import:
        if o.domain in ONNX_DOMAINS:
            return int(o.version)
    return None


def translatable(
    node: onnx.NodeProto,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
    *,
    opset: int | None = None,
) -> str | None:
    """None if this single node translates with these static types; else the reason.
    `opset` (the default domain's version) is needed by ops whose semantics changed
    between opsets (Softmax); without it they are refused."""
    try:
        _translate_node(node, _Ctx(types, constants, opset=opset))
    except Untranslatable as exc:
        return exc.message
    return None


# ---------------------------------------------------------------------------------------
# The group


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _reserved(name: str) -> bool:
    return name in KEYWORDS or name in TYPE_NAMES or name == "in" or _builtin(name) is not None


class _Names:
    """TC identifiers for ONNX value names: sanitized, distinct, clear of reserved words."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)
        self.of: dict[str, str] = {}

    def __call__(self, value: str) -> str:
        if value not in self.of:
            base = re.sub(r"[^A-Za-z0-9_]", "_", value) or "v"
            if base[0].isdigit() or _reserved(base):
                base = f"v_{base}"
            name, k = base, 2
            while name in self.taken:
                name, k = f"{base}_{k}", k + 1
            self.taken.add(name)
            self.of[value] = name
        return self.of[value]


def _targets(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


def _calls(nodes: Sequence[onnx.NodeProto], ctx: _Ctx, produced: set[str]) -> list[_Call]:
    """Each node's call, in order; a value read before the group makes it is refused."""
    calls: list[_Call] = []
    done: set[str] = set()
    for node in nodes:
        try:
            call = _translate_node(node, ctx)
        except Untranslatable as exc:
            label = f" '{node.name}'" if node.name else ""
            raise Untranslatable(f"{node.op_type} node{label}: {exc.message}") from None
        for arg in call.args:
            if arg in produced and arg not in done:
                raise Untranslatable(f"'{arg}' is read before the group produces it")
        for o in call.outputs:
            if o in done:
                raise Untranslatable(f"'{o}' is produced twice")
            done.add(o)
        calls.append(call)
    return calls


def _def_names(calls: Sequence[_Call], entry: str) -> dict[str, str]:
    """One def per distinct instantiation text, named <prefix>_<k> in order of first use
    (never the entry's name)."""
    def_names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for call in calls:
        if call.text not in def_names:
            prefix = _table()[call.op]["prefix"]
            counts[prefix] = counts.get(prefix, 0) + 1
            def_name = f"{prefix}_{counts[prefix]}"
            while def_name == entry:
                counts[prefix] += 1
                def_name = f"{prefix}_{counts[prefix]}"
            def_names[call.text] = def_name
    return def_names


def translate(
    nodes: Sequence[onnx.NodeProto],
    *,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    name: str = "fused",
    pack_weights: bool = True,
    opset: int | None = None,
) -> Translation:
    """One TC program for a group of nodes (in topological order).

    `outputs` are the values needed outside the group; the other values the group
    produces become temporaries. With `pack_weights`, a constant Gemm weight read
    transposed (transB=1, shape (out, in)) is passed pre-transposed as a new initializer
    `<weight>__tc_t`: the output dimension is then contiguous in memory, which the CPU
    code generator's register tiles need.
    """
    if not _IDENT.fullmatch(name) or _reserved(name):
        raise TcError(f"the entry name {name!r} is not a TC identifier")
    if not nodes:
        raise Untranslatable("an empty group")
    ctx = _Ctx(types, constants, pack_weights, opset)
    produced = {o for node in nodes for o in node.output if o}
    calls = _calls(nodes, ctx, produced)
    if len(set(outputs)) != len(outputs):
        raise TcError(f"outputs {list(outputs)} repeat a value")
    for o in outputs:
        if o not in produced:
            raise Untranslatable(f"output '{o}' is not produced by the group")
    if not outputs:
        raise Untranslatable("the group has no outputs")

    inputs: list[str] = []
    for call in calls:
        for arg in call.args:
            if arg not in produced and arg not in inputs:
                inputs.append(arg)

    def_names = _def_names(calls, name)
    ident = _Names({name, *def_names.values()})

    packed_arrays = {new: array for new, array in ctx.packed.values()}

    def value_type(value: str) -> tuple[str, tuple[int, ...]]:
        if value in packed_arrays:
            return BY_NUMPY[packed_arrays[value].dtype], packed_arrays[value].shape
        dtype, shape = ctx.type(value)
        return BY_NUMPY[dtype], shape

    params = []
    for v in inputs:
        tc_type, shape = value_type(v)
        params.append(f"{_decl(tc_type, shape)} {ident(v)}")
    outs = []
    for v in outputs:
        tc_type, shape = value_type(v)
        outs.append(f"{tc_type}({', '.join(map(str, shape))}) {ident(v)}")
    body = [
        f"  {_targets([ident(o) for o in call.outputs])} = "
        f"{def_names[call.text]}({', '.join(map(ident, call.args))})"
        for call in calls
    ]
    defs = [text.replace("${name}", def_name) for text, def_name in def_names.items()]
    entry = (
        f"def {name}({', '.join(params)}) -> ({', '.join(outs)}) {{\n" + "\n".join(body) + "\n}\n"
    )
    source = "\n".join([*defs, entry])
    initializers = tuple(
        numpy_helper.from_array(packed_arrays[v], v) for v in inputs if v in packed_arrays
    )
    return Translation(source, name, tuple(inputs), tuple(outputs), initializers)
