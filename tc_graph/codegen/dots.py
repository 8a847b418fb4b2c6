"""Contraction kernels on the CPU, as poly/contraction.py plans them and
forms.ContractionKernel decides them: the outer-product form (printed by codegen/outer.py)
and the dot-product form: R x C tiles of outputs whose vector dot products share operand
loads, in chunks of the reduction that keep a tile's operand rows in L1, for fixed sizes
and for every size. Also the 1 x C dot tiles of a dot product inside a fused nest
(forms.DotTile). Functions of the C printer (codegen/c.py), as outer.py's are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..poly.contraction import Contraction, window
from ..poly.scop import ScopStmt
from .forms import ContractionKernel, DotTile, box, box_text, loop_box
from .outer import OuterKernel, outer_items, print_kernel
from .prelude import shuffle

if TYPE_CHECKING:
    from .c import _Printer

L1_BYTES = 48 * 1024  # the L1 a dot-product kernel's reduction chunk is sized for

# Vectors of the longest reduction a dot-product kernel for every size also has a copy
# for (`sample_reduction`): gcc unrolls a loop of up to about this many tile steps whole.
SHORT_DOT = 8

_Body = Callable[[int, int], None]  # body(block size, depth): the code of one block


def _trips(lo: int | str, hi: int | str) -> int | str:
    """The iterations of a loop over [lo, hi): a number, or C text of the sizes."""
    if isinstance(lo, int) and isinstance(hi, int):
        return hi - lo
    return f"({hi}) - ({lo})"


def _block_count(lo: int | str, hi: int | str, size: int) -> int | str:
    """The blocks `blocked_loop` runs over [lo, hi): a number, or C text of the sizes."""
    if isinstance(lo, int) and isinstance(hi, int):
        return sum(n for n, _ in _blocks(lo, hi, size))
    return _block_counts(lo, hi, size)[2]


def _block_counts(lo: int | str, hi: int | str, size: int) -> tuple[str, str, str]:
    """The full blocks of `size` in [lo, hi) given as C, the elements left after them,
    and all blocks when those are blocks of the powers of two below `size` (one per bit
    of what is left): C expressions of the sizes."""
    extent = f"max((int64_t)0, (int64_t)({hi}) - ({lo}))"
    full, rest = f"({extent} / {size})", f"({extent} % {size})"
    return full, rest, f"({full} + __builtin_popcountll({rest}))"


def _blocks(lo: int, hi: int, size: int) -> list[tuple[int, int]]:
    """[lo, hi) in blocks: (how many, of what size), full blocks first."""
    full, rest = divmod(max(0, hi - lo), size)
    return [b for b in ((full, size), (1, rest)) if b[0] and b[1]]


def contraction(p: _Printer, form: ContractionKernel, depth: int) -> None:
    """The kernel of a contraction (poly/contraction.py): in the outer-product form
    (codegen/outer.py), or R x C tiles of outputs whose vector dot products share
    operand loads, columns outermost so a tile's column operands stay in cache while the
    rows stream."""
    st, env, ranges, outer = form.st, form.env, form.ranges, list(form.outer)
    plan = st.contraction
    assert plan is not None
    names = {v: f"_o{k}" for k, v in enumerate(v for v in st.source.lhs if v not in env)}
    if form.blocking is not None:
        block, packed = form.blocking
        bounds = loop_box(p.scop, st)
        kernel = OuterKernel(
            st, plan, block, bounds, {**env, **names}, packed, window(plan, ranges)
        )
        print_kernel(p, kernel, outer, depth)
        return
    names.update({plan.rows: "_a", plan.cols: "_b", plan.red: "_r"})
    t = _Tiles(p, st, plan, {**env, **names})
    if p.scop.symbolic is not None:
        contraction_every_size(t, outer, depth)
        return
    rows_cap, cols_cap = p.options.dot_tile
    (alo, ahi), (blo, bhi), (rlo, rhi) = (ranges[v] for v in (plan.rows, plan.cols, plan.red))
    p.out(depth, "{")
    parallel = bool(p.options.parallel_depth)
    d = outer_loops(p, t.env, outer, ranges, depth + 1)
    # Full tiles, then the edge tiles with what is left of each extent.
    chunk = dot_chunk(p)
    chunks = [(lo, min(lo + chunk, rhi)) for lo in range(rlo, rhi, chunk)] or [(rlo, rhi)]

    def column_block(cols_n: int, dd: int) -> None:
        for c, (clo, chi) in enumerate(chunks):

            def row_block(
                rows_n: int, ddd: int, clo: int = clo, chi: int = chi, c: int = c
            ) -> None:
                t.dot_tile(rows_n, cols_n, clo, chi, ddd, first=c == 0)

            blocked_loop(p, "a", alo, ahi, rows_cap, dd, row_block)

    blocked_loop(p, "b", blo, bhi, cols_cap, d, column_block, parallel=parallel and not outer)
    close_kernel(p, outer, depth)


def dot_chunk(p: _Printer) -> int:
    """Steps of a dot-product kernel's reduction chunk: the operand rows of one tile
    (rows + columns of them) fit in about half of L1 by default, so the column rows
    stay there while the row tiles stream."""
    rows_cap, cols_cap = p.options.dot_tile
    return p.options.reduction_chunk or max(
        16, (L1_BYTES // 2) // (4 * (rows_cap + cols_cap)) // 16 * 16
    )


def close_kernel(p: _Printer, outer: Sequence[str], depth: int) -> None:
    """Close a contraction kernel opened at `depth` with its outer output loops."""
    for k in reversed(range(len(outer))):
        p.out(depth + 1 + k, "}")
    p.out(depth, "}")


def outer_loops(
    p: _Printer,
    names: Mapping[str, str],
    outer: Sequence[str],
    bounds: Mapping[str, tuple[int | str, int | str]],
    depth: int,
) -> int:
    """Open the loops of a contraction kernel's output iterators outside its tiles (the
    first parallel where the options say); the depth inside them."""
    for k, v in enumerate(outer):
        lo, hi = bounds[v]
        if k == 0 and p.options.parallel_depth:
            p.parallel_loop(depth + k, names[v], lo, _trips(lo, hi), 1, simd=False)
        else:
            p.out(depth + k, f"for (int {names[v]} = {lo}; {names[v]} < {hi}; {names[v]}++) {{")
    return depth + len(outer)


def contraction_every_size(t: _Tiles, outer: list[str], depth: int) -> None:
    """A dot-product contraction kernel in a kernel for every size: R x C tiles, then
    what is left of each extent, the reduction in chunks as `contraction` sizes them
    (at least one, for a `!` over no elements)."""
    p, st, plan = t.p, t.st, t.plan
    assert plan.rows is not None
    rows_cap, cols_cap = p.options.dot_tile
    (rlo, rhi) = box_text(p.scop, st, plan.red)
    chunk = dot_chunk(p)
    p.out(depth, "{")
    parallel = bool(p.options.parallel_depth)
    d = outer_loops(p, t.env, outer, loop_box(p.scop, st), depth + 1)

    alo, ahi = box_text(p.scop, st, plan.rows)
    sample = sample_reduction(p, st)

    def column_block(cols_n: int, dd: int) -> None:
        def row_block(rows_n: int, ddd: int) -> None:
            t.dot_tile(rows_n, cols_n, "_k0", "_k1", ddd, first=first)

        def sample_block(rows_n: int, ddd: int) -> None:
            assert sample is not None
            t.dot_tile(rows_n, cols_n, *sample, ddd, first=True)

        if sample is not None:
            p.out(dd, f"if (({rhi}) - ({rlo}) == {sample[1] - sample[0]}) {{")
            blocked_loop(p, "a", alo, ahi, rows_cap, dd + 1, sample_block)
            p.out(dd, "} else")
        first = f"_k0 == {rlo}"
        p.out(dd, f"for (int _k0 = {rlo}; {first} || _k0 < {rhi}; _k0 += {chunk}) {{")
        p.out(dd + 1, f"const int _k1 = min(_k0 + {chunk}, {rhi});")
        blocked_loop(p, "a", alo, ahi, rows_cap, dd + 1, row_block)
        p.out(dd, "}")

    blo, bhi = box_text(p.scop, st, plan.cols)
    blocked_loop(p, "b", blo, bhi, cols_cap, d, column_block, parallel=parallel and not outer)
    close_kernel(p, outer, depth)


def sample_reduction(p: _Printer, st: ScopStmt) -> tuple[int, int] | None:
    """The sample's reduction range [lo, hi) of dot-product tiles for every size, where
    a copy specialised to it pays (as `specialised_trips` for short loops): its lower
    bound is the same at every size, its upper one is not, and at the sample it spans
    at most SHORT_DOT vectors, so gcc unrolls the copy's vector loop whole and its last
    vector is masked by a constant (in one chunk: chunks only keep long reductions in
    cache). tbmm's 72: 7% faster than the loop over a run-time range. None elsewhere."""
    plan = st.contraction
    assert plan is not None
    k = st.iterators.index(plan.red)
    lo, hi = box(p.scop, st)[plan.red]
    short = hi - lo <= SHORT_DOT * p.options.vector_width
    varies = st.domain.dim_min(k).is_cst() and not st.domain.dim_max(k).is_cst()
    return (lo, hi) if short and varies else None


