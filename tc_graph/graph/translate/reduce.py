"""Reductions: Reduce* and the global pools, spelled out by the table's reducer,
pre- and post-expression."""

from __future__ import annotations

import math
import string

import onnx

from .context import Call, Context, Untranslatable, attrs, inputs
from .elementwise import copy_call
from .library import instantiate, table
from .registry import table_ops, translator
from .text import FLOAT16, decl, lit, normalize_axis, ref, sizes, tc_type


def _reduce_axes(node: onnx.NodeProto, ctx: Context, rank: int) -> set[int]:
    """The axes a Reduce* node reduces: attribute (older opsets) or constant input."""
    ins = list(node.input)
    at = attrs(node)
    if "axes" in at:
        axes: list[int] = [int(a) for a in at["axes"]]
    elif len(ins) > 1 and ins[1]:
        axes = [int(a) for a in ctx.constant(ins[1], "axes").ravel()]
    else:
        axes = []
    if not axes:
        return set() if int(at.get("noop_with_empty_axes", 0)) else set(range(rank))
    axes_set = {normalize_axis(a, rank, "axis") for a in axes}
    if len(axes_set) != len(axes):
        raise Untranslatable(f"repeated axes {axes}")
    return axes_set


@translator(*table_ops("reducer"))
def _reduce(node: onnx.NodeProto, ctx: Context) -> Call:
    """Reduce* and the global pools, from the table's reducer, pre- and post-expression."""
    op = node.op_type
    entry = table()[op]
    if op.startswith("Global"):
        (x,) = inputs(node, 1, 1)
        sx = ctx.shape(x, op)
        if len(sx) < 3:
            raise Untranslatable(f"{op} of rank {len(sx)}: needs (N, C, spatial...)")
        axes_set, keepdims = set(range(2, len(sx))), 1
    else:
        x = inputs(node, 1, 2)[0]
        sx = ctx.shape(x, op)
        axes_set = _reduce_axes(node, ctx, len(sx))
        keepdims = int(attrs(node).get("keepdims", 1))
    if not axes_set:  # nothing to reduce: a copy, unless the op maps each element
        if "pre" in entry or "post" in entry:
            raise Untranslatable(f"{op} over no axes")
        return copy_call(op, node, ctx, x)
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
    y = ref("Y", y_idx)
    where = f" where {', '.join(kept)}" if kept else ""
    count = math.prod(sx[j] for j in axes_set)
    # The shift: the maximum where it is finite, else 0 (an infinity's inf - inf is NaN).
    m = ref("m", y_idx)
    shift = f"({m} - {m} == 0.0 ? {m} : 0.0)"
    pre = string.Template(entry.get("pre", "${x}")).substitute(x="x", m=shift)
    # float16 accumulates in a float32 temporary (the language computes float16 in float32;
    # 16-bit partial sums would lose the precision), stored as 16 bits at the end.
    acc = ref("acc", y_idx) if dtype == FLOAT16 else y
    if acc != y:
        pre = f"float32({pre})"
    result = acc
    if "post" in entry:
        if count == 0 and "${count}" in entry["post"]:
            # A mean of nothing divides by zero: left to onnxruntime, before any measuring.
            raise Untranslatable(f"{op} over an empty set (a reduced axis has size 0)")
        post = string.Template(entry["post"])
        result = post.substitute(y=acc, count=lit(count), m=shift, nan=ref("nan", y_idx))
    text = instantiate(
        op,
        "default",
        op=op,
        axes=sorted(axes_set),
        X=decl(tc_type(dtype), sizes(len(sx))),
        Xr=ref("X", x_idx),
        Yt=tc_type(dtype),
        acc=acc,
        reducer=entry["reducer"],
        pre=pre,
        ranges="".join(f", {r}" for r in kept),
        shift=f"  {m} max=! {ref('X', x_idx)}{where}\n" if entry.get("shifted") else "",
        nans=f"  {ref('nan', y_idx)} +=! x != x ? x : 0.0 where x = {ref('X', x_idx)}"
        f"{''.join(f', {r}' for r in kept)}\n"
        if entry.get("nans")
        else "",
        post=f"  {y} = {result}\n" if result != y else "",
    )
    return Call(op, text, (x,), (out,))
