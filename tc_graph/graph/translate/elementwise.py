"""Elementwise ops: the table's unary, binary and variadic expressions (numpy
broadcasting), Clip, and the copies (Identity, Cast, inference Dropout)."""

from __future__ import annotations

import string
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ...lang.types import BY_NUMPY
from .context import Call, Context, Untranslatable, attrs, inputs
from .library import instantiate, table
from .registry import table_ops, translator
from .text import broadcast, decl, indices, largest, lit, ref, sizes, tc_type


def _attr_fields(op: str, at: Mapping[str, Any]) -> dict[str, str]:
    """The table's numeric attributes of `op` (with their defaults) as TC literals."""
    return {k: lit(float(at.get(k, d))) for k, d in table()[op].get("attrs", {}).items()}


def _expression(op: str, at: Mapping[str, Any]) -> string.Template:
    """The table's element expression of an elementwise op, for the node's attributes."""
    entry = table()[op]
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
    ctx: Context,
    operands: Sequence[str],
    expr: Callable[[list[str]], str],
    *,
    scalars: Sequence[str] = (),
) -> Call:
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
    t = tc_type(dtype)
    out = ctx.check_output(node, shape, dtype)
    params, lets, names = [], [], []
    for k, s in enumerate(shapes):
        dims, idx = broadcast(s, shape)
        params.append(f"{decl(t, dims)} X{k}")
        lets.append(f"x{k} = {ref(f'X{k}', idx)}")
        names.append(f"x{k}")
    for k, v in enumerate(scalars):
        if ctx.shape(v, op) != ():
            raise Untranslatable(f"'{v}' is not a scalar")
        params.append(f"{t} s{k}")
    text = instantiate(
        op,
        "default",
        op=op,
        params=", ".join(params),
        Y=ref("Y", indices(len(shape))),
        Yt=t,
        expr=expr(names),
        lets=", ".join(lets),
    )
    return Call(op, text, (*operands, *scalars), (out,))


@translator(*table_ops("arity", "expr"))
def _elementwise(node: onnx.NodeProto, ctx: Context) -> Call:
    """Ops whose table entry gives the expression: one, two or any number of operands."""
    op = node.op_type
    entry = table()[op]
    arity = entry["arity"]
    at = attrs(node)
    fields = _attr_fields(op, at)
    template = _expression(op, at)
    if arity == "variadic":
        ins = inputs(node, 1, 1 << 16)
        if not all(ins):
            raise Untranslatable(f"{op} with a missing input")

        def fold(names: list[str]) -> str:
            acc = names[0]
            for name in names[1:]:
                acc = f"({template.substitute(a=acc, b=name)})"
            if "post" in entry:
                acc = string.Template(entry["post"]).substitute(y=acc, n=lit(len(names)))
            return acc

        return _elementwise_call(op, node, ctx, ins, fold)
    ins = inputs(node, arity, arity)
    power = _small_power(node, ctx, ins)
    if power is not None:
        return _elementwise_call(op, node, ctx, ins[:1], lambda n: f"({' * '.join(n * power)})")
    if arity == 1:
        return _elementwise_call(
            op, node, ctx, ins, lambda n: template.substitute(x=n[0], **fields)
        )
    return _elementwise_call(
        op, node, ctx, ins, lambda n: template.substitute(a=n[0], b=n[1], **fields)
    )


def _small_power(node: onnx.NodeProto, ctx: Context, ins: Sequence[str]) -> int | None:
    """2 or 3 where node is Pow of a float by that constant, which does not broadcast the
    base: its product x * x (* x), as onnxruntime computes it (the node alone gives the
    same bits; in a group, gcc may fuse its last product with an add that follows), where
    libm's powf is a call per element (Gelu's tanh form, as torch exports it, cubes)."""
    if node.op_type != "Pow" or ins[1] not in ctx.constants:
        return None
    exponent = ctx.constant(ins[1], "exponent")
    base = ctx.shape(ins[0], "Pow")
    if exponent.size != 1 or exponent.ndim > len(base):
        return None
    if ctx.common_dtype([ins[0]], "Pow").name not in ("float32", "float64"):
        return None
    value = float(exponent.reshape(()))
    return int(value) if value in (2.0, 3.0) else None