def blocked_loop(
    p: _Printer,
    axis: str,
    lo: int | str,
    hi: int | str,
    size: int,
    depth: int,
    body: _Body,
    *,
    parallel: bool = False,
) -> None:
    """for `axis`i over the blocks of [lo, hi), `axis`0 the block's first index and
    body(block size, depth) its code: full blocks of `size`, then the rest; in a kernel
    for every size ([lo, hi) as C), what is left in blocks of the powers of two below
    `size`, largest first (a tile of 1 x 4 dot products loads more per product than one
    of 2 x 4: tbmm's last 2 of 26 rows)."""
    counter, origin = f"{axis}i", f"{axis}0"
    count = _block_count(lo, hi, size)
    if parallel:
        p.parallel_loop(depth, counter, 0, count, 1, simd=False)
    else:
        p.out(depth, f"for (int {counter} = 0; {counter} < {count}; {counter}++) {{")
    if isinstance(lo, int) and isinstance(hi, int):
        done = 0
        for k, (blocks, n) in enumerate(_blocks(lo, hi, size)):
            p.out(depth + 1, f"{'if' if k == 0 else '} else if'} ({counter} < {done + blocks}) {{")
            p.out(
                depth + 2, f"const int {origin} = {lo + done * size} + ({counter} - {done}) * {n};"
            )
            body(n, depth + 2)
            done += blocks
    else:
        full, rest, _ = _block_counts(lo, hi, size)
        p.out(depth + 1, f"if ({counter} < {full}) {{")
        p.out(depth + 2, f"const int {origin} = {lo} + {counter} * {size};")
        body(size, depth + 2)
        if size > 1:
            p.out(depth + 1, "} else {")
            rest_blocks(p, axis, (lo, full, rest), size, depth + 2, body)
    p.out(depth + 1, "}")
    p.out(depth, "}")


