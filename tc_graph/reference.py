"""The NumPy oracle: evaluates an `ir.Program` directly and exactly.

Each statement is evaluated over its whole domain at once: every iterator is
an `arange` broadcast along its own axis, the right side is computed with
NumPy in the program's types (C promotion, integer `/` and `%` rounding toward
negative infinity, division by zero giving 0, MIN / -1 wrapping), reduced over
the reduction axes (`min=`/`max=` ignoring NaN), then combined with the
left-hand region and cast on store (a float into an integer saturating). The right
side is read in full before the left side is written, which is exactly the
in-place rule. Very large domains are cut into slabs along the outermost
left-hand index; there is never a Python loop per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, MutableMapping

import numpy as np
import scipy.special as sp

from . import ir
from .binding import index_error
from .lang.types import compute_type, promote

_SLAB_ELEMENTS = 1 << 22

# min and max ignore NaN (fmin/fmax; docs/language.md): with a non-NaN identity as the
# first value, a reduction is NaN only if its old value and every value are.
_REDUCERS: dict[str, np.ufunc] = {
    "+": np.add,
    "*": np.multiply,
    "min": np.fmin,
    "max": np.fmax,
}


def identity(op: str, dtype: np.dtype) -> int | float:
    """The identity of a reduction in dtype (what `!` initializes to)."""
    if op == "+":
        return 0
    if op == "*":
        return 1
    if dtype.kind == "f":
        return math.inf if op == "min" else -math.inf
    if dtype.kind == "b":
        return op == "min"
    info = np.iinfo(dtype)
    return int(info.max) if op == "min" else int(info.min)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    return np.copysign(np.floor(np.abs(x) + 0.5), x)


def _logb(x: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.floor(np.log2(np.abs(x)))


def _ieee_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's remainder: a - n*b with n = a/b rounded to even, exactly. `a - b*rint(a/b)`
    rounds a/b first (remainder(1e9, 3) gave 0 in float32). fmod by 2|b| is exact and
    keeps n's parity (2|b| overflowing to inf leaves a, also right); d = s - |b| is
    exact where it is used (Sterbenz). s and d are compared with |b|/2 as 2s and 2d
    against |b| when |b| < 1, where halving could round and doubling cannot overflow."""
    m = np.abs(b)
    s = np.abs(np.fmod(a, 2 * m))
    d = s - m
    small = m < 1
    half = np.where(small, m, m / 2)
    s2, d2 = np.where(small, 2 * s, s), np.where(small, 2 * d, d)
    # Ties: s = |b|/2 rounds to n = 0 (keep s); d = |b|/2 to n = 2 (-d).
    r = np.where(s2 <= half, s, np.where(d2 < half, d, np.where(d2 == half, -d, d - m)))
    return np.where(np.signbit(a), -r, r)


