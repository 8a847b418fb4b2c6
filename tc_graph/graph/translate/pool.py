"""MaxPool and AveragePool over any number of spatial dimensions."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import onnx

from .context import Call, Context, Untranslatable, attrs, inputs
from .library import instantiate
from .registry import translator
from .text import FLOAT16, NEG_INFINITY, decl, lit, padded_subscript, ref, scaled, tc_type, wide


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
        if any(d != 1 for d in dilations):
            # onnxruntime pads for the undilated window, the ONNX spec for the dilated one:
            # the fused pool's output would change shape (Conv refuses it as well).
            raise Untranslatable(f"auto_pad {auto_pad} with dilations {dilations}")
        outs = [-(-d // s) for d, s in zip(size, strides, strict=True)]
        begin = []
        for d, o, s, w in zip(size, outs, strides, span, strict=True):
            total = (o - 1) * s + w - d
            if total < 0:  # onnxruntime crops the input (AveragePool) or refuses (MaxPool)
                raise Untranslatable(f"auto_pad {auto_pad} asks for negative padding {total}")
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


def _pool_input(node: onnx.NodeProto, ctx: Context) -> tuple[str, tuple[int, ...], dict[str, Any]]:
    """A pool's input, its shape and the node's attributes; what no TC pool does refused."""
    op = node.op_type
    (x,) = inputs(node, 1, 1)
    sx = ctx.shape(x, op)
    if len(sx) < 3:
        raise Untranslatable(f"{op} of rank {len(sx)}: needs (N, C, spatial...)")
    at = attrs(node)
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
        f"{scaled(s, f'o{j}')}{f' - {b}' if b else ''} + {scaled(d, f'k{j}')}"
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


def _padded(
    size: Sequence[int],
    begin: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    outs: Sequence[int],
    fill: str,
) -> tuple[list[str], str]:
    """The statement of the input copied with `fill` around it, as far as the windows
    reach, and the window's read of it: affine, without a select or a clamp per window
    element (a clamped, strided read vectorized as a gather: ResNet's 3x3/2 MaxPool ran
    at 0.2x onnxruntime so; the copy costs one pass over the input). Only for pools with
    padding (text.padded_subscript, as the convolutions' copy)."""
    n = len(size)
    extent = [
        (o - 1) * s + (k - 1) * d + 1
        for o, s, k, d in zip(outs, strides, kernel, dilations, strict=True)
    ]
    conds, subs = [], []
    for j in range(n):
        tests, sub = padded_subscript(
            f"h{j}", str(size[j]), begin[j], extent[j] > begin[j] + size[j]
        )
        conds += tests
        subs.append(sub)
    hs = [f"h{j}" for j in range(n)]
    read = ref("X", ["n", "c", *subs])
    value = f"{' && '.join(conds)} ? {read} : {fill}" if conds else read
    where = ", ".join(f"h{j} in 0:{e}" for j, e in enumerate(extent))
    copy = f"  {ref('Xp', ['n', 'c', *hs])} = {value}\n      where {where}"
    at = [
        f"{scaled(s, f'o{j}')} + {scaled(d, f'k{j}')}"
        for j, (s, d) in enumerate(zip(strides, dilations, strict=True))
    ]
    return [copy], ref("Xp", ["n", "c", *at])


@translator("MaxPool", "AveragePool")
def _pool(node: onnx.NodeProto, ctx: Context) -> Call:
    """MaxPool and AveragePool over any number of spatial dimensions. Where a window
    leaves the input, the windows read a copy of it padded with -infinity (max)
    or 0 (average) as far as they reach (`_padded`); AveragePool divides by the count of
    positions inside the input, or inside the padded input with count_include_pad,
    computed by a second reduction over the windows when padding or ceil_mode make it
    vary."""
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
    o_idx = [f"o{j}" for j in range(n)]
    xr = ref("X", ["n", "c", *pos])
    copy = []
    if inside:
        fill = NEG_INFINITY if op == "MaxPool" else "0.0"
        copy, xr = _padded(size, begin, kernel, strides, dilations, outs, fill)
    yr = ref("Y", ["n", "c", *o_idx])
    ranges = ", ".join(
        [f"o{j} in 0:{o}" for j, o in enumerate(outs)]
        + [f"k{j} in 0:{k}" for j, k in enumerate(kernel)]
    )
    if op == "MaxPool":
        lines = [f"  {yr} max=! {xr}\n      where {ranges}"]
        window = "Positions outside the input read -infinity."
    else:
        value = wide(dtype, xr)
        sums = ref("acc" if dtype == FLOAT16 else "Y", ["n", "c", *o_idx])  # as accumulator()
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
            cnt = ref("cnt", o_idx)
            lines.insert(0, f"  {cnt} +=! {' && '.join(counted)} ? 1.0 : 0.0\n      where {ranges}")
            lines.append(f"  {yr} = {sums} / {cnt}")
        else:
            lines.append(f"  {yr} = {sums} / {lit(math.prod(kernel))}")
    lines = copy + lines
    text = instantiate(
        op,
        "default",
        op=op,
        kernel=kernel,
        strides=strides,
        dilations=dilations,
        pads_begin=begin,
        window=window,
        X=decl(tc_type(dtype), ["N", "C", *(f"S{j}" for j in range(n))]),
        Yt=tc_type(dtype),
        statements="\n".join(lines),
    )
    return Call(op, text, (x,), (out,))