def rest_blocks(
    p: _Printer, axis: str, at: tuple[int | str, str, str], size: int, depth: int, body: _Body
) -> None:
    """The block of a counter past the full ones: the (counter - full)-th bit set in
    what is left (`at`: lo, full, rest as C), largest first, its size a constant of
    the body."""
    lo, full, rest = at
    counter, origin = f"{axis}i", f"{axis}0"
    top = 1 << ((size - 1).bit_length() - 1)
    t, n = f"_{counter}t", f"_{counter}n"
    p.out(depth, f"int {t} = {counter} - {full}, {n} = {top};")
    p.out(depth, f"int {origin} = {lo} + {full} * {size};")
    p.out(depth, f"for (;; {n} >>= 1) if ({rest} & {n}) {{ if (!{t}--) break; {origin} += {n}; }}")
    while top > 1:
        p.out(depth, f"if ({n} == {top}) {{")
        body(top, depth + 1)
        p.out(depth, "} else")
        top //= 2
    p.out(depth, "{")
    body(1, depth + 1)
    p.out(depth, "}")


def contraction_trips(p: _Printer, form: ContractionKernel) -> int | str | None:
    """The iterations of the parallel loop `contraction` prints (its first outer
    output loop, else its blocks of columns; C text of the sizes in a kernel for every
    size); None when it prints none."""
    if not p.options.parallel_depth:
        return None
    st, outer = form.st, list(form.outer)
    assert st.contraction is not None
    bounds = loop_box(p.scop, st)
    if form.blocking is not None:
        return outer_items(form.blocking[0], bounds, outer, st.contraction)[0]
    if outer:
        return _trips(*bounds[outer[0]])
    return _block_count(*bounds[st.contraction.cols], p.options.dot_tile[1])


def inner_dot(p: _Printer, dot: DotTile, depth: int) -> None:
    """1 x C tiles of a fused nest's dot product's outputs sharing the loads of the
    operands they have in common."""
    plan = dot.st.contraction
    assert plan is not None
    t = _Tiles(p, dot.st, plan, {**dot.env, **dot.names})
    if p.scop.symbolic is not None:
        dots_every_size(t, dot.cap, depth)
        return
    ranges = box(p.scop, dot.st)
    (blo, bhi), (rlo, rhi) = ranges[plan.cols], ranges[plan.red]

    def tile(cols_n: int, d: int) -> None:
        t.dot_tile(1, cols_n, rlo, rhi, d, first=False)

    p.out(depth, "{")
    blocked_loop(p, "b", blo, bhi, dot.cap, depth + 1, tile)
    p.out(depth, "}")


