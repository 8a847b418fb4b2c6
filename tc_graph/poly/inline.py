"""Temporaries in and out before scheduling.

Copies inlined into their readers: a temporary defined by one plain `=` statement over
its whole shape whose right side is one read (a transpose, a gather, a cast) is replaced
by its definition wherever it is read, so no buffer is written and read back. ONNX
translations produce these at every Transpose and Gather; hand-written TCs rarely do.

Snapshots of in-place reductions: a reduction that reads its own left tensor must see
the values from before the statement (the right side is read in full first), which a
loop nest that initialises and accumulates in place cannot give; those reads go to a
copy taken just before (`snapshot_in_place`).

float16 reductions over variables: they accumulate in a float32 temporary
(`widen_half_reductions`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import islpy as isl

from .. import ir


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
        # Nothing it reads may change before its last reader has read it.
        sources = {r.tensor for r in ir.reads(st.rhs)}
        if any(s.tensor in sources for s in stmts[k + 1 : readers[-1] + 1]):
            continue
        return k
    return None


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
        statements.append(_copy(st, old, st.tensor, target.dtype))
        rhs = ir.map_expr(
            st.rhs,
            lambda e, t=st.tensor, o=old: (
                replace(e, tensor=o) if isinstance(e, ir.Read) and e.tensor == t else e
            ),
        )
        statements.append(replace(st, rhs=rhs))
    return replace(program, statements=tuple(statements), tensors=tensors)


def _copy(st: ir.Statement, dst: str, src: str, dtype: str) -> ir.Statement:
    """`dst(lhs) = src(lhs)` over st's left-hand region (the distinct left-hand index
    names come first among st's iterators)."""
    n = len(dict.fromkeys(st.lhs))
    return ir.Statement(
        dst,
        st.lhs,
        st.iterators[:n],
        "=",
        False,
        ir.Read(src, tuple(ir.Index(v) for v in st.lhs), dtype),
        st.domain.project_out(isl.dim_type.set, n, len(st.iterators) - n),
        st.bounds[:n],
        st.span,
    )


def widen_half_reductions(program: ir.Program) -> ir.Program:
    """program with every reduction over variables into a float16 tensor accumulating in
    a float32 temporary, copied in (without `!`) and back out around it. float16 is
    computed in float32 (docs/language.md), but a schedule that puts the reduction loop
    outside the left-hand loops accumulates through memory, rounding to float16 at every
    step: `P(i) *=! A(i, r)` over 300, 300, 0.001 overflowed to inf. Runs after
    snapshot_in_place, so the right side no longer reads the tensor."""
    statements: list[ir.Statement] = []
    tensors = dict(program.tensors)
    for st in program.statements:
        target = tensors[st.tensor]
        if st.op == "=" or not st.reduction_vars or target.dtype != "float16":
            statements.append(st)
            continue
        wide = _fresh({*tensors, *program.params}, st.tensor, "_acc")
        tensors[wide] = ir.Tensor(wide, "float32", "temp", target.shape, zero_fill=False)
        if not st.init:
            statements.append(_copy(st, wide, st.tensor, "float16"))
        statements.append(replace(st, tensor=wide))
        statements.append(_copy(st, st.tensor, wide, "float32"))
    return replace(program, statements=tuple(statements), tensors=tensors)
