"""MappingOptions: every knob of scheduling, tiling and mapping, in one value."""

from __future__ import annotations

import json
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
    parallel_depth: 1 runs the outer parallel loop as an OpenMP `parallel for`,
      0 runs the kernel on one thread (collapsing deeper loops is not supported yet).
    vector_width: float lanes of one vector register (16 for AVX-512).
    register_tile: vectors of an output row kept in registers across a reduction
      (register_tile * vector_width outputs per tile; 0 turns register tiling off).
    threads: OpenMP threads (0: OpenMP's default).
    allow_skewing: schedule with isl's scheduler, which may skew loops (off by
      default, as in TC); allow_negative: also accept its negative coefficients
      (without it, such a schedule is replaced by tc_graph's own).
    """

    fusion: str = "max"
    tile: tuple[int, ...] = ()
    unroll: int = 1
    parallel_depth: int = 1
    vector_width: int = 16
    register_tile: int = 4
    threads: int = 0
    allow_skewing: bool = False
    allow_negative: bool = False

    def __post_init__(self) -> None:
        if self.fusion not in FUSION_STRATEGIES:
            raise TcError(
                f"unknown fusion strategy {self.fusion!r}",
                hint=f"use one of {', '.join(FUSION_STRATEGIES)}",
            )
        if any(not isinstance(t, int) or t < 1 for t in self.tile):
            raise TcError(f"tile sizes must be positive integers, got {self.tile}")
        for name in ("unroll", "parallel_depth", "vector_width", "register_tile", "threads"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 0:
                raise TcError(f"{name} must be a non-negative integer, got {v!r}")
        if self.parallel_depth > 1:
            raise TcError("parallel_depth above 1 (collapsed loops) is not supported yet")
        if self.unroll < 1:
            raise TcError("unroll must be at least 1 (1 turns unrolling off)")
        if self.vector_width not in (1, 2, 4, 8, 16, 32, 64):
            raise TcError(f"vector_width must be a power of two up to 64, got {self.vector_width}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> MappingOptions:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise TcError(f"unknown mapping options: {', '.join(sorted(unknown))}")
        if "tile" in data:
            data["tile"] = tuple(data["tile"])
        return cls(**data)

    def __str__(self) -> str:
        parts = [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)]
        return "MappingOptions(" + ", ".join(parts) + ")"


ROW_TILE = 8
"""Rows of a register tile in outer-product form (8 rows x 2 vectors = 16 accumulators)."""


def default_options(program: ir.Program) -> MappingOptions:
    """The defaults for one program: the outer loop tiled by ROW_TILE where a reduction
    has the outer-product form, so its register tiles hold that many rows (see
    docs/cpu.md); otherwise MappingOptions()."""
    if any(_outer_product(s) for s in program.statements):
        return MappingOptions(tile=(ROW_TILE,))
    return MappingOptions()


def _outer_product(s: ir.Statement) -> bool:
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
