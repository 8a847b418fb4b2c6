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
from ..lang.types import TYPE_NAMES

__all__ = ["TRANSLATABLE", "Translation", "Untranslatable", "translatable", "translate"]

ValueType = tuple[np.dtype, tuple[int, ...]]

_FLOAT32 = np.dtype(np.float32)
# ONNX value dtypes the translations read, with their TC type names.
_TC_TYPES: dict[np.dtype, str] = {
    np.dtype(np.float32): "float32",
    np.dtype(np.int32): "int32",
    np.dtype(np.int64): "int64",
}
_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


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
        hint="reinstall tc_graph; the wheel ships it as tc_graph/operators",
    )


@cache
def _table() -> dict[str, dict[str, Any]]:
    """operators/operators.toml: op type -> def prefix, accepted dtypes, template files."""
    return tomllib.loads((_operators_dir() / "operators.toml").read_text(encoding="utf-8"))


@cache
def _template_file(file: str) -> string.Template:
    return string.Template((_operators_dir() / file).read_text(encoding="utf-8"))


def _instantiate(op: str, variant: str, **fields: object) -> str:
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
    output: str  # the ONNX value it produces


@dataclass
class _Ctx:
    """What the translations of one group share: static types, constants, packed weights."""

    types: Mapping[str, ValueType]
    constants: Mapping[str, np.ndarray]
    pack_weights: bool = True
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

    def check_output(self, node: onnx.NodeProto, shape: tuple[int, ...]) -> str:
        """The node's (single) output, after checking ONNX's type for it against ours."""
        outs = [o for o in node.output if o]
        if len(outs) != 1 or node.output[0] != outs[0]:
            raise Untranslatable(f"{node.op_type} must have exactly one output")
        dtype, onnx_shape = self.type(outs[0])
        if dtype != _FLOAT32 or onnx_shape != shape:
            raise Untranslatable(
                f"output '{outs[0]}' is typed {dtype.name}{list(onnx_shape)}, but the "
                f"translation computes float32{list(shape)}"
            )
        return outs[0]

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


