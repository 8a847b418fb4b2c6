"""The machine's float32 FMA peak for `scripts/bench.py layers`: the ceiling the layers'
GFLOP/s are read against.

Each thread runs 12 independent chains of vector FMAs (enough to cover the FMA latency on
the cores we run on) in the widest vectors the compiler targets with tc_graph's flags:
runtime/machine's probe, timed inside C, best of several runs.
"""

from __future__ import annotations

from tc_graph.runtime import cc, machine


def fma_peak(threads: int, steps: int = 20_000_000) -> float:
    """FLOP/s of `threads` threads doing nothing but vector FMAs (2 FLOPs each lane)."""
    return 2 * cc.vector_unit().floats * machine.fma_rate(12, threads, steps)
