"""Facts about this machine's cores that the compiler's choices rest on, measured by small
C probes built with the kernels' own flags: how many independent vector FMA chains keep a
core's FMA pipes busy (their latency times the FMAs it starts per cycle).

A core that starts one 512-bit FMA per cycle (Zen 4 runs them on two 256-bit halves) is
busy with 4 chains; a core with two 512-bit FMA pipes (Cascade Lake, Zen 5) needs 8. The
outer-product register block is sized from it (poly/contraction.blocking).
"""

from __future__ import annotations

import ctypes
import dataclasses
from collections.abc import Mapping

from ..options import VectorUnit
from . import cc

CHAINS = (4, 8, 12, 16)
"""The chain counts the probe times; the answer is one of them."""

BUSY = 0.75
"""A chain count keeps the pipes busy when it reaches this fraction of the best rate: a
core that starts two FMAs per cycle runs half as many chains as it needs at half its best
rate, one that starts one runs 4 chains at 0.85-0.9 of its best (the loop's own steps)."""

_SOURCE = """
#include <omp.h>
typedef float tc_vf __attribute__((vector_size({bytes})));
#define TC_FMA_LOOP(n) {{ \\
    tc_vf a[n]; \\
    for (int j = 0; j < n; j++) a[j] = (tc_vf){{0}} + (float)j; \\
    for (long i = 0; i < steps; i++) \\
      for (int j = 0; j < n; j++) a[j] = a[j] * x + y; \\
    for (int j = 0; j < n; j++) sink += a[j][0]; \\
  }}
/* Vector FMAs per second of `threads` threads, each running `chains` independent chains
   of `steps` FMAs: the best of five runs. */
double tc_fma_rate(int chains, int threads, long steps) {{
  double best = 0;
  for (int run = 0; run < 5; run++) {{
    double start = omp_get_wtime();
    float sink = 0;
    #pragma omp parallel num_threads(threads) reduction(+ : sink)
    {{
      const tc_vf x = (tc_vf){{0}} + 0.999f, y = (tc_vf){{0}} + 0.001f;
      switch (chains) {{
      case 4: TC_FMA_LOOP(4) break;
      case 8: TC_FMA_LOOP(8) break;
      case 12: TC_FMA_LOOP(12) break;
      default: TC_FMA_LOOP(16) break;
      }}
    }}
    double rate = (double)chains * steps * threads / (omp_get_wtime() - start);
    if (sink == sink && rate > best) best = rate;
  }}
  return best;
}}
"""


def fma_rate(chains: int, threads: int = 1, steps: int = 500_000) -> float:
    """Vector FMAs per second (each `vector_unit().floats` lanes wide) of `threads`
    threads running `chains` (one of CHAINS) independent chains each."""
    if chains not in CHAINS:
        raise ValueError(f"chains must be one of {CHAINS}, got {chains}")
    floats = cc.vector_unit().floats
    source = _SOURCE.format(bytes=4 * floats)
    path = cc.build(source, "fma_rate-" + cc.cache_key("tc_graph FMA rate probe", source))
    rate = cc.load(path).tc_fma_rate
    rate.restype, rate.argtypes = ctypes.c_double, (ctypes.c_int, ctypes.c_int, ctypes.c_long)
    return float(rate(chains, threads, steps))


@cc.per_compiler
def fma_chains() -> int:
    """The fewest independent FMA chains (of CHAINS) that keep one core's FMA pipes busy,
    measured once per process and compiler setting."""
    return fewest_chains({n: fma_rate(n) for n in CHAINS})


def fewest_chains(rates: Mapping[int, float]) -> int:
    """The fewest chains whose rate (FMAs per second, by chain count) is BUSY of the best."""
    best = max(rates.values())
    return min(n for n, r in rates.items() if r >= BUSY * best)


def vector_unit() -> VectorUnit:
    """The compiler's vector unit (cc.vector_unit), with this core's FMA chains where the
    kernels are built for this machine; under target_flags (a package for other CPUs)
    the unit's default."""
    unit = cc.vector_unit()
    if cc.active_target_flags():
        return unit
    return dataclasses.replace(unit, fma_chains=fma_chains())
