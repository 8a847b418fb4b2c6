"""The CPU backend (C + OpenMP through the system compiler) against independent oracles:
the hand-written NumPy of the reference tests and the reference evaluator on every
accepted program of the conformance table."""

from __future__ import annotations

import itertools
import platform
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_graph as tg
from tc_graph import compiler
from tc_graph.options import VectorUnit
from tc_graph.poly import contraction
from tc_graph.runtime import cc, machine
from tests.oracles import check_numpy_call, check_numpy_case, check_reference_case
from tests.tolerances import assert_matches
from tests.unit import test_conformance as conf
from tests.unit import test_reference as ref


def _as_tuple(x: Any) -> tuple[np.ndarray, ...]:
    return x if isinstance(x, tuple) else (x,)


@pytest.mark.parametrize("c", ref.CASES, ids=lambda c: c.name)
def test_cpu_matches_numpy(c: ref.Case) -> None:
    check_numpy_call(c, "cpu")


@pytest.mark.parametrize("case", conf.SHAPE_CASES, ids=[c["name"] for c in conf.SHAPE_CASES])
def test_cpu_matches_reference(case: dict[str, Any]) -> None:
    check_reference_case(case, "cpu")


# A fixed representative subset, run under the option matrix (pairwise, not the product).
SUBSET = (
    "matmul", "conv2d", "max_pool_2x2", "2LUT", "MLP1_in_place", "MLP3_temporaries",
    "softmax", "layer_norm", "batched_matmul",
)  # fmt: skip
OPTION_SETS = [
    tg.MappingOptions(fusion=f, tile=t, register_tile=r)
    for f, t, r in [
        ("max", (), 4),
        ("max", (8, 8), 0),
        ("preserve3coincident", (), 0),
        ("preserve3coincident", (4, 16), 4),
        ("min", (), 4),
        ("min", (16,), 0),
    ]
]


def _subset_cases() -> list[ref.Case]:
    by_name = {c.name: c for c in ref.CASES}
    return [by_name[name] for name in SUBSET]


@pytest.mark.parametrize(
    ("c", "options"),
    [
        (c, OPTION_SETS[(i + j) % len(OPTION_SETS)])
        for i, c in enumerate(_subset_cases())
        for j in range(2)
    ],
    ids=lambda x: x.name if isinstance(x, ref.Case) else f"{x.fusion}-{x.tile}-{x.register_tile}",
)
def test_cpu_options_match_numpy(c: ref.Case, options: tg.MappingOptions) -> None:
    check_numpy_case(c, "cpu", options)


def test_option_matrix_covers_every_value_pair() -> None:
    pairs = {(o.fusion, bool(o.tile), bool(o.register_tile)) for o in OPTION_SETS}
    fusions = {"max", "preserve3coincident", "min"}
    for f, t in itertools.product(fusions, (False, True)):
        assert any(p[0] == f and p[1] == t for p in pairs)
    for f, r in itertools.product(fusions, (False, True)):
        assert any(p[0] == f and p[2] == r for p in pairs)


MATMUL = "def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }"
MLP3 = """
def MLP3(float(B,N) I, float(O,N) W2, float(O) B2, float(P,O) W3, float(P) B3,
         float(Q,P) W4, float(Q) B4) -> (O4) {
  O2(b,o) = B2(o)
  O2(b,o) += I(b,n) * W2(o,n)
  O2(b,o) = fmax(O2(b,o), 0)
  O3(b,p) = B3(p)
  O3(b,p) += O2(b,o) * W3(p,o)
  O3(b,p) = fmax(O3(b,p), 0)
  O4(b,q) = B4(q)
  O4(b,q) += O3(b,p) * W4(q,p)
  O4(b,q) = fmax(O4(b,q), 0)
}
"""


def test_matmul_code_has_parallel_and_simd_loops() -> None:
    """A matmul too small for a contraction kernel (16 rows, 16 steps) keeps plain loops."""
    a = np.ones((16, 16), np.float32)
    b = np.ones((16, 24), np.float32)
    src = tg.define(MATMUL).mm.compile(a, b).source
    # the parallel loop is tc_phase's, which tc_kernel runs on OpenMP's threads
    assert "#pragma omp parallel" in src and "code = tc_phase(" in src
    assert "#pragma omp simd" in src