def _fdim(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's fdim: a - b where a > b, +0 where a <= b (equal infinities too, whose difference
    is NaN), NaN where either is NaN (both comparisons are false, and a + b is NaN)."""
    return np.where(a > b, a - b, np.where(a <= b, 0, a + b))


def _lgamma(x: np.ndarray) -> np.ndarray:
    """C's and CUDA's lgamma: +inf at both infinities (SciPy's gammaln is -inf at -inf)."""
    g = sp.gammaln(x)
    return np.where(np.isneginf(x), np.inf, g).astype(g.dtype)


def _erfcinv(x: np.ndarray) -> np.ndarray:
    """SciPy's erfcinv, except below the normal doubles, where it loses digits (inf at
    5e-324, where the value is 27.21): there Newton steps on log erfc(y) = log x, as the
    C helper takes them (codegen/expr.py), log erfc(y) = log erfcx(y) - y^2."""
    x = np.asarray(x)
    y = np.asarray(sp.erfcinv(x))
    tiny = (x > 0) & (x < np.finfo(np.float64).tiny)
    if not tiny.any():
        return y
    t = -np.log(x[tiny].astype(np.float64))
    z = np.sqrt(t - 0.5 * np.log(np.pi * t))
    for _ in range(4):
        e = sp.erfcx(z)
        z = z + (np.log(e) - z * z + t) * e * (np.sqrt(np.pi) / 2)
    y = y.copy()
    y[tiny] = z
    return y


def _at_infinity(f: Callable[[np.ndarray], np.ndarray], *, both: bool) -> Callable[..., np.ndarray]:
    """A Bessel function as C (and CUDA) define it: 0, its limit, at +inf and, where
    `both`, at -inf (y0 and y1 are NaN there), where SciPy gives NaN."""

    def bessel(x: np.ndarray) -> np.ndarray:
        v = f(x)
        at = np.isinf(x) if both else np.isposinf(x)
        return np.where(at, 0, v).astype(v.dtype)

    return bessel


_FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
    "atan": np.arctan, "atanh": np.arctanh, "cbrt": np.cbrt, "ceil": np.ceil, "cos": np.cos,
    "cosh": np.cosh, "cospi": lambda x: np.cos(np.pi * np.fmod(x, 2)), "erf": sp.erf, "erfc": sp.erfc,
    "erfcinv": _erfcinv, "erfcx": sp.erfcx, "erfinv": sp.erfinv, "exp": np.exp,
    "exp10": sp.exp10, "exp2": np.exp2, "expm1": np.expm1, "fabs": np.abs, "floor": np.floor,
    "j0": _at_infinity(sp.j0, both=True), "j1": _at_infinity(sp.j1, both=True), "lgamma": _lgamma,
    "log": np.log, "log10": np.log10,
    "log1p": np.log1p, "log2": np.log2, "logb": _logb, "nearbyint": np.rint,
    "normcdf": sp.ndtr, "normcdfinv": lambda x: -np.sqrt(2) * _erfcinv(2 * np.asarray(x)), "rcbrt": lambda x: 1 / np.cbrt(x),
    "rint": np.rint, "round": _round_half_away, "rsqrt": lambda x: 1 / np.sqrt(x),
    "sin": np.sin, "sinh": np.sinh, "sinpi": lambda x: np.sin(np.pi * np.fmod(x, 2)), "sqrt": np.sqrt,
    "tan": np.tan, "tanh": np.tanh, "tgamma": sp.gamma, "trunc": np.trunc,
    "y0": _at_infinity(sp.y0, both=False), "y1": _at_infinity(sp.y1, both=False),
    "atan2": np.arctan2, "copysign": np.copysign, "fdim": _fdim,
    "fmax": np.fmax, "fmin": np.fmin, "fmod": np.fmod, "hypot": np.hypot,
    "nextafter": np.nextafter, "pow": np.power, "remainder": _ieee_remainder,
    "rhypot": lambda a, b: 1 / np.hypot(a, b),
    "fma": lambda a, b, c: a * b + c,
    "norm3d": lambda a, b, c: np.sqrt(a * a + b * b + c * c),
    "rnorm3d": lambda a, b, c: 1 / np.sqrt(a * a + b * b + c * c),
    "norm4d": lambda a, b, c, d: np.sqrt(a * a + b * b + c * c + d * d),
    "rnorm4d": lambda a, b, c, d: 1 / np.sqrt(a * a + b * b + c * c + d * d),
    "min": np.fmin, "max": np.fmax, "abs": np.abs,
}  # fmt: skip

_ARITH: dict[str, np.ufunc] = {"+": np.add, "-": np.subtract, "*": np.multiply}
_COMPARE: dict[str, np.ufunc] = {
    "==": np.equal, "!=": np.not_equal, "<": np.less, "<=": np.less_equal,
    ">": np.greater, ">=": np.greater_equal,
}  # fmt: skip


def _int_divide(a: np.ndarray, b: np.ndarray, op: str) -> np.ndarray:
    """Floor division and modulo; a zero divisor gives 0 instead of trapping, and a
    divisor of -1 negates (wrapping: MIN / -1 is MIN) with remainder 0, never dividing."""
    zero = b == 0
    minus_one = (b == -1) if a.dtype.kind == "i" else np.zeros_like(zero)
    safe = np.where(zero | minus_one, np.ones_like(b), b)
    q = np.floor_divide(a, safe) if op == "/" else np.remainder(a, safe)
    if op == "/":
        q = np.where(minus_one, np.negative(a), q)
    return np.where(zero | (minus_one & (op == "%")), np.zeros_like(q), q)


