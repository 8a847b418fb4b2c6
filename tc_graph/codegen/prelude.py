"""The C every CPU kernel starts with: vector types, the sums, maxima and minima across a
vector's lanes, isl's floord/min/max, and exp, erf and tanh written so that gcc vectorizes
them (libm's are a call per element), then the expression printer's helpers."""

from __future__ import annotations

from collections.abc import Sequence

from .expr import helper_lines


def prelude(vector_width: int) -> str:
    """The C a CPU kernel starts with, for vectors of `vector_width` floats."""
    lines = [
        "#include <stdint.h>",
        f"typedef float tc_vf __attribute__((vector_size({4 * vector_width})));",
        f"typedef float tc_vfu __attribute__((vector_size({4 * vector_width}), aligned(4)));",
        f"typedef int tc_vi __attribute__((vector_size({4 * vector_width})));",
        *_SHUFFLE,
        _hsum(vector_width),
        *_vector_extrema(vector_width),
        # stdio for the size checks' snprintf (gcc 14 refuses an implicit declaration).
        "#include <stdio.h>",
        "#include <stdlib.h>",
        "#include <string.h>",
        "#include <math.h>",
        "#define floord(n, d) (((n) < 0) ? -((-(n) + (d) - 1) / (d)) : (n) / (d))",
        "#define min(x, y) ((x) < (y) ? (x) : (y))",
        "#define max(x, y) ((x) > (y) ? (x) : (y))",
        *_VECTOR_EXPF,
        *_vector_expf(vector_width),
        *_vector_erff(),
        *_vector_tanhf(),
    ]
    lines += helper_lines("static inline")
    return "\n".join(lines)


# expf without a call, so that gcc vectorizes it inside `omp simd` loops (libm's expf is
# a call per element: 6.3x slower on one Zen 3 core, and Softmax lost to onnxruntime). x
# = n ln2 + r with |r| <= ln2/2: n rounded by adding and taking away 1.5 * 2^23 (a
# rounding conversion to int kept the loop from vectorizing), ln2 split in two so that
# n ln2 is exact for |n| < 2^9; e^r by a degree-6 polynomial fitted to e^r's relative
# error on |r| <= ln2/2 (Lawson's iteration: 2e-9, under a tenth of an ulp; the Taylor
# series needs r^7 for that, one FMA more, 7% of a Softmax): its relative error is at
# most 0.71 float32 epsilons in all, measured over [-87.3, 88.7] (0.65 with Taylor's); 2^n
# applied in two halves, so that subnormal results and overflow to infinity come out
# right, its bits moved by memcpy (a union kept a loop that also reads a local array
# from vectorizing). x is clamped to [-104, 89] first (the float-to-int conversion must
# stay in range) as integer minima on its bits (unsigned for the negative side, whose bits
# grow with the magnitude, signed for the positive): written as float selects, gcc
# computed the clamped lanes' constant results apart and blended them back, 50
# instructions per vector instead of 30 (exp 0.57 against 0.9 ns an element over a copy,
# one Zen 3 core). A NaN clamps to either end and is returned as it came.
_VECTOR_EXPF = (
    "static inline float tc_expf(float x) {",
    "  uint32_t u;",
    "  __builtin_memcpy(&u, &x, 4);",
    "  u = u < 0xC2D00000u ? u : 0xC2D00000u;",
    "  int32_t k = (int32_t)u < 0x42B20000 ? (int32_t)u : 0x42B20000;",
    "  float c;",
    "  __builtin_memcpy(&c, &k, 4);",
    "  float t = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;",
    "  float r = (c - t * 0.693145751953125f) - t * 1.4286068202862268e-6f;",
    "  float p = 1.0f + r * (1.0f + r * (0.49999994040f + r * (0.16666431725f + r * (0.04166800156f"
    " + r * (0.00837416295f + r * 0.00138436444f)))));",
    "  int32_t n = (int32_t)t, h = n >> 1, ia = (h + 127) << 23, ib = (n - h + 127) << 23;",
    "  float a, b;",
    "  __builtin_memcpy(&a, &ia, 4);",
    "  __builtin_memcpy(&b, &ib, 4);",
    "  return x != x ? x : p * a * b;",
    "}",
)


