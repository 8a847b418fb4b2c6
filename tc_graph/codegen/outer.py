"""The C text of an outer-product contraction kernel (poly/contraction.py decided its form
and `blocking` its sizes; this module only prints them).

Work items are (outer output indices, band of rows, panel of columns), one parallel loop
over all of them; a thread's consecutive items share a band, whose X stays in L2. Per
chunk of the reduction an item packs its panel of P (chunk x NR floats; past the last
column zeros, or the last column's row again, never stored) and runs the register block
down its band: MR x NR accumulators, the reduction innermost. A panel past the last
column is staged through a small array, so every vector load and store stays inside the
output.

In a kernel for every size the ranges are C expressions of the sizes (numbers where
they are fixed): counts are computed by the code, both the full and the staged panel
are printed, and the rows a register block leaves are run in blocks of powers of two.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..poly.contraction import (
    Blocking,
    Contraction,
    Packing,
    along_reduction,
    spare_registers,
    transposed_pack,
)
from ..poly.scop import ScopStmt
from .expr import cname, store
from .prelude import shuffle

if TYPE_CHECKING:
    from .c import _Printer


@dataclass(frozen=True)
class OuterKernel:
    """One outer-product kernel being printed: its statement, plan, blocking, the box of
    its domain, and the C names of its output indices outside the block."""

    st: ScopStmt
    plan: Contraction
    block: Blocking
    ranges: Mapping[str, tuple[Bound, Bound]]  # numbers, or C text of the sizes
    env: Mapping[str, str]
    packing: Packing  # how its panels of P are had (contraction.packing)
    window: int  # panel rows per step of the first reduction index (contraction.window)

    @property
    def columns(self) -> tuple[Bound, Bound]:
        return outer_columns(self.plan, self.ranges)

    @property
    def every_size(self) -> bool:
        """Some range is C text: the code works out what the printer cannot."""
        return any(isinstance(x, str) for pair in self.ranges.values() for x in pair)

    @property
    def in_place(self) -> bool:
        return self.packing == "in_place"

    @property
    def gathers(self) -> bool:
        return self.packing == "offsets"

    def at(self, col: str) -> dict[str, str]:
        """The C values of the column indices at flattened column `col`, for an address in
        the output (row-major, its last dimension all columns: span 0, column `col`)."""
        if self.plan.span is None:
            return {self.plan.cols: col}
        return {self.plan.span: "0", self.plan.cols: col}

    def lane(self, col: str) -> dict[str, str]:
        """The C values of the column indices at flattened column `col`, one by one."""
        if self.plan.span is None:
            return {self.plan.cols: col}
        width = self.ranges[self.plan.cols][1]
        return {self.plan.span: f"({col} / {width})", self.plan.cols: f"({col} % {width})"}

    def open_inner(self, p: _Printer, d: int) -> int:
        """Open the loops of the inner reduction indices (`_i0`, ...); their depth."""
        for j, v in enumerate(self.plan.inner):
            lo, hi = self.ranges[v]
            p.out(d + j, f"for (int _i{j} = {lo}; _i{j} < {hi}; _i{j}++) {{")
        return d + len(self.plan.inner)

    def close_inner(self, p: _Printer, d: int) -> None:
        for j in reversed(range(len(self.plan.inner))):
            p.out(d + j, "}")

    def reduction_env(self, step: str = "(k0 + _k)") -> dict[str, str]:
        """The C values of the reduction indices: the first one's `step` (by default at
        step `_k` of the chunk), the inner ones' loop variables."""
        return {
            self.plan.red: step,
            **{v: f"_i{j}" for j, v in enumerate(self.plan.inner)},
        }

    @property
    def first(self) -> str:
        """C condition: this chunk starts the sum (a `!` reduction starts from 0, a folded
        bias from its value; a plain `+=` from the output's)."""
        starts = self.st.source.init or self.plan.start is not None
        return f"k0 == {self.ranges[self.plan.red][0]}" if starts else "0"

    def start(self, p: _Printer, i: int, col: str, *, vector: bool) -> str:
        """The sums' start at row a0 + i and column `col`: a vector over the columns from
        `col` on, or the one value at `col`."""
        plan = self.plan
        if plan.start is None:
            return "(tc_vf){0}" if vector else "0.0f"
        assert plan.rows is not None
        env = {**self.env, plan.rows: f"(a0 + {i})", **self.at(col)}
        if not vector:
            return f"(float)({p.expr(plan.start, env)})"
        text, is_vector = p.vexpr(plan.start, env, plan.cols)
        return text if is_vector else f"((tc_vf){{0}} + (float)({text}))"