def test_mlp3_is_one_kernel_with_one_parallel_region() -> None:
    rng = np.random.default_rng(0)
    shapes = [(16, 12), (8, 12), (8,), (6, 8), (6,), (2, 6), (2,)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    kernel = tg.define(MLP3).MLP3.compile(*args, options=tg.MappingOptions(fusion="max"))
    assert kernel.source.count("#pragma omp parallel") == 1
    i, w2, b2, w3, b3, w4, b4 = args
    o2 = np.maximum(i @ w2.T + b2, 0)
    o3 = np.maximum(o2 @ w3.T + b3, 0)
    want = np.maximum(o3 @ w4.T + b4, 0)
    np.testing.assert_allclose(kernel(*args), want, rtol=1e-4, atol=1e-5)


def test_indirect_index_out_of_bounds_is_an_error_not_a_read() -> None:
    fn = tg.define("def g(float(N) X, int(M) I) -> (Z) { Z(i) = X(I(i)) }").g
    x = np.arange(4, dtype=np.float32)
    with pytest.raises(tg.TcError, match="out of bounds"):
        fn(x, np.array([0, 4], np.int32))
    np.testing.assert_array_equal(fn(x, np.array([3, 1], np.int32)), [3, 1])


@pytest.mark.parametrize(
    "options",
    [
        tg.MappingOptions(allow_skewing=True),
        tg.MappingOptions(allow_skewing=True, allow_negative=True, fusion="min"),
        tg.MappingOptions(unroll=8, register_tile=0, parallel_depth=0),
        tg.MappingOptions(vector_width=8, register_tile=2, tile=(2, 4)),
        tg.MappingOptions(prefetch_distance=0),
        tg.MappingOptions(prefetch_distance=32, register_tile=8),
    ],
    ids=[
        "isl-scheduler",
        "isl-negative-min",
        "unrolled-serial",
        "narrow-vectors",
        "no-prefetch",
        "far-prefetch",
    ],
)
@pytest.mark.parametrize("name", ["matmul", "2LUT", "MLP3_temporaries", "conv1d", "softmax"])
def test_more_options_match_numpy(name: str, options: tg.MappingOptions) -> None:
    c = next(c for c in ref.CASES if c.name == name)
    args = c.args()
    expected = c.oracle(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        fn = tg.define(c.source)[c.entry]
    got = _as_tuple(fn(*args, options=options))
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        assert_matches(g, e, f"{c.name} output {k} under {options}")


def test_options_round_trip_json_and_reject_nonsense() -> None:
    o = tg.MappingOptions(fusion="min", tile=(8, 16), unroll=4, threads=2)
    assert tg.MappingOptions.from_json(o.to_json()) == o
    assert "fusion='min'" in str(o)
    with pytest.raises(tg.TcError, match="fusion"):
        tg.MappingOptions(fusion="some")
    with pytest.raises(tg.TcError, match="unknown mapping options"):
        tg.MappingOptions.from_json('{"tiles": [1]}')


def test_one_kernel_called_from_several_threads_at_once() -> None:
    from concurrent.futures import ThreadPoolExecutor

    kernel = tg.define(MATMUL).mm.compile(
        np.ones((64, 32), np.float32), np.ones((32, 48), np.float32)
    )
    rng = np.random.default_rng(1)
    pairs = [
        (
            rng.standard_normal((64, 32)).astype(np.float32),
            rng.standard_normal((32, 48)).astype(np.float32),
        )
        for _ in range(16)
    ]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda ab: kernel(*ab), pairs * 4))
    for (a, b), got in zip(pairs * 4, results, strict=True):
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


