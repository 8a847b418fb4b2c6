"""Contraction kernels on the CPU, as poly/contraction.py plans them and
forms.ContractionKernel decides them: the outer-product form (printed by codegen/outer.py)
and the dot-product form: R x C tiles of outputs whose vector dot products share operand
loads, in chunks of the reduction that keep a tile's operand rows in L1, for fixed sizes
and for every size. Also the 1 x C dot tiles of a dot product inside a fused nest
(forms.DotTile). Functions of the C printer (codegen/c.py), as outer.py's are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from ..poly.contraction import window
from ..poly.scop import ScopStmt
from .expr import cname
from .forms import ContractionKernel, DotTile, box, box_text, loop_box
from .outer import OuterKernel, outer_items, print_kernel
from .prelude import shuffle

if TYPE_CHECKING:
    from .c import _Printer

L1_BYTES = 48 * 1024  # the L1 a dot-product kernel's reduction chunk is sized for

# Vectors of the longest reduction a dot-product kernel for every size also has a copy
# for (`sample_reduction`): gcc unrolls a loop of up to about this many tile steps whole.
SHORT_DOT = 8


def _block_counts(lo: str, hi: str, size: int) -> tuple[str, str, str]:
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
    if p.scop.symbolic is not None:
        contraction_every_size(p, st, env, names, outer, depth)
        return
    rows_cap, cols_cap = p.options.dot_tile
    (alo, ahi), (blo, bhi), (rlo, rhi) = (ranges[v] for v in (plan.rows, plan.cols, plan.red))
    p.out(depth, "{")
    parallel = bool(p.options.parallel_depth)
    d = outer_loops(p, names, outer, ranges, depth + 1)
    # Full tiles, then the edge tiles with what is left of each extent.
    chunk = dot_chunk(p)
    chunks = [(lo, min(lo + chunk, rhi)) for lo in range(rlo, rhi, chunk)] or [(rlo, rhi)]

    def column_block(cols_n: int, dd: int) -> None:
        for c, (clo, chi) in enumerate(chunks):

            def row_block(
                rows_n: int, ddd: int, clo: int = clo, chi: int = chi, c: int = c
            ) -> None:
                dot_tile(p, st, env, names, rows_n, cols_n, clo, chi, ddd, first=c == 0)

            blocked_loop(p, "ai", "a0", alo, ahi, rows_cap, dd, row_block)

    blocked_loop(
        p, "bi", "b0", blo, bhi, cols_cap, d, column_block, parallel=parallel and not outer
    )
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
        if isinstance(lo, int) and isinstance(hi, int):
            count: int | str = hi - lo
        else:
            count = f"({hi}) - ({lo})"
        if k == 0 and p.options.parallel_depth:
            p.parallel_loop(depth + k, names[v], lo, count, 1, simd=False)
        else:
            p.out(depth + k, f"for (int {names[v]} = {lo}; {names[v]} < {hi}; {names[v]}++) {{")
    return depth + len(outer)


def contraction_every_size(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    names: Mapping[str, str],
    outer: list[str],
    depth: int,
) -> None:
    """A dot-product contraction kernel in a kernel for every size: R x C tiles, then
    what is left of each extent, the reduction in chunks as `contraction` sizes them
    (at least one, for a `!` over no elements)."""
    plan = st.contraction
    assert plan is not None and plan.rows is not None
    rows_cap, cols_cap = p.options.dot_tile
    (rlo, rhi) = box_text(p.scop, st, plan.red)
    chunk = dot_chunk(p)
    p.out(depth, "{")
    parallel = bool(p.options.parallel_depth)
    d = outer_loops(p, names, outer, loop_box(p.scop, st), depth + 1)

    alo, ahi = box_text(p.scop, st, plan.rows)
    sample = sample_reduction(p, st)

    def column_block(cols_n: int, dd: int) -> None:
        def row_block(rows_n: int, ddd: int) -> None:
            dot_tile(p, st, env, names, rows_n, cols_n, "_k0", "_k1", ddd, first=first)

        def sample_block(rows_n: int, ddd: int) -> None:
            assert sample is not None
            dot_tile(p, st, env, names, rows_n, cols_n, *sample, ddd, first=True)

        if sample is not None:
            p.out(dd, f"if (({rhi}) - ({rlo}) == {sample[1] - sample[0]}) {{")
            blocks_every_size(p, "ai", "a0", alo, ahi, rows_cap, dd + 1, sample_block)
            p.out(dd, "} else")
        first = f"_k0 == {rlo}"
        p.out(dd, f"for (int _k0 = {rlo}; {first} || _k0 < {rhi}; _k0 += {chunk}) {{")
        p.out(dd + 1, f"const int _k1 = min(_k0 + {chunk}, {rhi});")
        blocks_every_size(p, "ai", "a0", alo, ahi, rows_cap, dd + 1, row_block)
        p.out(dd, "}")

    blo, bhi = box_text(p.scop, st, plan.cols)
    blocks_every_size(
        p, "bi", "b0", blo, bhi, cols_cap, d, column_block, parallel=parallel and not outer
    )
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


def blocks_every_size(
    p: _Printer,
    counter: str,
    origin: str,
    lo: str,
    hi: str,
    size: int,
    depth: int,
    body: Callable[[int, int], None],
    *,
    parallel: bool = False,
) -> None:
    """blocked_loop over [lo, hi) given as C: full blocks of `size`, then what is left
    in blocks of the powers of two below `size`, largest first (a tile of 1 x 4 dot
    products loads more per product than one of 2 x 4: tbmm's last 2 of 26 rows)."""
    full, rest, count = _block_counts(lo, hi, size)
    if parallel:
        p.parallel_loop(depth, counter, 0, count, 1, simd=False)
    else:
        p.out(depth, f"for (int {counter} = 0; {counter} < {count}; {counter}++) {{")
    p.out(depth + 1, f"if ({counter} < {full}) {{")
    p.out(depth + 2, f"const int {origin} = {lo} + {counter} * {size};")
    body(size, depth + 2)
    if size > 1:
        p.out(depth + 1, "} else {")
        rest_blocks(p, counter, origin, (lo, full, rest), size, depth + 2, body)
    p.out(depth + 1, "}")
    p.out(depth, "}")


def rest_blocks(
    p: _Printer,
    counter: str,
    origin: str,
    at: tuple[str, str, str],
    size: int,
    depth: int,
    body: Callable[[int, int], None],
) -> None:
    """The block of a counter past the full ones: the (counter - full)-th bit set in
    what is left (`at`: lo, full, rest as C), largest first, its size a constant of
    the body."""
    lo, full, rest = at
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
    st, ranges, outer = form.st, form.ranges, list(form.outer)
    assert st.contraction is not None
    if form.blocking is not None:
        bounds = loop_box(p.scop, st)
        return outer_items(form.blocking[0], bounds, outer, st.contraction)[0]
    if p.scop.symbolic is not None:
        if outer:
            lo, hi = box_text(p.scop, st, outer[0])
            return f"({hi}) - ({lo})"
        blo, bhi = box_text(p.scop, st, st.contraction.cols)
        return _block_counts(blo, bhi, p.options.dot_tile[1])[2]
    if outer:
        lo, hi = ranges[outer[0]]
        return hi - lo
    blo, bhi = ranges[st.contraction.cols]
    return sum(n for n, _ in _blocks(blo, bhi, p.options.dot_tile[1]))


def blocked_loop(
    p: _Printer,
    counter: str,
    origin: str,
    lo: int,
    hi: int,
    size: int,
    depth: int,
    body: Callable[[int, int], None],
    *,
    parallel: bool = False,
) -> None:
    """for counter over the blocks of [lo, hi): full blocks of `size`, then the rest;
    `origin` is the block's first index, and body(block size, depth) its code."""
    blocks = _blocks(lo, hi, size)
    count = sum(n for n, _ in blocks)
    if parallel:
        p.parallel_loop(depth, counter, 0, count, 1, simd=False)
    else:
        p.out(depth, f"for (int {counter} = 0; {counter} < {count}; {counter}++) {{")
    done = 0
    for k, (count, n) in enumerate(blocks):
        p.out(depth + 1, f"{'if' if k == 0 else '} else if'} ({counter} < {done + count}) {{")
        p.out(depth + 2, f"const int {origin} = {lo + done * size} + ({counter} - {done}) * {n};")
        body(n, depth + 2)
        done += count
    p.out(depth + 1, "}")
    p.out(depth, "}")


def tile_env(
    p: _Printer, st: ScopStmt, env: Mapping[str, str], names: Mapping[str, str], i: int, j: int
) -> dict[str, str]:
    """The iterators of output (i, j) of the tile at (a0, b0)."""
    plan = st.contraction
    assert plan is not None
    out = {**env, **names, plan.cols: f"(b0 + {j})"}
    if plan.rows is not None:
        out[plan.rows] = f"(a0 + {i})"
    return out


def inner_dot(p: _Printer, dot: DotTile, depth: int) -> None:
    """1 x C tiles of a fused nest's dot product's outputs sharing the loads of the
    operands they have in common."""
    st, env, names, cap = dot.st, dot.env, dot.names, dot.cap
    plan = st.contraction
    assert plan is not None
    if p.scop.symbolic is not None:
        dots_every_size(p, dot, depth)
        return
    ranges = box(p.scop, st)
    (blo, bhi), (rlo, rhi) = ranges[plan.cols], ranges[plan.red]
    p.out(depth, "{")
    blocked_loop(
        p,
        "bi",
        "b0",
        blo,
        bhi,
        cap,
        depth + 1,
        lambda n, dd: dot_tile(p, st, env, names, 1, n, rlo, rhi, dd, first=False),
    )
    p.out(depth, "}")


def dots_every_size(p: _Printer, dot: DotTile, depth: int) -> None:
    """inner_dot in a kernel for every size: tiles of `cap` outputs, then one output at
    a time, as many of each as the sizes give."""
    st, env, names, cap = dot.st, dot.env, dot.names, dot.cap
    plan = st.contraction
    assert plan is not None
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
            dot_tile(p, st, env, names, 1, n, lo, hi, depth + 2, first=False)
            p.out(depth + 1, "}")
        p.out(depth, "}")


def dot_tile(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    names: Mapping[str, str],
    rows_n: int,
    cols_n: int,
    rlo: int | str,
    rhi: int | str,
    d: int,
    *,
    first: bool | str,
) -> None:
    """The rows_n x cols_n outputs at (a0, b0) over reductions [rlo, rhi): vector dot
    products sharing loads, a masked last vector (where the range is numbers), then
    the lane sums and the tail. `first`: the first part of the reduction (a C
    condition where the sizes say)."""
    plan = st.contraction
    assert plan is not None
    width = p.options.vector_width
    if isinstance(rlo, str) or isinstance(rhi, str):
        lo, hi = box(p.scop, st)[plan.red]  # the sample's, for choices only
        fixed = False
    else:
        lo, hi, fixed = rlo, rhi, True
    tile = [(i, j) for i in range(rows_n) for j in range(cols_n)]
    for i, j in tile:
        p.out(d, f"tc_vf acc{i}_{j} = {{0}};")
    p.out(d, f"int r0 = {rlo};")
    p.out(d, f"for (; r0 + {width} <= {rhi}; r0 += {width}) {{")
    tile_step(p, st, env, names, tile, "r0", d + 1, mask=None)
    p.out(d, "}")
    if fixed:
        assert isinstance(rlo, int) and isinstance(rhi, int)
        masked_last(p, st, env, names, tile, (rlo, rhi), d)
    else:
        last_every_size(p, st, env, names, tile, (rlo, rhi), d)
    accs = [f"acc{i}_{j}" for i, j in tile]
    # Short dot products are dominated by their horizontal sums: reduce them together.
    # (Long ones measured faster with one sum each: less pressure on the registers.)
    sums = lane_sums(p, accs, d) if hi - lo < 256 else [f"tc_hsum({a})" for a in accs]
    for (i, j), total in zip(tile, sums, strict=True):
        finish_dot(
            p,
            st,
            tile_env(p, st, env, names, i, j),
            total,
            "r0" if fixed else None,
            rhi,
            d,
            first=first,
        )


def masked_last(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    names: Mapping[str, str],
    tile: list[tuple[int, int]],
    bounds: tuple[int, int],
    d: int,
) -> None:
    """The last partial vector of the dot products, where the range holds a whole
    vector: one more step over the final `width` elements, the lanes the loop already
    summed masked off by a constant mask."""
    width = p.options.vector_width
    rlo, rhi = bounds
    tail = (rhi - rlo) % width
    if not tail or rhi - rlo < width:
        return
    lanes = ", ".join("-1" if k >= width - tail else "0" for k in range(width))
    p.out(d, f"{{ const tc_vi mask = {{{lanes}}}; r0 = {rhi - width};")
    tile_step(p, st, env, names, tile, "r0", d + 1, mask="mask")
    p.out(d, f"r0 = {rhi}; }}")


def last_every_size(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    names: Mapping[str, str],
    tile: list[tuple[int, int]],
    bounds: tuple[str | int, str | int],
    d: int,
) -> None:
    """The elements the vector loop left, in a kernel for every size: a masked step
    over the final `width` (the mask computed from the lanes left) where the range
    holds a vector, else one element at a time into lane 0. Either way the range ends
    here, so no output has a scalar tail of its own (on short reductions such as
    tbmm's 72, sixteen tails cost as much as the vector loop)."""
    plan = st.contraction
    assert plan is not None
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
    tile_step(p, st, env, names, tile, "r0", d + 2, mask="mask")
    p.out(d + 1, f"}} else for (; r0 < {rhi}; r0++) {{")
    for i, j in tile:
        one = p.expr(st.source.rhs, {**tile_env(p, st, env, names, i, j), plan.red: "r0"})
        p.out(d + 2, f"acc{i}_{j}[0] += (float)({one});")
    p.out(d + 1, "}")
    p.out(d, f"r0 = {rhi}; }}")


def tile_step(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    names: Mapping[str, str],
    tile: list[tuple[int, int]],
    r0: str,
    depth: int,
    *,
    mask: str | None,
) -> None:
    """One vector step of every dot product of a tile; each operand vector is loaded
    once into a local and shared by the products that use it."""
    plan = st.contraction
    assert plan is not None
    loads: dict[str, str] = {}
    updates = []
    for i, j in tile:
        vec = p.vector_rhs(st, tile_env(p, st, env, names, i, j), plan.red, r0, loads)
        assert vec is not None, "plan() admits only vector forms"
        # Masked lanes add +0 (a selection of bits: 0 * inf would be NaN).
        masked = vec if mask is None else f"(tc_vf)((tc_vi)({vec}) & {mask})"
        updates.append(f"acc{i}_{j} += {masked};")
    p.pinned_loads(loads, depth)
    for u in updates:
        p.out(depth, u)


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
            p.out(
                depth,
                f"tc_vf {name} = {shuffle(a, b, lo)} + {shuffle(a, b, hi)};",
            )
            nxt.append(name)
        level, lanes = nxt, half
    (total,) = level
    while lanes > 1:
        half = lanes // 2
        mask = [k + half if k % lanes < half else k for k in range(width)]
        p.out(
            depth,
            f"{total} += {shuffle(total, total, mask)};",
        )
        lanes = half
    return [f"{total}[{k * (width // n)}]" for k in range(n)]


def finish_dot(
    p: _Printer,
    st: ScopStmt,
    env: Mapping[str, str],
    total: str,
    r0: str | None,
    rhi: int | str,
    depth: int,
    *,
    first: bool | str,
) -> None:
    """Add the scalar tail of a dot product from `r0` (None: no tail) and store it
    (the first part of a `!` reduction starts from 0, any other from the stored value;
    `first` may be a C condition)."""
    src = st.source
    assert st.contraction is not None
    target = f"{cname(src.tensor)}[{p.linear(src.tensor, [env[v] for v in src.lhs])}]"
    tail = p.expr(src.rhs, {**env, st.contraction.red: "_t"})
    start = target
    if src.init and isinstance(first, str):
        start = f"(({first}) ? 0.0f : {target})"
    elif src.init and first:
        start = "0.0f"
    if r0 is None:
        p.out(depth, f"{target} = {start} + {total};")
        return
    p.out(depth, f"{{ float s = {start} + {total};")
    p.out(depth + 1, f"for (int _t = {r0}; _t < {rhi}; _t++) s += (float)({tail});")
    p.out(depth + 1, f"{target} = s; }}")


# -- AST -------------------------------------------------------------