Bound = int | str  # a range's end: a number, or C text of the sizes


def outer_items(
    block: Blocking, ranges: Mapping[str, tuple[Bound, Bound]], outer: list[str], plan: Contraction
) -> tuple[Bound, Bound, Bound]:
    """(work items, bands, panels) of a kernel."""
    assert plan.rows is not None
    bands = _count(*ranges[plan.rows], block.band)
    panels = _count(*outer_columns(plan, ranges), block.panel)
    total = _times(bands, panels)
    for v in outer:
        total = _times(total, _extent(*ranges[v]))
    return total, bands, panels


def outer_columns(
    plan: Contraction, ranges: Mapping[str, tuple[Bound, Bound]]
) -> tuple[Bound, Bound]:
    """The columns' range: flattened over span x cols where the plan has a span (the
    columns then fill the output's last dimension, from 0)."""
    lo, hi = ranges[plan.cols]
    if plan.span is None:
        return lo, hi
    slo, shi = ranges[plan.span]
    return _times(slo, hi), _times(shi, hi)


def _extent(lo: Bound, hi: Bound) -> Bound:
    """hi - lo, at least 0."""
    if isinstance(lo, int) and isinstance(hi, int):
        return hi - lo
    return f"max((int64_t)0, (int64_t)({hi}) - ({lo}))"


def _times(a: Bound, b: Bound) -> Bound:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return f"(({a}) * ({b}))"


