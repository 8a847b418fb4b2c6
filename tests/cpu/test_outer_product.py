"""Outer-product contraction kernels (poly/contraction.py, codegen/outer.py) against
NumPy in float64: register blocks with row and column remainders, reduction chunks with
tails, bands of rows, batched and accumulating forms, and the phase entry point that
onnxruntime's thread pool runs."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.special

import tc_graph as tg
from tests.cpu.test_phases import run_phases

PROGRAMS = """
def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }
def tn(float(K,M) A, float(K,N) B) -> (C) { C(m,n) +=! (0.5 * A(k,m) + 1.0) * B(k,n) }
def bmm(float(G,M,K) A, float(G,K,N) B) -> (C) { C(g,m,n) +=! A(g,m,k) * B(g,k,n) }
def tmm(float(M,K) A, float(N,K) B) -> (C) { C(m,n) +=! A(m,k) * B(n,k) }
def conv(float(N,C,H,W) X, float(F,C,KH,KW) Wt) -> (Y) {
  Y(n,f,oh,ow) +=! X(n,c,2*oh+kh,ow+2*kw) * Wt(f,c,kh,kw)
}
def bias(float(M,K) A, float(K,N) B, float(N) C) -> (Y) {
  Y(m,n) = 0.5 * C(n)
  Y(m,n) += A(m,k) * B(k,n)
}
def convb(float(N,C,H,W) X, float(F,C,KH,KW) Wt, float(F) B) -> (Y) {
  Y(n,f,oh,ow) = B(f)
  Y(n,f,oh,ow) += X(n,c,oh+kh,ow+kw) * Wt(f,c,kh,kw)
}
def convr(float(N,C,H,W) X, float(F,C,KH,KW) Wt, float(F) B, float(N,F,OH,OW) R) -> (Y) {
  Y(n,f,oh,ow) = B(f)
  Y(n,f,oh,ow) += X(n,c,oh+kh,ow+kw) * Wt(f,c,kh,kw)
  Y(n,f,oh,ow) = fmax(Y(n,f,oh,ow) + R(n,f,oh,ow), 0)
}
def stem(float(N,C,H,W) X, float(F,C,KH,KW) Wt, float(F) B, float(OW) M) -> (Y, Z) {
  Y(n,f,oh,ow) = B(f)
  Y(n,f,oh,ow) += X(n,c,2*oh+kh,2*ow+kw) * Wt(f,c,kh,kw)
  Y(n,f,oh,ow) = fmax(Y(n,f,oh,ow), 0)
  Z(n,f,oh,ow) = B(f)
  Z(n,f,oh,ow) += X(n,c,2*oh+kh,2*ow+kw) * Wt(f,c,kh,kw)
  Z(n,f,oh,ow) = fmax(Z(n,f,oh,ow) * M(ow), 0)
}
def convt(float(N,C,H,W) X, float(F,C,KH,KW) Wt, float(F) B) -> (Y) {
  T(n,f,oh,ow) = B(f)
  T(n,f,oh,ow) += X(n,c,oh+kh,ow+kw) * Wt(f,c,kh,kw)
  Y(n,f,oh,ow) = fmax(T(n,f,oh,ow), 0)
}
def nhwc(float(N,H,W,C) X, float(F,C) Wt) -> (Y) {
  Y(n,f,oh,ow) +=! X(n,oh,ow,c) * Wt(f,c)
}
def gconv(float(N,G,C,H,W) I, float(G,F,C,KH,KW) W1) -> (O) {
  O(n,g,f,h,w) +=! I(n,g,c,h+kh,w+kw) * W1(g,f,c,kh,kw)
}
def mlp(float(M,K) A, float(K,N) B, float(N) C) -> (Y) {
  Y(m,n) = C(n)
  Y(m,n) += A(m,k) * B(k,n)
  Y(m,n) = fmax(Y(m,n), 0)
}
def gelu_res(float(M,K) A, float(K,N) B, float(M,N) R) -> (Y, Z) {
  Y(m,n) +=! A(m,k) * B(k,n)
  Z(m,n) = 0.5 * Y(m,n) * (1 + erf(Y(m,n) * 0.70710678)) + R(m,n)
}
def acc(float(M,K) A, float(K1,N) B, float(M,N) C0) -> (C) {
  C(m,n) = C0(m,n)
  C(m,n) += A(m,k) * B(k + 1,n)
}
"""


def _rand(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _close(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize(
    ("m", "n", "k", "options"),
    [
        (13, 37, 67, tg.MappingOptions(vector_width=8, reduction_chunk=16)),
        (4, 16, 64, tg.MappingOptions(vector_width=8)),
        (6, 32, 300, tg.MappingOptions(vector_width=8, micro_tile=(6, 2))),
        (300, 20, 256, tg.MappingOptions(vector_width=8)),
        (29, 41, 97, tg.MappingOptions(vector_width=4, micro_tile=(3, 1), reduction_chunk=32)),
        (17, 70, 80, tg.MappingOptions(vector_width=16, micro_tile=(12, 2), parallel_depth=0)),
    ],
)
def test_matrix_products_in_register_blocks_match_numpy(
    m: int, n: int, k: int, options: tg.MappingOptions
) -> None:
    """Full blocks and the last rows, full panels and the staged last one, chunks with a
    tail, one band and several (300 rows, 256-step chunks: bands of 252)."""
    rng = np.random.default_rng(m * n + k)
    a, b = _rand(rng, m, k), _rand(rng, k, n)
    kernel = tg.define(PROGRAMS).mm.compile(a, b, options=options)
    assert "_bp[" in kernel.source, "not the outer-product kernel"
    _close(kernel(a, b), a.astype(np.float64) @ b)


def test_transposed_scaled_batched_and_accumulating_forms_match_numpy() -> None:
    """X may be any expression without the column index, read in any order; outer output
    indices become work items; without `!` the sum starts from what C holds."""
    rng = np.random.default_rng(5)
    mod = tg.define(PROGRAMS)
    a, b = _rand(rng, 70, 11), _rand(rng, 70, 19)
    assert "_bp[" in mod.tn.compile(a, b).source
    _close(mod.tn(a, b), (0.5 * a.astype(np.float64) + 1.0).T @ b)
    a, b = _rand(rng, 40, 300), _rand(rng, 21, 300)
    assert "_bp[" in mod.tmm.compile(a, b).source, "B(n, k) is packed transposed"
    _close(mod.tmm(a, b), a.astype(np.float64) @ b.T)
    ga, gb = _rand(rng, 3, 10, 65), _rand(rng, 3, 65, 9)
    _close(mod.bmm(ga, gb), np.einsum("gmk,gkn->gmn", ga.astype(np.float64), gb))
    a, b, c0 = _rand(rng, 7, 260), _rand(rng, 261, 12), _rand(rng, 7, 12)
    assert "_bp[" in mod.acc.compile(a, b, c0).source
    _close(mod.acc(a, b, c0), c0 + a.astype(np.float64) @ b[1:])


@pytest.mark.parametrize(
    ("m", "n", "k", "width", "parametric"),
    [
        (40, 37, 67, 8, False),
        (64, 21, 300, 8, False),
        (40, 33, 129, 16, True),
        (40, 40, 300, 4, True),
        (26, 26, 100, 16, False),
        (26, 26, 100, 16, True),
    ],
)
def test_a_weight_read_along_the_reduction_is_packed_in_transposed_squares(
    m: int, n: int, k: int, width: int, parametric: bool
) -> None:
    """C3's B(n, k): squares of lanes x steps loaded along k and transposed in registers,
    the steps past the last square one by one; in the last partial panel (staged) too,
    its lanes past the last column loading the last column's row again (never stored);
    fixed sizes and every size. A chunk's steps past its last whole square take one
    more square ending at the chunk's end (100 steps: chunks of 64 and 36, the last
    square of 36 at steps 20 to 35), a chunk shorter than a square is copied step by
    step."""
    rng = np.random.default_rng(m + n + k)
    a, b = _rand(rng, m, k), _rand(rng, n, k)
    options = tg.MappingOptions(vector_width=width, reduction_chunk=64)
    kernel = tg.define(PROGRAMS).tmm.compile(a, b, options=options, parametric=parametric)
    assert "_x1_0 = TC_SHUFFLE" in kernel.source, "not packed in transposed squares"
    assert " < _nl ? 0 : _nl - 1)" in kernel.source, "the staged panel is not packed in squares"
    assert f"_k = kn - {width};" in kernel.source, "no square ends at the chunk's end"
    _close(kernel(a, b), a.astype(np.float64) @ b.T)


def test_panels_packed_ahead_of_time_are_read_in_place() -> None:
    """P already laid out as the kernel's panels (a constant weight packed at optimize
    time: graph/translate/linear.py) is read where it lies, the last panel's padding
    included, and is not copied."""
    width = 16  # two vectors of 8: the default panel at vector_width 8
    m, k, n = 19, 100, 37
    rng = np.random.default_rng(4)
    a, b = _rand(rng, m, k), _rand(rng, k, n)
    padded = np.zeros((k, -(-n // width) * width), np.float32)
    padded[:, :n] = b
    panels = np.ascontiguousarray(padded.reshape(k, -1, width).transpose(1, 0, 2))
    src = (
        f"def f(float(M,K) A, float(NB,K,{width}) P) -> (C) "
        f"{{ C(m,n) +=! A(m,k) * P(n / {width}, k, n % {width}) where n in 0:{n} }}"
    )
    kernel = tg.define(src).f.compile(a, panels, options=tg.MappingOptions(vector_width=8))
    assert "_bp = &t_P[" in kernel.source
    assert "float _bp[" not in kernel.source
    _close(kernel(a, panels), a.astype(np.float64) @ b)


@pytest.mark.parametrize(
    ("f", "c", "w", "options"),
    [
        (37, 11, 41, tg.MappingOptions(vector_width=8)),
        (32, 13, 20, tg.MappingOptions(vector_width=8, reduction_chunk=2, micro_tile=(5, 1))),
    ],
)
def test_convolutions_pack_a_window_per_panel_and_match_numpy(
    f: int, c: int, w: int, options: tg.MappingOptions
) -> None:
    """Several reduction indices: the first chunked, the others (the kernel window) inside
    it; rows are the output channels, P the strided, dilated input window of a panel of
    output columns (full panels and a staged last one, chunks with a tail)."""
    rng = np.random.default_rng(f + c + w)
    x, wt = _rand(rng, 2, c, 9, w), _rand(rng, f, c, 3, 2)
    kernel = tg.define(PROGRAMS).conv.compile(x, wt, options=options)
    assert "_bp[" in kernel.source and "_i1++" in kernel.source
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    want = np.einsum("ncpqij,fcij->nfpq", windows[:, :, ::2, :, :, ::2], wt)
    _close(kernel(x, wt), want)


def test_a_bias_statement_starts_the_sums() -> None:
    """`Y = b; Y += X * P`: the bias is the accumulators' start (a vector along the
    columns, or one value per row), so even a short reduction gets the kernel, in one
    pass over Y; the staged last panel reads no bias past the last column."""
    rng = np.random.default_rng(11)
    mod = tg.define(PROGRAMS)
    a, b, c = _rand(rng, 13, 70), _rand(rng, 70, 37), _rand(rng, 37)
    kernel = mod.bias.compile(a, b, c)
    assert "_bp[" in kernel.source and kernel.source.count("omp parallel") == 1
    _close(kernel(a, b, c), 0.5 * c + a.astype(np.float64) @ b)
    x, wt, bf = _rand(rng, 1, 8, 6, 21), _rand(rng, 40, 8, 3, 3), _rand(rng, 40)
    kernel = mod.convb.compile(x, wt, bf)
    assert "_bp[" in kernel.source and kernel.source.count("omp parallel") == 1
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    want = np.einsum("ncpqij,fcij->nfpq", windows, wt) + bf[:, None, None]
    _close(kernel(x, wt, bf), want)


@pytest.mark.parametrize("name", ["mm", "mlp"])
def test_kernels_for_every_size_stage_the_last_panel_by_vectors(name: str) -> None:
    """One kernel for every size, called at sizes whose last panel of 16 holds 13, 9 or 7
    columns (or none) and whose reduction takes several chunks: the staged start (zeros,
    the bias, or the sums so far; a `!` sum's first chunk from zeros in registers) and
    store go a vector at a time while whole vectors remain, then one ending at the last
    column (13 and 9 columns) or lane by lane (7), and a relu ends each block; `B(k, n)`
    is copied in runs of the panel's columns. (`acc` and `bias` start from a vector as
    `mlp` does: 15 s more.)"""
    rng = np.random.default_rng(len(name))
    options = tg.MappingOptions(vector_width=8, reduction_chunk=16)
    fn = getattr(tg.define(PROGRAMS), name)
    kernel = None
    for m, k, n in [(13, 70, 45), (5, 33, 9), (1, 17, 16), (8, 40, 23)]:
        a, b, c = _rand(rng, m, k), _rand(rng, k, n), _rand(rng, n)
        args = (a, b) if name == "mm" else (a, b, c)
        if kernel is None:
            kernel = fn.compile(*args, options=options, parametric=True)
            assert "const float *_s0 = &t_B[" in kernel.source, "the panel is not copied in runs"
            assert "for (; _l + 8 <= _nl; _l += 8)" in kernel.source
            assert "_l = _nl - 8;" in kernel.source, "no vector ends at the last column"
            zeros = "c0_0 = k0 == (0) ? (tc_vf){0} : *(const tc_vf *)&_c[0];"
            assert (zeros in kernel.source) == (name == "mm"), "a `!` sum's first chunk"
        sums = a.astype(np.float64) @ b
        _close(kernel(*args), sums if name == "mm" else np.maximum(c + sums, 0))


def test_an_elementwise_statement_after_ends_each_block() -> None:
    """`Z = f(Y, R)` right after the contraction runs on each block once its sums are
    final (an activation in place, or Gelu plus a residual into another tensor), in the
    same parallel region; the contraction's own output is still stored."""
    rng = np.random.default_rng(12)
    mod = tg.define(PROGRAMS)
    a, b, c = _rand(rng, 13, 70), _rand(rng, 70, 37), _rand(rng, 37)
    kernel = mod.mlp.compile(a, b, c)
    assert kernel.source.count("omp parallel") == 1 and "k0 + kn == 70" in kernel.source
    _close(kernel(a, b, c), np.maximum(c + a.astype(np.float64) @ b, 0))
    r = _rand(rng, 13, 37)
    kernel = mod.gelu_res.compile(a, b, r)
    assert kernel.source.count("omp parallel") == 1
    y, z = kernel(a, b, r)
    want = a.astype(np.float64) @ b
    _close(y, want)
    _close(z, 0.5 * want * (1 + scipy.special.erf(want * 0.70710678)) + r)