def dots_every_size(t: _Tiles, cap: int, depth: int) -> None:
    """inner_dot in a kernel for every size: tiles of `cap` outputs, then one output at
    a time, as many of each as the sizes give."""
    p, st, plan = t.p, t.st, t.plan
    blo, bhi = box_text(p.scop, st, plan.cols)
    rlo, rhi = box_text(p.scop, st, plan.red)
    sample = sample_reduction(p, st)
    reductions: list[tuple[int | str, int | str]] = [(rlo, rhi)]
    if sample is not None:
        p.out(depth, f"if (({rhi}) - ({rlo}) == {sample[1] - sample[0]})")
        reductions.insert(0, sample)
    for k, (lo, hi) in enumerate(reductions):
        if k:
            p.out(depth, "else")
        p.out(depth, f"{{ int b0 = {blo};")
        for n, step in ((cap, f"b0 + {cap} <= {bhi}"), (1, f"b0 < {bhi}")):
            p.out(depth + 1, f"for (; {step}; b0 += {n}) {{")
            t.dot_tile(1, n, lo, hi, depth + 2, first=False)
            p.out(depth + 1, "}")
        p.out(depth, "}")


@dataclass(frozen=True)
class _Tiles:
    """The dot-product tiles of one contraction statement: the printer, the statement
    and its plan, and the C names of its iterators outside a tile."""

    p: _Printer
    st: ScopStmt
    plan: Contraction
    env: Mapping[str, str]

    def at(self, i: int, j: int) -> dict[str, str]:
        """The iterators of output (i, j) of the tile at (a0, b0)."""
        out = {**self.env, self.plan.cols: f"(b0 + {j})"}
        if self.plan.rows is not None:
            out[self.plan.rows] = f"(a0 + {i})"
        return out

    def dot_tile(
        self, rows_n: int, cols_n: int, rlo: int | str, rhi: int | str, d: int, *, first: bool | str
    ) -> None:
        """The rows_n x cols_n outputs at (a0, b0) over reductions [rlo, rhi): vector dot
        products sharing loads, a masked last vector (where the range is numbers), then
        the lane sums and the tail. `first`: the first part of the reduction (a C
        condition where the sizes say)."""
        p = self.p
        width = p.options.vector_width
        if isinstance(rlo, str) or isinstance(rhi, str):
            lo, hi = box(p.scop, self.st)[self.plan.red]  # the sample's, for choices only
            fixed = False
        else:
            lo, hi, fixed = rlo, rhi, True
        tile = [(i, j) for i in range(rows_n) for j in range(cols_n)]
        for i, j in tile:
            p.out(d, f"tc_vf acc{i}_{j} = {{0}};")
        p.out(d, f"int r0 = {rlo};")
        p.out(d, f"for (; r0 + {width} <= {rhi}; r0 += {width}) {{")
        self.step(tile, d + 1, mask=None)
        p.out(d, "}")
        if fixed:
            assert isinstance(rlo, int) and isinstance(rhi, int)
            self.masked_last(tile, (rlo, rhi), d)
        else:
            self.last_every_size(tile, (rlo, rhi), d)
        accs = [f"acc{i}_{j}" for i, j in tile]
        # Short dot products are dominated by their horizontal sums: reduce them together.
        # (Long ones measured faster with one sum each: less pressure on the registers.)
        sums = lane_sums(p, accs, d) if hi - lo < 256 else [f"tc_hsum({a})" for a in accs]
        for (i, j), total in zip(tile, sums, strict=True):
            self.finish(i, j, total, rhi if fixed else None, d, first=first)

    def masked_last(self, tile: list[tuple[int, int]], bounds: tuple[int, int], d: int) -> None:
        """The last partial vector of the dot products, where the range holds a whole
        vector: one more step over the final `width` elements, the lanes the loop already
        summed masked off by a constant mask."""
        width = self.p.options.vector_width
        rlo, rhi = bounds
        tail = (rhi - rlo) % width
        if not tail or rhi - rlo < width:
            return
        lanes = ", ".join("-1" if k >= width - tail else "0" for k in range(width))
        self.p.out(d, f"{{ const tc_vi mask = {{{lanes}}}; r0 = {rhi - width};")
        self.step(tile, d + 1, mask="mask")
        self.p.out(d, f"r0 = {rhi}; }}")

    def last_every_size(
        self, tile: list[tuple[int, int]], bounds: tuple[str | int, str | int], d: int
    ) -> None:
        """The elements the vector loop left, in a kernel for every size: a masked step
        over the final `width` (the mask computed from the lanes left) where the range
        holds a vector, else one element at a time into lane 0. Either way the range ends
        here, so no output has a scalar tail of its own (on short reductions such as
        tbmm's 72, sixteen tails cost as much as the vector loop)."""
        p = self.p
        width = p.options.vector_width
        rlo, rhi = bounds
        index = ", ".join(map(str, range(width)))
        p.out(d, f"if (r0 < {rhi}) {{")
        p.out(d + 1, f"if (({rhi}) - ({rlo}) >= {width}) {{")
        p.out(
            d + 2,
            f"const tc_vi mask = (tc_vi){{{index}}} >= (int)({width} - (({rhi}) - r0)); "
            f"r0 = {rhi} - {width};",
        )
        self.step(tile, d + 2, mask="mask")
        p.out(d + 1, f"}} else for (; r0 < {rhi}; r0++) {{")
        for i, j in tile:
            one = p.expr(self.st.source.rhs, {**self.at(i, j), self.plan.red: "r0"})
            p.out(d + 2, f"acc{i}_{j}[0] += (float)({one});")
        p.out(d + 1, "}")
        p.out(d, f"r0 = {rhi}; }}")

    def step(self, tile: list[tuple[int, int]], depth: int, *, mask: str | None) -> None:
        """One vector step, at r0, of every dot product of a tile; each operand vector is
        loaded once into a local and shared by the products that use it."""
        loads: dict[str, str] = {}
        updates = []
        for i, j in tile:
            vec = self.p.vector_rhs(self.st, self.at(i, j), self.plan.red, "r0", loads)
            assert vec is not None, "plan() admits only vector forms"
            # Masked lanes add +0 (a selection of bits: 0 * inf would be NaN).
            masked = vec if mask is None else f"(tc_vf)((tc_vi)({vec}) & {mask})"
            updates.append(f"acc{i}_{j} += {masked};")
        self.p.pinned_loads(loads, depth)
        for u in updates:
            self.p.out(depth, u)

    def finish(
        self, i: int, j: int, total: str, end: int | str | None, d: int, *, first: bool | str
    ) -> None:
        """Add the scalar tail of output (i, j)'s dot product from r0 to `end` (None: no
        tail) and store it (the first part of a `!` reduction starts from 0, any other
        from the stored value; `first` may be a C condition)."""
        p, src, env = self.p, self.st.source, self.at(i, j)
        target = p.target(self.st, env)
        tail = p.expr(src.rhs, {**env, self.plan.red: "_t"})
        start = target
        if src.init and isinstance(first, str):
            start = f"(({first}) ? 0.0f : {target})"
        elif src.init and first:
            start = "0.0f"
        if end is None:
            p.out(d, f"{target} = {start} + {total};")
            return
        p.out(d, f"{{ float s = {start} + {total};")
        p.out(d + 1, f"for (int _t = r0; _t < {end}; _t++) s += (float)({tail});")
        p.out(d + 1, f"{target} = s; }}")