CONTRACTIONS = """
def tmm(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,kk) * B(n,kk) }
def acc(float(M,K) A, float(N,K1) B, float(M,N) C0) -> (C) {
  C(m,n) = C0(m,n)
  C(m,n) += 0.5 * A(m,kk) * B(n,kk+1) - A(m,kk)
}
def btmm(float(G,M,K) A, float(G,N,K) B) -> (C) { C(g,m,n) +=! A(g,m,kk) * B(g,n,kk) }
"""


@pytest.mark.parametrize(
    ("m", "n", "k"),
    [
        (8, 12, 256),
        (9, 13, 300),
        (4, 4, 257),
        (130, 5, 263),
        (7, 12, 100),
        (6, 9, 70),
        (7, 10, 1700),
    ],
)
def test_long_contractions_match_numpy(m: int, n: int, k: int) -> None:
    """Long dot products take a contraction kernel (the dot form's tiles, or with 8 rows
    or more and a reduction under 1024 the outer form's blocks: full tiles, row and
    column remainders, reduction tails) with and without `!`."""
    rng = np.random.default_rng(m * n + k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    mod = tg.define(CONTRACTIONS)
    kernel = mod.tmm.compile(a, b)
    # Many rows, or some and a reduction not too long: the outer-product kernel, B's rows
    # packed as panels.
    outer = m >= contraction.OUTER_ROWS or (
        m >= contraction.OUTER_FEW_ROWS and k < contraction.LONG_DOT
    )
    assert ("_bp[" if outer else "tc_vf acc0_0") in kernel.source
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b.T, rtol=1e-4, atol=1e-3)
    b1 = rng.standard_normal((n, k + 1)).astype(np.float32)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    want = (
        c0 + 0.5 * (a.astype(np.float64) @ b1[:, 1:].T) - a.sum(axis=1, dtype=np.float64)[:, None]
    )
    # With another statement on C, only a long reduction gets the contraction kernel.
    assert ("for (int ai = 0" in mod.acc.compile(a, b1, c0).source) == (k >= 256)
    np.testing.assert_allclose(mod.acc(a, b1, c0), want, rtol=1e-4, atol=1e-3)
    ga = rng.standard_normal((3, m, k)).astype(np.float32)
    gb = rng.standard_normal((3, n, k)).astype(np.float32)
    want = np.einsum("gmk,gnk->gmn", ga.astype(np.float64), gb.astype(np.float64))
    assert ("_bp[" if outer else "tc_vf acc0_0") in mod.btmm.compile(ga, gb).source
    np.testing.assert_allclose(mod.btmm(ga, gb), want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    "subscript", ["K - 1 - k", "299 - k", "(K - 1) - k", "k", "k + 0", "1 + k - 1"]
)
@pytest.mark.parametrize("parametric", [False, True])
def test_a_reduction_index_read_backwards_is_no_vector_load(
    subscript: str, parametric: bool
) -> None:
    """A(i, 299 - k) reads the row backwards as k grows: no vector of consecutive k
    (the dot-product form loaded A[299 - r0 .. 314 - r0], wrong sums and reads past the
    last row; `k + c` and `c + k` still are)."""
    fn = tg.define(
        f"def f(float(M, K) A, float(K) B) -> (O) {{ O(i) +=! A(i, {subscript}) * B(k) }}"
    ).f
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    kernel = fn.compile(a, b, parametric=parametric)
    np.testing.assert_allclose(kernel(a, b), fn(a, b, target="reference"), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("rows", [1, 13, 37, 200])
@pytest.mark.parametrize("transposed", [False, True])
def test_batched_rows_of_one_match_numpy(rows: int, transposed: bool) -> None:
    """A (rows, 1, K) by (K, N) product, as a rows node's kernel has it: the batch index is
    the register block's rows (full blocks and tails), in both operand orders."""
    rng = np.random.default_rng(rows)
    a = rng.standard_normal((rows, 1, 300)).astype(np.float32)
    w = rng.standard_normal((70, 300) if transposed else (300, 70)).astype(np.float32)
    read = "W(n, k)" if transposed else "W(k, n)"
    decl = "float(N, K) W" if transposed else "float(K, N) W"
    source = f"def mm(float(B, M, K) A, {decl}) -> (Y) {{ Y(b, m, n) +=! A(b, m, k) * {read} }}"
    wt = w.T if transposed else w
    np.testing.assert_allclose(tg.define(source).mm(a, w), a.astype(np.float64) @ wt,
                               rtol=1e-4, atol=1e-3)  # fmt: skip


@pytest.mark.parametrize(
    ("dot_tile", "chunk"), [((4, 5), 0), ((3, 8), 64), ((1, 8), 1024), ((8, 3), 80), ((5, 4), 256)]
)
def test_contraction_tile_shapes_and_reduction_chunks_match_numpy(
    dot_tile: tuple[int, int], chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tile shape (full tiles and both remainders, power-of-two and other counts of
    lane sums) and reduction chunk (chunks with a tail, `!` only on the first) computes
    the same contraction."""
    # The dot-product form at 11 rows (over 300 steps they take the outer form): a
    # reduction long enough to keep it prints a tile per chunk, and gcc took 40 s.
    monkeypatch.setattr(contraction, "OUTER_FEW_ROWS", 12)
    rng = np.random.default_rng(sum(dot_tile) + chunk)
    a = rng.standard_normal((11, 300)).astype(np.float32)
    b = rng.standard_normal((13, 300)).astype(np.float32)
    options = tg.MappingOptions(dot_tile=dot_tile, reduction_chunk=chunk)
    kernel = tg.define(CONTRACTIONS).tmm.compile(a, b, options=options)
    rows, cols = dot_tile
    assert (
        f"acc{rows - 1}_{cols - 1} = " in kernel.source and f"acc{rows}_0 = " not in kernel.source
    )
    np.testing.assert_allclose(kernel(a, b), a.astype(np.float64) @ b.T, rtol=1e-4, atol=1e-3)
    with pytest.raises(tg.TcError, match="dot_tile"):
        tg.MappingOptions(dot_tile=(8, 8))


def test_second_process_reuses_the_compiled_kernel(tmp_path: Any) -> None:
    """A kernel compiled by one process is loaded by the next without the compiler."""
    import os
    import subprocess
    import sys

    script = (
        "import numpy as np, tc_graph as tg\n"
        "from tc_graph.runtime import cc\n"
        f"fn = tg.define({MATMUL!r}).mm\n"
        "a = np.ones((8, 4), np.float32); b = np.ones((4, 6), np.float32)\n"
        "assert (fn(a, b) == 4).all()\n"
        "print(cc.compilations)\n"
    )
    env = {**os.environ, "TC_GRAPH_CACHE": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
        for _ in range(2)
    ]
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    # The first compiles the kernel and runtime/machine's FMA probe; the second neither.
    assert [r.stdout.strip() for r in runs] == ["2", "0"]


def test_full_size_mlp3_stays_one_parallel_region() -> None:
    """One parallel loop over the batch; the hidden layers O2 and O3 are contracted to
    per-thread rows (no heap temporaries)."""
    rng = np.random.default_rng(0)
    shapes = [(128, 128), (64, 128), (64,), (32, 64), (32,), (2, 32), (2,)]
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    kernel = tg.define(MLP3).MLP3.compile(*args, options=tg.MappingOptions(fusion="max"))
    assert kernel.source.count("#pragma omp parallel") == 1
    assert "const int64_t tc_kernel_scratch_bytes = (int64_t)(0);" in kernel.source
    i, w2, b2, w3, b3, w4, b4 = (a.astype(np.float64) for a in args)
    want = np.maximum(np.maximum(np.maximum(i @ w2.T + b2, 0) @ w3.T + b3, 0) @ w4.T + b4, 0)
    np.testing.assert_allclose(kernel(*args), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("source", "shapes", "oracle"),
    [
        (
            "def mm(float(M,K) A, float(K,N) B) -> (Y) { Y(m,n) +=! A(m,k) * B(k,n) }",
            [(1, 64), (64, 64)],
            lambda a, b: a @ b,
        ),
        (
            "def r(float(D0,D1,D2) X) -> (Y) { Y(i0,i2) +=! X(i0,k1,i2) }",
            [(1, 50, 64)],
            lambda x: x.sum(axis=1),
        ),
    ],
    ids=["matmul_one_row", "reduce_one_batch"],
)
def test_one_iteration_dimension_is_not_the_parallel_loop(
    source: str, shapes: list[tuple[int, ...]], oracle: Any
) -> None:
    """isl prints no loop for a size-1 dimension; its parallel mark must not fall on the
    reduction loop below it (two threads would race on every sum)."""
    rng = np.random.default_rng(5)
    args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fn = tg.define(source)[tg.define(source).names[0]]
    kernel = fn.compile(*args, options=tg.MappingOptions(threads=2))
    for _ in range(40):
        assert_matches(kernel(*args), oracle(*args), "size-1 output dimension")


def test_the_fma_chains_are_measured_for_this_machine_only() -> None:
    """machine.vector_unit adds the probe's answer to the compiler's unit; for a package
    built for other CPUs (target_flags) it keeps the default."""
    if platform.machine() != "x86_64":
        pytest.skip("the other CPUs' flags here are x86's")
    unit = machine.vector_unit()
    assert (unit.floats, unit.registers) == (cc.vector_unit().floats, cc.vector_unit().registers)
    assert unit.fma_chains in machine.CHAINS and all(machine.fma_rate(n) > 0 for n in (4, 16))
    with cc.target_flags(["-march=x86-64-v2"]):
        assert machine.vector_unit() == cc.vector_unit() == VectorUnit(4, 16)
    with pytest.raises(ValueError, match="chains"):
        machine.fma_rate(5)


def test_the_vector_unit_is_the_cpus() -> None:
    """-march=native targets this CPU: its widest vector registers, from /proc/cpuinfo."""
    flags = set()
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            flags = set(line.partition(":")[2].split())
            break
    if not flags or platform.machine() != "x86_64":
        pytest.skip("no x86 /proc/cpuinfo flags here")
    want = 16 if "avx512f" in flags else 8 if "avx" in flags else 4
    assert cc.vector_unit().floats == want
    got = compiler.default_options_for(
        tg.define("def f(float(N) A) -> (B) { B(i) = A(i) }").f, (np.zeros(3, np.float32),)
    )
    # and its register file: a dot-product tile of 4 x 4 in AVX-512's 32, 2 x 4 in 16
    tile = (4, 4) if "avx512f" in flags else (2, 4)
    assert got == tg.MappingOptions(vector_width=want, dot_tile=tile)


@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32, 64])
def test_vector_widths_other_than_the_register(width: int) -> None:
    """Register tiles pin operand loads with an asm operand; vectors of several
    registers (16 floats without AVX-512, 32 and 64 floats) cannot be pinned, nor can a
    vector of one float, and must still compile and compute (16 did not compile on an
    AVX2 CPU, nor 1 anywhere, found by fuzzing: "impossible constraint in 'asm'"). Also
    the outer-product form's kernel (128 x 64 x 128)."""
    rng = np.random.default_rng(9)
    fn = tg.define("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }").mm
    for m, k, n in [(16, 32, 256), (128, 64, 128)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        kernel = fn.compile(a, b, options=tg.MappingOptions(vector_width=width, tile=(8,)))
        assert "_v0" in kernel.source, "the register tile with shared operand loads is not used"
        assert_matches(kernel(a, b), a @ b, f"matmul at vector width {width}")


def test_a_kernel_pickles_as_its_library() -> None:
    """A pickled kernel loads its library again instead of compiling (the autotuner's
    sandbox runs candidates so); the copy computes the same values."""
    import pickle

    rng = np.random.default_rng(11)
    a = rng.standard_normal((9, 7)).astype(np.float32)
    b = rng.standard_normal((7, 5)).astype(np.float32)
    fn = tg.define("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }").mm
    kernel = fn.compile(a, b)
    copy = pickle.loads(pickle.dumps(kernel))
    assert copy.library == kernel.library and copy.options == kernel.options
    np.testing.assert_allclose(copy(a, b), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    with pytest.raises(tg.TcError):
        copy(b, a)


@pytest.mark.parametrize("m", [24, 20])
@pytest.mark.parametrize("n", [16, 17, 31, 47, 80, 83])
@pytest.mark.parametrize("register_tile", [1, 2, 4])
def test_register_tiles_with_every_column_remainder_match_numpy(
    m: int, n: int, register_tile: int
) -> None:
    """The outer-product register tiles (8 rows where they divide the rows, else one)
    cover n columns as full tiles, then one tile of the whole vectors left, then scalar
    accumulators for the last columns; a `+=` without `!` accumulates into out=."""
    rng = np.random.default_rng(n * register_tile + m)
    a = rng.standard_normal((m, 37)).astype(np.float32)
    b = rng.standard_normal((37, n)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)  # += into out= is the point here
        fn = tg.define("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) += A(m,k) * B(k,n) }")
    options = tg.MappingOptions(tile=(8,), register_tile=register_tile)
    kernel = fn.mm.compile(a, b, options=options)
    # Half the CPU's vector registers are accumulators, shared by the tile's rows.
    rows = 8 if m % 8 == 0 else 1
    tile = 16 * min(register_tile, n // 16, cc.vector_unit().registers // 2 // rows)
    assert ("const int j0 = " in kernel.source) == ((n % tile) // 16 > 0)
    assert ("float t0 = " in kernel.source) == (n % 16 > 0)
    c0 = rng.standard_normal((m, n)).astype(np.float32)
    got = kernel(a, b, out=c0.copy())
    np.testing.assert_allclose(got, c0 + a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


LUT = """
def lut(float(E,D) T, int32(B,L) I) -> (O) {
  O(b,d) +=! T(I(b,l),d)
}
"""


@pytest.mark.parametrize("tile", [(16, 8, 1), (512, 2048, 1), (4, 8, 2), ()])
def test_isl_scheduler_keeps_checks_first_and_reductions_serial(tile: tuple[int, ...]) -> None:
    """With allow_skewing (isl's scheduler): the index checks run before the reads they
    guard (isl sees no dependence between them), and a first tile size that covers its
    loop does not hand the parallel loop to the reduction below (two threads race)."""
    rng = np.random.default_rng(len(tile))
    table = rng.standard_normal((1000, 8)).astype(np.float32)
    index = rng.integers(0, 1000, (16, 6)).astype(np.int32)
    options = tg.MappingOptions(tile=tile, allow_skewing=True, threads=2)
    kernel = tg.define(LUT).lut.compile(table, index, options=options)
    # the phases' functions follow the metadata, in order (tc_kernel calls tc_phase for
    # the split ones, which calls them)
    body = kernel.source[kernel.source.rindex("tc_phase_trips") :]
    assert body.index("if (check)") < body.index("t_T["), "a read before its index check"
    want = table[index].sum(axis=1)
    for _ in range(20):  # a race shows up as a wrong sum now and then
        np.testing.assert_allclose(kernel(table, index), want, rtol=1e-5, atol=1e-5)
    bad = index.copy()
    bad[3, 2] = 1000
    with pytest.raises(tg.TcError, match=r"out of range|index"):
        kernel(table, bad)


def test_prefetched_lookups_under_row_tiles_compile_and_match_numpy() -> None:
    """Rows of a lookup prefetched inside an 8-row register tile: each row's index is
    prefetched with that row's number (the row loop is unrolled into the tile)."""
    rng = np.random.default_rng(3)
    table = rng.standard_normal((5000, 64)).astype(np.float32)
    index = rng.integers(0, 5000, (16, 50)).astype(np.int32)
    options = tg.MappingOptions(tile=(4,), register_tile=1, prefetch_distance=32)
    kernel = tg.define(LUT).lut.compile(table, index, options=options)
    assert kernel.source.count("__builtin_prefetch(&t_T[") >= 4
    np.testing.assert_allclose(kernel(table, index), table[index].sum(axis=1), rtol=1e-5, atol=1e-4)


CONTRACTION_THEN_LOOKUP = """
def f(float(B, M) A, float(N, M) W) -> (C) {
  T1(b, n) +=! A(b, m) * W(n, m)
  C(b, n) = T1(b, n) * A(b, n % M)
}
"""


@pytest.mark.parametrize("fusion", ["max", "preserve3coincident", "min"])
def test_isl_scheduler_with_a_dot_product_contraction(fusion: str) -> None:
    """allow_skewing on a long dot product followed by a statement isl fuses it with
    (issue 12, item 9: an AssertionError, "a contraction is one perfect nest")."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    w = rng.standard_normal((16, 64)).astype(np.float32)
    fn = tg.define(CONTRACTION_THEN_LOOKUP).f
    want = fn(a, w, target="reference")
    got = fn(a, w, options=tg.MappingOptions(allow_skewing=True, fusion=fusion))
    assert_matches(got, want, "f")


CHECK_OF_COMPUTED_INDEX = """
def main(int64(N, M, K) A, int32 s, int32(M) I4) -> (T7) {
  T1(i0, i1, i2) = (abs(float(A(i0, i1, i2))) ? A(i0, M - 1, i2) : A(i0, i1, i2))
  T3(i0, i1) +=! T1(i0, i1, T1(i0, i1, max(min(I4(i1), K - 1), 0)) % K)
  T7(i0, i1, i2) *=! ((T1(i0, i1, i2) + s) + T1(i0, i1, i2)) where r0 in 0:s
}
"""


def _check_of_computed_index() -> tuple[Any, tuple[Any, ...]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)  # T3 is unused, r0 only repeats
        fn = tg.define(CHECK_OF_COMPUTED_INDEX).main
    a = np.arange(4, dtype=np.int64).reshape(1, 4, 1)
    return fn, (a, np.int32(2), np.arange(4, dtype=np.int32))


@pytest.mark.parametrize("fusion", ["max", "min"])
def test_isl_scheduler_checks_computed_indices_after_their_writers(fusion: str) -> None:
    """An index check of values the program computes (T1 read as T1's subscript) follows
    T1's writer: ordering every check before every statement made a cycle, and an
    islpy.Error ("unable to carry dependences") escaped (fuzzer finding)."""
    fn, args = _check_of_computed_index()
    options = tg.MappingOptions(allow_skewing=True, fusion=fusion)
    with warnings.catch_warnings():
        warnings.simplefilter("error", tg.TcWarning)  # isl's schedule, no fallback
        got = fn(*args, options=options)
    assert_matches(got, fn(*args, target="reference"), "T7")


def test_isl_scheduler_failure_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """Where isl's scheduler finds no schedule, ours is used and a TcWarning says why; no
    islpy.Error leaves the public API."""
    import islpy as isl

    from tc_graph.poly import schedule

    def fail(*_args: Any) -> None:
        raise isl.Error("unable to carry dependences in /isl_scheduler.c:1")

    monkeypatch.setattr(schedule, "isl_schedule", fail)
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))  # compile, not a cached kernel
    fn, args = _check_of_computed_index()
    with pytest.warns(tg.TcWarning, match="allow_skewing: .*unable to carry dependences"):
        got = fn(*args, options=tg.MappingOptions(allow_skewing=True))
    assert_matches(got, fn(*args, target="reference"), "T7")


def test_isl_scheduler_runs_on_a_bounded_budget(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """isl's scheduler gets an operation budget (a fuzzed program kept it busy for minutes):
    past it, ours is used with a TcWarning, and the kernel still computes the reference's
    values. A budget of 10 operations is always exceeded."""
    from tc_graph.poly import schedule

    monkeypatch.setattr(schedule, "SCHEDULE_MAX_OPERATIONS", 10)
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))  # compile, not a cached kernel
    fn, args = _check_of_computed_index()
    with pytest.warns(tg.TcWarning, match="maximal number of operations exceeded"):
        got = fn(*args, options=tg.MappingOptions(allow_skewing=True))
    assert_matches(got, fn(*args, target="reference"), "T7")
    import islpy as isl

    assert isl.DEFAULT_CONTEXT.get_max_operations() == 0  # the budget is not left behind


REDUCTION_BESIDE_A_LONGER_NEST = """
def f(float(N,M) B, float(K) A) -> (O, P) {
  O(i) +=! B(r, k) where exists A(i)
  P(i, j) = A(j) where i in 0:M + 1
}
"""


def test_a_reduction_fused_at_one_value_of_a_parallel_loop_stays_serial() -> None:
    """The outer loop is parallel: O's nest has one value of it (r = 0), so isl prints
    O's loops apart, and the parallel mark fell on O's reduction loop k (issue 12,
    item 6: two threads summed into O at once). The conftest's mark check fails the
    kernel too."""
    b = np.ones((1, 4000), np.float32)
    a = np.ones(64, np.float32)
    fn = tg.define(REDUCTION_BESIDE_A_LONGER_NEST).f
    want = fn(b, a, target="reference")
    kernel = fn.compile(b, a, options=tg.MappingOptions(threads=2))
    for _ in range(20):  # a race shows up as a wrong sum now and then
        for g, w in zip(kernel(b, a), want, strict=True):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("parametric", [False, True])
@pytest.mark.parametrize("k", [18, 20])
def test_an_infinity_in_a_dot_product_sums_to_infinity(parametric: bool, k: int) -> None:
    """The last partial vector of a dot product is summed once more over its final
    `width` elements with the lanes already summed masked off: masked by multiplying with
    0, an infinite product there made 0 * inf = NaN where NumPy gives inf. The mask is a
    selection of bits (test first: NaN in the fixed and the every-size kernel)."""
    fn = tg.define("def d(float(M,K) A, float(N,K) B) -> (O) { O(i,j) +=! A(i,k) * B(j,k) }").d
    a, b = np.ones((3, k), np.float32), np.ones((5, k), np.float32)
    a[0, 5], b[4, 6] = np.inf, -np.inf
    kernel = fn.compile(a, b, parametric=parametric)
    assert "mask" in kernel.source, "not the dot-product form with a masked last vector"
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(kernel(a, b), a @ b.T)


_CLANG = next(
    (path for name in ("clang", *(f"clang-{v}" for v in range(22, 13, -1)))
     if (path := shutil.which(name))),
    None,
)  # fmt: skip
_SHUFFLING = """
def tbmm(float(B,N,M) X, float(B,K,M) Y) -> (Z) { Z(b,n,k) +=! X(b,n,m) * Y(b,k,m) }
def rows(float(N,M) A) -> (S) { S(i) +=! A(i,j) }
def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }
"""


@pytest.mark.skipif(_CLANG is None, reason="no clang on this machine")
@pytest.mark.parametrize("parametric", [False, True])
def test_kernels_that_shuffle_lanes_are_c_that_clang_accepts(
    tmp_path: Path, parametric: bool
) -> None:
    """The lane shuffles of horizontal sums, dot tiles and outer-product transposes were
    gcc's __builtin_shuffle, which clang does not have: no such kernel compiled with
    CC=clang. Checked with -fsyntax-only and a stand-in omp.h, so that a clang without
    its OpenMP runtime still checks the kernel's own C."""
    assert _CLANG is not None
    (tmp_path / "omp.h").write_text("int omp_get_max_threads(void);\n")
    mod, rng = tg.define(_SHUFFLING), np.random.default_rng(0)
    cases = {
        "tbmm": [rng.random((7, 26, 72), np.float32)] * 2,
        "rows": [rng.random((9, 100), np.float32)],
        "mm": [rng.random((96, 200), np.float32), rng.random((200, 120), np.float32)],
    }
    for name, args in cases.items():
        source = mod[name].compile(*args, parametric=parametric).source
        path = tmp_path / f"{name}.c"
        path.write_text(source)
        argv = [_CLANG, "-fsyntax-only", "-march=native", "-std=gnu11", f"-I{tmp_path}"]
        proc = subprocess.run([*argv, str(path)], capture_output=True, text=True, check=False)
        assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
