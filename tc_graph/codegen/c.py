"""The C + OpenMP target: what a CPU kernel prints beyond the shared statement printer
(codegen/stmt.py): OpenMP loops (folded where a kernel for every size has parallel loops
nested in its parallel loop), the forms codegen/forms.py decided for the marked loops
(dot tiles and contraction kernels by codegen/dots.py and codegen/outer.py), the local
arrays poly/local.py decided, and the kernel function (tc_phase is codegen/phases.py's).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import islpy as isl

from .. import ir
from ..errors import TcError
from ..lang.types import C_TYPES
from ..options import AVX512, MappingOptions, VectorUnit
from ..poly.marks import Local, Loop, LoopMark, Mark, in_tree, is_loop, of_node
from ..poly.proof import annotated_ast, children, refuse
from ..poly.scop import Scop, ScopStmt
from .dots import contraction, contraction_trips, inner_dot
from .expr import C_OPENMP, acc_start, cname, combine, identity
from .forms import (
    Chooser,
    ContractionKernel,
    DotTile,
    LoopForm,
    NoForm,
    ParallelLoop,
    Reduction,
    RegisterTile,
    RowTile,
    SpecialisedLoop,
    TileNest,
    VectorLoop,
    box_text,
    describe,
    loop_marks,
)
from .phases import (
    Parallel,
    Phase,
    doubled,
    phase_kernel,
    phase_plans,
    phase_signature,
    run_phases,
)
from .prelude import EXTREMA, prelude
from .stmt import (
    StatementPrinter,
    constant_loop,
    counted_loop,
    sample_trips,
)


class _Printer(StatementPrinter):
    def __init__(self, scop: Scop, options: MappingOptions, unit: VectorUnit) -> None:
        super().__init__(scop, C_OPENMP)
        self.options = options
        self.unit = unit
        # "omp": parallel loops are OpenMP loops (tc_kernel). "chunk": the one parallel
        # loop outside every other loop runs iterations [lo, hi) of a phase (tc_phase);
        # "serial": a phase printed without any parallel loop (`phase_plan` decides).
        self.mode = "omp"
        self.loops_open = 0
        # The schedule depth of the band under each enclosing mark of the `annotated_ast`
        # (poly/proof.py) printed (poly/cpu.py records it in the mark).
        self.mark_depth: dict[Loop, int | None] = {}
        # The temporaries that live in local arrays (poly/local.py decided them).
        self.locals: frozenset[str] = frozenset()
        self.chooser = Chooser(scop, options, unit)
        # Each loop's form as printed, by its iterator (`loop_forms`).
        self.decided: list[tuple[str, LoopForm | ContractionKernel | NoForm]] = []

    # -- vector code (register tiles, vectorized reductions) -----------
    def vexpr(
        self, e: ir.Expr, env: Mapping[str, str], lane: str, loads: dict[str, str] | None = None
    ) -> tuple[str, bool]:
        """e with `lane` running over the lanes of one float vector starting at env[lane]:
        (text, whether it is a vector), for an e that `no_vector_form` admits. With
        `loads`, each distinct vector load becomes a named local (declared by the caller)."""
        if lane not in ir.index_names(e):
            return self.expr(e, env), False
        match e:
            case ir.Read(tensor=t, subscripts=subs):
                idx = self.linear(t, [self.expr(x, env) for x in subs])
                text = f"(*(const tc_vfu *)&{cname(t)}[{idx}])"
                if loads is not None:
                    text = loads.setdefault(text, f"_v{len(loads)}")
                return text, True
            case ir.Binary(op=op, left=a, right=b):
                x, xv = self.vexpr(a, env, lane, loads)
                y, yv = self.vexpr(b, env, lane, loads)
                x = x if xv else f"(float)({x})"
                y = y if yv else f"(float)({y})"
                return f"({x} {op} {y})", True
            case ir.Unary(operand=a):
                x, _ = self.vexpr(a, env, lane, loads)
                return f"(-{x})", True
            case ir.Cast(operand=a):
                return self.vexpr(a, env, lane, loads)
            case ir.Call(fn="exp", args=(a,)):
                return f"tc_vexpf({self.vexpr(a, env, lane, loads)[0]})", True
        raise AssertionError(f"{e} has no vector form: no_vector_form refuses it")

    def vector_rhs(
        self,
        st: ScopStmt,
        env: Mapping[str, str],
        lane: str,
        at: str,
        loads: dict[str, str] | None = None,
    ) -> str:
        """The right side as a vector over lane = at, at+1, ... (forms.vector_refusal
        admits it)."""
        return self.vexpr(st.source.rhs, {**env, lane: at}, lane, loads)[0]

    def register_tile(self, form: RegisterTile, depth: int) -> None:
        """Each tile of `vectors` vectors of the output row stays in registers while the
        reduction runs (the CPU's private-memory promotion)."""
        nest, vectors = form.nest, form.vectors
        if self.scop.symbolic is not None:
            self.tiles_every_size(nest, vectors, depth)
            return
        width = self.options.vector_width
        jlo, jhi = form.columns
        # Full tiles, then one tile of the whole vectors left, then the last columns.
        tile = width * vectors
        full, rest = divmod(jhi - jlo, tile)
        self.out(depth, f"for (int j0 = {jlo}; j0 < {jlo + full * tile}; j0 += {tile}) {{")
        self.vector_tile(nest, vectors, depth + 1)
        self.out(depth, "}")
        start = jlo + full * tile
        if rest // width:
            self.out(depth, f"{{ const int j0 = {start};")
            self.vector_tile(nest, rest // width, depth + 1)
            self.out(depth, "}")
        if rest % width:
            self.column_tail(nest, start + rest // width * width, depth)

    @contextlib.contextmanager
    def reduction_loops(
        self, nest: TileNest, depth: int, before_last: Callable[[int], None] | None = None
    ) -> Iterator[int]:
        """The nest's reduction loops around the body written inside (at the depth it
        yields); `before_last` prints what goes just before the innermost one opens."""
        d = depth
        for k, v in enumerate(nest.reds):
            if before_last is not None and k == len(nest.reds) - 1:
                before_last(d)
            lo, hi = nest.ranges[v]
            name = nest.names[v]
            self.out(d, f"for (int {name} = {lo}; {name} < {hi}; {name} += 1) {{")
            d += 1
        yield d
        for _ in nest.reds:
            d -= 1
            self.out(d, "}")

    def vector_tile(self, nest: TileNest, vectors: int, depth: int) -> None:
        """The rows x vectors accumulators of the output columns at j0 (`envs`: each row's
        iterators): loaded, updated through the reduction loops with the shared operand
        loads pinned, stored. Rows found through an index tensor are prefetched for each
        row (the row loop is unrolled into the tile: its iterator is not declared)."""
        st, envs, names = nest.st, nest.envs, nest.names
        src = st.source
        j = src.lhs[-1]
        width = self.options.vector_width
        lanes = [f"(j0 + {q * width})" for q in range(vectors)]
        loads: dict[str, str] = {}
        vec = [[self.vector_rhs(st, {**e, **names}, j, at, loads) for at in lanes] for e in envs]

        def row(e: Mapping[str, str], at: str) -> str:
            return self.linear(src.tensor, [at if v == j else e[v] for v in src.lhs])

        out = cname(src.tensor)
        accs = [[f"acc{r}_{q}" for q in range(vectors)] for r in range(len(envs))]
        for e, names_r in zip(envs, accs, strict=True):
            for acc, at in zip(names_r, lanes, strict=True):
                self.out(depth, f"tc_vf {acc} = *(const tc_vfu *)&{out}[{row(e, at)}];")

        def prefetch(d: int, *, first: bool = False) -> None:
            for e in envs:
                self.prefetch(nest, {**e, **names}, width * vectors, d, first=first)

        with self.reduction_loops(nest, depth, lambda d: prefetch(d, first=True)) as d:
            prefetch(d)
            self.pinned_loads(loads, d)
            for names_r, texts in zip(accs, vec, strict=True):
                for acc, text in zip(names_r, texts, strict=True):
                    self.out(d, f"{acc} += {text};")
        for e, names_r in zip(envs, accs, strict=True):
            for acc, at in zip(names_r, lanes, strict=True):
                self.out(depth, f"*(tc_vfu *)&{out}[{row(e, at)}] = {acc};")

    def tiles_every_size(self, nest: TileNest, vectors: int, depth: int) -> None:
        """A register tile's columns in a kernel for every size: full tiles, then single
        vectors, then the columns left one at a time (how many of each, the sizes say)."""
        j = nest.st.source.lhs[-1]
        lo, hi = nest.ranges[j]
        width = self.options.vector_width
        tile = width * vectors
        self.out(depth, f"{{ int j0 = {lo};")
        self.out(depth + 1, f"for (; j0 + {tile} <= {hi}; j0 += {tile}) {{")
        self.vector_tile(nest, vectors, depth + 2)
        self.out(depth + 1, "}")
        if vectors > 1:
            self.out(depth + 1, f"for (; j0 + {width} <= {hi}; j0 += {width}) {{")
            self.vector_tile(nest, 1, depth + 2)
            self.out(depth + 1, "}")
        self.out(depth + 1, f"for (int _c = j0; _c < {hi}; _c++) {{")
        for e in nest.envs:
            target = self.target(nest.st, {**e, j: "_c"})
            self.out(depth + 2, f"{{ float t0 = {target};")
            with self.reduction_loops(nest, depth + 3) as d:
                rhs = self.expr(nest.st.source.rhs, {**e, j: "_c", **nest.names})
                self.out(d, f"t0 += (float)({rhs});")
            self.out(depth + 2, f"{target} = t0; }}")
        self.out(depth + 1, "}")
        self.out(depth, "}")

    def column_tail(self, nest: TileNest, start: int, depth: int) -> None:
        """The columns after the last whole vector: a scalar accumulator per row and
        column, all of them (up to _TAIL_CHAINS at a time) updated in one pass of the
        reduction loops, so their adds are independent. One dot product per column in
        turn is a chain of dependent adds: it made a 64x96x80 matmul 12x slower than
        the 64x96x64 one. Each element still adds its terms in order."""
        src = nest.st.source
        j = src.lhs[-1]
        chains = [(e, c) for e in nest.envs for c in range(start, nest.ranges[j][1])]
        for first in range(0, len(chains), _TAIL_CHAINS):
            group = chains[first : first + _TAIL_CHAINS]
            targets = [self.target(nest.st, {**e, j: str(c)}) for e, c in group]
            self.out(depth, "{")
            for k, target in enumerate(targets):
                self.out(depth + 1, f"float t{k} = {target};")
            with self.reduction_loops(nest, depth + 1) as d:
                for k, (e, c) in enumerate(group):
                    rhs = self.expr(src.rhs, {**e, j: str(c), **nest.names})
                    self.out(d, f"t{k} += (float)({rhs});")
            for k, target in enumerate(targets):
                self.out(depth + 1, f"{target} = t{k};")
            self.out(depth, "}")

    def row_tile(self, node: isl.AstNode, rows: RowTile, depth: int) -> None:
        """A register tile with a short loop's iterations as its rows; in a kernel for
        every size, where the sizes give all its rows, else the loop as it is."""
        if rows.full is None:
            self.register_tile(rows.tile, depth)
            return
        self.out(depth, f"if ({rows.full}) {{")
        self.register_tile(rows.tile, depth + 1)
        self.out(depth, "} else {")
        self.out(depth + 1, self.for_header(node) + " {")
        self.loop_body(node, depth + 1)
        self.out(depth, "}")

    def prefetch(
        self, nest: TileNest, env: Mapping[str, str], width: int, depth: int, *, first: bool
    ) -> None:
        """The rows the nest finds through an index tensor, for the `width` columns at j0,
        fetched a few reduction steps ahead; `first`: the rows of the first steps, before
        the reduction loop starts (without them every bag's first rows were demand misses:
        2LUT 9% slower)."""
        ahead = self.options.prefetch_distance
        if not nest.prefetched:
            return
        r = nest.reds[-1]
        lo, hi = nest.ranges[r]
        step = "_p" if first else f"({env[r]} + {ahead})"
        fenv = {**env, r: step, nest.st.source.lhs[-1]: "j0"}
        for read in nest.prefetched:
            idx = self.linear(read.tensor, [self.expr(s, fenv) for s in read.subscripts])
            if first:
                self.out(depth, f"for (int _p = {lo}; _p < {lo} + {ahead} && _p < {hi}; _p++) {{")
            else:
                self.out(depth, f"if ({env[r]} + {ahead} < {hi}) {{")
            for off in range(0, width, 16):
                self.out(depth + 1, f"__builtin_prefetch(&{cname(read.tensor)}[{idx} + {off}]);")
            self.out(depth, "}")

    def vector_reduction(
        self, node: isl.AstNode, st: ScopStmt, env: Mapping[str, str], depth: int
    ) -> None:
        """A dot product (or a maximum, a minimum) along a stride-1 reduction index: four
        vector accumulators, so consecutive fused multiply-adds do not wait on each
        other."""
        src = st.source
        it = node.for_get_iterator().to_C_str()
        r = next(v for v in st.iterators if env[v] == it)
        width = self.options.vector_width
        vec = [self.vector_rhs(st, env, r, f"(r0 + {q * width})") for q in range(4)]
        lo, hi = box_text(self.scop, st, r)
        target = self.target(st, env)
        tail = self.expr(src.rhs, {**env, r: "r0"})
        if src.op == "+":
            start, step, merge = "{0}", "{a} += {v}", "(a0 + a1) + (a2 + a3)"
            first, last = f"{target} + tc_hsum(a0)", f"acc += (float)({tail})"
        else:
            _, lanewise, across = EXTREMA[src.op]
            start = f"(tc_vf){{0}} + {identity(src.op, 'float32')}"
            step = f"{{a}} = {lanewise}({{a}}, {{v}})"
            merge = f"{lanewise}({lanewise}(a0, a1), {lanewise}(a2, a3))"
            first = combine(src.op, acc_start(src.op, target, "float32"), f"{across}(a0)", "float")
            last = f"acc = {combine(src.op, 'acc', f'(float)({tail})', 'float')}"
        self.out(depth, "{")
        self.out(depth + 1, "tc_vf " + ", ".join(f"a{q} = {start}" for q in range(4)) + ";")
        self.out(depth + 1, f"int r0 = {lo};")
        self.out(depth + 1, f"for (; r0 + {4 * width} <= {hi}; r0 += {4 * width}) {{")
        for q, text in enumerate(vec):
            self.out(depth + 2, step.format(a=f"a{q}", v=text) + ";")
        self.out(depth + 1, "}")
        self.out(
            depth + 1,
            f"for (; r0 + {width} <= {hi}; r0 += {width}) {step.format(a='a0', v=vec[0])};",
        )
        self.out(depth + 1, f"a0 = {merge};")
        self.out(depth + 1, f"float acc = {first};")
        self.out(depth + 1, f"for (; r0 < {hi}; r0++) {last};")
        self.out(depth + 1, f"{target} = acc;")
        self.out(depth, "}")

    def pinned_loads(self, loads: Mapping[str, str], depth: int, *, pin: bool = True) -> None:
        """Declare the shared operand vectors of a tile. The empty asm pins each in a
        register (unless not `pin`): otherwise gcc folds the load into every FMA that uses
        it, and the tile's load sharing is lost. A vector wider than the target's widest
        register (AVX-512's 16 floats, AVX2's 8) lives in several registers, which no asm
        operand can name, and gcc has no vector register for a vector of one float:
        neither is pinned."""
        pin = pin and 1 < self.options.vector_width <= self.unit.floats
        for text, name in loads.items():
            asm = f' __asm__("" : "+v"({name}));' if pin else ""
            self.out(depth, f"tc_vf {name} = {text};{asm}")

    def parallel_for(self, node: isl.AstNode, depth: int, *, simd: bool) -> None:
        """Open a parallel loop of the isl AST (its bounds are constants where sizes are
        baked in, expressions of the sizes in a kernel for every size)."""
        counted: tuple[int | str, int | str, int] | None = constant_loop(node)
        if counted is None and self.scop.symbolic is not None:
            counted = counted_loop(node)
        if counted is None:
            if self.mode == "omp":
                self.out(depth, self.dialect.parallel_pragma(self.options, simd=simd))
            self.out(depth, self.for_header(node) + " {")
            return
        first, count, step = counted
        it = node.for_get_iterator().to_C_str()
        self.parallel_loop(depth, it, first, count, step, simd=simd)

    def folded_for(self, loops: Sequence[isl.AstNode], depth: int) -> None:
        """`loops` (folded_loops) as one parallel loop over the product of their
        iterations, around the innermost one's body: OpenMP's collapse in tc_kernel (a
        phase it does not run through tc_phase); in tc_phase, iterations [lo, hi) step
        the loops' counters as an odometer (divisions once per chunk, none per
        iteration)."""
        if self.mode == "omp":
            pragma = self.dialect.parallel_pragma(self.options, simd=False, collapse=len(loops))
            self.out(depth, pragma)
            for k, lp in enumerate(loops):
                self.out(depth + k, self.for_header(lp) + " {")
            self.loop_body(loops[-1], depth + len(loops) - 1)
            for k in reversed(range(len(loops) - 1)):
                self.out(depth + k, "}")
            return
        self.odometer_for(loops, depth)

    def odometer_for(self, loops: Sequence[isl.AstNode], depth: int) -> None:
        """folded_for in tc_phase: iteration _t of [lo, hi) is the loops' counters _ci0,
        _ci1, ... (the last fastest), found by division at lo and stepped after each body."""
        counted = [counted_loop(lp) for lp in loops]
        assert all(counted), "folded_loops counts every loop"
        n = len(loops)
        counts = [f"_cn{k} = max((int64_t)1, {c[1]})" for k, c in enumerate(counted) if c and k]
        starts = [
            "lo" + "".join(f" / _cn{j}" for j in range(n - 1, k, -1)) + (f" % _cn{k}" if k else "")
            for k in range(n)
        ]
        self.out(depth, "{")
        self.out(depth + 1, f"const int64_t {', '.join(counts)};")
        self.out(
            depth + 1, "int64_t " + ", ".join(f"_ci{k} = {s}" for k, s in enumerate(starts)) + ";"
        )
        self.out(depth + 1, "for (int64_t _t = lo; _t < hi; _t++) {")
        for k, (lp, c) in enumerate(zip(loops, counted, strict=True)):
            if c is not None:
                it = lp.for_get_iterator().to_C_str()
                self.out(depth + 2, f"const int {it} = {c[0]} + (int)_ci{k} * {c[2]};")
        self.loops_open += 1
        self.node(loops[-1].for_get_body(), depth + 2)
        self.loops_open -= 1
        step = "_ci0++;"
        for k in range(1, n):
            step = f"if (++_ci{k} == _cn{k}) {{ _ci{k} = 0; {step} }}"
        self.out(depth + 2, step)
        self.out(depth + 1, "}")
        self.out(depth, "}")

    def parallel_loop(
        self, depth: int, var: str, first: int | str, count: int | str, step: int, *, simd: bool
    ) -> None:
        """Open `for var = first, first + step, ...` (count iterations) whose iterations are
        independent: an OpenMP loop in tc_kernel, a phase's [lo, hi) in tc_phase."""
        if self.mode == "chunk" and self.loops_open == 0:
            if simd:
                self.out(depth, self.dialect.simd_pragma())
            self.out(depth, "for (int64_t _t = lo; _t < hi; _t++) {")
            self.out(depth + 1, f"const int {var} = {first} + (int)_t * {step};")
            return
        if self.mode == "omp":
            self.out(depth, self.dialect.parallel_pragma(self.options, simd=simd))
        if isinstance(first, int) and isinstance(count, int):
            end: int | str = first + count * step
        else:
            end = f"({first}) + ({count}) * {step}"
        self.out(depth, f"for (int {var} = {first}; {var} < {end}; {var} += {step}) {{")

    def loop(self, node: isl.AstNode, depth: int, marks: frozenset[Loop]) -> None:
        """A loop in the form its proved marks ask for (forms.Chooser): a reduction in a
        local or in vectors, a register or dot tile, a parallel loop (folded with those
        inside it), a simd loop specialised to the sample or written in vectors, or a
        plain loop."""
        here = self.proved_marks(node, marks)
        top = self.mode == "omp" or (self.mode == "chunk" and self.loops_open == 0)
        form = self.chooser.form(node, here, top=top)
        self.decided.append((node.for_get_iterator().to_C_str(), form))
        match form:
            case Reduction(st=st, env=env, vector=True):
                self.vector_reduction(node, st, env, depth)
            case Reduction(st=st, env=env):
                self.accumulate(node, st, env, depth)
            case RegisterTile():
                self.register_tile(form, depth)
            case RowTile():
                self.row_tile(node, form, depth)
            case DotTile():
                inner_dot(self, form, depth)
            case ParallelLoop(loops=loops) if len(loops) > 1:
                self.folded_for(loops, depth)
            case ParallelLoop(simd=simd):
                self.parallel_for(node, depth, simd=simd)
                self.loop_body(node, depth)
            case SpecialisedLoop(trips=trips):
                self.specialised_loop(node, trips, depth)
            case VectorLoop():
                self.vector_loop(node, form, depth)
            case NoForm():
                if Loop.SIMD in here:
                    self.out(depth, self.dialect.simd_pragma())
                self.out(depth, self.for_header(node) + " {")
                self.loop_body(node, depth)

    def loop_body(self, node: isl.AstNode, depth: int) -> None:
        """The body of a loop opened at `depth`, and its closing brace."""
        self.loops_open += 1
        self.node(node.for_get_body(), depth + 1)
        self.loops_open -= 1
        self.out(depth, "}")

    def vector_loop(self, node: isl.AstNode, form: VectorLoop, depth: int) -> None:
        """The loop's whole vectors, each stored at once, then its last iterations as a
        simd loop."""
        (first, end), it = form.bounds, node.for_get_iterator().to_C_str()
        width = self.options.vector_width
        value = self.vexpr(form.st.source.rhs, form.env, form.lane)[0]
        target = self.target(form.st, form.env)
        self.out(depth, f"{{ int _vt = {first};")
        self.out(depth + 1, f"for (; _vt + {width} <= {end}; _vt += {width}) {{")
        self.out(depth + 2, f"const int {it} = _vt;")
        self.out(depth + 2, f"*(tc_vfu *)&{target} = {value};")
        self.out(depth + 1, "}")
        self.out(depth + 1, self.dialect.simd_pragma())
        self.out(depth + 1, f"for (int {it} = _vt; {it} < {end}; {it} += 1) {{")
        self.loop_body(node, depth + 1)
        self.out(depth, "}")

    def specialised_loop(self, node: isl.AstNode, trips: int, depth: int) -> None:
        """A simd loop twice, as Halide's specialize: `trips` iterations where its count
        is the sample's (gcc unrolls it), the general loop otherwise."""
        counted = counted_loop(node)
        assert counted is not None
        first, count, step = counted
        it = node.for_get_iterator().to_C_str()
        self.out(depth, f"if ({count} == {trips}) {{")
        self.out(depth + 1, self.dialect.simd_pragma())
        end = f"({first}) + {trips * step}"
        self.out(depth + 1, f"for (int {it} = {first}; {it} < {end}; {it} += {step}) {{")
        self.loop_body(node, depth + 1)
        self.out(depth, "} else {")
        self.out(depth + 1, self.dialect.simd_pragma())
        self.out(depth + 1, self.for_header(node) + " {")
        self.loop_body(node, depth + 1)
        self.out(depth, "}")

    def mark(self, node: isl.AstNode, mark: Mark, depth: int, marks: frozenset[Loop]) -> None:
        """A contraction's whole nest, a local array, or a loop mark in force (at its
        band's depth)."""
        if is_loop(mark, Loop.CONTRACT):
            kernel = self.chooser.contraction(node)
            self.decided.append((node.for_get_iterator().to_C_str(), kernel))
            contraction(self, kernel, depth)
        elif isinstance(mark, Local):
            self.local(node, mark, depth, marks)
        elif isinstance(mark, LoopMark):
            saved = self.mark_depth.get(mark.kind)
            self.mark_depth[mark.kind] = mark.depth
            super().mark(node, mark, depth, marks)
            self.mark_depth[mark.kind] = saved
        else:
            super().mark(node, mark, depth, marks)

    # -- temporaries ------------------------------------------------------
    def proved_marks(self, node: isl.AstNode, marks: frozenset[Loop]) -> frozenset[Loop]:
        """The marks of this loop (`loop_marks`); a refused one is reported."""
        here, refused = loop_marks(node, marks, self.mark_depth)
        for m in refused:
            refuse(m.value, node)
        return here

    def top_parallel(
        self, node: isl.AstNode, marks: frozenset[Loop], depths: Mapping[Loop, int | None]
    ) -> list[Parallel]:
        """The iterations of each parallel loop that `node` prints outside every other
        loop (C text of the sizes in a kernel for every size; None where its bounds are
        not constants), as `node` decides them: `marks` and `depths` are those in force,
        as the printer's `marks` and `mark_depth`."""
        t = node.get_type()
        if t == isl.ast_node_type.for_:
            if node.for_is_degenerate():
                return self.top_parallel(node.for_get_body(), frozenset(), depths)
            here, _ = loop_marks(node, marks, depths)
            if Loop.PARALLEL not in here:
                return []
            return [self.parallel_trips(node, simd=Loop.SIMD in here)]
        if t == isl.ast_node_type.mark:
            mark = of_node(node)
            if not isinstance(mark, LoopMark):
                return self.top_parallel(node.mark_get_node(), marks, depths)
            if mark.kind is Loop.CONTRACT:
                trips = contraction_trips(self, self.chooser.contraction(node.mark_get_node()))
                return [] if trips is None else [Parallel(trips)]
            depths = {**depths, mark.kind: mark.depth}
            return self.top_parallel(node.mark_get_node(), marks | {mark.kind}, depths)
        return [n for c in children(node) for n in self.top_parallel(c, marks, depths)]

    def parallel_trips(self, node: isl.AstNode, *, simd: bool) -> Parallel:
        """The iterations of a phase's parallel loop: a constant, or in a kernel for every
        size, the product of its folded loops' counts, and their number at the sample and
        at twice its sizes."""
        counted = constant_loop(node)
        sym = self.scop.symbolic
        if counted is not None:
            known = None if sym is None else counted[1]
            return Parallel(counted[1], known, known)
        if sym is None or counted_loop(node) is None:
            return Parallel(None)
        loops = self.chooser.folded(node, simd=simd)
        texts = [c[1] for c in map(counted_loop, loops) if c is not None]
        trips = texts[0] if len(texts) == 1 else " * ".join(f"({t})" for t in texts)
        return Parallel(
            trips, _product(loops, self.scop.sizes), _product(loops, doubled(self.scop))
        )

    def local(self, node: isl.AstNode, mark: Local, depth: int, marks: frozenset[Loop]) -> None:
        """A temporary's local array (poly/local.py), declared where the mark sits: inside
        the loop each of whose iterations uses its own elements only."""
        if mark.offsets is None:
            raise TcError(f"internal: isl's AST reaches {mark.tensor} outside its local box")
        t = self.program.tensors[mark.tensor]
        init = " = {0}" if t.zero_fill else ""
        # A block of its own: isl may print the mark more than once in one scope.
        self.out(
            depth, f"{{ {C_TYPES[t.dtype]} {cname(mark.tensor)}[{math.prod(mark.sizes)}]{init};"
        )
        saved = self.private.get(mark.tensor)
        self.private[mark.tensor] = (mark.offsets, mark.sizes)
        self.node(node, depth + 1, marks)
        self.out(depth, "}")
        if saved is None:
            del self.private[mark.tensor]
        else:
            self.private[mark.tensor] = saved

    # -- the kernel ------------------------------------------------------
    def arguments(self) -> None:
        """The tensor pointers of a kernel's args (inputs then outputs)."""
        p = self.program
        for k, n in enumerate([*p.inputs, *p.outputs]):
            t = p.tensors[n]
            const = "const " if t.role == "input" else ""
            self.out(
                1,
                f"{const}{C_TYPES[t.dtype]} *restrict {cname(n)} = "
                f"({const}{C_TYPES[t.dtype]} *)args[{k}];",
            )

    def sizes(self) -> None:
        """A kernel for every size: the sizes it reads (`sizes`, in the scop's order) and
        the program's constants, as C variables of the names the loop bounds use."""
        sym = self.scop.symbolic
        assert sym is not None
        for k, n in enumerate(sym.params):
            self.out(1, f"const int64_t {n} = sizes[{k}];")
        for n, v in self.program.constants.items():
            if n in self.program.params:
                self.out(1, f"const int64_t {n} = {v};")
        names = [*sym.params, *(n for n in self.program.constants if n in self.program.params)]
        self.out(1, "".join(f"(void){n}; " for n in names).rstrip())

    def kernel(self, phases: list[Phase], name: str) -> str:
        """`name` (its temporaries in a block of its own, freed on return) and `name`_in,
        which takes the block from its caller (the Python runtime keeps one per thread:
        from malloc, a temporary over glibc's mmap threshold was mapped afresh on every
        call and its pages faulted in again: an attention over 2 x 2100 x 8 took 27 ms a
        call, 12 ms with a block kept). `phases`: phase_plans of the AST printed."""
        sized = self.scop.symbolic is not None
        head = "void *const *args, const int64_t *sizes," if sized else "void *const *args,"
        self.out(0, f"int {name}_in({head} char *scratch, int check, int64_t *err);")
        self.scratch_bytes(name)
        self.out(0, f"int {name}({head} int check, int64_t *err) {{")
        size = f"{name}_scratch(sizes)" if sized else f"{name}_scratch_bytes"
        self.out(1, f"size_t bytes = (size_t){size};")
        self.out(1, "char *scratch = bytes ? aligned_alloc(64, bytes) : NULL;")
        self.out(1, "if (bytes && !scratch) return -1;")
        call = "args, sizes" if sized else "args"
        self.out(1, f"int code = {name}_in({call}, scratch, check, err);")
        self.out(1, "free(scratch);")
        self.out(1, "return code;")
        self.out(0, "}")
        # the phases run by tc_phase (run_phases), on OpenMP's threads; one thread where
        # the kernel is built without OpenMP (a package's, for a target without libgomp)
        self.out(0, f"{phase_signature(self.scop)};")
        self.out(0, "#ifdef _OPENMP")
        self.out(0, "int omp_get_num_threads(void);")
        self.out(0, "int omp_get_thread_num(void);")
        self.out(0, "#define TC_THREADS() omp_get_num_threads()")
        self.out(0, "#define TC_THREAD() omp_get_thread_num()")
        self.out(0, "#else")
        self.out(0, "#define TC_THREADS() 1")
        self.out(0, "#define TC_THREAD() 0")
        self.out(0, "#endif")
        self.out(0, f"int {name}_in({head} char *scratch, int check, int64_t *err) {{")
        if sized:
            self.sizes()
        self.arguments()
        prologue = self.lines
        self.lines = []
        run_phases(self, phases)
        body, self.lines = self.lines, prologue
        parts = self.scratch_parts()
        if parts:
            self.out(1, "size_t tc_at = 0;")
        for n, bytes_ in parts:
            t = self.program.tensors[n]
            ctype = C_TYPES[t.dtype]
            self.out(1, f"{ctype} *restrict {cname(n)} = ({ctype} *)(scratch + tc_at);")
            if t.zero_fill:
                self.out(1, f"memset({cname(n)}, 0, {bytes_});")
            self.out(1, f"tc_at += {bytes_};")
        # tc_phase's pointers from the restrict ones, so that its accesses are theirs
        names = [*self.program.inputs, *self.program.outputs]
        tensors = ", ".join(f"(void *){cname(n)}" for n in names) or "0"
        temps = ", ".join(f"(void *){cname(n)}" for n, _ in parts) or "0"
        self.out(1, f"void *const tc_args[] = {{{tensors}}};")
        self.out(1, f"void *const tc_temps[] = {{{temps}}};")
        self.out(1, "(void)tc_args; (void)tc_temps;")
        self.out(1, "int code = 0;")
        self.lines += body
        self.out(0, "done:")
        self.out(1, "return code;")
        self.out(0, "}")
        return "\n".join(self.lines)

    def phase_call(self, phase: int, trips: int | str) -> None:
        """Run iterations [0, trips) of tc_phase's `phase`, each OpenMP thread a
        contiguous share, as OpenMP's static schedule divides them (without parallel
        loops, parallel_depth 0, no phase is split); a failed check's code is the
        kernel's."""
        sizes = "sizes, " if self.scop.symbolic is not None else ""
        call = f"tc_phase({phase}, tc_args, tc_temps, {sizes}"
        threads = f" num_threads({self.options.threads})" if self.options.threads else ""
        self.out(1, f"#pragma omp parallel reduction(max: code){threads}")
        self.out(1, "{")
        self.out(2, "const int64_t _n = TC_THREADS(), _id = TC_THREAD();")
        self.out(2, f"const int64_t _q = (int64_t)({trips}) / _n, _r = (int64_t)({trips}) % _n;")
        self.out(2, "const int64_t _lo = _id * _q + (_id < _r ? _id : _r);")
        self.out(2, f"code = {call}_lo, _lo + _q + (_id < _r), err);")
        self.out(1, "}")
        self.out(1, "if (code) goto done;")

    def scratch_parts(self) -> list[tuple[str, str]]:
        """Each shared temporary of the scratch block, in order, with its bytes as C (a
        multiple of 64: the block is aligned to 64, so each part is too)."""
        out = []
        for n in self.shared_temps():
            one = f"sizeof({C_TYPES[self.program.tensors[n].dtype]})"
            out.append((n, f"(((size_t)({self.count(n)}) * {one} + 63) & ~(size_t)63)"))
        return out

    def scratch_bytes(self, name: str) -> None:
        """The scratch block's bytes: a constant `name`_scratch_bytes (fixed shapes), or
        `name`_scratch(sizes) (a kernel for every size)."""
        parts = self.scratch_parts()
        total = " + ".join(b for _, b in parts) or "0"
        if self.scop.symbolic is None:
            self.out(0, f"const int64_t {name}_scratch_bytes = (int64_t)({total});")
            return
        self.out(0, f"int64_t {name}_scratch(const int64_t *sizes) {{")
        self.sizes()
        self.out(1, f"return (int64_t)({total});")
        self.out(0, "}")

    def count(self, tensor: str) -> str:
        """A temporary's elements as C, at least one (each has a place of its own in the
        scratch block)."""
        if self.scop.symbolic is None:
            return str(max(1, math.prod(self.scop.shapes[tensor])))
        rank = self.program.tensors[tensor].rank
        dims = [f"max((int64_t)0, (int64_t){self.extent(tensor, k)})" for k in range(rank)]
        return f"max((int64_t)1, {' * '.join(['(int64_t)1', *dims])})"

    def shared_temps(self) -> list[str]:
        """The temporaries the caller allocates: all but the local ones."""
        return [n for n in self.program.temporaries if n not in self.locals]


def _product(loops: Sequence[isl.AstNode], sizes: Mapping[str, int]) -> int | None:
    """The product of the loops' iterations at these sizes (None where one is unknown)."""
    trips = [sample_trips(lp, sizes) for lp in loops]
    return None if None in trips else math.prod(t for t in trips if t is not None)


# Scalar accumulators of a register tile's last columns updated together (enough
# independent adds to hide the add latency, few enough to stay in registers).
_TAIL_CHAINS = 24


def emit(
    scop: Scop,
    schedule: isl.Schedule,
    options: MappingOptions,
    *,
    name: str = "tc_kernel",
    unit: VectorUnit = AVX512,
) -> str:
    """The C source of one kernel: `int name(void *const *args, int check, int64_t *err)`,
    args = inputs then outputs; returns 0, or k > 0 when check k failed (value in *err);
    and `name`_in, its temporaries in a scratch block its caller passes (_Printer.kernel).
    `unit` is the target CPU's (runtime/cc.vector_unit)."""
    printer, ast = _printer(scop, schedule, options, unit)
    phases = phase_plans(printer, ast)
    main = printer.kernel(phases, name)
    return f"{prelude(options.vector_width)}\n\n{main}\n\n{phase_kernel(printer, phases)}\n"


def _printer(
    scop: Scop, schedule: isl.Schedule, options: MappingOptions, unit: VectorUnit
) -> tuple[_Printer, isl.AstNode | None]:
    """A printer of the schedule, knowing its local arrays, and the AST it prints (with
    isl's proofs; None without statements)."""
    ast = annotated_ast(scop, schedule) if scop.statements else None
    printer = _Printer(scop, options, unit)
    printer.locals = frozenset(m.tensor for m in in_tree(schedule) if isinstance(m, Local))
    return printer, ast


def loop_forms(
    scop: Scop, schedule: isl.Schedule, options: MappingOptions, *, unit: VectorUnit = AVX512
) -> str:
    """Each loop of the kernel (every phase, in order, as printed with OpenMP's loops)
    with its form, or why it keeps isl's (`tc-graph compile --emit forms`)."""
    printer, ast = _printer(scop, schedule, options, unit)
    if ast is not None:
        printer.node(ast, 1)
    return "".join(f"{it}: {describe(form)}\n" for it, form in printer.decided)
