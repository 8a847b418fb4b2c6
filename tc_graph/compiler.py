"""The compiler driver: the one path from a call's arguments to a kernel, in named stages.

    bind ─▶ prepare ─▶ scop ─▶ schedule ─▶ mapped ─▶ ast ─▶ text ─▶ library

Every entry point compiles through `kernel` (the API, the command line, the autotuner
through the API, the ONNX path) or prints through `source` and `show` (the golden files,
`tc-graph compile --emit`), so a call's arguments are bound once and untuned calls start
from the same options: the tuning database's best, else `default_options`. Each stage is a
function of the frozen values of the stages before it; `show` prints any of them, as
Triton keeps its intermediates.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import islpy as isl
import numpy as np

from . import binding, ir
from .codegen.c import emit, loop_forms
from .errors import TcError
from .lang.canonical import canonical
from .lang.sema import CheckedDef
from .options import AVX512, MappingOptions, VectorUnit
from .options import default_options as program_defaults
from .poly.cpu import map_cpu
from .poly.gpu import GpuMapping, Launch, gpu_schedule, map_gpu
from .poly.inline import inline_copies, snapshot_in_place, widen_reductions
from .poly.promotion import promoted_ast
from .poly.proof import annotated_ast
from .poly.schedule import build_schedule
from .poly.scop import Scop, build_scop, symbolic_for
from .runtime import cc, machine
from .runtime.kernel import ENTRY, Kernel, code_version, library_for
from .runtime.parametric import ParametricKernel
from .tune import db

TARGETS = ("cpu", "opencl", "cuda")
# What `show` prints: a stage of the target's pipeline, or the text of one dialect.
STAGES = ("scop", "schedule", "mapped", "ast", "forms", "c", "cuda", "opencl")


class Function(Protocol):
    """What the driver needs of a TC function (a tg.TcFunction): its checked def, and its
    program for given integer scalars. The API depends on this module, not the other way
    round."""

    @property
    def checked(self) -> CheckedDef: ...

    def program_for(self, sizes: dict[str, int]) -> ir.Program: ...


@dataclass(frozen=True, eq=False)
class Bound:
    """A call's arguments bound to a def (once per call): the program for its integer
    scalars, the inputs as arrays of the declared dtypes, the values of the size names,
    and the concrete shapes of the outputs and temporaries."""

    fn: Function
    args: tuple[Any, ...]
    program: ir.Program
    arrays: Mapping[str, np.ndarray]
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]

    @property
    def checked(self) -> CheckedDef:
        return self.fn.checked

    @property
    def output_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(self.shapes[o] for o in self.program.outputs)

    @property
    def output_dtypes(self) -> tuple[np.dtype, ...]:
        return tuple(np.dtype(self.checked.tensors[o].dtype) for o in self.checked.outputs)


@dataclass(frozen=True, eq=False)
class Prepared:
    """The program as the back end compiles it (in-place updates read a snapshot,
    reductions accumulate in their compute type, copies are inlined), with every size,
    constants included, and the shape of every tensor."""

    program: ir.Program
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]


@dataclass(frozen=True, eq=False)
class Mapped:
    """The mapped schedule tree: every decision a mark on it. GPU targets add their
    launches and shared-memory sites."""

    schedule: isl.Schedule
    gpu: GpuMapping | None = None


@dataclass(frozen=True)
class Text:
    """A kernel's source in one dialect, and its launches in order (GPU targets)."""

    target: str
    text: str
    launches: tuple[Launch, ...] = ()


def bind(fn: Function, args: Sequence[Any]) -> Bound:
    """Check the arguments against the def, and the preconditions range inference could
    not prove against their sizes."""
    arrays, sizes = binding.bind_inputs(fn.checked, args)
    program = fn.program_for(sizes)
    binding.check_preconditions(program, sizes)
    return Bound(fn, tuple(args), program, arrays, sizes, binding.tensor_shapes(program, sizes))


def default_options(
    program: ir.Program, target: str, unit: VectorUnit | None = None
) -> MappingOptions:
    """The untuned options of every entry point: options.default_options of the program,
    for this machine's vector unit on the cpu target unless `unit` says which (GPU
    mappings read no vector unit: AVX-512's, MappingOptions()'s, stands in)."""
    if unit is None:
        unit = machine.vector_unit() if target == "cpu" else AVX512
    return program_defaults(program, unit)