@pytest.mark.parametrize(("size", "window", "c"), [(9, 3, 8), (4, 3, 8), (20, 3, 8), (7, 1, 64)])
def test_convolution_rows_flattened_into_panels_match_numpy(size: int, window: int, c: int) -> None:
    """Output rows (7, 2, 18 and 7 wide) flattened with the columns: a panel spans
    several rows (its window gathered by lane offsets; copied where its lanes lie in one
    row of 18, or where input rows are as long: a 1x1 window), the last one staged, the
    bias start and the residual + relu end read at each lane's own row and column."""
    rng = np.random.default_rng(size)
    x, wt, bf = _rand(rng, 2, c, size, size), _rand(rng, 40, c, window, window), _rand(rng, 40)
    out = size - window + 1
    r = _rand(rng, 2, 40, out, out)
    kernel = tg.define(PROGRAMS).convr.compile(x, wt, bf, r)
    assert kernel.source.count("omp parallel") == 1 and "_bp[" in kernel.source
    windows = np.lib.stride_tricks.sliding_window_view(
        x.astype(np.float64), (window, window), axis=(2, 3)
    )
    want = np.maximum(np.einsum("ncpqij,fcij->nfpq", windows, wt) + bf[:, None, None] + r, 0)
    _close(kernel(x, wt, bf, r), want)
    (got,) = run_phases(kernel, [x, wt, bf, r], seed=size)
    _close(got, want)