# tc_expf on a vector, for the loops the printer writes in vectors (forms.VectorLoop): on
# a 16-float AVX-512 vector, 2^n p(r) is one vscalefps, which also rounds subnormal
# results and overflows to infinity, instead of tc_expf's 8 instructions of exponent bits
# (gcc does not make that of scalar code); elsewhere tc_expf lane by lane, which gcc
# vectorizes as before. x is clamped with vminps/vmaxps, the constant first: they return
# their second operand where either is NaN, so a NaN goes through; n is rounded and r
# reduced as tc_expf does (the same FMAs where the compiler fuses tc_expf's a * b + c, as
# gcc's gnu11 and clang do by default), and so the same bits for every float input
# (checked for all 2^32 in C against tc_expf; with -ffp-contract=off in TC_GRAPH_CFLAGS,
# 0.4% of them 1 ulp apart). exp 0.285 -> 0.199 ns an element, one Zen 4 core, L1.
_AVX512_EXPF = (
    "#include <immintrin.h>",
    "static inline tc_vf tc_vexpf(tc_vf x) {",
    "  __m512 c = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(89.0f),"
    " (__m512)x));",
    "  __m512 t = _mm512_sub_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f),"
    " _mm512_set1_ps(12582912.0f)), _mm512_set1_ps(12582912.0f));",
    "  __m512 r = _mm512_fnmadd_ps(t, _mm512_set1_ps(0.693145751953125f), c);",
    "  r = _mm512_fnmadd_ps(t, _mm512_set1_ps(1.4286068202862268e-6f), r);",
    "  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(0.00138436444f),"
    " _mm512_set1_ps(0.00837416295f));",
    *(
        f"  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps({c}));"
        for c in ("0.04166800156f", "0.16666431725f", "0.49999994040f", "1.0f", "1.0f")
    ),
    "  return (tc_vf)_mm512_scalef_ps(p, t);",
    "}",
)


def _vector_expf(width: int) -> list[str]:
    lanes = [
        "static inline tc_vf tc_vexpf(tc_vf x) {",
        f"  for (int l = 0; l < {width}; l++) x[l] = tc_expf(x[l]);",
        "  return x;",
        "}",
    ]
    if width != 16:
        return lanes
    return ["#ifdef __AVX512F__", *_AVX512_EXPF, "#else", *lanes, "#endif"]


# erff without a call, for the same reason (Gelu, x * 0.5 * (1 + erf(x / sqrt 2)), ran at
# 0.18x onnxruntime on libm's erff): x clamped to [-3.92, 3.92] (erf is +-1 in float
# beyond), then x P(x^2) / Q(x^2) with P of degree 6 and Q of degree 5, a rational fit of
# erf(x) / x on [0, 3.92] (linear least squares on P - erf(x)/x Q at 10,000 points,
# reweighted toward the largest errors: 2e-9 relative before rounding). 11 FMAs and a
# division, against the 23 FMAs and selects of the Taylor series and degree-16 fit it
# replaces (vector code evaluates both pieces): within 2.4 ulp of 1, and 2.1 ulp relative
# near 0, against SciPy; the result is clamped to [-1, 1] (at 3.92 the rounded quotient
# was 1 + 1 ulp). A NaN passes every clamp and comes out as it came. erf is odd and so is
# the fit, so |x| is clamped and the sign put back last: one select each side instead of
# two (as x < -3.92 ? -3.92 : x > 3.92 ? ..., gcc made 8 compares and 2 mask operations a
# vector of them), the same bits for every float input; Gelu over 1024 x 1536, two Zen 4
# cores: 467 -> 347 us.
_ERF_P = (
    1.1283791688178453, 0.18517299222943706, 0.05423659697467068, 0.0038385530569476196,
    0.0003762483913926067, 4.594736964420171e-06, -1.2727623927011322e-08,
)  # fmt: skip
_ERF_Q = (
    1.0, 0.4974386918343798, 0.11387837781320044, 0.015428130655140093,
    0.001300824033682812, 6.226182104356048e-05,
)  # fmt: skip
_ERF_HI = 3.92


def _horner(var: str, coefficients: Sequence[float]) -> str:
    """c0 + var * (c1 + var * (...)) with float literals."""
    text = f"{coefficients[-1]!r}f"
    for c in reversed(coefficients[:-1]):
        text = f"{c!r}f + {var} * ({text})"
    return text


