"""Kernels for every size (fn.compile(..., parametric=True)) against the NumPy reference
evaluator, at sizes Hypothesis draws (tests/data/parametric.toml)."""

from __future__ import annotations

import functools
import resource
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tc_graph as tg
from tc_graph.runtime import cc

CASES = tomllib.loads(
    (Path(__file__).parents[1] / "data" / "parametric.toml").read_text(encoding="utf-8")
)["case"]
SAMPLE = 13


def _arguments(case: dict[str, Any], sizes: dict[str, int], seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    out: list[Any] = []
    for a in case["args"]:
        if isinstance(a, list):
            shape = [sizes[n] if isinstance(n, str) else n for n in a]
            out.append(rng.standard_normal(shape).astype(np.float32))
        elif "scalar" in a:
            out.append(a["scalar"])
        else:
            shape = [sizes[n] for n in a["shape"]]
            out.append(rng.integers(0, max(1, sizes[a["high"]]), shape).astype(np.int32))
    return out


@functools.cache
def _compiled(name: str) -> tuple[tg.TcFunction, tg.ParametricKernel]:
    """The case's def, and its kernel for every size, compiled once at SAMPLE."""
    case = next(c for c in CASES if c["name"] == name)
    fn = getattr(tg.define(case["source"]), name)
    sample = case.get("sample", SAMPLE)
    sizes = sample if isinstance(sample, dict) else dict.fromkeys(case["sizes"], sample)
    args = _arguments(case, sizes, 0)
    kernel = fn.compile(*args, parametric=True)
    assert isinstance(kernel, tg.ParametricKernel)
    return fn, kernel


def _check(case: dict[str, Any], sizes: dict[str, int], seed: int) -> None:
    fn, kernel = _compiled(case["name"])
    args = _arguments(case, sizes, seed)
    try:
        want = fn(*args, target="reference")
    except tg.TcError as e:
        with pytest.raises(tg.TcError):
            kernel(*args)
        assert str(e)
        return
    wants = want if isinstance(want, tuple) else (want,)
    # Outputs start as NaN (or -7), not as whatever np.empty finds: an element the kernel
    # never writes must not pass by holding a freed array's right value.
    poison = [np.full(w.shape, np.nan if w.dtype.kind == "f" else -7, w.dtype) for w in wants]
    got = kernel(*args, out=poison)
    gots = got if isinstance(got, tuple) else (got,)
    for g, w in zip(gots, wants, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
@settings(max_examples=12, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_every_size_matches_reference(case: dict[str, Any], data: Any, seed: int) -> None:
    largest = case.get("largest", 24)
    sizes = {n: data.draw(st.integers(0, largest), label=n) for n in case["sizes"]}
    for a in case["args"]:
        if isinstance(a, dict) and "high" in a:
            sizes[a["high"]] = max(1, sizes[a["high"]])
    _check(case, sizes, seed)


@pytest.mark.parametrize(("name", "sizes"), [("mlp", (16, 0, 6)), ("matmul", (3, 0, 5))])
def test_reduction_over_nothing_still_sets_the_outputs(name: str, sizes: tuple[int, ...]) -> None:
    """A `+=!` with no elements leaves its outputs at 0 (its `!` runs over the left-hand
    box, whatever the reduction's extent)."""
    case = next(c for c in CASES if c["name"] == name)
    _check(case, dict(zip(case["sizes"], sizes, strict=True)), 485)


@pytest.mark.parametrize(
    ("dtype", "op"),
    [("half", "+=!"), ("half", "*=!"), ("int8", "max=!"), ("uint8", "min=!"), ("bool", "+=!")],
)
def test_a_widened_reduction_over_nothing_still_sets_the_outputs(dtype: str, op: str) -> None:
    """A reduction accumulating in a wider type than its tensor's (poly/inline.py's
    widen_reductions) starts and copies back over the left-hand box too: in a kernel for
    every size both were guarded by the reduction's range being non-empty, so at M = 1
    (`1:M` empty) and M = 0 the output was left as allocated (found by fuzzing: int8
    max over nothing gave [-27 67 85 ...] for -128)."""
    fn = tg.define(f"def f({dtype}(N,M) A) -> (R) {{ R(i) {op} A(i,k - 1) where k in 1:M }}")["f"]
    kind = np.dtype({"half": "float16"}.get(dtype, dtype))
    kernel = fn.compile(np.ones((5, 33), kind), parametric=True)
    for n, m in [(3, 4), (4, 1), (3, 0), (6, 1)]:
        a = np.random.default_rng(n + m).integers(1, 3, (n, m)).astype(kind)
        for _ in range(3):  # fresh outputs each call, on memory earlier calls left behind
            np.testing.assert_array_equal(kernel(a), fn(a, target="reference"), err_msg=f"{n}x{m}")


def test_an_index_past_every_size_gives_no_loop() -> None:
    """`B(i - 2^31)` needs i >= 2^31, which no size allows (sizes are up to 2^31 - 1): the
    kernel for every size kept that loop, whose int iterator started at 2^31, wrapped to
    -2^31 and wrote O out of bounds (SIGSEGV, found by fuzzing). Run in a child process,
    which the old kernel killed."""
    code = (
        "import numpy as np, tc_graph as tg\n"
        "f = tg.define('def f(float(N) A, float(M) B) -> (O) { O(i) = A(i) + B(i - 2147483648) }').f\n"
        "a, b = np.ones(1, np.float32), np.ones(2, np.float32)\n"
        "print(f.compile(a, b, parametric=True)(a, b).shape, f(a, b, target='reference').shape)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["(0,)", "(0,)"]


def test_a_kernel_for_every_size_compiles_at_a_sample_with_no_outputs() -> None:
    """Its choices taken where the output is empty (a stencil whose kernel is longer than
    its input: 3 - 5 + 1 < 0 outputs), the kernel is still one for every size (an
    internal ValueError escaped the compile: the box of an empty domain has no bounds)."""
    fn = tg.define("def st(float(N) B, float(M) K) -> (A) { A(i) +=! B(i + k) * K(k) }").st
    rng = np.random.default_rng(4)
    kernel = fn.compile(np.ones(3, np.float32), np.ones(5, np.float32), parametric=True)
    for n, m in [(3, 5), (9, 5), (40, 3), (1, 1)]:
        b, k = rng.standard_normal(n).astype(np.float32), rng.standard_normal(m).astype(np.float32)
        want = fn(b, k, target="reference")
        np.testing.assert_allclose(kernel(b, k), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["dense_relu", "conv_channels", "dot", "batched_projection"])
def test_long_contractions_take_the_outer_product_form(name: str) -> None:
    """At their samples these contractions are kernels of their own in the outer-product
    form (a panel buffer `_bp`), which test_every_size_matches_reference then checks at
    other sizes; the bias and the relu are folded in (no loop of their own)."""
    kernel = _compiled(name)[1]
    assert "float _bp[" in kernel.source
    if name == "dense_relu":
        assert "t_b[" in kernel.source and kernel.source.count("#pragma omp parallel") == 1


@pytest.mark.parametrize("sizes", [(3, 7, 33, 40), (2, 40, 40, 17), (5, 13, 1, 33), (4, 6, 0, 35)])
def test_outer_form_under_a_batch_loop(sizes: tuple[int, ...]) -> None:
    """Work items over batch x bands x panels: several panels and batches (the batch of
    an item was read with the product of bands and panels unparenthesized, found by
    scripts/bench.py dynamic on the encoder: NaN at batch 8, sequence 16)."""
    case = next(c for c in CASES if c["name"] == "batched_projection")
    _check(case, dict(zip(case["sizes"], sizes, strict=True)), 7)


@pytest.mark.parametrize(("rows", "loop"), [(4, "_k0 += 16"), (40, " k0 += 16")])
def test_reduction_chunks_serve_every_size(rows: int, loop: str) -> None:
    """A contraction kernel summing its reduction in chunks of 16 (the first starting the
    `!` from 0): at reductions of no element, part of a chunk, whole chunks and more; in
    the dot-product form (few rows at the sample) and the outer-product form."""
    case = next(c for c in CASES if c["name"] == "dot")
    fn = tg.define(case["source"]).dot
    options = tg.MappingOptions(reduction_chunk=16)
    sample = _arguments(case, {"M": rows, "K": 260, "N": 40}, 0)
    kernel = fn.compile(*sample, parametric=True, options=options)
    assert loop in kernel.source
    for k in (0, 5, 16, 17, 33, 90):
        args = _arguments(case, {"M": 9, "K": k, "N": 11}, k)
        np.testing.assert_allclose(kernel(*args), fn(*args, target="reference"), atol=1e-4)


def test_new_shapes_do_not_compile(monkeypatch: pytest.MonkeyPatch) -> None:
    """One kernel serves every shape: neither its calls nor compile() at other shapes
    build anything."""
    case = next(c for c in CASES if c["name"] == "softmax")
    fn, kernel = _compiled("softmax")

    def refuse(*_: Any, **__: Any) -> None:
        raise AssertionError("a kernel for every size was compiled again")

    monkeypatch.setattr(cc, "build", refuse)
    for n, d in [(1, 1), (3, 1000), (70, 5), (0, 4)]:
        args = _arguments(case, {"N": n, "D": d}, n)
        assert fn.compile(*args, parametric=True) is kernel
        np.testing.assert_allclose(kernel(*args), fn(*args, target="reference"), rtol=1e-5)


def test_index_out_of_range_names_the_call_extent() -> None:
    fn, kernel = _compiled("bag")
    table = np.ones((5, 3), np.float32)
    index = np.array([[0, 5]], np.int32)
    with pytest.raises(tg.TcError, match=r"at 5 in dimension 0, whose extent is 5"):
        kernel(table, index)
    with pytest.raises(tg.TcError, match=r"at 5 in dimension 0, whose extent is 5"):
        fn(table, index)


def test_a_bad_index_is_reported_again_at_shapes_seen_before() -> None:
    """The second call at the same shapes skips binding its arguments (`_by_shapes`): its
    failed index check is still a TcError naming the extent (an UnboundLocalError
    escaped the API: the error message read the bound arrays)."""
    _, kernel = _compiled("bag")
    table = np.ones((5, 3), np.float32)
    for index in ([[0, 5]], [[0, 5]], [[-1, 0]]):
        with pytest.raises(tg.TcError, match=r"dimension 0, whose extent is 5"):
            kernel(table, np.array(index, np.int32))


def test_integer_scalar_is_a_constant_of_the_kernel() -> None:
    _, kernel = _compiled("repeat")
    with pytest.raises(tg.TcError, match=r"compiled for R=3, got 4"):
        kernel(np.ones(5, np.float32), 4)
    # As 0-d arrays too, after a call at the same shapes (which a later call does not
    # bind again): the scalar's value is checked each time.
    assert kernel(np.ones(5, np.float32), np.array(3, np.int32)).shape == (3, 5)
    with pytest.raises(tg.TcError, match=r"compiled for R=3, got 4"):
        kernel(np.ones(5, np.float32), np.array(4, np.int32))


@pytest.mark.parametrize("name", ["v", "s", "j0", "acc", "lo"])
def test_size_named_like_the_generated_c_is_refused(name: str) -> None:
    fn = tg.define(f"def f(float({name}) A) -> (O) {{ O(i) = A(i) }}").f
    with pytest.raises(tg.TcError, match=rf"size '{name}' has a name the generated C uses"):
        fn.compile(np.ones(3, np.float32), parametric=True)


def test_every_size_is_a_cpu_kernel() -> None:
    fn, _ = _compiled("transpose_bias")
    with pytest.raises(tg.TcError, match=r"compiled for the cpu target, not 'opencl'"):
        fn.compile(np.ones((2, 2), np.float32), np.ones(2, np.float32), target="opencl",
                   parametric=True)  # fmt: skip


def test_every_size_compiles_where_c99_errors_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """gcc 14 rejects what C99 removed (an implicit function declaration, an int without
    a type) and incompatible pointer types; gcc 12 only warns. A kernel for every size
    called snprintf without <stdio.h>: with gcc 14 none compiled."""
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path))
    monkeypatch.setenv(
        "TC_GRAPH_CFLAGS",
        "-Werror=implicit-function-declaration -Werror=implicit-int "
        "-Werror=incompatible-pointer-types -Werror=int-conversion",
    )
    case = next(c for c in CASES if c["name"] == "bag")
    fn = tg.define(case["source"]).bag
    args = _arguments(case, {"E": 7, "D": 5, "B": 3, "L": 4}, 1)
    kernel = fn.compile(*args, parametric=True)
    np.testing.assert_allclose(kernel(*args), fn(*args, target="reference"), rtol=1e-5)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_every_size_matches_reference_at_its_sample(case: dict[str, Any]) -> None:
    """At the sample, where loops shorter than a vector run as copies specialised to it
    (random sizes seldom meet them)."""
    sample = case.get("sample", SAMPLE)
    sizes = sample if isinstance(sample, dict) else dict.fromkeys(case["sizes"], sample)
    _check(case, dict(sizes), 11)


def test_a_short_inner_loop_is_specialised_to_the_sample() -> None:
    """MLP3's last layer has 2 outputs per row: the loop over them is printed again for
    exactly 2 iterations (gcc unrolls it), the general loop serving every other count."""
    fn = tg.define("""
    def last(float(B, P) X, float(P, Q) W) -> (O) {
      O(b, q) +=! X(b, p) * W(p, q)
    }""").last
    rng = np.random.default_rng(0)
    sample = [rng.standard_normal(s).astype(np.float32) for s in [(128, 32), (32, 2)]]
    kernel = fn.compile(*sample, parametric=True)
    assert "== 2) {" in kernel.source
    for b, p, q in [(128, 32, 2), (5, 7, 3), (9, 1, 2), (3, 4, 1), (2, 33, 17)]:
        args = [rng.standard_normal(s).astype(np.float32) for s in [(b, p), (p, q)]]
        np.testing.assert_allclose(kernel(*args), args[0] @ args[1], rtol=1e-5, atol=1e-5)


def test_a_short_reduction_is_specialised_to_the_sample() -> None:
    """tbmm's dot products over 40 elements at the sample: the tiles are printed again for
    exactly that reduction (one chunk, its last vector masked by a constant), the general
    tiles serving every other length, with the other sizes free in both."""
    fn = tg.define("""
    def tbmm(float(B, N, M) X, float(B, K, M) Y) -> (Z) {
      Z(b, n, k) +=! X(b, n, m) * Y(b, k, m)
    }""").tbmm
    rng = np.random.default_rng(1)
    kernel = fn.compile(*[rng.standard_normal((3, s, 40)).astype(np.float32) for s in (9, 6)],
                        parametric=True)  # fmt: skip
    assert ") == 40)" in kernel.source
    for b, n, k, m in [(3, 9, 6, 40), (2, 5, 11, 40), (1, 4, 4, 39), (2, 3, 7, 41), (1, 6, 5, 1)]:
        x = rng.standard_normal((b, n, m)).astype(np.float32)
        y = rng.standard_normal((b, k, m)).astype(np.float32)
        np.testing.assert_allclose(kernel(x, y), x @ y.transpose(0, 2, 1), rtol=1e-4, atol=1e-4)
    # A reduction of the same length at every size has no second copy.
    fixed = tg.define("""
    def tbmm(float(B, N, 40) X, float(B, K, 40) Y) -> (Z) {
      Z(b, n, k) +=! X(b, n, m) * Y(b, k, m)
    }""").tbmm
    x = rng.standard_normal((3, 9, 40)).astype(np.float32)
    assert ") == 40)" not in fixed.compile(x, x[:, :6], parametric=True).source


def test_rows_under_a_parallel_batch_are_tiled() -> None:
    """A layer whose batch loop is the parallel one (its mean reads every row of the
    batch): the rows of its product below it are tiled by 8 as in a specialised kernel,
    so the product's register tiles hold 8 rows and share each weight load among them;
    rows past the last whole tile, and fewer than 8, run as the tile's tail."""
    fn = tg.define("""
    def f(float(B, S, 32) X, float(32, 32) W, float(32) G) -> (Y) {
      m(b) +=! X(b, s, k)
      T(b, s, k) = X(b, s, k) * G(k) + m(b)
      Y(b, s, j) +=! T(b, s, k) * W(k, j)
    }""").f
    rng = np.random.default_rng(2)

    def arguments(b: int, s: int) -> list[np.ndarray]:
        shapes = [(b, s, 32), (32, 32), (32,)]
        return [rng.standard_normal(shape).astype(np.float32) for shape in shapes]

    kernel = fn.compile(*arguments(3, 16), parametric=True)
    assert "acc7_0" in kernel.source  # a register tile of 8 rows
    for b, s in [(3, 16), (1, 1), (2, 9), (1, 17), (4, 5)]:
        x, w, g = arguments(b, s)
        t = x * g + x.sum(axis=(1, 2))[:, None, None]
        np.testing.assert_allclose(kernel(x, w, g), t @ w, rtol=1e-3, atol=1e-3)


_SCORES = """
def scores(float(B, S, 8) Q, float(B, S, 8) K) -> (O) {
  s(b, i, j) +=! Q(b, i, d) * K(b, j, d)
  m(b, i) max=! s(b, i, j)
  O(b, i, j) = s(b, i, j) - m(b, i)
}
"""


@pytest.mark.parametrize("parametric", [False, True])
def test_large_temporaries_are_kept_from_call_to_call(parametric: bool) -> None:
    """A kernel's temporaries are a block its caller keeps per thread: allocated per call,
    one over glibc's largest mmap threshold (32 MiB; here 2 x 2100 x 2100 scores) was
    mapped afresh each time and its pages faulted in again (8,600 faults a call); each
    thread has its own block (two threads at once, at two sizes)."""
    rng = np.random.default_rng(3)
    q, k = (rng.standard_normal((2, 2100, 8)).astype(np.float32) for _ in range(2))
    kernel = tg.define(_SCORES).scores.compile(q, k, parametric=parametric)
    out = np.empty((2, 2100, 2100), np.float32)
    for _ in range(2):
        kernel(q, k, out=out)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(3):
        kernel(q, k, out=out)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 3
    assert faults < 2000, f"{faults:.0f} page faults a call"
    small = [a[:, : 300 if parametric else 2100][::-1] for a in (q, k)]  # other values
    with ThreadPoolExecutor(2) as pool:
        got = list(
            pool.map(lambda a: kernel(*a), [(q, k), [np.ascontiguousarray(a) for a in small]])
        )
    for (x, y), result in zip([(q, k), small], got, strict=True):
        s = np.einsum("bid,bjd->bij", x.astype(np.float64), y)
        np.testing.assert_allclose(result, s - s.max(axis=2, keepdims=True), rtol=1e-4, atol=1e-3)
