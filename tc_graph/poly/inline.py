"""Temporaries in and out before scheduling.

Copies inlined into their readers: a temporary defined by one plain `=` statement over
its whole shape whose right side is one read (a transpose, a gather, a cast) is replaced
by its definition wherever it is read, so no buffer is written and read back. ONNX
translations produce these at every Transpose and Gather; hand-written TCs rarely do.

Snapshots of in-place reductions: a reduction that reads its own left tensor must see
the values from before the statement (the right side is read in full first), which a
loop nest that initialises and accumulates in place cannot give; those reads go to a
copy taken just before (`snapshot_in_place`).

Reductions over variables whose computing type is not their tensor's (float16, mixed
widths): they accumulate in a temporary of the computing type (`widen_reductions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import islpy as isl
import numpy as np

from .. import affine, ir
from ..lang.types import compute_type, is_float, promote
from ..reference import identity
from .scop import indirect_reads


def inline_copies(program: ir.Program, sizes: Mapping[str, int]) -> ir.Program:
    """program with every inlinable temporary substituted away (see the module doc)."""
    point = ir.param_point(program, sizes)
    while True:
        found = _candidate(program, point)
        if found is None:
            return program
        program = _inline(program, found)


def _reads_tensor(st: ir.Statement, tensor: str) -> bool:
    return any(r.tensor == tensor for r in ir.reads(st.rhs))


def _is_copy(e: ir.Expr) -> bool:
    """One read, perhaps cast: a reader that reads an element many times (a reduction
    over another dimension) re-reads the source instead, at the same cost. Arithmetic
    would be recomputed at every read."""
    while isinstance(e, ir.Cast):
        e = e.operand
    return isinstance(e, ir.Read)


def _candidate(program: ir.Program, point: isl.Set) -> int | None:
    """Index of a statement whose temporary can be inlined, or None."""
    stmts = program.statements
    for k, st in enumerate(stmts):
        t = program.tensors[st.tensor]
        if t.role != "temp" or st.op != "=" or st.reduction_vars:
            continue
        if st.iterators != st.lhs or len(set(st.lhs)) != len(st.lhs):
            continue
        if not _is_copy(st.rhs) or _reads_tensor(st, t.name):
            continue
        if any(s.tensor == t.name for j, s in enumerate(stmts) if j != k):
            continue
        readers = [j for j, s in enumerate(stmts) if _reads_tensor(s, t.name)]
        if not readers or readers[0] < k:
            continue
        # It must define every element: its box is the tensor's whole shape.
        whole = all(
            ir.eval_pw(lo, point) == 0 and ir.eval_pw(hi, point) == ir.eval_pw(extent, point)
            for (lo, hi), extent in zip(st.bounds, t.shape, strict=True)
        )
        if not whole:
            continue
        if indirect_reads(st.rhs) and not all(_reads_all(stmts[j], t, point) for j in readers):
            continue
        # A reader's indirect subscript of the copy would vanish with it (a dimension the
        # source does not read), or be checked against the source's extent, not the copy's.
        if any(r.tensor == t.name for j in readers for r, _ in indirect_reads(stmts[j].rhs)):
            continue
        # Nothing it reads may change before its last reader has read it.
        sources = {r.tensor for r in ir.reads(st.rhs)}
        if any(s.tensor in sources for s in stmts[k + 1 : readers[-1] + 1]):
            continue
        return k
    return None


def _reads_all(reader: ir.Statement, t: ir.Tensor, point: isl.Set) -> bool:
    """Whether reader reads every element of t: each read is t(v1, ..., vn) with distinct
    index variables whose ranges are t's whole extents, and no range of reader is empty.
    A gather inlined into a reader that reads fewer elements would have its index values
    checked only where they are read, not over its whole domain (issue 12 item 11)."""
    ranges = {
        v: (ir.eval_pw(lo, point), ir.eval_pw(hi, point))
        for v, (lo, hi) in zip(reader.iterators, reader.bounds, strict=True)
    }
    if any(hi <= lo for lo, hi in ranges.values()):
        return False
    extents = [ir.eval_pw(d, point) for d in t.shape]
    for r in ir.reads(reader.rhs):
        if r.tensor != t.name:
            continue
        names = [s.name for s in r.subscripts if isinstance(s, ir.Index)]
        if len(set(names)) != len(r.subscripts):
            return False
        if any(ranges.get(v) != (0, n) for v, n in zip(names, extents, strict=True)):
            return False
    return True


def _inline(program: ir.Program, k: int) -> ir.Program:
    definition = program.statements[k]
    temp = program.tensors[definition.tensor]

    def substitute(e: ir.Expr) -> ir.Expr:
        if not (isinstance(e, ir.Read) and e.tensor == temp.name):
            return e
        env = dict(zip(definition.lhs, e.subscripts, strict=True))
        body = ir.map_expr(
            definition.rhs,
            lambda x: env[x.name] if isinstance(x, ir.Index) and x.name in env else x,
        )
        return body if body.dtype == temp.dtype else ir.Cast(body, temp.dtype)

    statements = tuple(
        ir.Statement(
            s.tensor,
            s.lhs,
            s.iterators,
            s.op,
            s.init,
            ir.map_expr(s.rhs, substitute),
            s.domain,
            s.bounds,
            s.span,
        )
        for j, s in enumerate(program.statements)
        if j != k
    )
    tensors = {n: t for n, t in program.tensors.items() if n != temp.name}
    return replace(program, statements=statements, tensors=tensors)


def _needs_snapshot(st: ir.Statement) -> bool:
    """st reads its own left tensor and writes some element before its last such read:
    the `!` overwrites first, or a reduction index updates each element many times.
    (A pointwise update reads each element once, right before writing it.)"""
    if st.op == "=" or not _reads_tensor(st, st.tensor):
        return False
    return st.init or bool(st.reduction_vars)


def _fresh(taken: set[str], base: str, suffix: str = "_old") -> str:
    name, k = f"{base}{suffix}", 1
    while name in taken:
        name, k = f"{base}{suffix}{k}", k + 1
    return name


def snapshot_in_place(program: ir.Program) -> ir.Program:
    """program with every in-place reduction that needs the old values (see
    _needs_snapshot) reading a copy of its left region, taken by a `=` statement
    right before it. The copy is a temporary, written wherever it is read."""
    statements: list[ir.Statement] = []
    tensors = dict(program.tensors)
    for st in program.statements:
        if not _needs_snapshot(st):
            statements.append(st)
            continue
        target = tensors[st.tensor]
        old = _fresh({*tensors, *program.params}, st.tensor)
        tensors[old] = ir.Tensor(old, target.dtype, "temp", target.shape, zero_fill=False)
        # Sema's in-place rule: every read of the left tensor uses the left-hand indices.
        at = tuple(ir.Index(v) for v in st.lhs)
        statements.append(_copy(st, old, ir.Read(st.tensor, at, target.dtype), program.context))
        rhs = ir.map_expr(
            st.rhs,
            lambda e, t=st.tensor, o=old: (
                replace(e, tensor=o) if isinstance(e, ir.Read) and e.tensor == t else e
            ),
        )
        statements.append(replace(st, rhs=rhs))
    return replace(program, statements=tuple(statements), tensors=tensors)


def _copy(st: ir.Statement, dst: str, rhs: ir.Expr, context: isl.Set) -> ir.Statement:
    """`dst(lhs) = rhs` over st's left-hand box (the distinct left-hand index names come
    first among st's iterators), however many elements st reduces: projecting st's domain
    instead kept the condition that its range is not empty, and a kernel for every size
    left the output unset where it was (`R(i) max=! A(i, k - 1) where k in 1:M` at M = 1)."""
    n = len(dict.fromkeys(st.lhs))
    sp = st.domain.project_out(isl.dim_type.set, n, len(st.iterators) - n).get_space()
    domain = affine.box(sp, st.bounds[:n]).intersect_params(context)
    return ir.Statement(dst, st.lhs, st.iterators[:n], "=", False, rhs, domain, st.bounds[:n],
                        st.span)  # fmt: skip


def widen_reductions(program: ir.Program) -> ir.Program:
    """program with every reduction over variables whose computing type is not its
    tensor's type accumulating in a temporary of the computing type: started from the
    tensor's identity converted to that type (`!`) or from its contents, and copied back
    once at the end. A schedule that puts the reduction loop outside the left-hand loops
    accumulates through memory, converting at every step: float16 `P(i) *=! A(i, r)`
    over 300, 300, 0.001 overflowed to inf, and uint8 `T(i) min=! V(i, r)` over int32
    values compared wrapped partial results (-3 stored as 253). Integer `+` and `*` wrap
    the same either way and are left alone, except into bool (2 then -1 stored as false). Runs after snapshot_in_place, so the right
    side no longer reads the tensor."""
    statements: list[ir.Statement] = []
    tensors = dict(program.tensors)
    for st in program.statements:
        target = tensors[st.tensor]
        acc = compute_type(promote(target.dtype, st.rhs.dtype))
        # Integer + and * commute with wrapping to a narrower integer, not with bool.
        wrapping = st.op in ("+", "*") and not is_float(acc) and target.dtype != "bool"
        if st.op == "=" or not st.reduction_vars or acc == target.dtype or wrapping:
            statements.append(st)
            continue
        wide = _fresh({*tensors, *program.params}, st.tensor, "_acc")
        tensors[wide] = ir.Tensor(wide, acc, "temp", target.shape, zero_fill=False)
        at = tuple(ir.Index(v) for v in st.lhs)
        start: ir.Expr = ir.Read(st.tensor, at, target.dtype)
        if st.init:
            value = identity(st.op, np.dtype(target.dtype))
            start = ir.Cast(ir.Const(value, target.dtype), acc)
        statements.append(_copy(st, wide, start, program.context))
        statements.append(replace(st, tensor=wide, init=False))
        statements.append(_copy(st, st.tensor, ir.Read(wide, at, acc), program.context))
    return replace(program, statements=tuple(statements), tensors=tensors)