def test_a_stride_2_convolution_over_three_channels_matches_numpy() -> None:
    """An image's stem: 27 reduction steps and 40 output channels take the outer form
    (MIN_OUTER_REDUCTION); outputs 7 x 21 wide flatten into panels, the last staged, and
    a panel inside one output row reads every other input element (`_even`). Y's relu
    runs on whole vectors of the flattened columns; Z's reads M along the columns only,
    so each lane at its own row and column."""
    rng = np.random.default_rng(16)
    x, wt, bf = _rand(rng, 1, 3, 15, 43), _rand(rng, 40, 3, 3, 3), _rand(rng, 40)
    m = _rand(rng, 21)
    kernel = tg.define(PROGRAMS).stem.compile(x, wt, bf, m)
    assert "_bp[" in kernel.source
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    conv = np.einsum("ncpqij,fcij->nfpq", windows[:, :, ::2, ::2], wt) + bf[:, None, None]
    want = (np.maximum(conv, 0), np.maximum(conv * m, 0))
    for got, w in zip(kernel(x, wt, bf, m), want, strict=True):
        _close(got, w)
    for got, w in zip(run_phases(kernel, [x, wt, bf, m], seed=16), want, strict=True):
        _close(got, w)


@pytest.mark.parametrize("chunk", [None, 3])
def test_sums_only_the_end_reads_are_kept_only_between_chunks(chunk: int | None) -> None:
    """A Conv and its Relu as ONNX translates them: the sums in a temporary T that only
    the relu reads. The last chunk's sums go from the block's buffer through the relu
    into Y (T is not stored); earlier chunks (8 channels in chunks of 3) keep their
    partial sums in T. Rows 7 x 11 wide, the last panel staged."""
    rng = np.random.default_rng(17)
    x, wt, bf = _rand(rng, 1, 8, 9, 13), _rand(rng, 40, 8, 3, 3), _rand(rng, 40)
    options = tg.MappingOptions(reduction_chunk=chunk) if chunk else None
    kernel = tg.define(PROGRAMS).convt.compile(x, wt, bf, options=options)
    assert "_bp[" in kernel.source
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(2, 3))
    want = np.maximum(np.einsum("ncpqij,fcij->nfpq", windows, wt) + bf[:, None, None], 0)
    _close(kernel(x, wt, bf), want)
    (got,) = run_phases(kernel, [x, wt, bf], seed=17)
    _close(got, want)


