"""The onnxruntime phase ABI of docs/onnx.md: `tc_phase`, the kernel as a sequence of
phases whose iterations onnxruntime's thread pool runs in chunks, and the metadata that
describes it (tensors, temporaries, phases, checks).

How a phase runs is decided on the AST before it is printed (`phase_plan`); the CPU
statement printer then prints each phase once, in that mode.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import islpy as isl

from .. import ir
from ..lang.types import C_TYPES, ONNX_TYPES, SCALARS
from ..poly.cpu import instances
from ..poly.marks import Loop
from ..poly.proof import ast_nodes, children
from ..poly.scop import Scop
from .expr import cname
from .sizes import SIZES_ABI_VERSION, c_list, c_string, tc_shapes
from .stmt import user_exprs


class PhasePrinter(Protocol):
    """What the phase ABI needs of the CPU statement printer (codegen/c.py): its lines,
    its mode ("omp", "chunk" or "serial"), a node printed at a depth, the kernel's
    argument pointers, the temporaries the caller allocates, and the parallel loops a
    node prints outside every other loop."""

    scop: Scop
    program: ir.Program
    lines: list[str]
    mode: str

    def out(self, depth: int, text: str) -> None: ...

    def node(self, node: isl.AstNode, depth: int, marks: frozenset[Loop] = ...) -> None: ...

    def arguments(self) -> None: ...

    def sizes(self) -> None: ...

    def extent(self, tensor: str, k: int) -> str: ...

    def shared_temps(self) -> list[str]: ...

    def top_parallel(
        self, node: isl.AstNode, marks: frozenset[Loop], depths: Mapping[Loop, int | None]
    ) -> list[Parallel]: ...

    def phase_call(self, phase: int, trips: int | str) -> None: ...


ABI_VERSION = 1
"""Version of the library-kernel contract of docs/onnx.md."""

# The fewest statement instances of a phase worth a parallel run on onnxruntime's pool,
# in a kernel for every size (whose parallel loops were chosen at the sample, and may
# hold a few rows at other sizes). A BERT-style layer at 1 x 77 tokens, its loops chosen
# at 8 x 128 (Zen 4): phases of 4,000-15,000 instances took 0.4-2 us on one thread, less
# than a parallel run's start (2-3 us); its softmax, 99,000, 17.7 us.
MIN_PHASE_WORK = 1 << 16


@dataclass(frozen=True)
class Parallel:
    """A parallel loop that a node prints outside every other loop: its iterations (C
    text of the sizes in a kernel for every size; None where its bounds are not
    constants) and, in a kernel for every size, their number at the sample (None for a
    contraction's work items)."""

    trips: int | str | None
    sample: int | None = None
    doubled: int | None = None  # their number with every size twice the sample's


@dataclass(frozen=True)
class PhasePlan:
    """How tc_phase runs one top-level node: `trips` independent iterations of its
    parallel loop, or, where `serial` says why not, one iteration. In a kernel for every
    size, a run of fewer than `least` iterations is not worth onnxruntime's pool."""

    trips: int | str = 1
    serial: str | None = None
    least: int = 1
    split: bool = False  # its iterations are those of a parallel loop, run in chunks


def phase_plan(printer: PhasePrinter, node: isl.AstNode) -> PhasePlan:
    """How tc_phase runs a top-level node, decided before it is printed: split into
    the iterations of its one parallel loop outside every other loop when the node
    is one loop nest (code beside the loop would run once per chunk) and the loop's
    bounds are constants (expressions of the sizes in a kernel for every size, where
    the parallel loops directly inside it fold into it: codegen/forms.py's `folded_loops`);
    else as one iteration, with the reason."""
    if not _one_nest(node):
        return PhasePlan(serial="more than one loop nest")
    loops = printer.top_parallel(node, frozenset(), {})
    if len(loops) > 1:
        return PhasePlan(serial=f"{len(loops)} parallel loops outside every other loop")
    if not loops:
        return PhasePlan()
    (loop,) = loops
    if loop.trips is None:
        return PhasePlan(serial="its parallel loop's bounds are not constants")
    return PhasePlan(trips=loop.trips, least=_least_trips(printer, node, loop), split=True)


def doubled(scop: Scop) -> dict[str, int]:
    """The sizes of a scop for every size with each of its run-time sizes twice the
    sample's (where `_least_trips` asks whether an iteration's work grows)."""
    assert scop.symbolic is not None
    return {**scop.sizes, **{n: 2 * scop.sizes[n] for n in scop.symbolic.params}}


def _least_trips(printer: PhasePrinter, node: isl.AstNode, loop: Parallel) -> int:
    """The fewest iterations of a kernel for every size's phase worth onnxruntime's pool:
    as many as hold MIN_PHASE_WORK statement instances, where an iteration's instances
    are the same at every size (as at the sample and at twice its sizes); 1 (any two are
    worth it) where they grow with the sizes: a softmax's rows decided at 32 columns
    hold 4096 at (1, 256, 4096), a million elements that ran on one thread."""
    symbolic = printer.scop.symbolic
    if symbolic is None or loop.sample is None or loop.doubled is None:
        return 1
    names = {
        user_exprs(printer.scop, n)[0].name
        for n in ast_nodes(node)
        if n.get_type() == isl.ast_node_type.user
    }
    work = instances(printer.scop, names)
    twice = instances(printer.scop, names, ir.param_point(printer.program, doubled(printer.scop)))
    if work == 0 or work * loop.doubled != twice * loop.sample:
        return 1
    return max(1, -(-MIN_PHASE_WORK * loop.sample // work))


def _tops(ast: isl.AstNode) -> list[isl.AstNode]:
    """The nodes that run one after the other at the top of the AST, each a phase: a block
    inside the top one is where loops of one iteration printed none (a (1, 1, K) product's
    zeroing and sums, whose columns are a parallel loop of their own)."""
    if ast.get_type() != isl.ast_node_type.block:
        return [ast]
    return [top for child in children(ast) for top in _tops(child)]


Phase = tuple[isl.AstNode, PhasePlan]


def phase_plans(printer: PhasePrinter, ast: isl.AstNode | None) -> list[Phase]:
    """Each top-level node of the AST, a phase, with how it runs: decided once, for
    tc_kernel (run_phases) and tc_phase (phase_kernel) alike."""
    return [(top, phase_plan(printer, top)) for top in ([] if ast is None else _tops(ast))]


def run_phases(printer: PhasePrinter, phases: list[Phase]) -> None:
    """tc_kernel's body, phase after phase: a phase that tc_phase runs in chunks of its
    parallel loop is a call of tc_phase on each OpenMP thread's share of the iterations,
    so that its code is printed (and compiled) once, in tc_phase (printed in both, a
    kernel for every size took gcc twice as long); the others are printed here, in
    OpenMP's loops or plain (no parallel loop, several, bounds that are not constants,
    more than one loop nest)."""
    for k, (top, plan) in enumerate(phases):
        if plan.split:
            printer.phase_call(k, plan.trips)
        else:
            printer.node(top, 1)


def phase_signature(scop: Scop, name: str = "tc_phase") -> str:
    """tc_phase's C declarator (docs/onnx.md): a kernel for every size takes its sizes."""
    sizes = "const int64_t *sizes, " if scop.symbolic is not None else ""
    return (
        f"int {name}(int32_t phase, void *const *args, void *const *temps, "
        f"{sizes}int64_t lo, int64_t hi, int64_t *err)"
    )


def phase_kernel(printer: PhasePrinter, phases: list[Phase]) -> str:
    """tc_phase and the metadata of docs/onnx.md: the kernel as a sequence of phases,
    each top-level node of the AST one phase, for onnxruntime's thread pool.
    Call after the printer's kernel() (the temporaries it allocates are the caller's
    `temps` here; the local arrays poly/local.py decided are not among them).
    Of several phases, each is a function of its own, which tc_phase calls: in one,
    gcc 12 hoisted a constant of one phase (a relu's zero) out of its loops and kept it
    in a register across another's register block, whose accumulator then lived on the
    stack (ResNet-50's 1x1 1024 -> 256 before its relu: 1.5x slower)."""
    printer.lines = []
    symbolic = printer.scop.symbolic is not None
    if len(phases) == 1:  # tc_phase itself
        _phase_function(printer, 0, *phases[0], name="tc_phase")
    else:
        for k, (child, plan) in enumerate(phases):
            _phase_function(printer, k, child, plan, name=f"tc_phase_{k}")
        sizes = "sizes, " if symbolic else ""
        printer.out(0, f"{phase_signature(printer.scop)} {{")
        printer.out(1, "switch (phase) {")
        for k in range(len(phases)):
            call = f"tc_phase_{k}(phase, args, temps, {sizes}lo, hi, err)"
            printer.out(1, f"case {k}: return {call};")
        printer.out(1, "default: return -2;")
        printer.out(1, "}")
        printer.out(0, "}")
    plans = [plan for _, plan in phases]
    shapes = [] if not symbolic else [*tc_shapes(printer, plans), ""]
    return "\n".join([*_metadata(printer, plans), "", *shapes, *printer.lines])


def _phase_function(
    printer: PhasePrinter, k: int, child: isl.AstNode, plan: PhasePlan, *, name: str
) -> None:
    """Phase k's function `name`: the kernel's arguments and shared temporaries, then its
    node (tc_phase itself, of a kernel of one phase, refuses any other phase)."""
    p = printer.program
    lines, printer.lines = printer.lines, []
    printer.mode = "serial" if plan.serial else "chunk"
    printer.node(child, 1)
    printer.mode = "omp"
    body, printer.lines = printer.lines, lines
    own = "" if name == "tc_phase" else "static __attribute__((noinline)) "
    printer.out(0, f"{own}{phase_signature(printer.scop, name)} {{")
    if not own:
        printer.out(1, f"if (phase != {k}) return -2;")
    if printer.scop.symbolic is not None:
        printer.sizes()
    printer.out(1, "const int check = 1;")
    printer.out(1, "(void)check; (void)phase; (void)lo; (void)hi; (void)temps;")
    printer.arguments()
    for j, n in enumerate(printer.shared_temps()):
        c = C_TYPES[p.tensors[n].dtype]
        printer.out(1, f"{c} *restrict {cname(n)} = ({c} *)temps[{j}];")
    printer.out(1, "int code = 0;")
    printer.lines += body
    printer.out(0, "done:")
    printer.out(1, "return code;")
    printer.out(0, "}")


def _check_texts(printer: PhasePrinter) -> list[str]:
    """tc_check_text's entries: what each check code of the kernel tests, as C strings."""
    out = []
    for st in printer.scop.statements:
        if st.kind == "check":
            assert st.checked is not None
            extent = printer.extent(st.checked.tensor, st.checked_dim)
            text = f"subscript {st.checked_dim} of '{st.checked.tensor}' (extent {extent})"
            out.append(c_string(text))
    return out


def _metadata(printer: PhasePrinter, plans: list[PhasePlan]) -> list[str]:
    """The exported metadata of docs/onnx.md: with fixed sizes (ABI 1) the dimensions,
    temporaries' bytes and phases' iterations; for every size (ABI 2, whose tc_shapes
    computes those) the fewest iterations worth a parallel run and the number of sizes."""
    p, shapes, sym = printer.program, printer.scop.shapes, printer.scop.symbolic
    fixed = sym is None
    temps = printer.shared_temps()
    checks = _check_texts(printer)
    signature = [*p.inputs, *p.outputs]
    meta = [
        ("int32_t", "tc_abi_version", [ABI_VERSION if fixed else SIZES_ABI_VERSION]),
        ("int32_t", "tc_num_inputs", [len(p.inputs)]),
        ("int32_t", "tc_num_outputs", [len(p.outputs)]),
        ("int32_t", "tc_dtypes[]", [ONNX_TYPES[p.tensors[n].dtype] for n in signature]),
        ("int32_t", "tc_ranks[]", [p.tensors[n].rank for n in signature]),
        ("int64_t", "tc_dims[]", [d for n in signature for d in shapes[n]] if fixed else None),
        ("int32_t", "tc_output_zero[]", [int(p.tensors[n].zero_fill) for n in p.outputs]),
        ("int32_t", "tc_num_temps", [len(temps)]),
        ("int64_t", "tc_temp_bytes[]", [_bytes(shapes[n], p.tensors[n].dtype) for n in temps]
                                       if fixed else None),
        ("int32_t", "tc_temp_zero[]", [int(p.tensors[n].zero_fill) for n in temps]),
        ("int32_t", "tc_num_phases", [len(plans)]),
        ("int64_t", "tc_phase_trips[]", [int(plan.trips) for plan in plans] if fixed else None),
        ("int64_t", "tc_phase_least[]", None if fixed else [plan.least for plan in plans]),
        ("int32_t", "tc_num_sizes", None if sym is None else [len(sym.params)]),
    ]  # fmt: skip
    lines = [
        f"const {c} {name} = {c_list(values, scalar=not name.endswith('[]'))};"
        for c, name, values in meta
        if values is not None
    ]
    lines.append(f"const int32_t tc_num_checks = {len(checks)};")
    lines.append(f"const char *const tc_check_text[] = {{{', '.join(checks) or '0'}}};")
    return lines


def _one_nest(node: isl.AstNode) -> bool:
    """Whether an AST node is a single loop nest (or statement), seen through marks,
    guards without an else and loops of one iteration: nothing runs beside its outermost
    loop (an else branch would run once per chunk)."""
    while True:
        t = node.get_type()
        if t == isl.ast_node_type.mark:
            node = node.mark_get_node()
        elif t == isl.ast_node_type.if_ and not node.if_has_else_node():
            node = node.if_get_then_node()
        elif t == isl.ast_node_type.for_ and node.for_is_degenerate():
            node = node.for_get_body()
        else:
            return t not in (isl.ast_node_type.block, isl.ast_node_type.if_)


def _bytes(shape: Sequence[int], dtype: str) -> int:
    return max(1, math.prod(shape)) * SCALARS[dtype].bytes