def _vector_erff() -> list[str]:
    hi = f"{_ERF_HI!r}f"
    return [
        "static inline float tc_erff(float x) {",
        "  float a = fabsf(x);",
        f"  a = {hi} < a ? {hi} : a;",
        "  float t = a * a;",
        f"  float r = a * ({_horner('t', _ERF_P)}) / ({_horner('t', _ERF_Q)});",
        "  return copysignf(1.0f < r ? 1.0f : r, x);",
        "}",
    ]


# tanhf without a call, for the same reason (libm's tanhf: 16.7 ms over 1024 x 1536 on two
# Zen 4 cores, onnxruntime 0.21-0.46 ms). Below |x| = 0.625, x + x^3 P(x^2), P of degree 5
# fitted to (tanh(x) - x) / x^3 (weighted least squares in x^2: 1e-9 relative before
# rounding); above, 1 - 2 / (e^2|x| + 1) with tc_expf (nothing cancels there: tanh is over
# 0.55), which is 1 where e^2|x| overflows. Both are computed and one selected (vector
# code has no branch); the sign is put back last, as tanh is odd. Within 1.37 ulp of
# tanh over every float (checked in C against the double tanh); NaN, infinities and
# signed zeros as libm.
_TANH_P = (
    -0.33333332613962424,
    0.13333277050695347,
    -0.05395573449774894,
    0.021749796310497307,
    -0.008298633974761278,
    0.0022537955613510605,
)


def _vector_tanhf() -> list[str]:
    return [
        "static inline float tc_tanhf(float x) {",
        "  float a = fabsf(x);",
        "  float t = a * a;",
        f"  float s = a + a * t * ({_horner('t', _TANH_P)});",
        "  float l = 1.0f - 2.0f / (tc_expf(a + a) + 1.0f);",
        "  return copysignf(a < 0.625f ? s : l, x);",
        "}",
    ]


# Lanes of two vectors picked by constant indices (0 .. w-1 from the first, w .. 2w-1 from
# the second): clang and gcc 12 on have __builtin_shufflevector, older gcc only
# __builtin_shuffle with a mask vector (which clang lacks: no kernel compiled with it).
_SHUFFLE = [
    "#if defined(__clang__) || __GNUC__ >= 12",
    "#define TC_SHUFFLE(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)",
    "#else",
    "#define TC_SHUFFLE(a, b, ...) __builtin_shuffle(a, b, (tc_vi){__VA_ARGS__})",
    "#endif",
]


def shuffle(a: str, b: str, lanes: Sequence[int]) -> str:
    """C for the vector of the lanes of `a` and `b` at `lanes` (see _SHUFFLE)."""
    return f"TC_SHUFFLE({a}, {b}, {', '.join(map(str, lanes))})"


def _hsum(width: int) -> str:
    """The sum of a vector's lanes as a tree of shuffles (log2(width) steps, not width)."""
    steps = [f"v += {rotation};" for rotation in _rotations(width)]
    return f"static inline float tc_hsum(tc_vf v) {{ {' '.join(steps)} return v[0]; }}"


def _rotations(width: int) -> list[str]:
    """The lane rotations by width/2, width/4, ..., 1 of `v` (a tree over the lanes)."""
    out = []
    half = width // 2
    while half:
        out.append(shuffle("v", "v", [(lane + half) % width for lane in range(width)]))
        half //= 2
    return out


# Vector forms of `max=` and `min=` for vectorized reductions: the select keeps the
# accumulator where the new value is NaN, as the scalar `combine` does (NaN ignored), and
# is x86's maxps/minps exactly; the lanes, never NaN, then reduce by the same select.
EXTREMA = {"max": (">", "tc_vmax", "tc_hmax"), "min": ("<", "tc_vmin", "tc_hmin")}


def _vector_extrema(width: int) -> list[str]:
    lines = []
    for cmp, lanewise, across in EXTREMA.values():
        lines.append(
            f"static inline tc_vf {lanewise}(tc_vf a, tc_vf v) {{ tc_vi m = v {cmp} a;"
            " return (tc_vf)((m & (tc_vi)v) | (~m & (tc_vi)a)); }"
        )
        steps = " ".join(f"v = {lanewise}(v, {r});" for r in _rotations(width))
        lines.append(f"static inline float {across}(tc_vf v) {{ {steps} return v[0]; }}")
    return lines