@translator("Clip")
def _clip(node: onnx.NodeProto, ctx: Context) -> Call:
    """Clip: bounds from attributes (opset < 11) or optional inputs, each possibly absent:
    then the dtype's lowest or largest value, as ONNX defines it (onnxruntime clamps
    +-inf to them); a bound that is a runtime input is passed as a 0-d parameter."""
    ins = inputs(node, 1, 3)
    at = attrs(node)
    dtype = ctx.type(ins[0])[0]
    big = largest(dtype) if dtype.kind == "f" else None  # other dtypes are refused below
    bounds: list[str | None] = []
    scalars: list[str] = []
    for k, (attr, default) in enumerate((("min", big and f"(-{big})"), ("max", big))):
        if k + 1 < len(ins) and ins[k + 1]:
            v = ins[k + 1]
            if v in ctx.constants:
                bound = np.asarray(ctx.constant(v, "bound"))
                if bound.size != 1:  # onnxruntime takes shape (1,) too
                    raise Untranslatable(f"Clip bound '{v}' of shape {bound.shape}")
                bounds.append(lit(float(bound.reshape(()))))
            else:
                bounds.append(f"s{len(scalars)}")
                scalars.append(v)
        else:
            bounds.append(lit(float(at[attr])) if attr in at else default)

    def expr(names: list[str]) -> str:
        (x,) = names
        lo, hi = bounds
        if lo is not None:
            x = f"({x} < {lo} ? {lo} : {x})"
        if hi is not None:
            x = f"({x} > {hi} ? {hi} : {x})"
        return x

    return _elementwise_call("Clip", node, ctx, ins[:1], expr, scalars=scalars)


def copy_call(op: str, node: onnx.NodeProto, ctx: Context, x: str) -> Call:
    """An identity copy of any TC dtype (Identity, a reduction over no axes)."""
    dtype, shape = ctx.type(x)
    ctx.shape(x, op)
    out = ctx.check_output(node, shape, dtype)
    dims, idx = sizes(len(shape)), indices(len(shape))
    text = instantiate(
        "Identity",
        "default",
        X=decl(tc_type(dtype), dims),
        Xr=ref("X", idx),
        Y=ref("Y", idx),
    )
    return Call("Identity", text, (x,), (out,))


@translator("Identity")
def _identity(node: onnx.NodeProto, ctx: Context) -> Call:
    (x,) = inputs(node, 1, 1)
    return copy_call("Identity", node, ctx, x)


@translator("Cast")
def _cast(node: onnx.NodeProto, ctx: Context) -> Call:
    (x,) = inputs(node, 1, 1)
    sx = ctx.shape(x, "Cast")
    to = int(attrs(node).get("to", 0))
    try:
        target = np.dtype(helper.tensor_dtype_to_np_dtype(to))
    except Exception:
        raise Untranslatable(f"Cast to ONNX type {to}") from None
    if target not in BY_NUMPY or target.kind == "V":
        raise Untranslatable(f"Cast to {target.name}: no TC type")
    out = ctx.check_output(node, sx, target)
    idx = indices(len(sx))
    text = instantiate(
        "Cast",
        "default",
        to=tc_type(target),
        X=decl(tc_type(ctx.type(x)[0]), sizes(len(sx))),
        Xr=ref("X", idx),
        Y=ref("Y", idx),
    )
    return Call("Cast", text, (x,), (out,))


@translator("Dropout")
def _dropout(node: onnx.NodeProto, ctx: Context) -> Call:
    """Dropout at inference is the identity (its mask as onnxruntime's); training is
    refused."""
    ins = inputs(node, 1, 3)
    at = attrs(node)
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
    idx = indices(len(sx))
    mask_text = mask_doc = ""
    if mask:
        ctx.check_type(mask, sx, np.dtype(np.bool_))
        if ctx.opset is None:
            raise Untranslatable("Dropout's mask depends on the opset, which is not known")
        # onnxruntime's inference mask is all true from opset 12 on, all false before.
        kept = int(ctx.opset >= 12)
        mask_text = f"  {ref('M', idx)} = bool({kept}) where exists {ref('X', idx)}\n"
        mask_doc = f", its mask all {'true' if kept else 'false'}"
    text = instantiate(
        "Dropout",
        "default",
        mask_doc=mask_doc,
        outputs="Y, M" if mask else "Y",
        X=decl(tc_type(dtype), sizes(len(sx))),
        Xr=ref("X", idx),
        Y=ref("Y", idx),
        mask=mask_text,
    )
    return Call("Dropout", text, (x,), (y, mask) if mask else (y,))
