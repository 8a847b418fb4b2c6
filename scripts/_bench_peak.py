"""The machine's float32 FMA peak for `scripts/bench.py layers`: the ceiling the layers'
GFLOP/s are read against.

Each thread runs a loop of fused multiply-adds on 12 independent vector accumulators
(enough to cover the FMA latency on the cores we run on: two FMA pipes, 4 or 5 cycles
each), in the widest vectors the compiler targets with tc_graph's flags; the loop is
timed inside C, best of several runs.
"""

from __future__ import annotations

import ctypes

from tc_graph.runtime import cc

_SOURCE = """
#include <omp.h>
typedef float vf __attribute__((vector_size({bytes})));
double tc_fma_peak(int threads, long steps) {{
  double best = 0;
  for (int run = 0; run < 5; run++) {{
    double start = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+ : sink)
    {{
      vf a[12], x = (vf){{0}} + 0.999f, y = (vf){{0}} + 0.001f;
      for (int j = 0; j < 12; j++) a[j] = (vf){{0}} + (float)j;
      for (long i = 0; i < steps; i++)
        for (int j = 0; j < 12; j++) a[j] = a[j] * x + y;
      for (int j = 0; j < 12; j++) sink += a[j][0];
    }}
    double seconds = omp_get_wtime() - start;
    double rate = 2.0 * 12 * {floats} * steps * threads / seconds;
    if (sink == sink && rate > best) best = rate;
  }}
  return best;
}}
"""


def fma_peak(threads: int, steps: int = 20_000_000) -> float:
    """FLOP/s of `threads` threads doing nothing but vector FMAs (2 FLOPs each lane)."""
    floats = cc.vector_unit().floats
    source = _SOURCE.format(bytes=4 * floats, floats=floats)
    path = cc.build(source, "fma_peak-" + cc.cache_key("tc_graph bench FMA peak", source, ""))
    peak = ctypes.CDLL(str(path)).tc_fma_peak
    peak.restype, peak.argtypes = ctypes.c_double, (ctypes.c_int, ctypes.c_long)
    return float(peak(threads, steps))