def default_options_for(fn: Function, args: Sequence[Any], target: str = "cpu") -> MappingOptions:
    """The untuned options of a call."""
    return default_options(bind(fn, args).program, target)


def options_for(bound: Bound, target: str, options: MappingOptions | None) -> MappingOptions:
    """The options a call compiles with: the given ones, else the best tuned on this
    machine, else the defaults. Reading the database never starts a search: tuning runs
    only when asked (tg.autotune, `tc-graph tune`, tg.optimize(tune=True))."""
    if options is not None:
        return options
    known = db.best_options(db.key_parts(bound.fn, bound.args, target))
    return known if known is not None else default_options(bound.program, target)


def prepare(bound: Bound) -> Prepared:
    program = widen_reductions(snapshot_in_place(bound.program))
    shapes = {
        **{n: a.shape for n, a in bound.arrays.items()},
        **binding.tensor_shapes(program, bound.sizes),
    }
    sizes = {**bound.sizes, **program.constants}
    return Prepared(inline_copies(program, sizes), sizes, shapes)


def scop(prepared: Prepared, target: str, options: MappingOptions) -> Scop:
    """Domains, accesses and dependences. On the CPU, dot products take their tiled forms
    when register tiles are on (whole "contract" statements unless isl schedules)."""
    p = prepared
    if target == "cpu":
        return build_scop(
            p.program,
            p.sizes,
            p.shapes,
            contractions=options.register_tile > 0,
            kernels=not options.allow_skewing,
        )
    return build_scop(p.program, p.sizes, p.shapes, contractions=False)


def schedule(scop: Scop, target: str, options: MappingOptions) -> isl.Schedule:
    """The fused schedule, over the CPU's loop order or the GPU's (parallel loops out)."""
    return build_schedule(scop, options) if target == "cpu" else gpu_schedule(scop, options)


def mapped(scop: Scop, tree: isl.Schedule, target: str, options: MappingOptions) -> Mapped:
    if target == "cpu":
        return Mapped(map_cpu(tree, scop, options))
    gpu = map_gpu(tree, scop, options)
    return Mapped(gpu.schedule, gpu)


def ast(scop: Scop, tree: Mapped, options: MappingOptions) -> isl.AstNode | None:
    """The isl AST of the mapped tree, as the printers build it (marks are its comments;
    a GPU kernel's shared-memory tiles are decided on it); None for a program without
    statements."""
    if not scop.statements:
        return None
    if tree.gpu is None:
        return annotated_ast(scop, tree.schedule)
    blocks = [lc.block for lc in tree.gpu.launches]
    return promoted_ast(scop, tree.schedule, tree.gpu.sites, blocks, options)


def text(
    scop: Scop, tree: Mapped, target: str, options: MappingOptions, unit: VectorUnit = AVX512
) -> Text:
    """The printed kernel: C + OpenMP for a CPU with this vector unit, or CUDA or OpenCL."""
    if tree.gpu is None:
        return Text(target, emit(scop, tree.schedule, options, name=ENTRY, unit=unit))
    from .codegen.gpu import DIALECTS, emit_gpu

    body, launches = emit_gpu(scop, ast(scop, tree, options), tree.gpu, options, DIALECTS[target])
    return Text(target, body, launches)


def source(
    prepared: Prepared, target: str, options: MappingOptions, unit: VectorUnit = AVX512
) -> Text:
    """scop → schedule → mapped → text."""
    s = scop(prepared, target, options)
    return text(s, mapped(s, schedule(s, target, options), target, options), target, options, unit)


def _library_key(
    bound: Bound, prepared: Prepared, options: MappingOptions, *, every_size: bool = False
) -> str:
    """A CPU library's cache key: for these shapes, or for every size (the ranks, and the
    sample's sizes, where its choices are made)."""
    d, arrays = bound.checked, bound.arrays
    sizes = bound.sizes if every_size else {n: bound.sizes[n] for n in d.index_scalars}
    return cc.cache_key(
        code_version(),
        "cpu-every-size" if every_size else "cpu",
        canonical(prepared.program.source)[0],
        d.name,
        repr(sorted((n, str(arrays[n].dtype), arrays[n].ndim if every_size else arrays[n].shape)
                    for n in d.inputs)),
        repr(sorted(sizes.items())),
        options.to_json(),
    )  # fmt: skip