def _count(lo: Bound, hi: Bound, size: int) -> Bound:
    """Blocks of `size` that cover [lo, hi)."""
    if isinstance(lo, int) and isinstance(hi, int):
        return -(-(hi - lo) // size)
    return f"(({_extent(lo, hi)} + {size - 1}) / {size})"


def _aligned(block: Blocking) -> str:
    """A buffer that whole vectors are loaded from, as aligned as one vector (a cache line
    at least)."""
    return f"__attribute__((aligned({max(64, 4 * block.width)})))"


def print_kernel(p: _Printer, k: OuterKernel, outer: list[str], depth: int) -> None:
    """The whole kernel: the parallel loop over work items and each item's chunks."""
    plan, block = k.plan, k.block
    assert plan.rows is not None
    total, bands, panels = outer_items(block, k.ranges, outer, plan)
    (alo, ahi), (blo, _) = k.ranges[plan.rows], k.columns
    rlo, rhi = k.ranges[plan.red]
    d = depth
    p.out(d, "{")
    if p.options.parallel_depth:
        p.parallel_loop(d + 1, "_w", 0, total, 1, simd=False)
    else:
        p.out(d + 1, f"for (int _w = 0; _w < {total}; _w++) {{")
    d += 2
    stride = _times(bands, panels)
    for v in outer:
        lo, hi = k.ranges[v]
        p.out(d, f"const int {k.env[v]} = {lo} + _w / {stride} % {_extent(lo, hi)};")
        stride = _times(stride, _extent(lo, hi))
    p.out(d, f"const int b0 = {blo} + _w % {panels} * {block.panel};")
    # Bands of whole blocks that differ by one block at most: a last band of a few rows
    # had left one thread the heavy work items (the items are split in runs).
    blocks = _count(alo, ahi, block.rows)
    p.out(d, f"const int _band = _w / {panels} % {bands};")
    p.out(d, f"const int a_lo = {alo} + _band * {blocks} / {bands} * {block.rows};")
    p.out(d, f"const int a_end = {alo} + (_band + 1) * {blocks} / {bands} * {block.rows};")
    p.out(d, f"const int a_hi = a_end < {ahi} ? a_end : {ahi};")
    if not k.in_place:
        p.out(d, f"float _bp[{block.chunk * k.window * block.panel}] {_aligned(block)};")
    if k.gathers:
        _lane_offsets(p, k, d)
    # For every size the reduction may be empty: one chunk of no steps still starts the sums.
    more = f"k0 == {rlo} || k0 < {rhi}" if k.every_size else f"k0 < {rhi}"
    p.out(d, f"for (int k0 = {rlo}; {more}; k0 += {block.chunk}) {{")
    p.out(d + 1, f"const int kn = k0 + {block.chunk} < {rhi} ? {block.chunk} : {rhi} - k0;")
    _panel(p, k, d + 1)
    p.out(d, "}")
    p.out(depth + 1, "}")
    p.out(depth, "}")


def _panel(p: _Printer, k: OuterKernel, d: int) -> None:
    """Pack the chunk's panel, then run the blocks down the band: full panels with direct
    loads and stores, the last partial one (if any) staged."""
    block = k.block
    blo, bhi = k.columns
    edge = k.every_size or (int(bhi) - int(blo)) % block.panel != 0
    if edge:
        # For every size in 64 bits: b0 + NR may pass 2^31 - 1 where the columns are many.
        head = f"(int64_t)b0 + {block.panel}" if k.every_size else f"b0 + {block.panel}"
        p.out(d, f"if ({head} <= {bhi}) {{")
        if k.every_size:
            # What the test says, to gcc: the sizes are below 2^31 (the kernel ABI), so no
            # column index of the panel wraps, and gcc's copy of it is vector loads, not
            # gathers (MLP3: a quarter of its time).
            top = 2**31 - 1 - block.panel
            p.out(d + 1, f"if (b0 > {top}) __builtin_unreachable();")
        _pack_and_run(p, k, d + 1, staged=False)
        p.out(d, "} else {")
        _pack_and_run(p, k, d + 1, staged=True)
        p.out(d, "}")
    else:
        _pack_and_run(p, k, d, staged=False)


def _pack_and_run(p: _Printer, k: OuterKernel, d: int, *, staged: bool) -> None:
    plan, block = k.plan, k.block
    assert plan.packed is not None and plan.rows is not None
    n = block.panel
    if staged:
        p.out(d, f"const int _nl = {k.columns[1]} - b0;")  # the panel's columns in the output
    if k.in_place:
        rows = p.scop.shapes[plan.packed.tensor][1]
        at = f"((int64_t)(b0 / {n}) * {rows} + k0) * {n}"
        p.out(d, f"const float *restrict _bp = &{cname(plan.packed.tensor)}[{at}];")
    else:
        _pack(p, k, d, staged=staged)
    _run(p, k, d, staged=staged)


def _pack(p: _Printer, k: OuterKernel, d: int, *, staged: bool) -> None:
    """Copy the chunk's panel of P into the buffer (past the last column zeros, or in
    transposed squares the last column's row again): row after row of NR values, one row
    per step of the reduction indices."""
    plan, n = k.plan, k.block.panel
    assert plan.packed is not None
    if k.gathers:
        value = "_s0[_off[_l]]"
    else:
        lanes = k.at("(b0 + _l)") if k.packing == "runs" else k.lane("(b0 + _l)")
        value = p.expr(plan.packed, {**k.env, **lanes, **k.reduction_env()})
    if staged:
        lane = "(int64_t)b0 + _l" if k.every_size else "b0 + _l"
        value = f"{lane} < {k.columns[1]} ? {value} : 0.0f"
    if transposed_pack(plan):
        _transposed(p, k, d, value, staged=staged)
        return
    if along_reduction(plan):
        # P read along the reduction: copy its rows with unit stride
        p.out(d, f"for (int _l = 0; _l < {n}; _l++) {{")
        p.out(d + 1, f"for (int _k = 0; _k < kn; _k++) _bp[_k * {n} + _l] = {value};")
        p.out(d, "}")
        return
    if k.packing == "runs" and not staged:
        _steps(p, k, d, value, copy="run")
        return
    if k.gathers and not staged:
        # lanes in one row of P (a panel inside an output row): a plain copy at stride 1,
        # every other element of twice as many at stride 2; across output rows, each
        # vector from its two rows' runs
        for test, copy in (("_along", "run"), ("_even", "evens"), ("_two", "pairs")):
            p.out(d, f"{'if' if copy == 'run' else '} else if'} ({test}) {{")
            _steps(p, k, d + 1, value, copy=copy)
        p.out(d, "} else {")
        _steps(p, k, d + 1, value)
        p.out(d, "}")
    else:
        _steps(p, k, d, value)


def _transposed(p: _Printer, k: OuterKernel, d: int, value: str, *, staged: bool) -> None:
    """The panel from squares of `width` lanes x `width` steps: a vector along the
    reduction from each lane's row of P, transposed in registers, stored a step at a
    time. The steps past the last whole square take one more square, ending at the
    chunk's end (it writes some steps of the one before again); a chunk shorter than a
    square, `value` at lane `_l` step by step (gcc made that copy gathers and scatters in
    a kernel for every size: tbmm's 72 steps, 8 past 4 squares, a tenth of its time). In
    a staged panel a lane past the last column copies the last column's row again
    (tbmm's last panel, 10 of 16 lanes, copied element by element had cost it a third of
    its time; loaded or zeroed lane by lane, for every size, a twelfth): the blocks never
    store those lanes."""
    w, n = k.block.width, k.block.panel
    p.out(d, "int _k = 0;")
    p.out(d, f"for (; _k + {w} <= kn; _k += {w}) {{")
    _squares(p, k, d + 1, staged=staged)
    p.out(d, "}")
    p.out(d, f"if (_k < kn && kn >= {w}) {{")
    p.out(d + 1, f"_k = kn - {w};")
    _squares(p, k, d + 1, staged=staged)
    p.out(d + 1, "_k = kn;")
    p.out(d, "}")
    p.out(d, "for (; _k < kn; _k++) {")
    p.out(d + 1, f"for (int _l = 0; _l < {n}; _l++) _bp[_k * {n} + _l] = {value};")
    p.out(d, "}")


def _squares(p: _Printer, k: OuterKernel, d: int, *, staged: bool) -> None:
    """The panel's steps _k to _k + width, a square of lanes at a time."""
    plan, w, n = k.plan, k.block.width, k.block.panel
    assert plan.packed is not None
    for lb in range(0, n, w):
        p.out(d, "{")
        for i in range(w):
            lane = f"({lb + i} < _nl ? {lb + i} : _nl - 1)" if staged else f"{lb + i}"
            at = _address(p, k, {**k.lane(f"(b0 + {lane})"), plan.red: "(k0 + _k)"})
            load = f"*(const tc_vfu *)&{cname(plan.packed.tensor)}[{at}]"
            p.out(d + 1, f"tc_vf _t{i} = {load};")
        rows = _transpose(p, [f"_t{i}" for i in range(w)], d + 1)
        for t, row in enumerate(rows):
            p.out(d + 1, f"*(tc_vf *)&_bp[(_k + {t}) * {n} + {lb}] = {row};")
        p.out(d, "}")


def _transpose(p: _Printer, rows: list[str], d: int) -> list[str]:
    """Vectors holding the transpose of the square whose rows are `rows`: for each bit b
    of a lane's number, each pair of rows i and i + b (bit b of i clear) exchanges the
    lanes with bit b set in row i for those with it clear in row i + b, two shuffles per
    pair (after every bit, element (i, j) is at (j, i))."""
    w = len(rows)
    b, cur = 1, list(rows)
    while b < w:
        nxt = list(cur)
        for i in (i for i in range(w) if not i & b):
            lo = [w + (j ^ b) if j & b else j for j in range(w)]
            hi = [w + j if j & b else j ^ b for j in range(w)]
            for row, mask in ((i, lo), (i | b, hi)):
                name = f"_x{b}_{row}"
                p.out(d, f"tc_vf {name} = {shuffle(cur[i], cur[i | b], mask)};")
                nxt[row] = name
        cur, b = nxt, 2 * b
    return cur


def _steps(p: _Printer, k: OuterKernel, d: int, value: str, *, copy: str = "lanes") -> None:
    """The panel's rows, one per step of the reduction indices: `value` at lane `_l`
    ("lanes"), or copied a vector at a time from the lanes' run at `_off[0]` past column
    0, or (packed in runs) at column b0 ("run"; gcc's own vectorization of the lane copy
    shuffled pairs across the window's steps: a fifth of a 3x3 convolution's time over 64
    channels), from twice as many at stride 2 ("evens"), or from two runs per vector
    ("pairs")."""
    plan, n = k.plan, k.block.panel
    assert plan.packed is not None
    p.out(d, "float *_dst = _bp;")
    p.out(d, "for (int _k = 0; _k < kn; _k++) {")
    dd = k.open_inner(p, d + 1)
    if k.gathers or copy == "run":
        # the lanes' run starts at the panel's column b0, or `_off[0]` past column 0
        column = "0" if k.gathers else "b0"
        start = _address(p, k, {**k.at(column), **k.reduction_env()})
        p.out(dd, f"const float *_s0 = &{cname(plan.packed.tensor)}[{start}];")
    w = k.block.width
    run = "_off[0] + " if k.gathers else ""
    if copy == "evens":
        _evens(p, k, dd)
    elif copy == "pairs":
        for j in range(n // w):
            x, y = (f"*(const tc_vfu *)&_s0[{v}[{j}]]" for v in ("_va", "_vb"))
            blend = f"(tc_vf)(((tc_vi)({x}) & ~_vm[{j}]) | ((tc_vi)({y}) & _vm[{j}]))"
            p.out(dd, f"*(tc_vf *)&_dst[{j * w}] = {blend};")
    elif copy == "run":
        for j in range(0, n, w):
            p.out(dd, f"*(tc_vf *)&_dst[{j}] = *(const tc_vfu *)&_s0[{run}{j}];")
    else:
        p.out(dd, f"for (int _l = 0; _l < {n}; _l++) _dst[_l] = {value};")
    p.out(dd, f"_dst += {n};")
    k.close_inner(p, d + 1)
    p.out(d, "}")


def _evens(p: _Printer, k: OuterKernel, d: int) -> None:
    """A vector of lanes at stride 2 from two loads and a shuffle: the first load's even
    elements, then the second's odd ones, the second load starting one element early so
    that neither reads past the last lane's element (the end of P, at the last step)."""
    w = k.block.width
    picks = [2 * i for i in range(w // 2)] + [w + 2 * i + 1 for i in range(w // 2)]
    for j in range(0, k.block.panel, w):
        lo = f"*(const tc_vfu *)&_s0[_off[0] + {2 * j}]"
        hi = f"*(const tc_vfu *)&_s0[_off[0] + {2 * j + w - 1}]"
        p.out(d, f"*(tc_vf *)&_dst[{j}] = {shuffle(lo, hi, picks)};")


def _address(p: _Printer, k: OuterKernel, env: Mapping[str, str]) -> str:
    """P's linear index with the indices in `env` (the others the kernel's)."""
    packed = k.plan.packed
    assert packed is not None
    env = {**k.env, **env}
    return p.linear(packed.tensor, [p.expr(s, env) for s in packed.subscripts])


def _lane_offsets(p: _Printer, k: OuterKernel, d: int) -> None:
    """Each lane's offset from the panel's column 0 in P, for the work item (the address
    at the lane less the address at column 0, the reduction indices at 0), and whether
    the lanes lie one after the other in P (`_along`: then the panel is a plain copy) or
    at every other element (`_even`: a stride-2 window, copied by shuffles), or in two
    runs per vector (`_two`, see _pairs)."""
    zero = dict.fromkeys(k.reduction_env(), "0")
    at = _address(p, k, {**k.lane("(b0 + _l)"), **zero})
    first = _address(p, k, {**k.at("0"), **zero})
    n = k.block.panel
    p.out(d, f"int64_t _off[{n}];")
    p.out(d, f"for (int _l = 0; _l < {n}; _l++) _off[_l] = {at} - {first};")
    p.out(d, "int _along = 1, _even = 1;")
    p.out(d, f"for (int _l = 1; _l < {n}; _l++) _along &= _off[_l] == _off[0] + _l;")
    p.out(d, f"for (int _l = 1; _l < {n}; _l++) _even &= _off[_l] == _off[0] + 2 * _l;")
    _pairs(p, k, d)


def _pairs(p: _Printer, k: OuterKernel, d: int) -> None:
    """Whether every vector of the panel is at most two runs of consecutive elements in
    P, the second later in P (`_two`: a panel across output rows, stride 1), and per
    vector where each run would start at its first lane (`_va`, `_vb`) and which lanes
    take the second (`_vm`). A load at either start stays between the vector's first
    and last elements, so inside P."""
    w, vectors = k.block.width, k.block.panel // k.block.width
    p.out(d, f"int64_t _va[{vectors}], _vb[{vectors}];")
    p.out(d, f"tc_vi _vm[{vectors}];")
    p.out(d, "int _two = 1;")
    p.out(d, f"for (int _j = 0; _j < {vectors}; _j++) {{")
    p.out(d + 1, f"int _cut = {w};")
    p.out(d + 1, f"_va[_j] = _vb[_j] = _off[_j * {w}];")
    p.out(d + 1, f"for (int _l = 1; _l < {w}; _l++) {{")
    p.out(d + 2, f"const int64_t _at = _off[_j * {w} + _l] - _l;")
    p.out(d + 2, f"if (_cut == {w} && _at != _va[_j]) {{ _cut = _l; _vb[_j] = _at; }}")
    p.out(d + 2, "_two &= _at == (_l < _cut ? _va[_j] : _vb[_j]);")
    p.out(d + 1, "}")
    p.out(d + 1, "_two &= _vb[_j] >= _va[_j];")
    p.out(d + 1, f"for (int _l = 0; _l < {w}; _l++) _vm[_j][_l] = _l >= _cut ? -1 : 0;")
    p.out(d, "}")


def _run(p: _Printer, k: OuterKernel, d: int, *, staged: bool) -> None:
    """The register blocks down the band: full ones, then the last rows."""
    plan, block = k.plan, k.block
    assert plan.rows is not None
    alo, ahi = k.ranges[plan.rows]
    p.out(d, "int a0 = a_lo;")
    p.out(d, f"for (; a0 + {block.rows} <= a_hi; a0 += {block.rows}) {{")
    _block(p, k, block.rows, d + 1, staged=staged)
    p.out(d, "}")
    if k.every_size:
        # The rows left (fewer than a block) in blocks of the powers of two below it,
        # largest first: any count in at most log2(rows) blocks (one at a time, MLP3's last
        # 8 of 128 rows cost as much as its 120 others).
        size = 1 << ((block.rows - 1).bit_length() - 1) if block.rows > 1 else 0
        while size:
            p.out(d, f"if (a0 + {size} <= a_hi) {{")
            _block(p, k, size, d + 1, staged=staged)
            p.out(d + 1, f"a0 += {size};")
            p.out(d, "}")
            size //= 2
        return
    rest = (int(ahi) - int(alo)) % block.rows
    if rest:
        p.out(d, "if (a0 < a_hi) {")
        _block(p, k, rest, d + 1, staged=staged)
        p.out(d, "}")


def _target(p: _Printer, k: OuterKernel, i: int, col: str) -> str:
    """The output element at row a0 + i, column `col`."""
    assert k.plan.rows is not None
    return p.target(k.st, {**k.env, k.plan.rows: f"(a0 + {i})", **k.at(col)})


def _staged_start(p: _Printer, k: OuterKernel, rows: int, d: int) -> str | None:
    """The start of a block of the last, partial panel, staged in `_c` (rows x NR): the
    output's `_nl` columns a vector at a time while whole vectors remain, then lane by
    lane, zeros past them. Lane by lane, with its stores, tbmm's partial blocks for every
    size had run 1.4x their full ones. Returns the C condition under which the sums start
    from zeros instead (a `!` sum's first chunk), `_c` then left unwritten: zeroed and
    read back, it cost tbmm's kernel for every size 3%; None where they never do."""
    block = k.block
    w, n = block.width, block.panel
    p.out(d, f"float _c[{rows * n}] {_aligned(block)};")
    plain = k.plan.start is None
    guarded = plain and k.first != "0"  # "0": the sums always start from the output's
    if guarded:
        p.out(d, f"if (!({k.first})) {{")
    dd = d + 1 if guarded else d
    if plain:
        zeros = "*(tc_vf *)&_c[_l] = (tc_vf){0};"
        p.out(dd, f"for (int _l = 0; _l < {rows * n}; _l += {w}) {zeros}")
    for i in range(rows):
        old = _target(p, k, i, "(b0 + _l)")
        first, vfirst = (k.start(p, i, "(b0 + _l)", vector=v) for v in (False, True))
        whole = (
            f"*(const tc_vfu *)&{old}"
            if plain
            else f"{k.first} ? {vfirst} : *(const tc_vfu *)&{old}"
        )
        lane = old if plain else f"{k.first} ? {first} : {old}"
        rest = "" if plain else f"for (; _l < {n}; _l++) _c[{i * n} + _l] = 0.0f;"
        vector, scalar = f"*(tc_vfu *)&_c[{i * n} + _l] = {whole};", f"_c[{i * n} + _l] = {lane};"
        _by_vectors(p, k, dd, vector, scalar, rest)
    if guarded:
        p.out(d, "}")
    return k.first if guarded else None


def _by_vectors(
    p: _Printer, k: OuterKernel, d: int, vector: str, scalar: str, rest: str = ""
) -> None:
    """The staged panel's `_nl` columns: `vector` at `_l` while a whole vector remains,
    then `scalar` lane by lane, then `rest` (if any) past them. For every size, the lanes
    past the last whole vector are one more vector, ending at the last column, where the
    panel has a vector's columns (it copies some lanes of the one before again; `vector`
    may not assume `_l` a multiple of the width): lane by lane, tbmm's 10 lanes cost its
    kernel for every size 4% (specialised, gcc made the lane copy permutes of the block's
    registers, and the vector 6% slower, through `_c`)."""
    w = k.block.width
    p.out(d, "{ int _l = 0;")
    p.out(d + 1, f"for (; _l + {w} <= _nl; _l += {w}) {vector}")
    if k.every_size:
        p.out(d + 1, f"if (_l < _nl && _nl >= {w}) {{ _l = _nl - {w}; {vector} _l = _nl; }}")
    p.out(d + 1, f"for (; _l < _nl; _l++) {scalar}")
    if rest:
        p.out(d + 1, rest)
    p.out(d, "}")


def _block(p: _Printer, k: OuterKernel, rows: int, d: int, *, staged: bool) -> None:
    """rows x NR outputs at (a0, b0) over the chunk: accumulators in vector registers,
    one broadcast of X and NR / width loads of the panel per reduction step."""
    plan, block = k.plan, k.block
    assert plan.scalar is not None and plan.rows is not None
    w, n = block.width, block.panel
    accs = [[f"c{i}_{j}" for j in range(block.vectors)] for i in range(rows)]
    zero = _staged_start(p, k, rows, d) if staged else None
    zeros = f"{zero} ? (tc_vf){{0}} : " if zero else ""
    for i, row in enumerate(accs):
        for j, acc in enumerate(row):
            if staged:
                p.out(d, f"tc_vf {acc} = {zeros}*(const tc_vf *)&_c[{i * n + j * w}];")
            else:
                col = f"(b0 + {j * w})"
                old = f"*(const tc_vfu *)&{_target(p, k, i, col)}"
                first = k.start(p, i, col, vector=True)
                p.out(d, f"tc_vf {acc} = {k.first} ? {first} : {old};")
    p.out(d, "const float *_src = _bp;")
    # The reduction index itself runs (not k0 + _k, which may wrap as far as gcc knows:
    # for every size it kept an index per row of X: tbmm's loop 29 instructions, now 23).
    p.out(d, "for (int _r = k0; _r < k0 + kn; _r++) {")
    dd = k.open_inner(p, d + 1)
    vf = "tc_vfu" if k.in_place else "tc_vf"  # an array in place is aligned to its floats
    loads = {f"*(const {vf} *)&_src[{j * w}]": f"_v{j}" for j in range(block.vectors)}
    p.pinned_loads(loads, dd, pin=not staged or spare_registers(block, p.unit) >= STAGED_SPARE)
    for i, row in enumerate(accs):
        x = p.expr(plan.scalar, {**k.env, plan.rows: f"(a0 + {i})", **k.reduction_env("_r")})
        steps = " ".join(f"{acc} += _s * _v{j};" for j, acc in enumerate(row))
        p.out(dd, f"{{ const float _s = (float)({x}); {steps} }}")
    p.out(dd, f"_src += {n};")
    k.close_inner(p, d + 1)
    p.out(d, "}")
    if staged:
        _store(p, k, accs, d, "_c")
        # Through a pointer to the row's first column (the panel's columns lie
        # contiguously in the output): indexed by b0 + _l, which wraps as far as gcc
        # knows, the lane-by-lane copy became gathers and scatters in a kernel for every
        # size (tbmm: a twentieth of its time).
        for i in range(rows):
            p.out(d, f"float *_row{i} = &{_target(p, k, i, 'b0')};")
            held = f"_c[{i * n} + _l]"
            whole = f"*(tc_vfu *)&_row{i}[_l] = *(const tc_vfu *)&{held};"
            _by_vectors(p, k, d, whole, f"_row{i}[_l] = {held};")
        if plan.end is not None:
            p.out(d, f"if (k0 + kn == {k.ranges[plan.red][1]}) {{")
            _end(p, k, rows, d + 1, staged=True, held="_c" if plan.end_on_block else None)
            p.out(d, "}")
    elif plan.end_on_block:
        # the final sums go through the block's buffer, which the end reads by vectors
        p.out(d, f"if (k0 + kn == {k.ranges[plan.red][1]}) {{")
        p.out(d + 1, f"float _e[{rows * n}] {_aligned(block)};")
        _store(p, k, accs, d + 1, "_e")
        if plan.keep:
            _store(p, k, accs, d + 1, None)
        _end(p, k, rows, d + 1, staged=False, held="_e")
        p.out(d, "} else {")
        _store(p, k, accs, d + 1, None)
        p.out(d, "}")
    else:
        _store(p, k, accs, d, None)
        if plan.end is not None:
            p.out(d, f"if (k0 + kn == {k.ranges[plan.red][1]}) {{")
            _end(p, k, rows, d + 1, staged=False, held=None)
            p.out(d, "}")


# A staged block pins its panel's vectors only where the full block leaves this many
# vector registers free. With both blocks' vectors pinned in one function, gcc 12 kept an
# accumulator of AVX2's full 6 x 16 block (15 of 16 registers) on the stack: a chain
# through memory each step, a 1x1 convolution over 196 columns 1.6x slower. Unpinned in
# Zen 4's 4 x 32 block (11 of 32), it folded the loads into every FMA, 8 vector loads a
# step for 2, and tbmm, whose 26 columns make every panel staged, ran 1.25x slower.
STAGED_SPARE = 2


def _store(p: _Printer, k: OuterKernel, accs: list[list[str]], d: int, buffer: str | None) -> None:
    """The accumulators into `buffer` (rows x NR, row after row), or (None) the output."""
    n, w = k.block.panel, k.block.width
    for i, row in enumerate(accs):
        for j, acc in enumerate(row):
            if buffer is not None:
                p.out(d, f"*(tc_vf *)&{buffer}[{i * n + j * w}] = {acc};")
            else:
                p.out(d, f"*(tc_vfu *)&{_target(p, k, i, f'(b0 + {j * w})')} = {acc};")


def _end(p: _Printer, k: OuterKernel, rows: int, d: int, *, staged: bool, held: str | None) -> None:
    """The elementwise statement that follows the contraction, on the block's final sums
    while they are in L1 (the caller tests that this chunk is the last): read from
    `held`, the block's buffer (rows x NR, a vector of columns at a time), or else from
    the output, lane by lane."""
    plan = k.plan
    assert plan.end is not None and plan.rows is not None
    end, src = plan.end, k.st.source
    limit = "_l < _nl" if staged else f"_l < {k.block.panel}"
    columns = k.at("(b0 + _l)") if held is not None else k.lane("(b0 + _l)")
    old_box, old_name = p.private.get(src.tensor), p.renamed.get(src.tensor)
    if held is not None:
        sizes = {plan.rows: rows, plan.cols: k.block.panel}
        offsets = {plan.rows: "a0", plan.cols: "b0"}
        p.private[src.tensor] = (
            tuple(offsets.get(v, "0") for v in src.lhs),
            tuple(sizes.get(v, 1) for v in src.lhs),
        )
        p.renamed[src.tensor] = held
        p.out(d, "#pragma omp simd")
    p.out(d, f"for (int _l = 0; {limit}; _l++) {{")
    for i in range(rows):
        env = {**k.env, plan.rows: f"(a0 + {i})", **columns}
        target = f"{cname(end.tensor)}[{_output(p, end.tensor, [env[v] for v in end.lhs])}]"
        value = store(p.expr(end.rhs, env), p.program.tensors[end.tensor].dtype, end.rhs.dtype)
        p.out(d + 1, f"{target} = {value};")
    p.out(d, "}")
    p.private.pop(src.tensor, None)
    p.renamed.pop(src.tensor, None)
    if old_box is not None:
        p.private[src.tensor] = old_box
    if old_name is not None:
        p.renamed[src.tensor] = old_name


def _output(p: _Printer, tensor: str, subs: list[str]) -> str:
    """The linear index of an element of `tensor` in the tensor itself, not in a buffer
    that holds a box of it for reading."""
    box = p.private.pop(tensor, None)
    text = p.linear(tensor, subs)
    if box is not None:
        p.private[tensor] = box
    return text
