"""OpenCL kernels called from several threads at once (found by fuzzing): the first calls
of a process made several contexts (programs built in one, enqueued on another's queue:
INVALID_CONTEXT, for good), and calls of one kernel set the arguments of its shared
pyopencl Kernel objects under each other (wrong outputs, or a segfault). Each case runs
in a fresh process, whose first OpenCL call it needs; the oracle is NumPy."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_FIRST_CALLS = """
import numpy as np, tc_graph as tg
from concurrent.futures import ThreadPoolExecutor
fn = tg.define("def f(float(N) A) -> (B) { B(i) = A(i) * 2 }").f
arrays = [np.arange(n, dtype=np.float32) for n in range(1, 9)]
def call(a):
    return np.array_equal(fn(a, target="opencl"), a * 2)
with ThreadPoolExecutor(8) as ex:
    first = list(ex.map(call, arrays))
print(first, [call(a) for a in arrays[:3]])
"""

_MANY_CALLS = """
import sys
import numpy as np, tc_graph as tg
from concurrent.futures import ThreadPoolExecutor
sys.setswitchinterval(1e-6)  # switch threads often: the race shows within a second
fn = tg.define("def f(float(N) A, float(N) B) -> (C) { C(i) = A(i) * 2 + B(i) }").f
rng = np.random.default_rng(0)
data = [(rng.standard_normal(64).astype(np.float32), rng.standard_normal(64).astype(np.float32))
        for _ in range(64)]
k = fn.compile(*data[0], target="opencl")
def call(i):
    a, b = data[i % 64]
    return np.array_equal(k(a, b), a * 2 + b)
with ThreadPoolExecutor(16) as ex:
    print(list(ex.map(call, range(2000))).count(False), "wrong")
"""


def _run(script: str, tmp_path: Path) -> str:
    env = {**os.environ, "TC_GRAPH_CACHE": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                       text=True, cwd=ROOT, env=env, timeout=300)  # fmt: skip
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])
    return r.stdout.strip()


def test_first_calls_from_threads_share_one_context(tmp_path: Path) -> None:
    assert _run(_FIRST_CALLS, tmp_path) == f"{[True] * 8} {[True] * 3}"


def test_one_kernel_called_from_threads_computes_each_call(tmp_path: Path) -> None:
    assert _run(_MANY_CALLS, tmp_path) == "0 wrong"