def lane_sums(p: _Printer, vectors: list[str], depth: int) -> list[str]:
    """Expressions for the lane sums of each vector. A power-of-two count of them up to
    the vector width is reduced together, halving lanes per vector at each step (one
    shuffle pair and one add per two vectors), not one vector at a time; other counts
    in such groups."""
    width = p.options.vector_width
    n = len(vectors)
    if n & (n - 1) or n > width:
        # Any other count in power-of-two groups, largest first (20: 16 and 4).
        group = min(width, 1 << (n.bit_length() - 1))
        return lane_sums(p, vectors[:group], depth) + lane_sums(p, vectors[group:], depth)
    if n == 1:
        return [f"tc_hsum({vectors[0]})"]
    level = list(vectors)
    lanes = width  # lanes each source occupies in the vectors of `level`
    while len(level) > 1:
        half = lanes // 2
        per = width // lanes  # sources per input vector
        lo, hi = [], []
        for side in range(2):
            for q in range(per):
                for t in range(half):
                    base = side * width + q * lanes
                    lo.append(base + t)
                    hi.append(base + half + t)
        nxt = []
        for k in range(0, len(level), 2):
            p.tmp += 1
            name = f"_s{p.tmp}"
            a, b = level[k], level[k + 1]
            p.out(depth, f"tc_vf {name} = {shuffle(a, b, lo)} + {shuffle(a, b, hi)};")
            nxt.append(name)
        level, lanes = nxt, half
    (total,) = level
    while lanes > 1:
        half = lanes // 2
        mask = [k + half if k % lanes < half else k for k in range(width)]
        p.out(depth, f"{total} += {shuffle(total, total, mask)};")
        lanes = half
    return [f"{total}[{k * (width // n)}]" for k in range(n)]
