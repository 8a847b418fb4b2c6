"""MappingOptions: every knob of scheduling, tiling and mapping, in one value."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from . import ir
from .errors import TcError

FUSION_STRATEGIES = ("max", "preserve3coincident", "min")


@dataclass(frozen=True)
class MappingOptions:
    """How a TC is scheduled and mapped (the knobs of the TC paper, CPU side).

    fusion: "max" fuses every legal pair of sibling loops, "preserve3coincident"
      fuses only while the fused outer loops stay parallel (up to three of them),
      "min" fuses nothing.
    tile: tile sizes of the outer band, outermost first; () turns tiling off.
    unroll: innermost loops with at most this many iterations are fully unrolled
      (1 turns unrolling off).
    parallel_depth: 1 runs the outer parallel loop on OpenMP's threads (each a share of
      its iterations), 0 runs the kernel on one thread (collapsing deeper loops is not
      supported yet).
    vector_width: float lanes of one vector (16: AVX-512's register; the defaults a call
      gets, default_options, use its CPU's widest register: 8 with AVX2).
    register_tile: vectors of an output row kept in registers across a reduction
      (register_tile * vector_width outputs per tile; 0 turns register tiling off).
    dot_tile: rows x columns of outputs per tile of a dot-product contraction kernel
      (docs/cpu.md): their vector dot products share operand loads (at most 32 outputs;
      the defaults a call gets fit its CPU's registers: 2 x 4 with AVX2).
    micro_tile: rows x vectors of outputs an outer-product contraction keeps in registers
      (docs/cpu.md); () sizes it from the CPU's registers (AVX2: 6 x 2, AVX-512: 12 x 2).
    reduction_chunk: reduction elements a contraction tile sums per pass (0: as many as
      keep the tile's operand rows, or an outer product's packed panel, in half of L1).
    prefetch_distance: reduction steps ahead that rows reached through an index tensor
      are prefetched (2LUT's lookups; 0 turns prefetching off).
    threads: OpenMP threads (0: OpenMP's default).
    allow_skewing: schedule with isl's scheduler, which may skew loops (off by
      default, as in TC); allow_negative: also accept its negative coefficients
      (without it, such a schedule is replaced by tc_graph's own).

    GPU targets (opencl, cuda; docs/gpu.md):
    block: threads of a block, x (innermost mapped loop) first, up to 3 dims.
    grid: blocks of the grid, x first; () launches one block per tile. A grid smaller
      than the tiles makes blocks loop over them.
    use_shared_memory: copy the tiles of tensors a kernel only reads into shared (local)
      memory when they are reused or read non-coalesced (docs/gpu.md).
    unroll_copy_shared: write each thread's share of a copy out in full (small tiles).
    shared_depth: outer-band members above the tiles' position (0: right above the
      thread-mapped loops).
    max_shared_memory: bytes of shared memory the promoted tiles of a kernel may use.
    use_private_memory: keep each thread's output of a reduction in a register.
    private_depth: where a thread's output registers are placed, as a schedule depth d
      (the kernel's loop `c<d>`; 0: the default places). For d > 0 they are held across
      the reduction loops at depth >= d of the nest enclosing the update (at least the
      innermost loop): the accumulator (default: innermost loop only) rises to the
      outermost such loop; a private tile (default: all the loops) leaves the loops above
      d outside its load and store. Private elements are unaffected (docs/gpu.md).

    Every option is typed and bounded (_INTS, _TUPLES below: threads up to 1024, unroll
    up to 256, ...); anything else is a TcError naming the option and its range.
    """

    fusion: str = "max"
    tile: tuple[int, ...] = ()
    unroll: int = 1
    parallel_depth: int = 1
    vector_width: int = 16
    register_tile: int = 4
    dot_tile: tuple[int, int] = (4, 4)
    micro_tile: tuple[int, ...] = ()
    reduction_chunk: int = 0
    prefetch_distance: int = 8
    threads: int = 0
    allow_skewing: bool = False
    allow_negative: bool = False
    block: tuple[int, ...] = (32, 8)
    grid: tuple[int, ...] = ()
    use_shared_memory: bool = True
    use_private_memory: bool = True
    unroll_copy_shared: bool = False
    shared_depth: int = 0
    private_depth: int = 0
    max_shared_memory: int = 48 * 1024

    def __post_init__(self) -> None:
        """Every option within its bounds: options also come from models and the tuning
        database, and an unbounded one reached the runtime (threads=100000 crashed
        OpenMP, unroll=10**9 compiled for minutes: issue 12)."""
        for name in _TUPLES:
            v = getattr(self, name)
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))  # a list from JSON or a caller
        if not isinstance(self.fusion, str) or self.fusion not in FUSION_STRATEGIES:
            raise TcError(
                f"unknown fusion strategy {self.fusion!r}",
                hint=f"use one of {', '.join(FUSION_STRATEGIES)}",
            )
        for name in _FLAGS:
            if not isinstance(getattr(self, name), bool):
                raise TcError(f"{name} must be True or False, got {getattr(self, name)!r}")
        for name, (lo, hi, what) in _INTS.items():
            _check_int(name, getattr(self, name), lo, hi, what)
        for name, (most, hi, what) in _TUPLES.items():
            v = getattr(self, name)
            if not isinstance(v, tuple) or len(v) > most:
                raise TcError(
                    f"{name} must be a list of at most {most} integers, got {v!r}", hint=what
                )
            for t in v:
                _check_int(f"each of {name}", t, 1, hi, what)
        if len(self.dot_tile) != 2 or math.prod(self.dot_tile) > 32:
            raise TcError(
                f"dot_tile must be two positive integers (rows, columns) with at most 32 "
                f"outputs, got {self.dot_tile}"
            )
        if self.micro_tile and (len(self.micro_tile) != 2 or math.prod(self.micro_tile) > 32):
            raise TcError(
                f"micro_tile must be two positive integers (rows, vectors) with at most 32 "
                f"vectors, got {self.micro_tile}",
                hint="[] sizes it from the CPU's registers",
            )
        if not self.block:
            raise TcError("block needs at least one dimension")
        if math.prod(self.block) > 1024:
            raise TcError(f"a block has at most 1024 threads, got {math.prod(self.block)}")
        if self.vector_width not in (1, 2, 4, 8, 16, 32, 64):
            raise TcError(f"vector_width must be a power of two up to 64, got {self.vector_width}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> MappingOptions:
        """Options from their JSON text (a model's, the tuning database's), or the object
        it holds; anything malformed is a TcError."""
        data: Any = text
        if isinstance(text, str):
            try:
                data = json.loads(text)
            except (ValueError, RecursionError) as e:
                raise TcError(
                    f"mapping options are not valid JSON ({e}): {text[:80]!r}",
                    hint='write a JSON object such as {"tile": [8, 8], "unroll": 4}',
                ) from None
        if not isinstance(data, dict):
            raise TcError(
                f"mapping options must be a JSON object of option names, got {type(data).__name__}"
            )
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise TcError(
                f"unknown mapping options: {', '.join(sorted(map(str, unknown)))}",
                hint=f"the options are {', '.join(sorted(known))}",
            )
        return cls(**data)

    # Presets in the spirit of the TC paper's (section 6): starting points for tuning.
    @classmethod
    def naive(cls) -> MappingOptions:
        """No tiling choices, no promotion: the plainest correct mapping."""
        return cls(fusion="min", block=(32,), use_shared_memory=False, use_private_memory=False)

    @classmethod
    def pointwise(cls) -> MappingOptions:
        """Elementwise code: wide blocks over the innermost loops, nothing to promote."""
        return cls(fusion="max", tile=(8, 32), block=(32, 8), use_shared_memory=False)

    @classmethod
    def mlp(cls) -> MappingOptions:
        """Fully connected layers: a row of the batch per thread row, fused layers."""
        return cls(fusion="max", tile=(16, 32), block=(32, 4))

    @classmethod
    def convolution(cls) -> MappingOptions:
        """Convolutions: tiles of output rows and columns, input windows in shared memory."""
        return cls(fusion="max", tile=(1, 4, 8, 16), block=(16, 8, 4))

    @classmethod
    def group_convolution(cls) -> MappingOptions:
        """Grouped convolutions: one group's filters per block."""
        return cls(fusion="max", tile=(1, 1, 8, 4, 8), block=(8, 4, 8))

    def __str__(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)]
        return "MappingOptions(" + ", ".join(parts) + ")"


_INTS = {
    "unroll": (1, 256, "1 turns unrolling off; longer loops only bloat the code"),
    "parallel_depth": (0, 1, "0: one thread, 1: the outer parallel loop"),
    "register_tile": (0, 16, "0 turns register tiling off"),
    "reduction_chunk": (0, 2**31 - 1, "0 picks a chunk that fits L1"),
    "prefetch_distance": (0, 1024, "0 turns prefetching off"),
    "threads": (0, 1024, "0 uses OpenMP's default (OMP_NUM_THREADS, else one per core)"),
    "shared_depth": (0, 32, "a depth of the schedule's outer band; 0: above the threads"),
    "private_depth": (0, 32, "a depth of the schedule; 0: the default places"),
    "max_shared_memory": (0, 2**24, "bytes of shared memory (48 KiB by default)"),
    "vector_width": (1, 64, "a power of two: 16 for AVX-512"),
}
"""(lowest, highest, what the value means) of the integer options."""

_TUPLES = {
    "tile": (32, 2**31 - 1, "tile sizes, outermost loop first; [] turns tiling off"),
    "dot_tile": (2, 32, "rows and columns of a contraction tile, e.g. [4, 4]"),
    "micro_tile": (2, 32, "rows and vectors of an outer-product block, e.g. [6, 2]; [] picks"),
    "block": (3, 1024, "threads per block, x first, at most 1024 in all"),
    "grid": (3, 65535, "blocks of the grid, x first; [] launches one block per tile"),
}
"""(most entries, highest value, what it means) of the options that are lists of
positive integers."""

_FLAGS = (
    "allow_skewing", "allow_negative", "use_shared_memory", "use_private_memory",
    "unroll_copy_shared",
)  # fmt: skip


def _check_int(name: str, v: object, lo: int, hi: int, what: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise TcError(f"{name} must be an integer from {lo} to {hi}, got {v!r}", hint=what)


ROW_TILE = 8
"""Rows of a register tile in outer-product form (8 rows x 2 vectors = 16 accumulators)."""


@dataclass(frozen=True)
class VectorUnit:
    """The target CPU's vector registers: float lanes of the widest one, and how many there
    are. A machine fact, not an option: the C printer sizes register tiles by it."""

    floats: int = 16
    registers: int = 32
    fma_chains: int = 8
    """Independent FMA chains that keep one core's FMA pipes busy: their latency times the
    FMAs started per cycle (4 x 2 on two-pipe AVX-512 cores; runtime/machine measures it)."""


AVX512 = VectorUnit()
"""AVX-512's 32 registers of 16 floats: what MappingOptions() assumes."""


def default_options(program: ir.Program, unit: VectorUnit = AVX512) -> MappingOptions:
    """The defaults for one program on a CPU with this vector unit: vectors as wide as its
    registers, a dot-product tile that fits them, and the outer loop tiled by ROW_TILE
    where a reduction has the outer-product form, so its register tiles hold that many
    rows (see docs/cpu.md)."""
    tile = (ROW_TILE,) if any(outer_product(s) for s in program.statements) else ()
    return MappingOptions(tile=tile, vector_width=unit.floats, dot_tile=dot_tile(unit))


def dot_tile(unit: VectorUnit) -> tuple[int, int]:
    """The dot-product tile whose accumulators and operand vectors (rows x columns, plus
    rows + columns) fit the register file: 4 x 4 in AVX-512's 32 registers, 2 x 4 in
    AVX2's 16 (there 4 x 4 spilled its sums to the stack; 2 x 4 ran 1.2-1.3x faster on
    two Zen 3 cores)."""
    rows = 4 if unit.registers >= 32 else 2
    return rows, 4


def outer_product(s: ir.Statement) -> bool:
    """`O(..., i, j) += A(.. i ..) * B(.., j)`: one read broadcast along the output row j,
    another contiguous along it and independent of the row i."""
    if s.op != "+" or not s.reduction_vars or len(s.lhs) < 2:
        return False
    i, j = s.lhs[-2], s.lhs[-1]
    rows = cols = False
    for r in ir.reads(s.rhs):
        names = {n for x in r.subscripts for n in ir.index_names(x)}
        rows |= i in names and j not in names
        last = r.subscripts[-1] if r.subscripts else None
        cols |= isinstance(last, ir.Index) and last.name == j and i not in names
    return rows and cols