def test_grouped_convolution_of_16_channels_a_group_matches_numpy() -> None:
    """16 output channels a group (OUTER_FLAT_ROWS) over flattened 4 x 5 outputs: two
    full blocks of 6 rows and one of 4 per group, the group an outer index."""
    rng = np.random.default_rng(15)
    x, wt = _rand(rng, 2, 3, 8, 6, 7), _rand(rng, 3, 16, 8, 3, 3)
    kernel = tg.define(PROGRAMS).gconv.compile(x, wt)
    assert "_bp[" in kernel.source
    windows = np.lib.stride_tricks.sliding_window_view(x.astype(np.float64), (3, 3), axis=(3, 4))
    _close(kernel(x, wt), np.einsum("ngcpqij,gfcij->ngfpq", windows, wt))


def test_a_channels_last_input_is_copied_along_its_channels() -> None:
    """P read along the reduction (channels last) over flattened output rows: each lane's
    run of channels is copied with unit stride, at the lane's own row and column."""
    rng = np.random.default_rng(14)
    x, wt = _rand(rng, 2, 5, 7, 70), _rand(rng, 40, 70)
    kernel = tg.define(PROGRAMS).nhwc.compile(x, wt)
    assert "_bp[" in kernel.source
    _close(kernel(x, wt), np.einsum("nhwc,fc->nfhw", x.astype(np.float64), wt))


def test_phases_in_shuffled_chunks_match_numpy() -> None:
    """onnxruntime's thread pool runs the work items in chunks, in any order."""
    rng = np.random.default_rng(8)
    ga, gb = _rand(rng, 2, 23, 70), _rand(rng, 2, 70, 21)
    kernel = tg.define(PROGRAMS).bmm.compile(ga, gb)
    (got,) = run_phases(kernel, [ga, gb], seed=3)
    _close(got, np.einsum("gmk,gkn->gmn", ga.astype(np.float64), gb))


def test_micro_tile_is_checked() -> None:
    with pytest.raises(tg.TcError, match="micro_tile"):
        tg.MappingOptions(micro_tile=(8, 8))
    with pytest.raises(tg.TcError, match="micro_tile"):
        tg.MappingOptions(micro_tile=(4,))
