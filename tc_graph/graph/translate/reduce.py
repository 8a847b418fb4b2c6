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
    count = math.prod(sx[j] for j in axes_set)
    if count == 0 and "${count}" in entry.get("post", ""):
        # A mean of nothing divides by zero: left to onnxruntime, before any measuring.
        raise Untranslatable(f"{op} over an empty set (a reduced axis has size 0)")
    rows = [f"i{j}" for j in range(len(sx)) if j not in axes_set]
    text = instantiate(
        op,
        "default",
        op=op,
        axes=sorted(axes_set),
        X=decl(tc_type(dtype), sizes(len(sx))),
        Yt=tc_type(dtype),
        **_statements(entry, dtype, ref("X", x_idx), ref("Y", y_idx), rows, kept, count),
    )
    return Call(op, text, (x,), (out,))


def _statements(
    entry: dict, dtype: str, xr: str, y: str, rows: list[str], kept: list[str], count: int
) -> dict[str, str]:
    """reduce.tc's statements. The reduction runs over the indices it keeps (`rows`):
    with keepdims, into a temporary stored into Y's extent-1 dimensions after (their
    index in the reduction put its init in the reduction's loop band: a 512 x 1000
    ReduceMax ran 9 ms, against 24 us in vectors); float16 accumulates in a float32
    temporary (16-bit partial sums would lose the precision)."""
    acc = ref("acc", rows) if kept or dtype == FLOAT16 else y
    m = ref("m", rows)
    # The shift: the maximum where it is finite, else 0 (an infinity's inf - inf is NaN).
    shift = f"({m} - {m} == 0.0 ? {m} : 0.0)"
    pre = string.Template(entry.get("pre", "${x}")).substitute(x="x", m=shift)
    if dtype == FLOAT16:
        pre = f"float32({pre})"
    result = acc
    if "post" in entry:
        post = string.Template(entry["post"])
        result = post.substitute(y=acc, count=lit(count), m=shift)
    where = f" where {', '.join(kept)}" if kept else ""
    return {
        "Xr": xr,
        "acc": acc,
        "reducer": entry["reducer"],
        "pre": pre,
        "shift": f"  {m} max=! {xr}\n" if entry.get("shifted") else "",
        "post": f"  {y} = {result}{where}\n" if result != y else "",
    }
