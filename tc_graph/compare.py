"""The one output comparison of tc_graph: a kernel's or an optimized model's outputs
against the reference's (NumPy's, onnxruntime's on the original model). Floats within a
tolerance relative to each output's magnitude: another schedule reassociates sums, so an
output near zero among terms in the thousands differs in its last bits (alexnet's
convolutions did, and were refused as wrong), while a bug gives other numbers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def rtol(dtype: np.dtype) -> float:
    """The relative tolerance of a float dtype, by its precision."""
    return 1e-2 if dtype.itemsize <= 2 else 1e-3 if dtype.itemsize <= 4 else 1e-9


def mismatch(got: Sequence[np.ndarray], want: Sequence[np.ndarray]) -> str | None:
    """Why `got` is not `want` (None when it is): a shape or dtype, integers and bools
    that are not equal, floats beyond rtol(dtype) of themselves plus a tenth of that of
    the output's largest finite magnitude (NaN matching NaN)."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {k} is {g.dtype}{list(g.shape)}, expected {w.dtype}{list(w.shape)}"
        if w.dtype.kind not in "fc":
            if not np.array_equal(g, w):
                return f"output {k} differs"
            continue
        r = rtol(w.dtype)
        finite = np.abs(w[np.isfinite(w)])
        scale = float(np.max(finite)) if finite.size else 1.0
        if not np.allclose(g, w, rtol=r, atol=r * 0.1 * max(scale, 1e-30), equal_nan=True):
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            worst = float(np.nanmax(diff)) if diff.size else 0.0
            return f"output {k} differs by up to {worst:.3g}"
    return None