def convert(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """x converted to dtype as every target does: a float into an integer truncates toward
    zero and saturates (NaN gives 0, beyond the range its nearest end), where C and
    `astype` leave it undefined; anything else is NumPy's (C's) conversion."""
    x = np.asarray(x)
    if dtype.kind not in "iu" or x.dtype.kind != "f":
        return x.astype(dtype)
    info = np.iinfo(dtype)
    top = 2.0 ** (info.bits - (info.kind == "i"))  # exact in every float type
    low, high, nan = x <= (-top if info.min else 0), x >= top, np.isnan(x)
    inside = np.where(low | high | nan, 0, x).astype(dtype)
    ends = np.array([info.min, info.max], dtype)
    return np.where(high, ends[1], np.where(low, ends[0], inside))


class _Evaluator:
    def __init__(
        self,
        program: ir.Program,
        tensors: Mapping[str, np.ndarray],
        sizes: Mapping[str, int],
        grids: Mapping[str, np.ndarray],
    ) -> None:
        self.program = program
        self.tensors = tensors
        self.sizes = sizes
        self.grids = grids

    def __call__(self, e: ir.Expr) -> np.ndarray:
        dt = np.dtype(e.dtype)
        match e:
            case ir.Const(value=v):
                return np.asarray(v, dtype=dt)
            case ir.Index(name=n):
                return self.grids[n].astype(dt, copy=False)
            case ir.Size(name=n):
                return np.asarray(self.sizes[n], dtype=dt)
            case ir.DimSize(tensor=t, dim=k):
                return np.asarray(self.tensors[t].shape[k], dtype=dt)
            case ir.Read():
                return self.read(e)
            case ir.Unary(op="!", operand=x):
                return np.logical_not(self(x))
            case ir.Unary(operand=x):
                return np.negative(self(x).astype(dt))
            case ir.Binary(op=op, left=a, right=b, compute=ct):
                return self.binary(op, a, b, np.dtype(ct), dt)
            case ir.Select(cond=c, then=a, other=b):
                return np.where(self(c).astype(bool), self(a).astype(dt), self(b).astype(dt))
            case ir.Call(fn=fn, args=args):
                vals = [self(a).astype(dt) for a in args]
                return np.asarray(_FUNCTIONS[fn](*vals)).astype(dt, copy=False)
            case ir.Cast(operand=x):
                return convert(self(x), dt)
        raise TypeError(e)

    def binary(self, op: str, a: ir.Expr, b: ir.Expr, ct: np.dtype, dt: np.dtype) -> np.ndarray:
        if op in ir.LOGICAL:
            x, y = self(a).astype(bool), self(b).astype(bool)
            return np.logical_and(x, y) if op == "&&" else np.logical_or(x, y)
        x, y = self(a).astype(ct), self(b).astype(ct)
        if op in _COMPARE:
            return _COMPARE[op](x, y)
        if op in _ARITH:
            return _ARITH[op](x, y).astype(dt, copy=False)
        if ct.kind == "f":
            return np.true_divide(x, y).astype(dt, copy=False)
        return _int_divide(x, y, op).astype(dt, copy=False)

    def read(self, r: ir.Read) -> np.ndarray:
        arr = self.tensors[r.tensor]
        if not r.subscripts:
            return arr[()]
        subs = [self.subscript(r, k) for k in range(len(r.subscripts))]
        return arr[tuple(subs)]

    def subscript(self, r: ir.Read, k: int) -> np.ndarray:
        """The values of subscript k of r, all within the tensor (else a TcError)."""
        v = self(r.subscripts[k]).astype(np.int64)
        extent = self.tensors[r.tensor].shape[k]
        if v.size:
            lo, hi = int(v.min()), int(v.max())
            if lo < 0 or hi >= extent:
                raise index_error(self.program, r, k, lo if lo < 0 else hi, extent)
        return v


def _grids(iterators: tuple[str, ...], ranges: list[tuple[int, int]]) -> dict[str, np.ndarray]:
    """Each iterator as an arange along its own axis."""
    return {
        v: np.arange(lo, hi, dtype=np.int64).reshape(
            [-1 if j == k else 1 for j in range(len(ranges))]
        )
        for k, (v, (lo, hi)) in enumerate(zip(iterators, ranges, strict=True))
    }


def _check_indirect(
    program: ir.Program,
    st: ir.Statement,
    ranges: list[tuple[int, int]],
    tensors: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
) -> None:
    """Index values read from inputs are checked before anything is written."""
    for r in ir.reads(st.rhs):
        for k, sub in enumerate(r.subscripts):
            inner = [x for x in ir.walk(sub) if isinstance(x, ir.Read)]
            if inner and all(x.tensor in program.inputs for x in inner):
                used = tuple(v for v in st.iterators if v in ir.index_names(sub))
                box = [ranges[st.iterators.index(v)] for v in used]
                # Over the statement's whole domain: none when any of its ranges is empty,
                # though the subscript's own variables have values (issue 12 item 12).
                if all(hi > lo for lo, hi in ranges):
                    _Evaluator(program, tensors, sizes, _grids(used, box)).subscript(r, k)


def _store(
    st: ir.Statement,
    ranges: list[tuple[int, int]],
    tensors: MutableMapping[str, np.ndarray],
    program: ir.Program,
    sizes: Mapping[str, int],
) -> None:
    target = tensors[st.tensor]
    nl = len(st.lhs)
    region = tuple(slice(lo, hi) for lo, hi in ranges[:nl])
    if any(hi <= lo for lo, hi in ranges[:nl]):
        return
    shape = tuple(max(hi - lo, 0) for lo, hi in ranges)
    if 0 in shape:
        # No reduction point: nothing is read (a subscript that would be out of range
        # at no point is no error), the reduction is its identity.
        value = np.zeros(shape, st.rhs.dtype)
    else:
        grids = _grids(st.iterators, ranges)
        value = np.broadcast_to(_Evaluator(program, tensors, sizes, grids)(st.rhs), shape)
    if st.op == "=":
        target[region] = convert(value, target.dtype)
        return
    acc = np.dtype(compute_type(promote(str(target.dtype), st.rhs.dtype)))
    ufunc = _REDUCERS[st.op]
    axes = tuple(range(nl, len(shape)))
    reduced = ufunc.reduce(value.astype(acc), axis=axes, initial=identity(st.op, acc))
    target[region] = convert(ufunc(_start(st, target[region], acc), reduced), target.dtype)


def _start(st: ir.Statement, old: np.ndarray, acc: np.dtype) -> np.ndarray | np.generic:
    """A reduction's first value in its computing type acc. With `!`, the identity of
    the tensor's own type (int8 `max=!` over nothing is -128), converted as C does (int32
    `max=!` over uint32 starts at 2^31). Without `!`, the current contents: converting
    an identity there and combining it with them (the old code) made int16 `max=` over
    uint32 start at 2^32 - 2^15 instead. A NaN old value counts as the identity of
    `min=`/`max=`, which ignore NaN (docs/language.md)."""
    if st.init:
        return np.asarray(identity(st.op, old.dtype), old.dtype).astype(acc)[()]
    start = old.astype(acc)
    if st.op in ("min", "max") and acc.kind == "f":
        start = np.where(np.isnan(start), acc.type(identity(st.op, acc)), start)
    return start


def evaluate(
    program: ir.Program,
    tensors: MutableMapping[str, np.ndarray],
    sizes: Mapping[str, int],
) -> None:
    """Run every statement of program in order over `tensors` (inputs, outputs and
    temporaries, allocated and zero-filled by the caller); `sizes` gives every
    parameter's value."""
    point = ir.param_point(program, sizes)
    all_ranges = [
        [(ir.eval_pw(lo, point), ir.eval_pw(hi, point)) for lo, hi in st.bounds]
        for st in program.statements
    ]
    with np.errstate(all="ignore"):
        for st, ranges in zip(program.statements, all_ranges, strict=True):
            _check_indirect(program, st, ranges, tensors, sizes)
        for st, ranges in zip(program.statements, all_ranges, strict=True):
            volume = math.prod(max(hi - lo, 0) for lo, hi in ranges)
            first = ranges[0] if st.lhs else None
            if first is None or volume <= _SLAB_ELEMENTS or first[1] - first[0] <= 1:
                _store(st, ranges, tensors, program, sizes)
                continue
            step = max(1, (first[1] - first[0]) * _SLAB_ELEMENTS // volume)
            for lo in range(first[0], first[1], step):
                slab = [(lo, min(lo + step, first[1])), *ranges[1:]]
                _store(st, slab, tensors, program, sizes)
