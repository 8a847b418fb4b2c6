"""Data movement by index: Reshape, Flatten, Squeeze, Unsqueeze (affine remappings),
Transpose, Concat and Gather."""

from __future__ import annotations

import math

import numpy as np
import onnx

from ...lang.types import BY_NUMPY
from .context import Call, Context, Untranslatable, attrs, inputs
from .library import instantiate
from .registry import translator
from .text import decl, indices, normalize_axis, ref, scaled, sizes, tc_type

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _remap(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[list[str], dict[int, int]]:
    """Subscripts into a row-major tensor of shape `src` that read element (i0, i1, ...) of
    the same elements seen as shape `dst`, and which output dimensions copy an input
    dimension (output -> input).

    Dimensions of size 1 are dropped, the rest are matched in runs whose products agree:
    within a run, the output indices make one linear index, and each input dimension
    reads it back with / and % by constants (a run of one dimension on each side is a
    plain index: a copy). So Squeeze, Unsqueeze, Flatten and most Reshapes stay affine.
    """
    subs = ["0"] * len(src)
    copies: dict[int, int] = {}
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
            terms.append(scaled(stride, f"i{j}"))
            stride *= dst[j]
        flat = " + ".join(reversed(terms))
        if len(s_run) == 1:
            subs[s_run[0]] = flat
            if len(d_run) == 1:
                copies[d_run[0]] = s_run[0]
            continue
        flat = f"({flat})" if len(d_run) > 1 else flat
        stride = ps
        for pos, j in enumerate(s_run):
            stride //= src[j]
            sub = flat if stride == 1 else f"{flat} / {stride}"
            if pos:
                sub = f"({sub}) % {src[j]}" if stride != 1 else f"{sub} % {src[j]}"
            subs[j] = sub
    return subs, copies


@translator("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def _reshape(node: onnx.NodeProto, ctx: Context) -> Call:
    """Reshape, Flatten, Squeeze, Unsqueeze: the output's static type gives the shape, so
    the shape or axes input is not read (it need not even be a constant)."""
    op = node.op_type
    x = inputs(node, 1, 2)[0]
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
    y_idx = indices(len(shape))
    subs, copies = _remap(sx, shape)
    # A dimension that copies one of X's is bounded by X's size, not its value: the text
    # then holds for any size of it (a rows group's batch, graph/rows.py).
    names = sizes(len(sx))
    bounds = [names[copies[j]] if j in copies else str(d) for j, d in enumerate(shape)]
    ranges = ", ".join(f"i{j} in 0:{b}" for j, b in enumerate(bounds))
    text = instantiate(
        op,
        "default",
        op=op,
        X=decl(tc_type(dtype), names),
        Xr=ref("X", subs),
        Y=ref("Y", y_idx),
        ranges=f" where {ranges}" if ranges else "",
    )
    return Call(op, text, (x,), (out,))


@translator("Transpose")
def _transpose(node: onnx.NodeProto, ctx: Context) -> Call:
    (x,) = inputs(node, 1, 1)
    sx = ctx.shape(x, "Transpose")
    dtype = ctx.type(x)[0]
    rank = len(sx)
    perm = [int(p) for p in attrs(node).get("perm", range(rank - 1, -1, -1))]
    if sorted(perm) != list(range(rank)):
        raise Untranslatable(f"perm {perm} is not a permutation of the {rank} axes")
    out = ctx.check_output(node, tuple(sx[p] for p in perm), dtype)
    text = instantiate(
        "Transpose",
        "default",
        perm=perm,
        X=decl(tc_type(dtype), [f"D{j}" for j in range(rank)]),
        Xr=ref("X", [f"i{j}" for j in range(rank)]),
        Y=ref("Y", [f"i{p}" for p in perm]),
    )
    return Call("Transpose", text, (x,), (out,))


@translator("Concat")
def _concat(node: onnx.NodeProto, ctx: Context) -> Call:
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
    axis = normalize_axis(int(attrs(node).get("axis", 0)), rank, "axis")
    for s in shapes:
        if len(s) != rank or any(s[j] != shapes[0][j] for j in range(rank) if j != axis):
            raise Untranslatable(f"Concat of shapes {[list(s) for s in shapes]} along {axis}")
    shape = list(shapes[0])
    shape[axis] = sum(s[axis] for s in shapes)
    out = ctx.check_output(node, tuple(shape), dtype)
    params, statements = [], []
    y = ref("Y", [f"i{j}" for j in range(rank)])
    for k in range(len(ins)):
        dims = [f"D{j}" for j in range(rank)]
        dims[axis] = f"C{k}"
        params.append(f"{decl(tc_type(dtype), dims)} X{k}")
        idx = [f"i{j}" for j in range(rank)]
        if k:
            offset = " + ".join(f"C{t}" for t in range(k))
            idx[axis] = f"i{axis} - ({offset})" if k > 1 else f"i{axis} - {offset}"
        statements.append(f"  {y} = {ref(f'X{k}', idx)}")
    text = instantiate(
        "Concat",
        "default",
        axis=axis,
        params=", ".join(params),
        statements="\n".join(statements),
    )
    return Call("Concat", text, tuple(ins), (out,))


@translator("Gather")
def _gather(node: onnx.NodeProto, ctx: Context) -> Call:
    x, i = inputs(node, 2, 2)
    sx = ctx.shape(x, "Gather")
    dtype = ctx.type(x)[0]
    idtype, si = ctx.type(i)
    if idtype not in _INDEX_DTYPES:
        raise Untranslatable(f"indices '{i}' have dtype {idtype.name}; Gather takes int32/int64")
    if not sx:
        raise Untranslatable("Gather from a 0-d tensor")
    axis = normalize_axis(int(attrs(node).get("axis", 0)), len(sx), "axis")
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
    text = instantiate(
        "Gather",
        "default",
        axis=axis,
        negatives=(
            "a select maps them to ix + N"
            if negative
            else "none, the indices are a constant without negative values"
        ),
        X=decl(tc_type(dtype), [f"D{j}" for j in range(len(sx))]),
        I=decl(BY_NUMPY[idtype], [f"J{t}" for t in range(len(si))]),
        Ir=ref("I", [f"j{t}" for t in range(len(si))]),
        x_idx=", ".join(x_idx),
        Y=ref("Y", y_idx),
    )
    return Call("Gather", text, (x, i), (out,))