def _unary(op: str, node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    (x,) = _inputs(node, 1, 1)
    shape = ctx.shape(x, op)
    out = ctx.check_output(node, shape)
    dims = [f"D{j}" for j in range(len(shape))]
    idx = [f"i{j}" for j in range(len(shape))]
    text = _instantiate(
        op, "default", X=_decl("float32", dims), Xr=_ref("X", idx), Y=_ref("Y", idx)
    )
    return _Call(op, text, (x,), out)


def _relu(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    return _unary("Relu", node, ctx)


def _identity(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    return _unary("Identity", node, ctx)


def _add(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    a, b = _inputs(node, 2, 2)
    sa, sb = ctx.shape(a, "Add"), ctx.shape(b, "Add")
    try:
        shape = tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        raise Untranslatable(f"shapes {list(sa)} and {list(sb)} do not broadcast") from None
    out = ctx.check_output(node, shape)
    da, ia = _broadcast(sa, shape)
    db, ib = _broadcast(sb, shape)
    idx = [f"i{j}" for j in range(len(shape))]
    text = _instantiate(
        "Add",
        "default",
        A=_decl("float32", da),
        B=_decl("float32", db),
        Ar=_ref("A", ia),
        Br=_ref("B", ib),
        C=_ref("C", idx),
    )
    return _Call("Add", text, (a, b), out)


def _matmul(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    a, b = _inputs(node, 2, 2)
    sa, sb = ctx.shape(a, "MatMul"), ctx.shape(b, "MatMul")
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
    out = ctx.check_output(node, shape)
    da, ia = _broadcast(sa[:-2], batch, "B", "b")
    db, ib = _broadcast(sb[:-2], batch, "B", "b")
    y_idx = [f"b{j}" for j in range(len(batch))]
    if len(sa) >= 2:
        da, ia, y_idx = [*da, "M"], [*ia, "m"], [*y_idx, "m"]
    da, ia = [*da, "K"], [*ia, "k"]
    db, ib = [*db, "K"], [*ib, "k"]
    if len(sb) >= 2:
        db, ib, y_idx = [*db, "N"], [*ib, "n"], [*y_idx, "n"]
    text = _instantiate(
        "MatMul",
        "default",
        A=_decl("float32", da),
        B=_decl("float32", db),
        Ar=_ref("A", ia),
        Br=_ref("B", ib),
        Y=_ref("Y", y_idx),
    )
    return _Call("MatMul", text, (a, b), out)


def _gemm(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 2, 3)
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else ""
    at = _attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
    sa, sb = ctx.shape(a, "Gemm"), ctx.shape(b, "Gemm")
    if len(sa) != 2 or len(sb) != 2:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: operands must be 2-D")
    m, k = sa[::-1] if trans_a else sa
    k_b, n = sb[::-1] if trans_b else sb
    if k != k_b:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: inner sizes differ")
    out = ctx.check_output(node, (m, n))
    if trans_b and len(ctx.type(b)[1]) == 2:
        packed = ctx.pack_transposed(b)
        if packed is not None:  # weights (N, K) become (K, N): n is contiguous in memory
            b, trans_b = packed, 0
    alpha_text = "" if alpha == 1.0 else f"{_lit(alpha)} * "
    fields = {
        "A": _decl("float32", ("K", "M") if trans_a else ("M", "K")),
        "B": _decl("float32", ("N", "K") if trans_b else ("K", "N")),
        "a_idx": "k, m" if trans_a else "m, k",
        "b_idx": "n, k" if trans_b else "k, n",
        "alpha": alpha_text,
    }
    if not c or beta == 0.0:  # ONNX: beta * C is dropped with beta = 0 (onnxruntime too)
        return _Call("Gemm", _instantiate("Gemm", "nobias", **fields), (a, b), out)
    sc = ctx.shape(c, "Gemm")
    if len(sc) > 2 or any(d not in (1, o) for d, o in zip(sc[::-1], (n, m), strict=False)):
        raise Untranslatable(f"C of shape {list(sc)} does not broadcast to {[m, n]}")
    dc, ic = _broadcast(sc, (m, n))
    # _broadcast names dimensions D0/D1 and indices i0/i1; Gemm's are M/N and m/n.
    dc = [{"D0": "M", "D1": "N"}.get(d, d) for d in dc]
    ic = [{"i0": "m", "i1": "n"}.get(i, i) for i in ic]
    beta_text = "" if beta == 1.0 else f"{_lit(beta)} * "
    text = _instantiate(
        "Gemm", "bias", C=_decl("float32", dc), Cr=beta_text + _ref("C", ic), **fields
    )
    return _Call("Gemm", text, (a, b, c), out)


def _gather(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    x, i = _inputs(node, 2, 2)
    sx = ctx.shape(x, "Gather")
    idtype, si = ctx.type(i)
    if idtype not in _INDEX_DTYPES:
        raise Untranslatable(f"indices '{i}' have dtype {idtype.name}; Gather takes int32/int64")
    if not sx:
        raise Untranslatable("Gather from a 0-d tensor")
    axis = _normalize_axis(int(_attrs(node).get("axis", 0)), len(sx), "axis")
    extent = sx[axis]
    shape = sx[:axis] + si + sx[axis + 1 :]
    out = ctx.check_output(node, shape)
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
        X=_decl("float32", [f"D{j}" for j in range(len(sx))]),
        I=_decl(_TC_TYPES[idtype], [f"J{t}" for t in range(len(si))]),
        Ir=_ref("I", [f"j{t}" for t in range(len(si))]),
        x_idx=", ".join(x_idx),
        Y=_ref("Y", y_idx),
    )
    return _Call("Gather", text, (x, i), out)


def _reduce_sum(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 1, 2)
    x = ins[0]
    sx = ctx.shape(x, "ReduceSum")
    at = _attrs(node)
    keepdims = int(at.get("keepdims", 1))
    if "axes" in at:  # opset < 13: an attribute
        axes: list[int] = [int(a) for a in at["axes"]]
    elif len(ins) > 1 and ins[1]:  # opset >= 13: an input, which must be a constant
        if ins[1] not in ctx.constants:
            raise Untranslatable(f"the axes '{ins[1]}' are not a constant")
        axes = [int(a) for a in np.asarray(ctx.constants[ins[1]]).ravel()]
    else:
        axes = []
    if not axes and int(at.get("noop_with_empty_axes", 0)):
        axes_set: set[int] = set()
    elif not axes:
        axes_set = set(range(len(sx)))
    else:
        axes_set = {_normalize_axis(a, len(sx), "axis") for a in axes}
        if len(axes_set) != len(axes):
            raise Untranslatable(f"repeated axes {axes}")
    shape = tuple(
        1 if j in axes_set else d for j, d in enumerate(sx) if keepdims or j not in axes_set
    )
    out = ctx.check_output(node, shape)
    dims = [f"D{j}" for j in range(len(sx))]
    if not axes_set:  # nothing to reduce: a copy
        idx = [f"i{j}" for j in range(len(sx))]
        text = _instantiate(
            "ReduceSum", "noop", X=_decl("float32", dims), Xr=_ref("X", idx), Y=_ref("Y", idx)
        )
        return _Call("Identity", text, (x,), out)
    x_idx = [f"k{j}" if j in axes_set else f"i{j}" for j in range(len(sx))]
    y_idx = [
        (f"r{j}" if j in axes_set else f"i{j}")
        for j in range(len(sx))
        if keepdims or j not in axes_set
    ]
    kept = [f"r{j} in 0:1" for j in sorted(axes_set)] if keepdims else []
    text = _instantiate(
        "ReduceSum",
        "default",
        axes=sorted(axes_set),
        X=_decl("float32", dims),
        Xr=_ref("X", x_idx),
        Y=_ref("Y", y_idx),
        where=f" where {', '.join(kept)}" if kept else "",
    )
    # The axes input is attribute-like: it is part of the TC, not an argument.
    return _Call("ReduceSum", text, (x,), out)


def _transpose(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    (x,) = _inputs(node, 1, 1)
    sx = ctx.shape(x, "Transpose")
    rank = len(sx)
    perm = [int(p) for p in _attrs(node).get("perm", range(rank - 1, -1, -1))]
    if sorted(perm) != list(range(rank)):
        raise Untranslatable(f"perm {perm} is not a permutation of the {rank} axes")
    out = ctx.check_output(node, tuple(sx[p] for p in perm))
    text = _instantiate(
        "Transpose",
        "default",
        perm=perm,
        X=_decl("float32", [f"D{j}" for j in range(rank)]),
        Xr=_ref("X", [f"i{j}" for j in range(rank)]),
        Y=_ref("Y", [f"i{p}" for p in perm]),
    )
    return _Call("Transpose", text, (x,), out)


def _concat(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = list(node.input)
    if not ins or not all(ins):
        raise Untranslatable("Concat with no inputs or a missing input")
    shapes = [ctx.shape(v, "Concat") for v in ins]
    rank = len(shapes[0])
    if rank == 0:
        raise Untranslatable("Concat of 0-d tensors")
    axis = _normalize_axis(int(_attrs(node).get("axis", 0)), rank, "axis")
    for s in shapes:
        if len(s) != rank or any(s[j] != shapes[0][j] for j in range(rank) if j != axis):
            raise Untranslatable(f"Concat of shapes {[list(s) for s in shapes]} along {axis}")
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    out = ctx.check_output(node, tuple(shape))
    params, statements = [], []
    y = _ref("Y", [f"i{j}" for j in range(rank)])
    for k in range(len(ins)):
        dims = [f"D{j}" for j in range(rank)]
        dims[axis] = f"C{k}"
        params.append(f"{_decl('float32', dims)} X{k}")
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
    return _Call("Concat", text, tuple(ins), out)


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


def _conv(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    ins = _inputs(node, 2, 3)
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else ""
    sx, sw = ctx.shape(x, "Conv"), ctx.shape(w, "Conv")
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
    out = ctx.check_output(node, (n, f, oh, ow))
    args: tuple[str, ...] = (x, w)
    bias_param = bias_stmt = ""
    if bias:
        if ctx.shape(bias, "Conv") != (f,):
            raise Untranslatable(f"bias '{bias}' is not of shape [{f}]")
        bias_param, bias_stmt, args = ", float32(F) B", "  Y(n, f, oh, ow) = B(f)\n", (*args, bias)
    pad_stmt, src = "", "X"
    if pt or pl or pb or pr:
        # Zero padding through a padded copy Xp: the convolution itself then has only affine
        # reads (vectorizable, no bounds test); the copy's reads are clamped, since tc_graph
        # checks subscripts regardless of the condition that guards them.
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
        pad_stmt = (
            f"  Xp(n, c, h, w) = {' && '.join(conds)} ? X(n, c, {subs[0]}, {subs[1]}) : 0.0\n"
            f"      where h in 0:H + {pt + pb}, w in 0:W + {pl + pr}\n"
        )
        src = "Xp"
    fg = f // group
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
        src=src,
        ih=f"{_scaled(strides[0], 'oh')} + {_scaled(dilations[0], 'kh')}",
        iw=f"{_scaled(strides[1], 'ow')} + {_scaled(dilations[1], 'kw')}",
    )
    return _Call("Conv", text, args, out)


_TRANSLATORS: dict[str, Callable[[onnx.NodeProto, _Ctx], _Call]] = {
    "MatMul": _matmul,
    "Gemm": _gemm,
    "Add": _add,
    "Relu": _relu,
    "Gather": _gather,
    "ReduceSum": _reduce_sum,
    "Transpose": _transpose,
    "Concat": _concat,
    "Identity": _identity,
    "Conv": _conv,
}

TRANSLATABLE: frozenset[str] = frozenset(_TRANSLATORS)


def _translate_node(node: onnx.NodeProto, ctx: _Ctx) -> _Call:
    if node.domain not in ("", "ai.onnx"):
        raise Untranslatable(f"op {node.domain}::{node.op_type} is not a standard ONNX op")
    translator = _TRANSLATORS.get(node.op_type)
    if translator is None:
        raise Untranslatable(f"no TC translation for op type {node.op_type}")
    return translator(node, ctx)


def translatable(
    node: onnx.NodeProto,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
) -> str | None:
    """None if this single node translates with these static types; else the reason."""
    try:
        _translate_node(node, _Ctx(types, constants))
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


def translate(
    nodes: Sequence[onnx.NodeProto],
    *,
    types: Mapping[str, ValueType],
    constants: Mapping[str, np.ndarray],
    outputs: Sequence[str],
    name: str = "fused",
    pack_weights: bool = True,
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
    ctx = _Ctx(types, constants, pack_weights)
    produced = {o for node in nodes for o in node.output if o}
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
        if call.output in done:
            raise Untranslatable(f"'{call.output}' is produced twice")
        done.add(call.output)
        calls.append(call)
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

    # Defs: one per distinct instantiation, named <prefix>_<k> in order of first use.
    def_names: dict[str, str] = {}
    counts: dict[str, int] = {}
    for call in calls:
        if call.text not in def_names:
            prefix = _table()[call.op]["prefix"]
            counts[prefix] = counts.get(prefix, 0) + 1
            def_name = f"{prefix}_{counts[prefix]}"
            while def_name == name:
                counts[prefix] += 1
                def_name = f"{prefix}_{counts[prefix]}"
            def_names[call.text] = def_name
    ident = _Names({name, *def_names.values()})

    packed_arrays = {new: array for new, array in ctx.packed.values()}

    def value_type(value: str) -> tuple[str, tuple[int, ...]]:
        if value in packed_arrays:
            return "float32", packed_arrays[value].shape
        dtype, shape = ctx.type(value)
        return _TC_TYPES[dtype], shape

    params = []
    for v in inputs:
        tc_type, shape = value_type(v)
        params.append(f"{_decl(tc_type, shape)} {ident(v)}")
    outs = []
    for v in outputs:
        tc_type, shape = value_type(v)
        outs.append(f"{tc_type}({', '.join(map(str, shape))}) {ident(v)}")
    body = [
        f"  {ident(call.output)} = {def_names[call.text]}({', '.join(map(ident, call.args))})"
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
