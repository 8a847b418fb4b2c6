"""The GPU dialects of the C-family printer: OpenCL C and CUDA.

The shared printers (codegen/expr.py, codegen/stmt.py) print expressions, statements and
loops for every target; this module adds what a mapped schedule tree (poly/gpu.py)
needs: one kernel function per `Kernel` mark (poly/marks.py), block- and thread-mapped
loops printed as strided loops over the group and local ids, guards for statements that
no mapped loop covers, index checks that record the first failure in a buffer (a GPU
thread cannot `goto` out of a kernel), and indirect subscripts clamped into bounds so
that a failed check never reads outside a buffer, the shared tiles poly/promotion.py
decided for each copy of a `shared` mark (copy-in, body on the tiles, copy-out of written
ones, barriers) and the private elements of poly/private.py (a statement's stores are
pointed at a written tile or a private element by `target`). The two dialects differ
only in the `GpuDialect` hooks.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import islpy as isl

from .. import ir
from ..errors import TcError
from ..lang.types import C_TYPES, FLOAT_TYPES, INT_TYPES, SCALARS, compute_type, promote
from ..options import MappingOptions
from ..poly.gpu import GpuMapping, Launch
from ..poly.marks import Kernel, Loop, Mapped, Mark, PrivateTile, SharedTiles, Tile, Unit, of_node
from ..poly.private import HeldElement, held_element
from ..poly.promotion import indirect_form, mapped_below, write_ref
from ..poly.proof import children, loop_depth
from ..poly.scop import Scop, ScopStmt
from .expr import LIBM, Dialect, acc_start, cname, combine, helper_lines, store
from .stmt import StatementPrinter, ast_int, constant_loop, user_exprs

_HALF = SCALARS["float16"]  # stored as the target's own half type


@dataclass(frozen=True)
class GpuDialect(Dialect):
    """A GPU target's spelling of what kernels need (format strings and qualifiers); the
    base class's pragmas have no GPU meaning."""

    name: str
    inline: str  # qualifies the prelude's functions
    kernel: str  # a kernel's header, of {name}, {params} and {threads} (per block)
    space: str  # qualifies a buffer parameter
    restrict: str
    thread_id: str  # a thread's id in its block along dim {d} (letter {x})
    block_id: str  # a block's id along dim {d} (letter {x})
    cas: str  # the atomic compare-and-swap
    shared: str  # qualifies a block's tile
    barrier_local: str  # synchronizes the block
    barrier_global: str  # also makes its global stores visible to the block's threads
    macros: tuple[str, ...] = ()  # the prelude's lines after floord
    missing: frozenset[str] = frozenset()  # builtins with no equivalent

    def simd_pragma(self) -> str:
        return "// simd"

    def reduction_pragma(self, op: str, acc: str) -> str:
        return f"// {acc}: the thread's output element in a register"

    def signed_wraps(self) -> bool:
        return False  # OpenCL C and CUDA have no -fwrapv

    def math_name(self, fn: str, dtype: str) -> str | None:
        return None  # the targets' own expf is fast

    def record_error(self, code: int) -> str:
        """Keep the first failing check's code and value."""
        return f"if ({self.cas}(tc_code, 0, {code}) == 0) *tc_value = v;"

    def head(self, double: bool, half: bool) -> list[str]:
        """The prelude's first lines: the target's types, extensions and headers."""
        raise NotImplementedError

    def prelude(self, double: bool, half: bool) -> str:
        """The text before the kernels: the target's own lines, then the shared helpers."""
        q = self.inline
        return "\n".join(
            [
                *self.head(double, half),
                "#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))",
                *self.macros,
                *helper_lines(q, double=double),
                f"{q} int tc_first(int init, int inc, int me, int n) "
                "{ int r = (me - floord(init, inc)) % n; "
                "return init + (r < 0 ? r + n : r) * inc; }",
            ]
        )

    def pointer(self, ctype: str, name: str, *, const: bool) -> str:
        return f"{self.space}{'const ' if const else ''}{ctype} *{self.restrict} {name}"

    def shared_array(self, ctype: str, name: str, size: int) -> str:
        """A block's fixed-size tile (declared at kernel scope, as OpenCL requires)."""
        return f"{self.shared} {ctype} {name}[{size}];"

    def barrier(self, global_memory: bool = False) -> str:
        """Synchronize the block; `global_memory`: its global stores are also visible
        to the block's threads afterwards (a copy-out read back by a later copy-in)."""
        return self.barrier_global if global_memory else self.barrier_local