def library(bound: Bound, prepared: Prepared, options: MappingOptions) -> Path:
    """The CPU kernel's shared library: the cache's, or generated and built now (in a
    child process under a compile_timeout)."""
    key = _library_key(bound, prepared, options)
    generate = functools.partial(_cpu_text, prepared, options, machine.vector_unit())
    return library_for(key, bound.checked.name, generate)


def _cpu_text(prepared: Prepared, options: MappingOptions, unit: VectorUnit) -> str:
    """The C of a CPU kernel (a function of its pickled arguments: the builder runs it)."""
    return source(prepared, "cpu", options, unit).text


def _every_size_text(prepared: Prepared, options: MappingOptions, unit: VectorUnit) -> str:
    """The C of a CPU kernel for every size, its choices taken at the prepared sizes."""
    s = scop_every_size(prepared, options)
    tree = mapped(s, schedule(s, "cpu", options), "cpu", options)
    return text(s, tree, "cpu", options, unit).text


def kernel(bound: Bound, target: str, options: MappingOptions | None = None) -> Kernel:
    """The kernel of a bound call, with `options_for`'s options: a loaded CPU library,
    OpenCL built for the device, or CUDA text with its launches."""
    if target not in TARGETS:
        raise TcError(f"target '{target}' cannot compile yet", hint="use target='cpu'")
    options = options_for(bound, target, options)
    prepared = prepare(bound)
    if target == "cpu":
        return Kernel(
            checked=bound.checked,
            program=prepared.program,
            sizes=prepared.sizes,
            shapes=prepared.shapes,
            options=options,
            target=target,
            library=library(bound, prepared, options),
        )
    from .runtime.gpu import GpuSource

    gpu = source(prepared, target, options)
    made = GpuSource(gpu.text, gpu.launches, prepared.program, prepared.sizes, prepared.shapes)
    if target == "cuda":
        from .runtime.cuda import CudaKernel

        return CudaKernel(bound.checked, made, options)  # type: ignore[return-value]
    from .runtime.opencl import OpenclKernel

    return OpenclKernel(bound.checked, made, options)  # type: ignore[return-value]


# Names the C of a kernel for every size uses itself: a size of one of these names could
# not be declared as the C variable its loop bounds read.
_C_NAMES = re.compile(
    r"(?:[abcjrt]\d+|_.*|t_.*|tc_.*|acc.*|args|sizes|temps|phase|check|err|code|done|v|s|lo|"
    r"scratch|bytes|memset|aligned_alloc|size_t|"
    r"hi|bi|mask|min|max|floord|INFINITY|NAN|"
    r"auto|break|case|char|const|continue|default|do|double|else|enum|extern|float|for|goto|"
    r"if|inline|int|long|register|restrict|return|short|signed|sizeof|static|struct|switch|"
    r"typedef|union|unsigned|void|volatile|while|exp|log|sqrt|tanh|fabs|pow|erf|free|malloc|"
    r"calloc|int\d+_t|uint\d+_t|[A-Za-z_]\w*__\w*)"
)


def for_every_size(options: MappingOptions) -> MappingOptions:
    """The options of a kernel for every size: unrolled loops, whose plans read the sizes,
    are off."""
    return replace(options, unroll=1)


def prepare_every_size(bound: Bound) -> Prepared:
    """`prepare` for a kernel for every size: copies stay (whether a copy covers its
    whole tensor is decided at sizes); `sizes` and `shapes` are the call's, its sample."""
    program = widen_reductions(snapshot_in_place(bound.program))
    # Integer scalars used as sizes are constants of the kernel (ParametricKernel checks them).
    scalars = {n: bound.sizes[n] for n in program.params if n not in program.size_params}
    program = replace(program, constants={**program.constants, **scalars})
    shapes = {
        **{n: a.shape for n, a in bound.arrays.items()},
        **binding.tensor_shapes(program, bound.sizes),
    }
    return Prepared(program, {**bound.sizes, **program.constants}, shapes)


