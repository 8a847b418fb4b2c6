"""Findings of the differential fuzzer (scripts/fuzz.py) on OpenCL, each checked against
the reference evaluator: float conditions of `?:`, `abs` of a signed integer, nested
private elements, float16 reached only through a cast."""

from __future__ import annotations

import numpy as np
import pytest

import tc_graph as tg
from tc_graph.runtime import opencl


def _same_as_reference(source: str, *args: np.ndarray, **kw: object) -> str:
    fn = tg.define(source).main
    k = fn.compile(*args, target="opencl", **kw)  # type: ignore[arg-type]
    want = fn(*args, target="reference")
    np.testing.assert_array_equal(k(*args), want)
    return k.source


def test_float_condition_of_a_select_is_a_truth_value() -> None:
    """OpenCL C rejects a float condition in `?:`; C converts it (nonzero is true, NaN
    too). A zero and a NaN off the diagonal pick both branches."""
    a = np.arange(49, dtype=np.float32).reshape(7, 7) - 25
    a[2, 5] = np.nan
    src = "def main(float(N,M) A) -> (T4) { T4(i0, i1) = (A(i0, i1) ? A(i0, i1) : A(i1, i0)) }"
    _same_as_reference(src, a)
    dsrc = src.replace("float(", "double(")
    _same_as_reference(dsrc, a.astype(np.float64))


def test_abs_of_int_min_wraps_in_the_signed_type() -> None:
    """OpenCL's abs returns the unsigned type: abs(INT_MIN) / 2 floored must stay
    -1073741824 (abs wraps to INT_MIN, as in the reference), not 1073741824."""
    for dt in (np.int32, np.int64, np.int8, np.int16):
        name = np.dtype(dt).name
        c = np.array([[np.iinfo(dt).min, -3], [5, np.iinfo(dt).max]], dt)
        src = f"def main({name}(N,N) C) -> (T3) {{ T3(i0, i1) = abs(C(i0, i1)) / 2 }}"
        _same_as_reference(src, c)


@pytest.mark.parametrize("m", [1, 3])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_nested_private_elements_keep_one_register(m: int, dtype: str) -> None:
    """An assignment then an initialized reduction of the same element: the private
    element of the outer block must hold what the inner block stored (it read an
    uninitialised shadowed `tc_v`)."""
    src = "def main(T(M) C) -> (S1) {\n  S1(i0) = C(i0)\n  S1(i0) +=! C(r0) }"
    src = src.replace("T(", "float(" if dtype == "float32" else "int64(")
    c = (np.arange(m) + 6).astype(dtype)
    _same_as_reference(src, c)
    off = tg.MappingOptions(use_private_memory=False)
    _same_as_reference(src, c, options=off)


def test_half_cast_without_fp16_tensors_needs_the_extension() -> None:
    """A `half(...)` cast in a float32 program uses float16 too: without cl_khr_fp16 the
    error is the extension's, not the OpenCL compiler's."""
    ctx, _ = opencl.context()
    src = "def main(float(M) C) -> (T1) { T1 *=! (abs(half(C(r0))) - C(r0)) }"
    c = np.array([1.5, -2.0], np.float32)
    if "cl_khr_fp16" in ctx.devices[0].extensions:
        got = tg.define(src).main(c, target="opencl")
        np.testing.assert_allclose(got, tg.define(src).main(c, target="reference"))
        return
    with pytest.raises(tg.TcError, match="cl_khr_fp16"):
        tg.define(src).main.compile(c, target="opencl")


def test_builtins_without_an_opencl_equivalent_are_listed_and_refused() -> None:
    """docs/gpu.md lists the builtins OpenCL lacks; each is a TcError naming it there,
    and the same program runs on the reference."""
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "gpu.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| OpenCL |"))
    names = ["j0", "j1", "y0", "y1", "nearbyint"]
    assert all(f"`{n}`" in row for n in names), row
    a = np.array([0.5, 2.0], np.float32)
    for n in names:
        fn = tg.define(f"def main(float(M) A) -> (B) {{ B(i) = {n}(A(i)) }}").main
        fn(a, target="reference")
        with pytest.raises(tg.TcError, match=f"builtin '{n}' has no opencl equivalent"):
            fn.compile(a, target="opencl")


@pytest.mark.parametrize(
    ("source", "args"),
    [
        (
            "def main(float(M,K) A, float(K,N) B) -> (L) {\n  L(m) min=! A(m,k)\n"
            "  T(k,n) = B(k,n) }",
            (np.arange(9, dtype=np.float32).reshape(1, 9) - 2, np.ones((9, 1), np.float32)),
        ),
        (
            "def main(int(M) C, float32(N, N) D) -> (S1) {\n"
            "  S1(i0) +=! C(i0 + r0) where r0 in 0:1\n  T3(i0, i1) = D(i0, i1) }",
            (np.array([8], np.int32), np.ones((6, 6), np.float32)),
        ),
    ],
)
def test_a_private_element_beside_a_mapped_loop_is_stored_by_one_thread(
    source: str, args: tuple
) -> None:
    """A one-element reduction runs on thread 0 (`if (tc_tx == 0)`), in a block whose
    other statement's loop is mapped to threads: the element's store after the block ran
    on every thread, the others storing an uninitialised register (inf for -2, 0 for 8)."""
    _same_as_reference(source, *args)
