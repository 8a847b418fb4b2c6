"""Normalizations: Softmax and LogSoftmax, BatchNormalization (inference) and
LayerNormalization."""

from __future__ import annotations

import math
import string

import numpy as np
import onnx

from .context import FLOAT32, Call, Context, Untranslatable, attrs, inputs
from .library import instantiate, table
from .registry import translator
from .text import broadcast, decl, indices, lit, normalize_axis, ref, sizes, tc_type, wide


@translator("Softmax", "LogSoftmax")
def _softmax(node: onnx.NodeProto, ctx: Context) -> Call:
    """Softmax and LogSoftmax: opset < 13 normalizes over every axis from `axis` on (the
    input flattened to 2-D there, default axis 1), opset >= 13 over `axis` alone (-1)."""
    op = node.op_type
    (x,) = inputs(node, 1, 1)
    sx = ctx.shape(x, op)
    if ctx.opset is None:
        raise Untranslatable(f"{op}'s axes depend on the opset, which is not known")
    rank = len(sx)
    if rank == 0:
        raise Untranslatable(f"{op} of a 0-d tensor")
    at = attrs(node)
    if ctx.opset < 13:
        axis = normalize_axis(int(at.get("axis", 1)), rank, "axis")
        axes = set(range(axis, rank))
    else:
        axes = {normalize_axis(int(at.get("axis", -1)), rank, "axis")}
    if math.prod(sx) == 0:
        raise Untranslatable(f"{op} of an empty tensor")
    dtype = ctx.common_dtype([x], op)
    out = ctx.check_output(node, sx, dtype)
    all_idx = indices(rank)
    k_idx = [f"k{j}" if j in axes else f"i{j}" for j in range(rank)]
    outer = ", ".join(f"i{j}" for j in range(rank) if j not in axes)
    fields = {"all": ", ".join(all_idx), "outer": outer, "Xi": ref("X", all_idx)}
    text = instantiate(
        op,
        "default",
        op=op,
        axes=sorted(axes),
        X=decl(tc_type(dtype), sizes(rank)),
        Yt=tc_type(dtype),
        Xk=ref("X", k_idx),
        Xi=fields["Xi"],
        ek=", ".join(k_idx),
        Y=ref("Y", all_idx),
        result=string.Template(table()[op]["result"]).substitute(fields),
        before="".join(
            f"  {string.Template(line).substitute(fields)}\n"
            for line in table()[op].get("before", [])
        ),
        **{k: v for k, v in fields.items() if k != "Xi"},
    )
    # 0-d temporaries (every axis reduced) are written without parentheses.
    text = text.replace("mx()", "mx").replace("s()", "s").replace("r()", "r")
    return Call(op, text, (x,), (out,))


@translator("BatchNormalization")
def _batch_norm(node: onnx.NodeProto, ctx: Context) -> Call:
    ins = inputs(node, 5, 5)
    at = attrs(node)
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
    idx = ["n", "c", *indices(len(sx))[2:]]
    text = instantiate(
        "BatchNormalization",
        "default",
        epsilon=lit(float(at.get("epsilon", 1e-5))),
        X=decl(tc_type(dtype), ["N", "C", *sizes(len(sx))[2:]]),
        t=tc_type(dtype),
        Xr=ref("X", idx),
        Y=ref("Y", idx),
    )
    return Call("BatchNormalization", text, tuple(ins), (out,))


@translator("LayerNormalization")
def _layer_norm(node: onnx.NodeProto, ctx: Context) -> Call:
    """LayerNormalization over the axes from `axis` on, with its optional Mean and
    InvStdDev outputs (shape: the input's, reduced axes kept as 1)."""
    op = "LayerNormalization"
    ins = inputs(node, 2, 3)
    at = attrs(node)
    x = ins[0]
    sx = ctx.shape(x, op)
    rank = len(sx)
    if rank == 0:
        raise Untranslatable(f"{op} of a 0-d tensor")
    axis = normalize_axis(int(at.get("axis", -1)), rank, "axis")
    axes = range(axis, rank)
    count = math.prod(sx[axis:])
    if count == 0 or math.prod(sx) == 0:
        raise Untranslatable(f"{op} of an empty tensor")
    outputs = list(node.output) + [""] * (3 - len(node.output))
    if not outputs[0]:
        raise Untranslatable(f"{op} without its output Y")
    dtype = ctx.common_dtype([v for v in ins if v], op)
    t = tc_type(dtype)
    ctx.check_type(outputs[0], sx, dtype)
    stat_shape = tuple(d if j < axis else 1 for j, d in enumerate(sx))
    for v in outputs[1:]:
        if v:
            ctx.check_type(v, stat_shape, FLOAT32)
    all_idx = indices(rank)
    k_idx = [f"k{j}" if j >= axis else f"i{j}" for j in range(rank)]
    outer = ", ".join(all_idx[:axis])
    params = [f"{decl(t, sizes(rank))} X"]
    args = [x]
    scale = bias = ""
    for name, v, sep in (("S", ins[1], " * "), ("B", ins[2] if len(ins) > 2 else "", " + ")):
        if not v:
            continue
        sv = ctx.shape(v, op)
        if len(sv) > rank or any(d not in (1, o) for d, o in zip(sv[::-1], sx[::-1], strict=False)):
            raise Untranslatable(f"'{v}' of shape {list(sv)} does not broadcast to {list(sx)}")
        dims, idx = broadcast(sv, sx)
        params.append(f"{decl(t, dims)} {name}")
        args.append(v)
        term = f"{sep}{ref(name, idx)}"
        scale, bias = (scale + term, bias) if name == "S" else (scale, bias + term)
    # Y has X's type; the statistics are float32 (ONNX's U), cast from float64.
    names, extra = [f"{t} Y"], []
    r_idx = [f"r{j}" if j >= axis else f"i{j}" for j in range(rank)]
    kept = ", ".join(f"r{j} in 0:1" for j in axes)
    for v, tc_name, expr in ((outputs[1], "Mean", "mu"), (outputs[2], "InvStdDev", "r")):
        if v:
            names.append(f"float32 {tc_name}")
            stat = ref(expr, all_idx[:axis])
            stat = f"float32({stat})" if dtype == np.float64 else stat
            extra.append(f"  {ref(tc_name, r_idx)} = {stat} where {kept}\n")
    text = instantiate(
        op,
        "default",
        axes=list(axes),
        epsilon=lit(float(at.get("epsilon", 1e-5))),
        params=", ".join(params),
        outputs=", ".join(names),
        outer=outer,
        all=", ".join(all_idx),
        Xk=wide(dtype, ref("X", k_idx)),
        Xi=ref("X", all_idx),
        dk=", ".join(k_idx),
        count=lit(count),
        Y=ref("Y", all_idx),
        scale=scale,
        bias=bias,
        extra="".join(extra),
    )
    text = text.replace("mu()", "mu").replace("r()", "r")
    return Call(op, text, tuple(args), tuple(v for v in outputs if v))
