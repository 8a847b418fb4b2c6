"""The form each loop of a CPU kernel takes, decided from isl's AST before any text.

A parallel loop takes the parallel loops nested in it along (in a kernel for every
size). A serial loop that a mark asks something of becomes a reduction in a local (in
vectors where its index is stride-1), a register tile (with the short loop around it as
its rows), a dot-product tile, a simd loop also printed for the sample's count, or a
simd loop written in vectors (a store of floats computed with exp). A form that does
not apply is refused with its reason (`NoForm`), and the loop prints as isl built it.
Which marks a loop keeps, isl's dependences decide (`loop_marks`). The decisions read
isl's objects (the AST's loops and expressions, the statement's domain) and the program,
never printed text: codegen/c.py prints the form it is given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import islpy as isl

from .. import ir
from ..options import MappingOptions, VectorUnit
from ..poly.contraction import Blocking, Packing, blocking, packing, window
from ..poly.lanes import no_vector_form
from ..poly.marks import Loop, is_loop, of_node
from ..poly.proof import loop_depth, loop_parallel
from ..poly.scop import Scop, ScopStmt, sampled
from .outer import outer_columns
from .prelude import EXTREMA
from .stmt import (
    affine,
    ast_int,
    constant_loop,
    counted_loop,
    mentions,
    reduced,
    sample_trips,
    user_exprs,
    with_value,
)

MAX_ROWS = 8  # rows of one register tile


@dataclass(frozen=True)
class NoForm:
    """A loop that keeps the form isl gave it, and why."""

    reason: str


@dataclass(frozen=True)
class Reduction:
    """A loop over a reduction index of the one update statement that is its body: the
    output element accumulates in a local, in four vectors where `vector` (the index is
    stride-1 and the right side has a vector form)."""

    st: ScopStmt
    env: Mapping[str, str]
    vector: bool


@dataclass(frozen=True)
class TileNest:
    """A register-tile nest: its statement, each row's iterators, the reduction
    iterators with their C names and ranges, and the reads it prefetches."""

    st: ScopStmt
    envs: tuple[Mapping[str, str], ...]
    names: Mapping[str, str]
    reds: tuple[str, ...]
    ranges: Mapping[str, tuple[int | str, int | str]]
    # The reads whose rows are fetched a few reduction steps ahead (`indirect_rows`).
    prefetched: tuple[ir.Read, ...]


@dataclass(frozen=True)
class RegisterTile:
    """Reduction loops around the stride-1 output loop of one `+=` statement, as tiles
    of `vectors` output vectors per row held in registers; `columns` is the output
    loop's range at the sample."""

    nest: TileNest
    vectors: int
    columns: tuple[int, int]


@dataclass(frozen=True)
class RowTile:
    """A short loop whose iterations become a register tile's rows. In a kernel for
    every size, whose row loop runs min(n, e) rows, `full` is the C condition under
    which all n rows exist (else the loop prints as it is); None in a fixed kernel."""

    tile: RegisterTile
    full: str | None


@dataclass(frozen=True)
class DotTile:
    """The output loop and reduction loop of a dot product in a fused nest: 1 x `cap`
    tiles of outputs sharing the loads of the operands they have in common."""

    st: ScopStmt
    env: Mapping[str, str]
    names: Mapping[str, str]
    cap: int


@dataclass(frozen=True)
class ParallelLoop:
    """A loop that isl's dependences prove parallel, with the parallel loops nested in it
    that run as one with it (`folded`): itself alone where none do."""

    loops: tuple[isl.AstNode, ...]
    simd: bool


@dataclass(frozen=True)
class SpecialisedLoop:
    """A simd loop of a kernel for every size, also printed for the sample's `trips`
    iterations (fewer than a vector's lanes): gcc's vector loop with its checks and
    scalar epilogue for an unknown count costs several times the unrolled copy (MLP3's
    last layer: 2 columns)."""

    trips: int


