"""Contractions of matrices: MatMul (batched, numpy broadcasting) and Gemm."""

from __future__ import annotations

import numpy as np
import onnx

from ...poly.contraction import MIN_TILE, own_kernel
from .context import FLOAT32, Call, Context, Untranslatable, attrs, inputs
from .library import instantiate
from .registry import translator
from .text import accumulator, broadcast, decl, lit, ref, tc_type, wide


@translator("MatMul")
def _matmul(node: onnx.NodeProto, ctx: Context) -> Call:
    a, b = inputs(node, 2, 2)
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
    da, ia = broadcast(sa[:-2], batch, "B", "b")
    db, ib = broadcast(sb[:-2], batch, "B", "b")
    y_idx = [f"b{j}" for j in range(len(batch))]
    if len(sa) >= 2:
        da, ia, y_idx = [*da, "M"], [*ia, "m"], [*y_idx, "m"]
    da, ia = [*da, "K"], [*ia, "k"]
    db, ib = [*db, "K"], [*ib, "k"]
    if len(sb) >= 2:
        db, ib, y_idx = [*db, "N"], [*ib, "n"], [*y_idx, "n"]
    acc, store = accumulator(dtype, y_idx)
    weight = {"B": decl(tc_type(dtype), db), "Br": wide(dtype, ref("B", ib)), "where": ""}
    if len(sa) >= 2 and len(sb) == 2:
        # The register block's rows: A's last leading dimension of more than one (a rows
        # node's (rows, 1, K) input has them first), as contraction._rows_index picks.
        rows = next((d for d in reversed(sa[:-1]) if d > 1), 1)
        weight = _weight(ctx, b, 0, dtype, (rows, sa[-1], sb[-1]))
    b = weight.pop("weight", b)
    text = instantiate(
        "MatMul",
        "default",
        A=decl(tc_type(dtype), da),
        Ar=wide(dtype, ref("A", ia)),
        Yt=tc_type(dtype),
        T=ref(acc, y_idx),
        store=store,
        **weight,
    )
    return Call("MatMul", text, (a, b), (out,))


@translator("Gemm")
def _gemm(node: onnx.NodeProto, ctx: Context) -> Call:
    ins = inputs(node, 2, 3)
    a, b = ins[0], ins[1]
    c = ins[2] if len(ins) > 2 else ""
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    trans_a, trans_b = int(at.get("transA", 0)), int(at.get("transB", 0))
    sa, sb = ctx.shape(a, "Gemm"), ctx.shape(b, "Gemm")
    dtype = ctx.common_dtype([a, b, c] if c else [a, b], "Gemm")
    t = tc_type(dtype)
    if len(sa) != 2 or len(sb) != 2:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: operands must be 2-D")
    m, k = sa[::-1] if trans_a else sa
    k_b, n = sb[::-1] if trans_b else sb
    if k != k_b:
        raise Untranslatable(f"Gemm of shapes {list(sa)} and {list(sb)}: inner sizes differ")
    out = ctx.check_output(node, (m, n), dtype)
    no_bias = not c or beta == 0.0
    alpha_text = "" if alpha == 1.0 else f"{lit(alpha)} * "
    acc, store = accumulator(dtype, ["m", "n"])
    fields = {
        "A": decl(t, ("K", "M") if trans_a else ("M", "K")),
        "Ar": wide(dtype, "A(k, m)" if trans_a else "A(m, k)"),
        "alpha": alpha_text,
        "Yt": t,
        "T": acc,
        "store": store,
        **_weight(ctx, b, trans_b, dtype, (m, k, n)),
    }
    b = fields.pop("weight")
    if no_bias:  # ONNX: beta * C is dropped with beta = 0 (onnxruntime too)
        return Call("Gemm", instantiate("Gemm", "nobias", **fields), (a, b), (out,))
    sc = ctx.shape(c, "Gemm")
    if len(sc) > 2 or any(d not in (1, o) for d, o in zip(sc[::-1], (n, m), strict=False)):
        raise Untranslatable(f"C of shape {list(sc)} does not broadcast to {[m, n]}")
    dc, ic = broadcast(sc, (m, n))
    # `broadcast` names dimensions D0/D1 and indices i0/i1; Gemm's are M/N and m/n.
    dc = [{"D0": "M", "D1": "N"}.get(d, d) for d in dc]
    ic = [{"i0": "m", "i1": "n"}.get(i, i) for i in ic]
    beta_text = "" if beta == 1.0 else f"{lit(beta)} * "
    text = instantiate(
        "Gemm", "bias", C=decl(t, dc), Cr=beta_text + wide(dtype, ref("C", ic)), **fields
    )
    return Call("Gemm", text, (a, b, c), (out,))


def _weight(
    ctx: Context,
    b: str,
    trans_b: int,
    dtype: np.dtype,
    sizes: tuple[int, int, int],
) -> dict[str, str]:
    """The 2-D B of a Gemm or MatMul: its declaration, its read, the where clause its read
    needs and the value passed. A constant weight in panels (`_panels`), else a constant
    one read transposed is passed transposed, so that n is contiguous in memory, except
    under fewer than MIN_TILE rows, where a constant (K, N) one is passed as (N, K): each
    output is then a dot product along the weight's own rows, the columns a parallel
    loop (a batch-1 Gemm's register tile over the transposed weight read 4096 rows 4 KB
    apart for every 32 columns, at a fifth of onnxruntime's speed; a one-row MatMul by
    (256, 1024) ran on one thread at 0.45x)."""
    panels = _panels(ctx, b, trans_b, dtype, sizes)
    if panels is not None:
        return panels
    if len(ctx.type(b)[1]) == 2 and bool(trans_b) == (sizes[0] >= MIN_TILE):
        packed = ctx.pack_transposed(b)
        if packed is not None:  # (N, K) becomes (K, N), or (K, N) becomes (N, K)
            b, trans_b = packed, 1 - trans_b
    t = tc_type(dtype)
    return {
        "B": decl(t, ("N", "K") if trans_b else ("K", "N")),
        "Br": wide(dtype, "B(n, k)" if trans_b else "B(k, n)"),
        "where": "",
        "weight": b,
    }


def _panels(
    ctx: Context,
    b: str,
    trans_b: int,
    dtype: np.dtype,
    sizes: tuple[int, int, int],
) -> dict[str, str] | None:
    """A constant float32 (K, N) weight ((N, K) with trans_b) of a contraction of these
    (rows, reduction, columns) sizes that gets a kernel of its own, packed as panels,
    which that kernel reads in place (poly/contraction.panels); None otherwise. The
    contraction is alone in its output: a Gemm's bias starts its sums (contraction.plan)."""
    m, k, n = sizes
    if dtype != FLOAT32 or not own_kernel(m, k, n, alone=True):
        return None
    panels = ctx.pack_panels(b, transposed=bool(trans_b))
    if panels is None:
        return None
    w = ctx.panel
    return {
        "B": decl(tc_type(dtype), (-(-n // w), "K", w)),
        "Br": f"B(n / {w}, k, n % {w})",
        "where": f" where n in 0:{n}",
        "weight": panels,
    }