def _check_size_names(program: ir.Program) -> None:
    for n in program.params:
        if _C_NAMES.fullmatch(n):
            raise TcError(
                f"size '{n}' has a name the generated C uses itself; a kernel for every "
                "size cannot declare it",
                hint=f"rename '{n}' in the TC (upper-case size names never clash)",
            )


def scop_every_size(prepared: Prepared, options: MappingOptions) -> Scop:
    """The scop for every size, sampled at the prepared call's sizes (1 x C dot tiles
    where register tiles are on); its size names checked (parametric_kernel)."""
    p = prepared
    return build_scop(
        p.program,
        p.sizes,
        p.shapes,
        contractions=options.register_tile > 0,
        symbolic=symbolic_for(p.program, p.sizes),
    )


def parametric_kernel(bound: Bound, options: MappingOptions | None = None) -> ParametricKernel:
    """The CPU kernel of a bound call's def for every shape (its dtypes and integer
    scalars fixed), with `options_for`'s options as `for_every_size` leaves them.
    Mapping choices are taken at the call's sizes (part of the key)."""
    options = for_every_size(options_for(bound, "cpu", options))
    prepared = prepare_every_size(bound)
    _check_size_names(prepared.program)
    d = bound.checked
    key = _library_key(bound, prepared, options, every_size=True)
    generate = functools.partial(_every_size_text, prepared, options, machine.vector_unit())
    return ParametricKernel(
        checked=d,
        program=prepared.program,
        params=tuple(n for n in prepared.program.params if n not in prepared.program.constants),
        scalars={n: bound.sizes[n] for n in d.index_scalars},
        options=options,
        library=library_for(key, d.name, generate),
    )


def _yaml(tree: isl.Schedule) -> str:
    printer = isl.Printer.to_str(isl.DEFAULT_CONTEXT).set_yaml_style(isl.yaml_style.BLOCK)
    return printer.print_schedule(tree).get_str()


def describe_scop(s: Scop) -> str:
    """The scop as text: each statement's domain, reads and writes, then the dependences."""
    lines = []
    for st in s.statements:
        lines += [
            f"{st.name} ({st.kind}): {st.domain}",
            f"  reads: {st.reads}",
            f"  writes: {st.writes}",
        ]
    lines.append(f"dependences: {s.dependences}")
    return "\n".join(lines) + "\n"


def describe_mapped(tree: Mapped) -> str:
    """The mapped tree as block YAML, and the GPU launches."""
    launches = tree.gpu.launches if tree.gpu is not None else ()
    lines = [f"# launch {lc.name}: grid {list(lc.grid)} block {list(lc.block)}" for lc in launches]
    return "\n".join([*lines, _yaml(tree.schedule)])


def show(bound: Bound, stage: str, target: str, options: MappingOptions | None = None) -> str:
    """One stage's output as text (`tc-graph compile --emit`): `stage` is one of STAGES;
    a dialect's text ("c", "cuda", "opencl") names its own target, the other stages are
    those of `target`'s pipeline. Nothing is built."""
    if stage in ("c", "cuda", "opencl"):
        target = "cpu" if stage == "c" else stage
    options = options_for(bound, target, options)
    s = scop(prepare(bound), target, options)
    if stage == "scop":
        return describe_scop(s)
    tree = schedule(s, target, options)
    if stage == "schedule":
        return _yaml(tree)
    done = mapped(s, tree, target, options)
    if stage == "mapped":
        return describe_mapped(done)
    if stage == "ast":
        node = ast(s, done, options)
        return node.to_C_str() if node is not None else ""
    unit = machine.vector_unit() if target == "cpu" else AVX512
    if stage == "forms":
        if target != "cpu":
            raise TcError(
                f"--emit forms shows the CPU printer's loop forms, not {target}'s",
                hint="use --target cpu, or --emit mapped for a GPU's mapping",
            )
        return loop_forms(s, done.schedule, options, unit=unit)
    return text(s, done, target, options, unit).text