@dataclass(frozen=True)
class VectorLoop:
    """An innermost simd loop whose one statement stores floats it computes with exp,
    written in vectors (`lane` running over a vector's floats): the prelude's tc_vexpf
    on AVX-512 is one vscalefps where gcc's vector code of tc_expf spends eight
    instructions on 2^n. The iterations after the last whole vector stay a simd loop;
    `bounds` are the loop's [first, end) as numbers or C text."""

    st: ScopStmt
    env: Mapping[str, str]
    lane: str
    bounds: tuple[int | str, int | str]


LoopForm = (
    Reduction | RegisterTile | RowTile | DotTile | ParallelLoop | SpecialisedLoop | VectorLoop
)


@dataclass(frozen=True)
class ContractionKernel:
    """A contraction statement's nest as a kernel of its own (a `contract` mark over
    poly/contraction.py's plan): the statement, the iterators of the loops outside the
    nest, the box of its domain (at the sample), its output iterators outside the
    tile's rows and columns, and in the outer-product form its register block and
    chunks and how its panels of P are had."""

    st: ScopStmt
    env: Mapping[str, str]
    ranges: Mapping[str, tuple[int, int]]
    outer: tuple[str, ...]
    blocking: tuple[Blocking, Packing] | None


@dataclass(frozen=True)
class Chooser:
    """What the forms are decided from: the scop, the options and the target's vector
    unit."""

    scop: Scop
    options: MappingOptions
    unit: VectorUnit

    def form(self, node: isl.AstNode, marks: frozenset[Loop], *, top: bool) -> LoopForm | NoForm:
        """The form of a loop with these proved marks: a parallel loop (`top`: printed as
        OpenMP's or the phase's loop, where loops fold into it), else the first that
        applies of a reduction, a register tile, a register tile's rows, a dot tile, a
        simd loop specialised to the sample and one written in vectors."""
        if Loop.PARALLEL in marks:
            simd = Loop.SIMD in marks
            return ParallelLoop(tuple(self.folded(node, simd=simd) if top else [node]), simd)
        reasons = []
        for kind, decide in (
            (Loop.REDUCE, self.reduction),
            (Loop.REGTILE, self.register_tile),
            (None, self.row_tile),
            (Loop.DOTTILE, self.dot_tile),
            (Loop.SIMD, self.specialised),
            (Loop.SIMD, self.vector_loop),
        ):
            if kind is not None and kind not in marks:
                continue
            form = decide(node)
            if not isinstance(form, NoForm):
                return form
            reasons.append(form.reason)
        return NoForm("; ".join(reasons) or "no mark asks for another form")

    def folded(self, node: isl.AstNode, *, simd: bool) -> list[isl.AstNode]:
        """`folded_loops` of a parallel loop of a kernel for every size whose bounds are
        expressions of the sizes; else itself (a constant or vector loop)."""
        symbolic = self.scop.symbolic is not None and constant_loop(node) is None
        if simd or not symbolic or counted_loop(node) is None:
            return [node]
        return folded_loops(node, self.scop.sizes)

    def specialised(self, node: isl.AstNode) -> SpecialisedLoop | NoForm:
        """An innermost simd loop of a kernel for every size whose bounds are expressions
        of the sizes alone and that runs fewer iterations than a vector has lanes at the
        sample."""
        if self.scop.symbolic is None:
            return NoForm("a kernel for these sizes needs no copy for the sample")
        trips = sample_trips(node, self.scop.sizes)
        if trips is None or not 0 < trips < self.options.vector_width:
            return NoForm(f"{trips} iterations at the sample")
        return SpecialisedLoop(trips)

    def vector_loop(self, node: isl.AstNode) -> VectorLoop | NoForm:
        """A simd loop whose one statement stores, at the loop's index alone and stride-1,
        floats computed with exp that have a vector form along it."""
        body = node.for_get_body()
        if body.get_type() != isl.ast_node_type.user:
            return NoForm("the simd loop's body is not one statement")
        st, exprs = user_exprs(self.scop, body)
        src, tensors = st.source, self.scop.program.tensors
        calls = {c.fn for c in ir.walk(src.rhs) if isinstance(c, ir.Call)}
        if st.kind != "assign" or "exp" not in calls:
            return NoForm("no exp to compute in vectors")
        it = node.for_get_iterator().to_C_str()
        env = {v: e.to_C_str() for v, e in zip(st.iterators, exprs, strict=True)}
        lanes = [v for v, e in zip(st.iterators, exprs, strict=True) if mentions(e, it)]
        if len(lanes) != 1 or env[lanes[0]] != it or src.lhs[-1:] != (lanes[0],):
            return NoForm(f"loop {it} is not the stride-1 index of the store alone")
        counted, known = counted_loop(node), constant_loop(node)
        if counted is None or counted[2] != 1:
            return NoForm(f"loop {it} does not step by 1")
        if known is not None and known[1] < self.options.vector_width:
            return NoForm(f"loop {it} runs fewer iterations than a vector has lanes")
        why = vector_refusal(tensors, st, lanes[0], ("=",))
        if why is not None:
            return NoForm(why)
        if known is not None:
            return VectorLoop(st, env, lanes[0], (known[0], known[0] + known[1]))
        return VectorLoop(st, env, lanes[0], (counted[0], f"({counted[0]}) + ({counted[1]})"))

    def contraction(self, node: isl.AstNode) -> ContractionKernel:
        """The kernel of the perfect nest under a `contract` mark."""
        found = band_exprs(self.scop, node)
        assert found is not None, "a contraction is one perfect nest"
        st, _, env = found
        plan = st.contraction
        assert plan is not None
        inside = (plan.rows, plan.cols, plan.span)
        outer = tuple(v for v in st.source.lhs if v not in env and v not in inside)
        blocked = None if plan.packed is None else self.outer_blocking(st)
        return ContractionKernel(st, env, box(self.scop, st), outer, blocked)

    def outer_blocking(self, st: ScopStmt) -> tuple[Blocking, Packing]:
        """The register block and chunks of an outer-product contraction, and how its
        panels of P are had (contraction.packing)."""
        plan = st.contraction
        assert plan is not None and plan.packed is not None
        ranges = box(self.scop, st)
        lo, hi = ranges[plan.red]
        every_size = self.scop.symbolic is not None
        block = blocking(self.options, self.unit, hi - lo, window(plan, ranges))
        shape = self.scop.shapes[plan.packed.tensor]
        packed = packing(plan, shape, ranges, block, every_size=every_size)
        if packed == "in_place":  # panels packed ahead of time: their width stays
            return block, packed
        clo, chi = outer_columns(plan, ranges)
        assert isinstance(clo, int) and isinstance(chi, int)
        block = blocking(self.options, self.unit, hi - lo, window(plan, ranges), chi - clo)
        return block, packing(plan, shape, ranges, block, every_size=every_size)

    def reduction(self, node: isl.AstNode) -> Reduction | NoForm:
        """A loop over a reduction index of the update that is its body, in vectors where
        register tiles are on and the right side has a vector form along it."""
        found = reduced(self.scop, node)
        if isinstance(found, str):
            return NoForm(found)
        st, env = found
        it = node.for_get_iterator().to_C_str()
        lane = next(v for v in st.iterators if env[v] == it)
        vector = (
            self.options.register_tile > 0
            and vector_refusal(self.scop.program.tensors, st, lane) is None
        )
        return Reduction(st, env, vector)

    def register_tile(
        self, node: isl.AstNode, rows: tuple[str, tuple[int, ...]] | None = None
    ) -> RegisterTile | NoForm:
        """The register tile of the perfect nest at node; `rows` = (iterator, values) of
        a short loop around it, unrolled into the tile: rows x vectors accumulators
        share each load of the row-independent operand (the outer-product form of a
        matmul's micro-kernel)."""
        found = band_exprs(self.scop, node)
        if found is None:
            return NoForm("a register tile needs a perfect nest")
        st, exprs, env = found
        inner = [v for v in st.iterators if v not in env]
        j = st.source.lhs[-1]
        if set(inner) != {j, *(v for v in inner if v in st.source.reduction_vars)}:
            return NoForm(f"the nest runs other loops than {j} and reduction loops")
        envs = [env]
        if rows is not None:
            envs = row_envs(st, exprs, env, rows)
            if envs is None:
                return NoForm("distinct rows would not store to distinct outputs")
        jlo, jhi = box(self.scop, st)[j]
        # Half the vector registers hold accumulators; the rest the operands.
        accumulators = self.unit.registers // 2
        width = self.options.vector_width
        vectors = min(self.options.register_tile, (jhi - jlo) // width, accumulators // len(envs))
        if vectors < 1:
            return NoForm("not one vector of output columns per row")
        why = vector_refusal(self.scop.program.tensors, st, j)
        if why is not None:
            return NoForm(why)
        reds = tuple(v for v in st.iterators if v in inner and v != j)
        names = {v: f"_r{n}" for n, v in enumerate(reds)}
        ahead = bool(reds) and self.options.prefetch_distance > 0
        prefetched = indirect_rows(self.scop, st, reds[-1]) if ahead else ()
        nest = TileNest(st, tuple(envs), names, reds, loop_box(self.scop, st), prefetched)
        return RegisterTile(nest, vectors, (jlo, jhi))

    def row_tile(self, node: isl.AstNode) -> RowTile | NoForm:
        """A loop of 2 to MAX_ROWS constant iterations (or, for every size, min(n, e) of
        them) around a register tile, which become the tile's rows."""
        if not regtile_rows(node):
            return NoForm("no register tile in its body")
        first, step = ast_int(node.for_get_init()), ast_int(node.for_get_inc())
        bound = ast_int(node.for_get_cond().get_op_arg(1))
        capped = None
        if bound is None and self.scop.symbolic is not None:
            capped = capped_bound(node.for_get_cond().get_op_arg(1))
            bound = capped[0] if capped else None
        if first is None or step is None or bound is None:
            return NoForm("the row loop's bounds are not constants")
        last = bound if node.for_get_cond().get_op_type() == isl.ast_expr_op_type.le else bound - 1
        values = tuple(range(first, last + 1, step))
        if not 2 <= len(values) <= MAX_ROWS:
            return NoForm(f"{len(values)} rows (a tile has 2 to {MAX_ROWS})")
        it = node.for_get_iterator().to_C_str()
        tile = self.register_tile(node.for_get_body().mark_get_node(), rows=(it, values))
        if isinstance(tile, NoForm):
            return tile
        return RowTile(tile, None if capped is None else f"({capped[1]}) >= {bound}")

    def dot_tile(self, node: isl.AstNode) -> DotTile | NoForm:
        """The output and reduction loops of a planned dot product, a perfect nest."""
        found = band_exprs(self.scop, node)
        if found is None:
            return NoForm("a dot tile needs a perfect nest")
        st, _, env = found
        plan = st.contraction
        assert plan is not None
        if set(st.iterators) - set(env) != {plan.cols, plan.red}:
            return NoForm("the nest runs other loops than the output and reduction loops")
        cap = 2 * max(1, min(self.options.register_tile, 4))
        return DotTile(st, env, {plan.cols: "_b", plan.red: "_r"}, cap)


def loop_marks(
    node: isl.AstNode,
    marks: frozenset[Loop],
    mark_depth: Mapping[Loop, int | None],
) -> tuple[frozenset[Loop], tuple[Loop, ...]]:
    """The marks of a loop of an `annotated_ast` (poly/proof.py), and those the proof
    refuses. A mark applies to the loop of its band's depth only (`mark_depth`): a loop
    further in means isl printed no loop for the band here (a piece where it has one
    value), and the mark ends. Then `parallel` and `simd` stay only where isl's
    dependences prove the loop parallel."""
    depth = loop_depth(node)
    here = {m for m in marks if mark_depth.get(m) in (None, depth)}
    refused = tuple(m for m in (Loop.PARALLEL, Loop.SIMD) if m in here and not loop_parallel(node))
    return frozenset(here.difference(refused)), refused


def folded_loops(node: isl.AstNode, sizes: Mapping[str, int]) -> list[isl.AstNode]:
    """The loops a parallel loop of a kernel for every size runs as one, itself first:
    while the last one's body is a loop that isl's dependences prove parallel, whose
    bounds are expressions of the sizes alone, and that nothing asks anything of (no
    mark, no register tile's rows), that loop too. Choices made at 8 x 128 tokens put a
    BERT-style layer's parallel loop on the batch, one iteration at batch 1; folded with
    its heads and rows, every thread has work at any batch."""
    loops = [node]
    while True:
        body = loops[-1].for_get_body()
        if (
            body.get_type() != isl.ast_node_type.for_
            or body.for_is_degenerate()
            or not loop_parallel(body)
            or sample_trips(body, sizes) is None
            or counted_loop(body) is None
            or regtile_rows(body)
        ):
            return loops
        loops.append(body)


_PANELS: Mapping[Packing, str] = {
    "in_place": "panels packed ahead of time",
    "runs": "panels copied in runs",
    "offsets": "panels gathered by lane offsets",
    "lanes": "panels gathered lane by lane",
}


def describe(form: LoopForm | ContractionKernel | NoForm) -> str:
    """A form in a few words, or why a loop keeps isl's (`tc-graph compile --emit forms`)."""
    match form:
        case ParallelLoop(loops=loops, simd=simd):
            folded = f", folding the {len(loops) - 1} loops inside" if len(loops) > 1 else ""
            return f"parallel{', simd' if simd else ''}{folded}"
        case SpecialisedLoop(trips=trips):
            return f"simd, also printed for the sample's {trips} iterations"
        case VectorLoop(st=st, lane=lane):
            return f"in vectors along {lane}, storing {st.source.tensor}"
        case Reduction(st=st, vector=vector):
            return f"reduction into {st.source.tensor} in {'vectors' if vector else 'a local'}"
        case RegisterTile(nest=nest, vectors=vectors):
            return f"register tile of {vectors} vectors of {nest.st.source.tensor}"
        case RowTile(tile=tile, full=full):
            rows = f"{len(tile.nest.envs)} rows x {tile.vectors} vectors"
            return f"register tile of {rows}{'' if full is None else ' where all rows exist'}"
        case DotTile(st=st, cap=cap):
            return f"dot tiles of 1 x {cap} outputs of {st.source.tensor}"
        case ContractionKernel(st=st, blocking=blocked):
            kind = "dot-product" if blocked is None else f"outer-product, {_PANELS[blocked[1]]}"
            return f"contraction kernel of {st.source.tensor} ({kind})"
        case NoForm(reason=reason):
            return f"as isl built it: {reason}"


def row_envs(
    st: ScopStmt,
    exprs: list[isl.AstExpr],
    env: Mapping[str, str],
    rows: tuple[str, tuple[int, ...]],
) -> list[dict[str, str]] | None:
    """Each row's iterators outside the tile, the row loop's iterator replaced by its
    value; None where distinct rows would not store to distinct outputs (the iterator
    must appear in one output subscript, affinely)."""
    it, values = rows
    outer = {v: e for v, e in zip(st.iterators, exprs, strict=True) if v in env}
    lhs = [outer[v] for v in st.source.lhs if v in outer and mentions(outer[v], it)]
    if len(lhs) != 1 or not affine(lhs[0]):
        return None
    return [{v: with_value(e, it, r).to_C_str() for v, e in outer.items()} for r in values]


def band_exprs(
    scop: Scop, node: isl.AstNode
) -> tuple[ScopStmt, list[isl.AstExpr], dict[str, str]] | None:
    """The statement under a perfect nest of loops, its arguments as isl's expressions,
    and the C values of its iterators that no loop of the nest runs; None where the nest
    is not perfect."""
    loops: list[str] = []
    while node.get_type() == isl.ast_node_type.for_:
        loops.append(node.for_get_iterator().to_C_str())
        node = node.for_get_body()
    if node.get_type() != isl.ast_node_type.user:
        return None
    st, args = user_exprs(scop, node)
    texts = (a.to_C_str() for a in args)
    return st, args, {v: a for v, a in zip(st.iterators, texts, strict=True) if a not in loops}


def indirect_rows(scop: Scop, st: ScopStmt, r: str) -> tuple[ir.Read, ...]:
    """The reads of st whose row is found through an index tensor (an input) that the
    reduction index r moves: the ones worth prefetching."""
    rows = []
    for read in ir.reads(st.source.rhs):
        outer = read.subscripts[:-1]
        if not any(map(ir.reads_tensor, outer)):
            continue
        if r not in {n for s in outer for n in ir.index_names(s)}:
            continue
        if all(x.tensor in scop.program.inputs for s in outer for x in ir.reads(s)):
            rows.append(read)
    return tuple(rows)


def vector_refusal(
    tensors: Mapping[str, ir.Tensor],
    st: ScopStmt,
    lane: str,
    ops: tuple[str, ...] = ("+", *EXTREMA),
) -> str | None:
    """Why st's right side has no vector form over `lane` as a store of one of `ops`
    into a float (a sum, a maximum or a minimum by default; `vexpr` prints the form it
    has); None when it has one. A right side that does not depend on the lane is one
    value, not a vector."""
    src = st.source
    if src.op not in ops or tensors[src.tensor].dtype != "float32":
        return f"the {src.op} into {src.tensor} is not one of {', '.join(ops)} into a float"
    if lane not in ir.index_names(src.rhs):
        return f"the right side does not depend on {lane}"
    return no_vector_form(src.rhs, lane, tensors)


def box(scop: Scop, st: ScopStmt) -> dict[str, tuple[int, int]]:
    """The box of a statement's domain (domains are boxes): v -> [lo, hi); in a kernel
    for every size, at its sample (for choices only: loop_box prints)."""
    out = {}
    domain = sampled(scop, st.domain)
    for k, v in enumerate(st.iterators):
        lo = domain.dim_min_val(k).to_python()
        hi = domain.dim_max_val(k).to_python() + 1
        out[v] = (lo, hi)
    return out


def loop_box(scop: Scop, st: ScopStmt) -> Mapping[str, tuple[int | str, int | str]]:
    """The box of a statement's domain as the code runs it: numbers, or in a kernel for
    every size, C expressions of its sizes."""
    if scop.symbolic is None:
        return box(scop, st)
    return {v: box_text(scop, st, v) for v in st.iterators}


def box_text(scop: Scop, st: ScopStmt, v: str) -> tuple[str, str]:
    """A statement's range of iterator v, [lo, hi), as C: numbers, or in a kernel for
    every size, isl's expressions of the sizes."""
    if scop.symbolic is None:
        lo, hi = box(scop, st)[v]
        return str(lo), str(hi)
    k = st.iterators.index(v)
    build = isl.AstBuild.from_context(scop.program.context)
    lo = build.expr_from_pw_aff(st.domain.dim_min(k)).to_C_str()
    hi = build.expr_from_pw_aff(st.domain.dim_max(k)).to_C_str()
    return f"({lo})", f"({hi}) + 1"


def regtile_rows(node: isl.AstNode) -> bool:
    """The loop's body is a register tile, whose rows the loop's iterations become."""
    body = node.for_get_body()
    return body.get_type() == isl.ast_node_type.mark and is_loop(of_node(body), Loop.REGTILE)


def capped_bound(e: isl.AstExpr) -> tuple[int, str] | None:
    """(n, e) of a loop bound `min(n, e)` of isl's AST (a tile's last rows, in a kernel for
    every size), e as C; None for any other bound."""
    if e.get_type() != isl.ast_expr_type.op or e.get_op_type() != isl.ast_expr_op_type.min:
        return None
    if e.get_op_n_arg() != 2:
        return None
    args = [e.get_op_arg(0), e.get_op_arg(1)]
    for k in range(2):
        n = ast_int(args[k])
        if n is not None and ast_int(args[1 - k]) is None:
            return n, args[1 - k].to_C_str()
    return None
