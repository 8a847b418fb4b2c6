"""Conv: 2-D (NCHW) convolutions, grouped, strided, dilated and padded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx

from ...poly.contraction import apart_in_l1
from .context import FLOAT32, Call, Context, Untranslatable, attrs, inputs
from .library import instantiate
from .registry import translator
from .text import accumulator, padded_subscript, scaled, tc_type, wide


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
        tests, sub = padded_subscript(i, size, lo, bool(hi))
        conds += tests
        subs.append(sub)
    return (
        f"  Xp(n, c, h, w) = {' && '.join(conds)} ? X(n, c, {subs[0]}, {subs[1]}) : 0.0\n"
        f"      where h in 0:H + {pt + pb}, w in 0:W + {pl + pr}\n"
    )


def _rows_apart(dtype: np.dtype, shape: tuple[int, ...]) -> int | None:
    """The channels a constant float32 weight is passed with when its rows (output
    channels) would crowd L1's sets, zeros appended (contraction.apart_in_l1); None when
    it is passed as it is. Range inference still takes the channels from X."""
    _, c, kh, kw = shape
    if dtype != FLOAT32 or apart_in_l1(c * kh * kw):
        return None
    return next((n for n in range(c + 1, 2 * c + 2) if apart_in_l1(n * kh * kw)), None)


@translator("Conv")
def _conv(node: onnx.NodeProto, ctx: Context) -> Call:
    ins = inputs(node, 2, 3)
    x, w = ins[0], ins[1]
    bias = ins[2] if len(ins) > 2 else ""
    sx, sw = ctx.shape(x, "Conv"), ctx.shape(w, "Conv")
    dtype = ctx.common_dtype([x, w, bias] if bias else [x, w], "Conv")
    t = tc_type(dtype)
    if len(sx) != 4 or len(sw) != 4:
        raise Untranslatable(
            f"Conv of shapes {list(sx)} and {list(sw)}: only 2-D convolutions (NCHW) translate"
        )
    n, c, h, wd = sx
    f, cg, kh, kw = sw
    at = attrs(node)
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
    acc, store = accumulator(dtype, ["n", "f", "oh", "ow"])
    grown = _rows_apart(dtype, sw) if group == 1 else None
    padded = None if grown is None else ctx.pad_channels(w, grown)
    w = padded or w
    args: tuple[str, ...] = (x, w)
    bias_param = bias_stmt = ""
    if bias:
        if ctx.shape(bias, "Conv") != (f,):
            raise Untranslatable(f"bias '{bias}' is not of shape [{f}]")
        bias_param, args = f", {t}(F) B", (*args, bias)
        bias_stmt = f"  {acc}(n, f, oh, ow) = {wide(dtype, 'B(f)')}\n"
    pad_stmt = _conv_padding(pt, pl, pb, pr)
    src = "Xp" if pad_stmt else "X"
    fg = f // group
    ih = f"{scaled(strides[0], 'oh')} + {scaled(dilations[0], 'kh')}"
    iw = f"{scaled(strides[1], 'ow')} + {scaled(dilations[1], 'kw')}"
    channels = "C" if group == 1 else cg  # each group's, in the weight
    if group == 1:
        chan = "c"
    else:
        block = "f" if fg == 1 else f"(f / {fg})"
        chan = f"{block} + c" if cg == 1 else f"{block} * {cg} + c"
    text = instantiate(
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
        cg=channels,
        wc=channels if padded is None else grown,
        rows_comment=(
            "The weight is as ONNX has it."
            if padded is None
            else f"The weight's channels are zero-padded to {grown}: its rows lie apart in L1."
        ),
        bias_param=bias_param,
        pad_stmt=pad_stmt,
        bias_stmt=bias_stmt,
        acc="+=" if bias else "+=!",
        t=t,
        T=acc,
        Xr=wide(dtype, f"{src}(n, {chan}, {ih}, {iw})"),
        Wr=wide(dtype, "Wt(f, c, kh, kw)"),
        store=store,
    )
    return Call("Conv", text, args, (out,))
