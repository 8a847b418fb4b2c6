"""Contractions `T(.., a, b) += f(.., r)` in float32 with one reduction index `r`.

Two vector forms:
- **dot products**, when every operand reads `r` with unit stride (`W(n, k)`, a Gemm with
  transB): the printer computes a tile of outputs at once, whose dot products share their
  operand loads and end in one combined lane reduction;
- **outer products**, when the right side is `X * P`, `P` read with unit stride along
  `b` and independent of `a`, `X` independent of `b` (`A(m, k) * B(k, n)`): an MR x NR
  block of outputs stays in vector registers while `r` runs innermost, one broadcast of
  `X` and NR / width vector loads of `P` a step. `P` is packed first, a panel of NR
  columns by a chunk of `r` at a time, contiguous in the order the block reads it
  (docs/cpu.md, `blocking` sizes both).

Long contractions (and short ones nothing else writes into) become a kernel of their
own, scheduled alone with their `!` folded in (`plan`). Other dot products keep their
place in the fused nests, and their innermost loops (b, then r) become a 1 x C tile
(`inner_plan`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from .. import ir
from ..options import MappingOptions, VectorUnit
from .lanes import no_vector_form, unit_stride


@dataclass(frozen=True)
class Contraction:
    rows: str | None  # a: the second-to-last left-hand index (None: a 1 x C tile)
    cols: str  # b: the last left-hand index
    red: str  # r: the reduction index (dot form: unit stride in every operand)
    # The outer-product form (None: the dot form): rhs == scalar * packed.
    packed: ir.Read | None = None
    scalar: ir.Expr | None = None
    inner: tuple[str, ...] = ()  # outer form: further reduction indices, inside `red`
    start: ir.Expr | None = None  # outer form: the sums' start (a bias), else 0 or T
    end: ir.Statement | None = None  # outer form: applied to each final block (a relu)
    # Outer form: the left-hand index before `cols` whose rows lie contiguously with the
    # columns (a convolution's output row): the columns run over span x cols as one
    # flattened index, so no panel is cut short at the end of each row.
    span: str | None = None
    # Outer form with a span: `end` reads and writes only elements that lie along the
    # flattened columns as the output's do (scop._flat), so it runs on whole vectors.
    flat_end: bool = False
    # Outer form: whether the final sums are stored as they are (not where `end` writes
    # them over, nor where only `end` reads them: an ONNX Conv's output before its Relu).
    keep: bool = True

    @property
    def end_on_block(self) -> bool:
        """`end` reads the final sums from the block's own buffer, a vector of columns at
        a time (every lane's element lies where the block holds it)."""
        return self.end is not None and (self.span is None or self.flat_end)


# A contraction kernel is its own parallel region, outside any fusion: worth it for long
# dot products, and for shorter ones only when nothing else computes the same tensor
# (MLP3's layers, with their bias and relu statements, stay one fused nest).
LONG_REDUCTION = 256
MIN_REDUCTION = 64
# The outer form's packed panel is reused by every block of rows, so with many rows
# (OUTER_ROWS, OUTER_FLAT_ROWS) a far shorter reduction pays: squeezenet's 1x1
# convolutions over 16-48 channels ran 1.4-4.6x faster, its 3x3/2 stem over 3 channels
# (27 steps) 2x, on two Zen 3 cores.
MIN_OUTER_REDUCTION = 8
MIN_TILE = 4
# Dot products with at least this many rows (and a LONG_REDUCTION, or MIN_REDUCTION where
# nothing else writes their output) take the outer form: C3's 128 x 1000 x 1024 ran 1.6x
# faster so, attention's Q K^T (128 x 64 x 128 per head) 1.4x (the whole attention, on
# one Zen 3 core).
# So do convolutions (several reduction indices) with this many output channels: ResNet's
# 3x3 and 1x1 layers ran 1.0-4.9x faster, gconv's groups of 16 channels 1.25x slower.
OUTER_ROWS = 32
# Convolutions whose output rows flatten into panels (`_span`) need only this many: gconv's
# groups of 16 output channels (12 x 12 outputs) ran 2x faster so on two Zen 3 cores; with
# a panel per output row (12 of 16 lanes used) they had run 1.25x slower.
OUTER_FLAT_ROWS = 16
# Dot products over fewer rows, down to this many, take the outer form too while their
# reduction is shorter than LONG_DOT steps: there each output's dot product ends in a
# horizontal sum that its few vector steps do not pay for. On two Zen 3 cores (AVX2)
# tbmm's 26 x 72 x 26 blocks ran 1.2-1.4x faster so, 8 to 24 rows over 64 to 512 steps
# 1.1-1.6x; over 1024 steps or more, 8 and 16 rows ran 1.3-1.5x slower.
OUTER_FEW_ROWS = 8
LONG_DOT = 1024


def _dot_form(program: ir.Program, st: ir.Statement) -> tuple[str, str] | None:
    """(b, r) when st is a float32 `+=` over one reduction index r whose right side has a
    vector form along r, and b is its last left-hand index."""
    if st.op != "+" or not st.lhs or len(st.reduction_vars) != 1:
        return None
    red = st.reduction_vars[0]
    if program.tensors[st.tensor].dtype != "float32" or st.rhs.dtype != "float32":
        return None
    if not any(red in ir.index_names(r) for r in ir.reads(st.rhs)):
        return None
    if no_vector_form(st.rhs, red, program.tensors) is not None:
        return None
    if any(isinstance(n, ir.Read) and n.tensor == st.tensor for n in ir.walk(st.rhs)):
        return None
    return st.lhs[-1], red


def plan(
    program: ir.Program,
    st: ir.Statement,
    extents: Mapping[str, int],
    *,
    start: ir.Statement | None = None,
    end: ir.Statement | None = None,
    dense: bool = False,
    flat_end: bool = False,
    read_elsewhere: bool = True,
    packs: bool = True,
) -> Contraction | None:
    """The kernel-of-its-own form of st, given each iterator's trip count, or None: the
    outer-product form where it applies, except for dot products over few rows (and a
    long reduction) or a short reduction, where packing costs more than it saves. `start`,
    the statement before st setting its output region (scop._starts), becomes the
    outer form's starting value when it has a vector form along the columns (a bias);
    `end`, the elementwise statement after st on its output (scop._ends), is applied to
    each block of outputs once its sums are final (an activation, a residual add).
    `dense`: the columns cover the output's whole last dimension (`_span` may flatten them
    with the index before). `flat_end`: `end` reads along them as the output lies
    (scop._flat). `read_elsewhere`: st's output is a result, or read by a statement
    besides st, start and end. Without `packs`, only the dot-product form (a kernel for
    every size: the outer form's panels are planned on the sizes)."""
    if len(st.lhs) < 2:
        return None
    dot, outer = _dot_form(program, st), _outer_form(program, st, extents) if packs else None
    depth = math.prod(extents[r] for r in st.reduction_vars)
    rows_n = extents[outer.rows or ""] if outer is not None else 0
    many_rows = rows_n >= OUTER_ROWS
    outer_wins = many_rows or (rows_n >= OUTER_FEW_ROWS and depth < LONG_DOT)
    if outer is not None and outer.inner and rows_n < (OUTER_FLAT_ROWS if dense else OUTER_ROWS):
        outer = None  # a window packed per panel, reused by too few rows
    if outer is not None and depth < MIN_REDUCTION and not many_rows:
        outer = None  # a short panel packed for too few rows
    # A dot product with a shorter reduction keeps its place in the fused nests unless
    # it is the only writer of its output anyway (MLP3's layers stay one parallel region).
    sole = sum(s.tensor == st.tensor for s in program.statements) == 1
    reach = MIN_REDUCTION if sole else LONG_REDUCTION
    if outer is not None and (dot is None or (depth >= reach and outer_wins)):
        rows, cols, red = outer.rows or "", outer.cols, outer.red
    elif dot is not None:
        (cols, red), outer = dot, None
        rows = _rows_index(list(st.lhs[:-1]), extents)
    else:
        return None
    if outer is None:
        start = end = None
    elif start is not None and not (
        start.rhs.dtype == "float32" and no_vector_form(start.rhs, cols, program.tensors) is None
    ):
        start = None
    first = start.rhs if start else None
    span = _span(st, outer, first, dense) if outer is not None else None
    # The statements folded into this one do not count as other writers of its output.
    folded = [s for s in (start, end) if s is not None and s.tensor == st.tensor]
    writers = sum(s.tensor == st.tensor for s in program.statements) - len(folded)
    width = extents[cols] * (extents[span] if span else 1)
    if not own_kernel(extents[rows], depth, width, alone=writers == 1, outer=outer is not None):
        return None
    if not (_reused(st, red, rows) or _reused(st, red, cols)):
        return None
    if outer is not None:
        flat = span is not None and end is not None and flat_end
        keep = end is None or (end.tensor != st.tensor and read_elsewhere)
        return replace(outer, start=first, end=end, span=span, flat_end=flat, keep=keep)
    return Contraction(rows, cols, red)


def _span(st: ir.Statement, outer: Contraction, start: ir.Expr | None, dense: bool) -> str | None:
    """The index before the columns to flatten them with: the left-hand index right
    before them when the columns fill the output's last dimension, it is not the rows,
    and neither X nor the start reads it or the columns (each stays one value per row
    of a block)."""
    if not dense or len(st.lhs) < 3 or st.lhs[-2] == outer.rows:
        return None
    span = st.lhs[-2]
    assert outer.scalar is not None
    lane = {span, outer.cols}
    if lane & ir.index_names(outer.scalar) or (start is not None and lane & ir.index_names(start)):
        return None
    return span


def own_kernel(rows: int, red: int, cols: int, *, alone: bool, outer: bool = False) -> bool:
    """A contraction of these trip counts gets a kernel of its own (the translation of a
    Gemm asks too, before it packs a weight for one); `outer`: in the outer form, whose
    rows (checked by plan) share each packed panel."""
    shortest = MIN_OUTER_REDUCTION if outer else MIN_REDUCTION
    return red >= shortest and min(rows, cols) >= MIN_TILE and (alone or red >= LONG_REDUCTION)


def _float32(program: ir.Program, st: ir.Statement) -> bool:
    return program.tensors[st.tensor].dtype == "float32" and st.rhs.dtype == "float32"


def _rows_index(candidates: list[str], extents: Mapping[str, int]) -> str:
    """The last of the candidate row indices that runs more than once, else the last: a
    rows node's kernel sees a (batch, seq, hidden) input as (rows, 1, hidden), whose
    rows are the batch index (with m as the rows, a 1024 x 256 by 256 x 1024 MatMul ran
    as 1024 products of one row, at 0.4x onnxruntime)."""
    return next((v for v in reversed(candidates) if extents.get(v, 2) > 1), candidates[-1])


def _outer_form(
    program: ir.Program, st: ir.Statement, extents: Mapping[str, int]
) -> Contraction | None:
    """st as `T(.., b) += X * P`: P a float32 read of the column b and the first reduction
    index, X independent of b, and a row a: the last left-hand index before b that P does
    not read and that runs more than once (a matmul's m; a convolution's output channel,
    P its input window). The other reduction indices (a convolution's kh, kw) run inside
    the first. A product of more factors is not reordered (that would round
    differently)."""
    if st.op != "+" or len(st.lhs) < 2 or not st.reduction_vars or not _float32(program, st):
        return None
    cols, (red, *inner) = st.lhs[-1], st.reduction_vars
    rhs = st.rhs
    if not (isinstance(rhs, ir.Binary) and rhs.op == "*" and rhs.compute == "float32"):
        return None
    if any(isinstance(n, ir.Read) and n.tensor == st.tensor for n in ir.walk(rhs)):
        return None
    for packed, scalar in ((rhs.right, rhs.left), (rhs.left, rhs.right)):
        if not isinstance(packed, ir.Read) or program.tensors[packed.tensor].dtype != "float32":
            continue
        names = ir.index_names(packed)
        if cols not in names or red not in names or cols in ir.index_names(scalar):
            continue
        free = [v for v in st.lhs[:-1] if v not in names]
        if not free or scalar.dtype != "float32":
            continue
        rows = _rows_index(free, extents)
        return Contraction(rows, cols, red, packed=packed, scalar=scalar, inner=tuple(inner))
    return None


def inner_plan(
    program: ir.Program, st: ir.Statement, extents: Mapping[str, int]
) -> Contraction | None:
    """The 1 x C tile form of a dot product that stays in the fused nests, or None."""
    form = _dot_form(program, st)
    if form is None:
        return None
    cols, red = form
    if extents[red] < MIN_TILE or extents[cols] < 2 or not _reused(st, red, cols):
        return None
    return Contraction(None, cols, red)


def _reused(st: ir.Statement, red: str, index: str) -> bool:
    """Some operand along `red` does not depend on `index`: the outputs of a tile along
    `index` share its loads. Without one (a row sum, `s(i) +=! E(i,k)`) a tile saves
    nothing, and the plain reduction keeps its place in the fused nests (Softmax's sum
    stays with the exp that writes its row)."""
    return any(
        red in ir.index_names(r) and index not in ir.index_names(r) for r in ir.reads(st.rhs)
    )


@dataclass(frozen=True)
class Blocking:
    """How an outer-product contraction is blocked: `rows` x `vectors` vectors of
    outputs in registers, `chunk` reduction steps per packed panel (the panel, chunk x
    rows of P, stays in L1), and `band` rows per block of work (their X, band x chunk,
    stays in L2)."""

    rows: int
    vectors: int
    width: int
    chunk: int
    band: int

    @property
    def panel(self) -> int:
        """Columns of a packed panel."""
        return self.vectors * self.width


L1_BYTES = 32 * 1024
L2_BYTES = 512 * 1024
# L1's sets: 64 on Zen 3, Zen 4 and Cascade Lake (32 KiB of 8 ways), and Zen 5 (48 KiB, 12).
L1_SETS = 64
LINE_BYTES = 64
# The most rows a register block holds (`blocking`).
MAX_BLOCK_ROWS = 12
# A padded column costs a block of one vector (twice the rows: a broadcast per FMA) about
# this many times what it costs a block of two, where the rows are not capped: ResNet-50's
# 3x3 convolutions at 7x7 and 14x14 (49 and 196 columns) and its 1x1 1024 -> 256 at 14x14
# ran 1.3-1.5x slower as 12 x 8 than as 6 x 16 on two Zen 3 cores, their weights read once
# per panel (56 against 64 and 200 against 208 columns).
ONE_VECTOR_COST = 1.5


def _padded(columns: int, panel: int) -> int:
    """The columns that panels of `panel` columns take to cover `columns`."""
    return -(-columns // panel) * panel


def window(plan: Contraction, ranges: Mapping[str, tuple[int, int]]) -> int:
    """Panel rows per step of the first reduction index: the box of the inner ones."""
    return math.prod(ranges[v][1] - ranges[v][0] for v in plan.inner)


def panel_width(unit: VectorUnit) -> int:
    """Columns of the panels `blocking` packs by default: the width weights are packed to
    ahead of time (`panels`)."""
    return blocking(MappingOptions(vector_width=unit.floats), unit, 1).panel


def apart_in_l1(row: int, rows: int = MAX_BLOCK_ROWS) -> bool:
    """`rows` consecutive rows of `row` float32s each, read a step at a time side by
    side (the broadcast side of a register block: a convolution's weight rows), put at
    most two distinct lines into any L1 set at every step of a line: the packed panel
    fills half of L1's ways. Rows 4 KiB apart (a 1x1 convolution over 1024 channels) all fall into
    one set, which holds 8 lines: the block's 12 rows evicted each other, and ResNet-50's
    1x1 1024 -> 256 ran 2.2x slower than with its rows 1040 floats apart (two Zen 3
    cores)."""
    step = 4 * row
    for offset in range(0, LINE_BYTES, 4):
        lines = {(r * step + offset) // LINE_BYTES for r in range(rows)}  # rows share lines
        if max(Counter(line % L1_SETS for line in lines).values()) > 2:
            return False
    return True


def panels(plan: Contraction, shape: tuple[int, ...], cols_from: int, block: Blocking) -> bool:
    """P is read where it lies: a float32 array of panels packed ahead of time (a constant
    weight, graph/translate), `P(b / NR, r, b % NR)` with NR the block's panel width, and
    the columns start at a panel's start. Then each panel is a contiguous run of its
    reduction rows, in the order the block reads them, and nothing is copied."""
    p, nr = plan.packed, block.panel
    if p is None or plan.inner or len(shape) != 3 or shape[2] != nr or cols_from % nr:
        return False
    match p.subscripts:
        case (
            ir.Binary(op="/", left=ir.Index(name=b1), right=ir.Const(value=d1)),
            ir.Index(name=r),
            ir.Binary(op="%", left=ir.Index(name=b2), right=ir.Const(value=d2)),
        ):
            return b1 == b2 == plan.cols and r == plan.red and d1 == d2 == nr
    return False


def rows_in_order(plan: Contraction, shape: tuple[int, ...], width: int) -> bool:
    """P's last two subscripts are the span and the columns, each plus an offset of
    neither (`oh + kh`, `ow + kw` with a 1x1 window), and its rows are as long as the
    output's (`width` columns): along the flattened columns P is then contiguous too (a
    1x1 convolution's input), so a panel is copied, not gathered lane by lane."""
    p = plan.packed
    if p is None or plan.span is None or len(p.subscripts) < 2 or shape[-1] != width:
        return False
    lanes = {plan.span, plan.cols}
    return all(
        _shifted(sub, name, lanes)
        for sub, name in zip(p.subscripts[-2:], (plan.span, plan.cols), strict=True)
    )


def columns_in_order(plan: Contraction) -> bool:
    """Without a span, P's last subscript is the columns (plus an offset of neither) and
    no other reads them (MLP3's `W2(n, o)`): a panel's lanes are a run of P at each step,
    copied a vector at a time. For every size gcc had vectorized the copy across the steps
    instead, with gathers (a tenth of MLP3's kernel on that line)."""
    p = plan.packed
    if p is None or plan.span is not None or not p.subscripts:
        return False
    *others, last = p.subscripts
    lanes = {plan.cols}
    return _shifted(last, plan.cols, lanes) and not any(lanes & ir.index_names(s) for s in others)


def lane_offsets(plan: Contraction) -> bool:
    """P's subscripts are sums of indices times constants, over flattened columns: P's
    address at a lane and a reduction step is then the address at the step for column 0
    plus the lane's offset, fixed for a work item. The panel is packed with one load per
    lane, not with each lane's row and column worked out again at each step (a division
    by the row length per lane: a third of a 3x3 convolution's time over 64 channels).
    Not for P read along the reduction, which is copied lane by lane."""
    p = plan.packed
    if p is None or plan.span is None or along_reduction(plan):
        return False
    return all(map(_integer_linear, p.subscripts))


def along_reduction(plan: Contraction) -> bool:
    """P is read along the reduction (its last subscript reads the first reduction index,
    and there are no others): a panel is copied lane by lane, a run of steps each."""
    p = plan.packed
    return p is not None and not plan.inner and plan.red in ir.index_names(p.subscripts[-1])


def transposed_pack(plan: Contraction) -> bool:
    """P is read along the reduction at unit stride, one output column per row of P (C3's
    weight, N x K): its panel is packed a square of vectors at a time, loaded along the
    reduction and transposed in registers (the copy element by element was a fifth of
    C3's time). Not with a span, whose lanes are no rows of P."""
    p = plan.packed
    if p is None or plan.span is not None or not along_reduction(plan):
        return False
    last = p.subscripts[-1]
    plus = isinstance(last, ir.Binary) and last.op == "+"
    return (last == ir.Index(plan.red) or plus) and unit_stride(p, plan.red)


def _integer_linear(e: ir.Expr) -> bool:
    """e is a sum of indices and constants, each maybe times a constant (no division,
    modulo, clamp or product of indices)."""
    match e:
        case ir.Index() | ir.Const():
            return True
        case ir.Binary(op="+" | "-", left=a, right=b):
            return _integer_linear(a) and _integer_linear(b)
        case ir.Binary(op="*", left=a, right=b):
            consts = isinstance(a, ir.Const) + isinstance(b, ir.Const)
            return consts >= 1 and _integer_linear(a) and _integer_linear(b)
    return False


def _shifted(sub: ir.Expr, name: str, lanes: set[str]) -> bool:
    """sub is `name`, or `name` plus a term that reads none of `lanes`."""
    if sub == ir.Index(name):
        return True
    if not (isinstance(sub, ir.Binary) and sub.op == "+"):
        return False
    for here, other in ((sub.left, sub.right), (sub.right, sub.left)):
        if here == ir.Index(name) and not lanes & ir.index_names(other):
            return True
    return False


# How an outer kernel gets its panels of P, decided once (`packing`): read where they lie
# (`panels`), copied a run of lanes at a time (`rows_in_order`, `columns_in_order`),
# gathered by per-lane offsets (`lane_offsets`), or each lane's element computed from its
# row and column.
Packing = Literal["in_place", "runs", "offsets", "lanes"]


def packing(
    plan: Contraction,
    shape: tuple[int, ...],
    ranges: Mapping[str, tuple[int, int]],
    block: Blocking,
    *,
    every_size: bool = False,
) -> Packing:
    """How the kernel of `plan` gets its panels, P being of `shape`. In a kernel for every
    size, `shape` and `ranges` are the sample's: panels read in place and runs across
    output rows, which rest on equal extents, are not chosen (lane offsets are found by
    the code)."""
    if every_size:
        if columns_in_order(plan):
            return "runs"
        return "offsets" if lane_offsets(plan) else "lanes"
    if panels(plan, shape, ranges[plan.cols][0], block):
        return "in_place"
    if rows_in_order(plan, shape, ranges[plan.cols][1]) or columns_in_order(plan):
        return "runs"
    return "offsets" if lane_offsets(plan) else "lanes"


def blocking(
    options: MappingOptions,
    unit: VectorUnit,
    red_extent: int,
    inner: int = 1,
    columns: int | None = None,
) -> Blocking:
    """The register block from the register file: two vectors of columns (one when a
    vector spans several registers), as many rows as leave a register for each column
    vector and one for the broadcast (AVX2: 6 x 16, AVX-512: 12 x 32), but no more than
    twice the FMA chains a core needs where it needs 4 (Zen 4: 4 x 32, 5-13% faster than
    12 x 32 on C3, tmm, MLP1 and MLP3; in kernels for every size too, since gcc allocates
    registers loop by loop: cc.GCC_CFLAGS); `micro_tile` overrides it. The chunk (steps of
    the first reduction index, `inner` panel rows each) keeps a panel in half of L1, the
    band a block of X in half of L2 (panels read in place too: one whole reduction per
    chunk measured slower, its bands too short). Given the `columns` the panels cover (P
    not packed ahead of time), one vector of columns where that pads them less on a core
    that needs 4 FMA chains (gconv's 12 x 12 outputs: 144 columns in 9 panels of 16, not
    5 of 32; 8% faster on Zen 4), and elsewhere where two vectors pad them more than
    ONE_VECTOR_COST times (one vector doubles the rows there: a broadcast of X per FMA)."""
    width = options.vector_width
    per = _registers_per_vector(width, unit)
    if options.micro_tile:
        rows, vectors = options.micro_tile
    else:
        vectors = max(1, 2 // per)
        if vectors == 2 and columns:
            one, two = _padded(columns, width), _padded(columns, 2 * width)
            if two > (one if unit.fma_chains <= 4 else ONE_VECTOR_COST * one):
                vectors = 1
        rows = max(1, min(MAX_BLOCK_ROWS, (unit.registers // per - vectors - 1) // vectors))
        if unit.fma_chains <= 4:
            rows = max(1, min(rows, 2 * unit.fma_chains // vectors))
    panel = vectors * width
    fit = max(16, (L1_BYTES // 2) // (4 * panel) // 16 * 16) // inner
    chunk = min(options.reduction_chunk or max(1, fit), red_extent)
    band = max(rows, (L2_BYTES // 2) // (4 * chunk * inner) // rows * rows)
    return Blocking(rows, vectors, width, chunk, band)


def _registers_per_vector(width: int, unit: VectorUnit) -> int:
    """The unit's registers one vector of `width` floats takes."""
    return max(1, math.ceil(width / unit.floats))


def spare_registers(block: Blocking, unit: VectorUnit) -> int:
    """Vector registers a full block leaves free: its accumulators, its panel vectors and
    the broadcast of X held."""
    held = block.rows * block.vectors + block.vectors
    return unit.registers - _registers_per_vector(block.width, unit) * held - 1