_DIMS = "xyz"


class OpenCL(GpuDialect):
    """OpenCL C: its integer types, extensions and 64-bit constants declared."""

    def head(self, double: bool, half: bool) -> list[str]:
        lines = [f"typedef {SCALARS[t].opencl} {SCALARS[t].c};" for t in INT_TYPES]
        if double:
            lines.insert(0, "#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if half:
            lines.insert(0, "#pragma OPENCL EXTENSION cl_khr_fp16 : enable")
            lines.append(f"#define {_HALF.c} {_HALF.opencl}")
        return [*lines, "#define INT64_C(c) c##L", "#define INT64_MIN (-9223372036854775807L - 1)"]


class Cuda(GpuDialect):
    """CUDA C++: the C headers, and CUDA's half type where the program has one."""

    def head(self, double: bool, half: bool) -> list[str]:
        lines = ["#include <stdint.h>", "#include <math.h>"]
        if half:
            # half storage, computed in float by the printer (nvcc's own _Float16 crashes it).
            lines += ["#include <cuda_fp16.h>", f"#define {_HALF.c} {_HALF.cuda}"]
        return lines


_NO_OPENCL = frozenset({"j0", "j1", "y0", "y1", "nearbyint"})
OPENCL = OpenCL(
    name="opencl",
    inline="static inline",
    kernel="__kernel void {name}({params})",
    space="__global ",
    restrict="restrict",
    thread_id="(int)get_local_id({d})",
    block_id="(int)get_group_id({d})",
    cas="atomic_cmpxchg",
    shared="__local",
    barrier_local="barrier(CLK_LOCAL_MEM_FENCE);",
    barrier_global="barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
    # OpenCL's math builtins are overloaded: the float names of C map onto them.
    macros=tuple(f"#define {fn}f(...) {fn}(__VA_ARGS__)" for fn in sorted(LIBM - _NO_OPENCL)),
    missing=_NO_OPENCL,
)
CUDA = Cuda(
    name="cuda",
    inline="static __device__ __forceinline__",
    kernel='extern "C" __global__ void __launch_bounds__({threads}) {name}({params})',
    space="",
    restrict="__restrict__",
    thread_id="(int)threadIdx.{x}",
    block_id="(int)blockIdx.{x}",
    cas="atomicCAS",
    shared="__shared__",
    # __syncthreads orders the block's shared and global accesses alike.
    barrier_local="__syncthreads();",
    barrier_global="__syncthreads();",
)
DIALECTS: Mapping[str, GpuDialect] = {"opencl": OPENCL, "cuda": CUDA}


class _GpuPrinter(StatementPrinter):
    """The C-family statement printer with kernels, mapped loops and guards."""

    dialect: GpuDialect

    def __init__(self, scop: Scop, options: MappingOptions, dialect: GpuDialect) -> None:
        super().__init__(scop, dialect)
        self.options = options
        self.launch: Launch | None = None
        self.active: set[tuple[Unit, int]] = set()
        # Shared promotion: the open loops (iterator, may run more than once for a
        # block), the tiles in force by (statement, reference), the kernel's arrays.
        self.loops: list[tuple[str, bool]] = []
        self.tiles: dict[tuple[str, ir.Read], Tile] = {}
        self.cur_stmt = ""
        self.decls: list[str] = []
        # While a private element's block is printed: its accesses, held in `tc_v`.
        self.held: frozenset[tuple[str, ir.Read]] = frozenset()

    # -- expressions -----------------------------------------------------
    def user(self, node: isl.AstNode) -> tuple[ScopStmt, list[str]]:
        st, args = super().user(node)
        self.cur_stmt = st.name
        return st, args

    def expr(self, e: ir.Expr, env: Mapping[str, str]) -> str:
        if isinstance(e, ir.Read) and (self.cur_stmt, e) in self.held:
            return "tc_v"
        if isinstance(e, ir.Read) and (self.cur_stmt, e) in self.tiles:
            tile = self.tiles[(self.cur_stmt, e)]
            virtual = e.subscripts
            if tile.index is not None:
                form = indirect_form(e)
                assert form is not None
                virtual = form[1]
            subs = [f"(int)({self.expr(s, env)}) - {tile.name}_o{k}" for k, s in enumerate(virtual)]
            return f"{tile.name}[{_flat(subs, tile.sizes)}]"
        if isinstance(e, ir.Read) and any(map(ir.reads_tensor, e.subscripts)):
            # Indirect subscripts are clamped: a failed check is reported after the
            # kernels ran, and no thread may read outside a buffer meanwhile.
            shape = self.scop.shapes[e.tensor]
            subs = []
            for k, s in enumerate(e.subscripts):
                text = self.expr(s, env)
                if ir.reads_tensor(s):
                    text = f"tc_clamp((int64_t)({text}), {shape[k] - 1})"
                subs.append(text)
            return f"{cname(e.tensor)}[{self.linear(e.tensor, subs)}]"
        if isinstance(e, ir.Select) and e.cond.dtype in FLOAT_TYPES:
            # OpenCL C takes only an integer condition in `?:`: the truth value C takes
            # implicitly (nonzero, NaN included) is spelled out.
            zero = ir.Const(0, e.cond.dtype)
            truth = ir.Binary("!=", e.cond, zero, "bool", compute_type(e.cond.dtype))
            return super().expr(replace(e, cond=truth), env)
        return super().expr(e, env)

    def call(self, fn: str, args: list[str], dtype: str) -> str:
        if fn in self.dialect.missing:
            raise TcError(
                f"builtin '{fn}' has no {self.dialect.name} equivalent", hint="use target='cpu'"
            )
        ct = compute_type(dtype)
        if fn == "abs" and self.wraps_here(ct):
            # -INT_MIN overflows, which OpenCL C and CUDA leave undefined (clang then
            # took abs as nonnegative): negated in the unsigned type, abs(MIN) is MIN.
            self.tmp += 1
            a, c = f"_a{self.tmp}", C_TYPES[dtype]
            neg = self.wrapping("-", "0", a, ct)
            return f"({{ {c} {a} = ({c})({args[0]}); {a} < 0 ? ({c}){neg} : {a}; }})"
        if fn == "abs" and dtype == "float16":
            # In float, as the printer computes half (CUDA's __half < int is ambiguous).
            return f"(({C_TYPES[dtype]})({super().call(fn, args, ct)}))"
        return super().call(fn, args, dtype)

    def target(self, st: ScopStmt, env: Mapping[str, str]) -> str:
        """Where a statement stores: its private element, its element of a shared tile, or
        of the tensor."""
        ref = write_ref(st)
        if (st.name, ref) in self.held:
            return "tc_v"
        if (st.name, ref) in self.tiles:
            self.cur_stmt = st.name
            return self.expr(ref, env)
        return super().target(st, env)

    def reduces(self, node: isl.AstNode) -> bool:
        """A reduction loop as every target prints it, or a `reduce` nest of several."""
        return node.for_get_body().get_type() != isl.ast_node_type.user or super().reduces(node)

    def reduction_loop(self, node: isl.AstNode, depth: int) -> None:
        if node.for_get_body().get_type() != isl.ast_node_type.user:
            self.reduction_nest(node, depth)
            return
        # The right side's reads are looked up among this statement's promoted ones.
        self.cur_stmt = user_exprs(self.scop, node.for_get_body())[0].name
        super().reduction_loop(node, depth)

    def reduction_nest(self, node: isl.AstNode, depth: int) -> None:
        """A `reduce` mark above several loops (poly/gpu.py's `_reduce_start`): the output
        element stays in `acc` across the whole nest. Where isl printed no perfect nest,
        the loop is printed and the mark moves to the loops inside."""
        chain: list[isl.AstNode] = []
        cur = node
        while cur.get_type() == isl.ast_node_type.for_:
            chain.append(cur)
            cur = cur.for_get_body()
        if cur.get_type() != isl.ast_node_type.user:
            self.out(depth, self.for_header(node) + " {")
            self.node(node.for_get_body(), depth + 1, frozenset({Loop.REDUCE}))
            self.out(depth, "}")
            return
        st, args = self.user(cur)
        src = st.source
        env = self.stmt_env(st, args)
        acc, store_acc = self.open_accumulator(st, env, depth)
        self.out(
            depth + 1, f"// acc: the thread's output element in a register over {len(chain)} loops"
        )
        d = self.open_loops(chain, depth + 1)
        self.cur_stmt = st.name
        value = self.expr(src.rhs, env)
        self.out(d, f"acc = {combine(src.op, 'acc', f'({acc})({value})', acc)};")
        self.close(d, depth + 1)
        self.out(depth + 1, store_acc)
        self.out(depth, "}")

    def open_loops(self, loops: Sequence[isl.AstNode], depth: int) -> int:
        """Open each of a chain of loops inside the one before; the depth inside them."""
        for c in loops:
            self.out(depth, self.loop_open(c))
            depth += 1
        return depth

    def close(self, depth: int, outer: int) -> None:
        """Close the blocks opened at depths `outer` to `depth - 1`, innermost first."""
        for d in reversed(range(outer, depth)):
            self.out(d, "}")

    # -- mapped loops and guards ------------------------------------------
    def guard(self, node: isl.AstNode) -> list[tuple[Unit, int]]:
        """Dims with several threads (or blocks) that no loop in or above node is mapped
        to: only id 0 runs node, or every thread would run it."""
        missing = self.unmapped()
        if not missing:
            return []
        below = mapped_below(node)
        return [w for w in missing if w not in below]

    def unmapped(self) -> list[tuple[Unit, int]]:
        """Dims with several threads (or blocks) that no enclosing loop is mapped to."""
        assert self.launch is not None
        wanted = [(Unit.THREAD, d) for d, n in enumerate(self.launch.block) if n > 1]
        wanted += [(Unit.BLOCK, d) for d, n in enumerate(self.launch.grid) if n > 1]
        return [w for w in wanted if w not in self.active]

    def shared(self, body: isl.AstNode, tiles: Sequence[Tile], depth: int) -> None:
        """A copy of the `shared` mark with the tiles promotion.promoted_ast decided for
        it: copy them in (threads take strided parts), synchronize, run the body on the
        tiles; then, for written tiles, synchronize and copy them out (each thread computed
        its own elements, others store them); and synchronize again before a later
        iteration of an enclosing loop overwrites tiles other threads may still read (or
        copies in what this copy-out stored)."""
        assert self.launch is not None
        assert all(unit is not Unit.THREAD for unit, _ in self.active), "a diverging barrier"
        block = self.launch.block
        tid = self.ident(Unit.THREAD, 0)
        for d in range(1, len(block)):
            tid = f"{self.ident(Unit.THREAD, d)} * {math.prod(block[:d])} + {tid}"
        nthreads = math.prod(block)
        self.out(depth, "{")
        self.out(depth + 1, f"const int tc_tid = {tid};")
        for t in tiles:
            self.decls.append(self.dialect.shared_array(C_TYPES[t.dtype], t.name, t.elements))
            shape = "".join(f"[{n}]" for n in t.sizes)
            why = ", ".join(
                w for w, on in (("reused", t.reused), ("not coalesced", not t.coalesced)) if on
            )
            what = t.tensor if t.index is None else f"{t.tensor} rows through {t.index}"
            if t.written:
                why += "; written: copied out" + ("" if t.load else ", not copied in")
            self.out(depth + 1, f"// shared tile {t.name}: {what}{shape} ({why})")
            for k, off in enumerate(t.offsets):
                self.out(depth + 1, f"const int {t.name}_o{k} = {off};")
            if t.load:
                self.copy(t, nthreads, depth + 1, out=False)
        if any(t.load for t in tiles):
            self.out(depth + 1, self.dialect.barrier())
        self.tiles = {ref: t for t in tiles for ref in t.refs}
        self.node(body, depth + 1)
        self.tiles = {}
        stores = [t for t in tiles if t.written]
        if stores:
            # Each thread computed its own elements; other threads copy them out.
            self.out(depth + 1, self.dialect.barrier())
            for t in stores:
                self.copy(t, nthreads, depth + 1, out=True)
        if any(repeats for _, repeats in self.loops):
            # A later copy-in may read what this copy-out stored (global memory too).
            self.out(depth + 1, self.dialect.barrier(global_memory=bool(stores)))
        self.out(depth, "}")

    def copy(self, t: Tile, nthreads: int, depth: int, *, out: bool) -> None:
        """Global to shared (or back, `out`), element i of the tile by thread i mod
        nthreads (the last dimension fastest: neighbouring threads touch neighbouring
        addresses)."""
        n = t.elements
        trips = -(-n // nthreads)
        if self.options.unroll_copy_shared and trips <= _UNROLL_COPY:
            for j in range(trips):
                self.out(depth, "{")
                self.out(depth + 1, f"const int tc_i = tc_tid + {j * nthreads};")
                full = (j + 1) * nthreads <= n
                self.copy_element(t, depth + 1, None if full else f"tc_i < {n}", out)
                self.out(depth, "}")
            return
        self.out(depth, f"for (int tc_i = tc_tid; tc_i < {n}; tc_i += {nthreads}) {{")
        self.copy_element(t, depth + 1, None, out)
        self.out(depth, "}")

    def copy_element(self, t: Tile, depth: int, cond: str | None, out: bool) -> None:
        conds = [cond] if cond else []
        glob = []
        for k in range(len(t.sizes)):
            inner = math.prod(t.sizes[k + 1 :])
            local = f"tc_i / {inner}" if inner > 1 else "tc_i"
            if k > 0:
                local = f"({local}) % {t.sizes[k]}" if inner > 1 else f"tc_i % {t.sizes[k]}"
            g = f"tc_g{k}"
            self.out(depth, f"const int {g} = {t.name}_o{k} + {local};")
            glob.append(g)
            conds.append(f"{g} >= 0 && {g} < {t.bounds[k]}")
        if t.index is not None:
            # The reached row: the index clamped into bounds (a bad index is reported by
            # its check after the kernels ran; the copy must not read outside the buffer).
            k = len(self.scop.shapes[t.index])
            row = f"{cname(t.index)}[{self.linear(t.index, glob[:k])}]"
            first = f"tc_clamp((int64_t)({row}), {self.scop.shapes[t.tensor][0] - 1})"
            glob = [first, *glob[k:]]
        glob_text = f"{cname(t.tensor)}[{self.linear(t.tensor, glob)}]"
        dst, src = (glob_text, f"{t.name}[tc_i]") if out else (f"{t.name}[tc_i]", glob_text)
        self.out(depth, f"if ({' && '.join(conds)}) {dst} = {src};")

    def first(self, dims: Sequence[tuple[Unit, int]]) -> str:
        """The condition that this is id 0 along each of `dims` ("" for none)."""
        return " && ".join(f"{self.ident(k, d)} == 0" for k, d in dims)

    def ident(self, unit: Unit, d: int) -> str:
        return f"tc_{'t' if unit is Unit.THREAD else 'b'}{_DIMS[d]}"

    def node(self, node: isl.AstNode, depth: int, marks: frozenset[Loop] = frozenset()) -> None:
        guarded = self.guard(node)
        if guarded:
            self.out(depth, f"if ({self.first(guarded)}) {{")
            self.active |= set(guarded)
            self.node(node, depth + 1, marks)
            self.active -= set(guarded)
            self.out(depth, "}")
            return
        if node.get_type() == isl.ast_node_type.block and self.options.use_private_memory:
            # Not inside another: its statements write the same element, already in `tc_v`.
            held = held_element(self.scop, node) if not self.held else None
            if isinstance(held, HeldElement):
                self.private_element(node, held, depth, marks)
                return
        if node.get_type() == isl.ast_node_type.for_:
            if Loop.REDUCE in marks and node.for_is_degenerate():
                # A loop isl printed once inside a `reduce` nest: the mark goes on inward.
                self.out(depth, self.loop_open(node))
                self.node(node.for_get_body(), depth + 1, marks)
                self.out(depth, "}")
                return
            self.loops.append((node.for_get_iterator().to_C_str(), not node.for_is_degenerate()))
            super().node(node, depth, marks)
            self.loops.pop()
            return
        super().node(node, depth, marks)

    def mark(self, node: isl.AstNode, mark: Mark, depth: int, marks: frozenset[Loop]) -> None:
        """Mapped loops, a copy of a `shared` mark with tiles, private tiles; other marks
        (a copy without tiles among them) as every target."""
        if isinstance(mark, Mapped):
            self.mapped(node, mark, depth)
        elif isinstance(mark, SharedTiles):
            self.shared(node, mark.tiles, depth)
        elif isinstance(mark, PrivateTile):
            self.private_tile(node, mark, depth)
        else:
            super().mark(node, mark, depth, marks)

    def mapped(self, node: isl.AstNode, mark: Mapped, depth: int) -> None:
        """A loop mapped to blocks or threads: each id takes the iterations it owns
        (value / step modulo the count), so any bounds and any count work."""
        kind, d, it = mark.unit, mark.dim, mark.iterator
        assert self.launch is not None
        count = (self.launch.block if kind is Unit.THREAD else self.launch.grid)[d]
        is_loop = (
            node.get_type() == isl.ast_node_type.for_ and node.for_get_iterator().to_C_str() == it
        )
        if not is_loop or count <= 1:
            # isl printed no loop here (one iteration): not mapped, so guarded below.
            self.node(node, depth)
            return
        me = self.ident(kind, d)
        init = node.for_get_init().to_C_str()
        if node.for_is_degenerate():
            self.out(depth, f"{{ const int {it} = {init};")
            self.out(depth + 1, f"if (tc_first({it}, {mark.step}, {me}, {count}) == {it}) {{")
            inside, repeats = depth + 2, False
        else:
            inc, cond = node.for_get_inc(), node.for_get_cond()
            first = _first(node.for_get_init(), inc, me, count)
            step = f"{count} * {inc.to_C_str()}"
            self.out(depth, f"for (int {it} = {first}; {cond.to_C_str()}; {it} += {step}) {{")
            trips = _trips(node)
            inside, repeats = depth + 1, trips is None or trips > count
        self.active.add((kind, d))
        self.loops.append((it, repeats))
        self.node(node.for_get_body(), inside)
        self.loops.pop()
        self.active.discard((kind, d))
        self.close(inside, depth)

    # -- private tiles -------------------------------------------------------
    def tile_nest(
        self, node: isl.AstNode, tile: PrivateTile
    ) -> tuple[list[isl.AstNode], list[isl.AstNode], isl.AstNode]:
        """The AST of a decided private tile: its thread loops, the reduction loops below
        them (with any loop isl printed once among them) and the statement."""
        fors: list[isl.AstNode] = []
        cur = node
        while cur.get_type() != isl.ast_node_type.user:
            if cur.get_type() == isl.ast_node_type.for_:
                fors.append(cur)
                cur = cur.for_get_body()
            else:
                assert cur.get_type() == isl.ast_node_type.mark, "a private tile's nest"
                cur = cur.mark_get_node()
        return fors[: len(tile.loops)], fors[len(tile.loops) :], cur

    def private_tile(self, node: isl.AstNode, tile: PrivateTile, depth: int) -> None:
        """The private tile poly/private.py decided for the thread nest at node: the
        thread's outputs in a private array `tc_pv` (paper 5.4)."""
        fors, chain, user = self.tile_nest(node, tile)
        st, args = self.user(user)
        src = st.source
        env = self.stmt_env(st, args)
        tdt = self.program.tensors[src.tensor].dtype
        acc_t = compute_type(promote(tdt, src.rhs.dtype))
        acc = C_TYPES[acc_t]
        target = self.target(st, env)
        shape = "x".join(str(lp.per_thread) for lp in tile.loops)
        outer = sum(1 for c in chain if loop_depth(c) in tile.outside)
        self.out(depth, "{")
        held = f", held across {len(chain) - outer} of {len(chain)} loops" if outer else ""
        self.out(depth + 1, f"// private tile: {shape} outputs of {src.tensor} per thread{held}")
        top = self.open_loops(chain[:outer], depth + 1)
        self.out(top, f"{acc} tc_pv[{tile.size}];")
        start = acc_start(src.op, target, acc_t)
        self.thread_loops(fors, tile, top, lambda pv: f"{pv} = {start};")
        d = self.open_loops(chain[outer:], top)
        value = f"({acc})({self.expr(src.rhs, env)})"
        self.thread_loops(fors, tile, d, lambda pv: f"{pv} = {combine(src.op, pv, value, acc)};")
        self.close(d, top)
        self.thread_loops(fors, tile, top, lambda pv: f"{target} = {store(pv, tdt, acc_t)};")
        self.close(top, depth)

    def private_element(
        self, node: isl.AstNode, held: HeldElement, depth: int, marks: frozenset[Loop]
    ) -> None:
        """A block whose statements keep the element private.held_element decided in
        `tc_v`: loaded unless the first statement writes it, stored once after the block."""
        st, args = self.user(held.first)
        target = self.target(st, self.stmt_env(st, args))
        tdt = self.program.tensors[held.tensor].dtype
        load = "" if st.kind in ("init", "assign") else f" = {target}"
        self.out(depth, f"{{ // private: {held.tensor} element over {held.statements} statements")
        self.out(depth + 1, f"{C_TYPES[tdt]} tc_v{load};")
        self.held = held.refs
        super().node(node, depth + 1, marks)
        self.held = frozenset()
        # Its statements ran on id 0 of the dims no loop maps (a sibling's mapped loop
        # left the block itself unguarded), and so does its store: the other threads'
        # tc_v was never set.
        alone = self.first(self.unmapped())
        self.out(depth + 1, f"{f'if ({alone}) ' if alone else ''}{target} = tc_v;")
        self.out(depth, "}")

    def thread_loops(
        self,
        fors: Sequence[isl.AstNode],
        tile: PrivateTile,
        depth: int,
        body: Callable[[str], str],
    ) -> None:
        """The thread's iterations as unrolled counted loops (constant private indices,
        so the array stays in registers), each guarded by the loop's own bound; `body`
        is the line that runs on the thread's element `tc_pv[...]`."""
        ix = ""
        for k, (f, lp) in enumerate(zip(fors, tile.loops, strict=True)):
            it, reps = f.for_get_iterator().to_C_str(), lp.per_thread
            first = _owned(lp.first, lp.stride, self.ident(Unit.THREAD, lp.dim), lp.threads)
            if reps == 1:
                self.out(depth, "{")
            else:
                self.out(depth, "#pragma unroll")
                self.out(depth, f"for (int tc_r{k} = 0; tc_r{k} < {reps}; tc_r{k}++) {{")
                first += f" + tc_r{k} * {lp.stride * lp.threads}"
                ix = f"tc_r{k}" if not ix else f"({ix}) * {reps} + tc_r{k}"
            self.out(depth + 1, f"const int {it} = {first};")
            self.out(depth + 1, f"if ({f.for_get_cond().to_C_str()}) {{")
            depth += 2
        self.out(depth, body(f"tc_pv[{ix}]"))
        self.close(depth, depth - 2 * len(fors))

    # -- kernels -----------------------------------------------------------
    def params(self) -> list[str]:
        p = self.program
        out = []
        for n in [*p.inputs, *p.outputs, *p.temporaries]:
            t = p.tensors[n]
            out.append(self.dialect.pointer(C_TYPES[t.dtype], cname(n), const=t.role == "input"))
        out.append(self.dialect.pointer("int", "tc_code", const=False))
        out.append(self.dialect.pointer("int64_t", "tc_value", const=False))
        out.append("const int check")
        return out

    def kernels(self, ast: isl.AstNode | None, launches: Sequence[Launch]) -> str:
        """One function per kernel mark of the AST (isl prints none for a kernel whose
        statements have empty domains); self.used lists the launches printed."""
        self.used: list[Launch] = []
        marks = [] if ast is None else [ast]
        if ast is not None and ast.get_type() == isl.ast_node_type.block:
            marks = children(ast)
        params = ", ".join(self.params())
        out = []
        for m in marks:
            assert m.get_type() == isl.ast_node_type.mark
            kernel = of_node(m)
            assert isinstance(kernel, Kernel), f"{kernel} at the root of a kernel"
            launch = launches[kernel.index]
            self.used.append(launch)
            self.lines = []
            self.launch = launch
            threads = math.prod(launch.block)
            header = self.dialect.kernel.format(name=launch.name, params=params, threads=threads)
            self.out(0, header + " {")
            for d in range(len(launch.block)):
                tid = self.dialect.thread_id.format(d=d, x=_DIMS[d])
                self.out(1, f"const int {self.ident(Unit.THREAD, d)} = {tid};")
            for d in range(len(launch.grid)):
                bid = self.dialect.block_id.format(d=d, x=_DIMS[d])
                self.out(1, f"const int {self.ident(Unit.BLOCK, d)} = {bid};")
            self.out(1, "(void)tc_code; (void)tc_value; (void)check;")
            self.active = set()
            self.decls = []
            at = len(self.lines)
            self.node(m.mark_get_node(), 1)
            self.lines[at:at] = ["  " + d for d in self.decls]
            self.out(0, "}")
            out.append("\n".join(self.lines))
        self.launch = None
        return "\n\n".join(out)


_UNROLL_COPY = 16  # copies of at most this many elements per thread are unrolled


def _flat(subs: Sequence[str], sizes: Sequence[int]) -> str:
    """Row-major position in a tile."""
    text = f"({subs[0]})"
    for k in range(1, len(subs)):
        text = f"({text} * {sizes[k]} + ({subs[k]}))"
    return text


def _owned(first: int, step: int, me: str, count: int) -> str:
    """The first of the iterations `first`, `first + step`, ... that id `me` of `count`
    owns (the one of value / step modulo count): plainly first + me * step when id 0
    owns the first (PoCL 3.1 miscompiles the general form, which uses `%`, in kernels
    with barriers)."""
    r = (first // step) % count
    k = f"{me}" if r == 0 else f"({me} >= {r} ? {me} - {r} : {me} + {count - r})"
    return f"{first} + {k} * {step}" if first else f"{k} * {step}"


def _first(init: isl.AstExpr, inc: isl.AstExpr, me: str, count: int) -> str:
    """The first iteration id `me` owns of a loop from init by inc: `_owned` when both
    are constants, else the general form."""
    first, step = ast_int(init), ast_int(inc)
    if first is None or step is None or step < 1:
        return f"tc_first({init.to_C_str()}, {inc.to_C_str()}, {me}, {count})"
    return _owned(first, step, me, count)


def _trips(node: isl.AstNode) -> int | None:
    """Iterations of a loop of the isl AST whose bounds are constants."""
    found = constant_loop(node)
    if found is None or node.for_get_cond().get_op_arg(0).get_type() != isl.ast_expr_type.id:
        return None
    return found[1]


def program_dtypes(program: ir.Program) -> set[str]:
    """Every type a program computes in: its tensors' and its expressions' (a cast to
    half in a float program needs float16 too, both its prelude and cl_khr_fp16)."""
    out = {t.dtype for t in program.tensors.values()}
    for st in program.statements:
        for e in ir.walk(st.rhs):
            out.add(e.dtype)
            if isinstance(e, ir.Binary):
                out.add(e.compute)
    return out


def emit_gpu(
    scop: Scop,
    ast: isl.AstNode | None,
    mapping: GpuMapping,
    options: MappingOptions,
    dialect: GpuDialect,
) -> tuple[str, tuple[Launch, ...]]:
    """The kernels of a mapped program from its AST (promotion.promoted_ast), one function
    per launch, in launch order, and the launches that have a kernel."""
    printer = _GpuPrinter(scop, options, dialect)
    body = printer.kernels(ast, mapping.launches)
    used = tuple(printer.used)
    dtypes = program_dtypes(scop.program)
    double = "float64" in dtypes
    half = "float16" in dtypes
    launches = "\n".join(
        f"// launch {lc.name}: grid {list(lc.grid)} block {list(lc.block)}" for lc in used
    )
    clamp = "int64_t tc_clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }"
    text = f"{dialect.prelude(double, half)}\n{dialect.inline} {clamp}\n\n{launches}\n\n{body}\n"
    return text, used
