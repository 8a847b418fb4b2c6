"""The C-family expression printer every target shares, and what its dialects hold.

Expressions, calls, casts and stores print the same in C + OpenMP, OpenCL and CUDA; a
`Dialect` says where targets differ (pragmas, whether signed overflow wraps, a math
function of their own). Generated kernels are specialized on sizes; integer `/` and `%`
round toward negative infinity and give 0 for a zero divisor (MIN / -1 wraps); a float
converted to an integer saturates; float16 is stored as `_Float16` and computed in float;
every tensor pointer is `restrict`. `helper_lines` are the arithmetic helpers that make
these rules hold in every dialect's prelude.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .. import ir
from ..lang.types import C_TYPES, FLOAT_TYPES, INT_TYPES, compute_type
from ..options import MappingOptions
from ..poly.scop import Scop

# Builtins whose libm name is the same in float (with an `f` suffix) and double.
LIBM = frozenset({
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos", "cosh", "erf",
    "erfc", "exp", "exp10", "exp2", "expm1", "fabs", "floor", "j0", "j1", "lgamma", "log",
    "log10", "log1p", "log2", "logb", "nearbyint", "rint", "round", "sin", "sinh", "sqrt", "tan",
    "tanh", "tgamma", "trunc", "y0", "y1", "atan2", "copysign", "fdim", "fmod",
    "hypot", "nextafter", "pow", "remainder", "fma",
})  # fmt: skip

_IDENTITY = {"+": "0", "*": "1"}


def helper_lines(q: str, *, double: bool = True) -> list[str]:
    """The arithmetic helpers every dialect shares, each function declared with `q`
    (`static inline` in C and OpenCL, `__device__` ones in CUDA)."""
    lines: list[str] = []
    for t in INT_TYPES:
        c, u = C_TYPES[t], C_TYPES[f"u{t}"] if t.startswith("int") else ""
        # A signed MIN / -1 traps (SIGFPE) in C: by -1 is a wrapping negation instead,
        # done in the unsigned type, and its remainder is 0.
        neg = f" if (b == -1) return ({c})(({u})0 - ({u})a);" if u else ""
        lines.append(
            f"{q} {c} tc_div_{t}({c} a, {c} b) {{ if (b == 0) return 0;{neg} "
            f"{c} q = a / b; return q - ((q * b != a && ((a < 0) != (b < 0))) ? 1 : 0); }}"
        )
        # The correction is added, not selected (`cond ? r + b : r`): gcc 12.2 compiled
        # the select inside `omp simd` loops into reads of A[-1] (the fuzzer, seed 2029).
        zero = "b == 0 || b == -1" if u else "b == 0"
        lines.append(
            f"{q} {c} tc_mod_{t}({c} a, {c} b) {{ if ({zero}) return 0; "
            f"{c} r = a % b; return r + ((r != 0 && ((r < 0) != (b < 0))) ? b : 0); }}"
        )
    for c, f in (("float", "f"), ("double", ""))[: 2 if double else 1]:
        lines += [
            # libm's fmax is a call gcc neither inlines nor vectorizes (NaN rules): a
            # select with the same rules (a NaN operand gives the other one) does both.
            f"{q} {c} tc_fmax{f}({c} a, {c} b) {{ return (a > b || b != b) ? a : b; }}",
            f"{q} {c} tc_fmin{f}({c} a, {c} b) {{ return (a < b || b != b) ? a : b; }}",
            f"{q} {c} tc_rsqrt{f}({c} x) {{ return 1 / sqrt{f}(x); }}",
            f"{q} {c} tc_rcbrt{f}({c} x) {{ return 1 / cbrt{f}(x); }}",
            # x modulo 2 first (fmod is exact): pi * x rounded loses a large x's angle.
            f"{q} {c} tc_sinpi{f}({c} x) {{ return sin{f}(({c})M_PI * fmod{f}(x, ({c})2)); }}",
            f"{q} {c} tc_cospi{f}({c} x) {{ return cos{f}(({c})M_PI * fmod{f}(x, ({c})2)); }}",
            # A typed 2: the overloaded sqrt of OpenCL and CUDA takes no int.
            f"{q} {c} tc_normcdf{f}({c} x) {{ return ({c})0.5 * erfc{f}(-x / sqrt{f}(({c})2)); }}",
            f"{q} {c} tc_rhypot{f}({c} a, {c} b) {{ return 1 / hypot{f}(a, b); }}",
            f"{q} {c} tc_norm3d{f}({c} a, {c} b, {c} c) "
            f"{{ return sqrt{f}(a * a + b * b + c * c); }}",
            f"{q} {c} tc_rnorm3d{f}({c} a, {c} b, {c} c) "
            f"{{ return 1 / sqrt{f}(a * a + b * b + c * c); }}",
            f"{q} {c} tc_norm4d{f}({c} a, {c} b, {c} c, {c} d) "
            f"{{ return sqrt{f}(a * a + b * b + c * c + d * d); }}",
            f"{q} {c} tc_rnorm4d{f}({c} a, {c} b, {c} c, {c} d) "
            f"{{ return 1 / sqrt{f}(a * a + b * b + c * c + d * d); }}",
        ]
        lines += _erf_family(q, c, f)
        lines += [_to_int(q, t, c, f) for t in INT_TYPES]
    return lines


def _erf_family(q: str, c: str, f: str) -> list[str]:
    """erfcx and the inverses of erf, erfc and the normal CDF, in C type c (suffix f)."""
    return [
        # exp(x^2) * erfc(x) overflows times underflows for large x (inf or NaN past
        # x = 9 in float): there, Laplace's continued fraction
        # erfcx(x) = 1/sqrt(pi) / (x + (1/2) / (x + (2/2) / (x + ...))), 12 terms from
        # x = 6 on (relative error below 1e-15), with no x^2 to overflow.
        f"{q} {c} tc_erfcx{f}({c} x) {{ if (!(x >= 6)) return exp{f}(x * x) * erfc{f}(x);"
        f" {c} t = x; for (int k = 12; k > 0; k--) t = x + ({c})0.5 * ({c})k / t;"
        f" return ({c})0.5641895835477563 / t; }}",
        # Giles' single-precision starting point for erfinv, from w = -log(1 - y^2).
        f"{q} {c} tc_erfinv_start{f}({c} w) {{ {c} p;"
        f" if (w < 5) {{ w -= 2.5; p = 2.81022636e-08; p = 3.43273939e-07 + p * w;"
        f" p = -3.5233877e-06 + p * w; p = -4.39150654e-06 + p * w; p = 0.00021858087 + p * w;"
        f" p = -0.00125372503 + p * w; p = -0.00417768164 + p * w; p = 0.246640727 + p * w;"
        f" p = 1.50140941 + p * w; }} else {{ w = sqrt{f}(w) - 3; p = -0.000200214257;"
        f" p = 0.000100950558 + p * w; p = 0.00134934322 + p * w; p = -0.00367342844 + p * w;"
        f" p = 0.00573950773 + p * w; p = -0.0076224613 + p * w; p = 0.00943887047 + p * w;"
        f" p = 1.00167406 + p * w; p = 2.83297682 + p * w; }} return p; }}",
        # erfinv for |x| <= 1/2, by Newton steps on erf from that start.
        f"{q} {c} tc_erfinv_mid{f}({c} x) {{"
        f" {c} y = tc_erfinv_start{f}(-log{f}((1 - x) * (1 + x))) * x;"
        f" for (int i = 0; i < 2; i++) y -= (erf{f}(y) - x) / "
        f"(({c})1.1283791670955126 * exp{f}(-y * y)); return y; }}",
        # erfcinv for 0 < u <= 1/2, where 1 - u is no longer exact (it rounds to 1 below
        # 6e-8 in float, 1e-16 in double) and erf's steps near 1 lose its digits: Newton
        # steps solve log erfc(y) = log u, with log erfc(y) = log erfcx(y) - y^2 (no
        # underflow) and derivative -2/sqrt(pi) / erfcx(y), from Giles' start where its
        # w = -log(u (2 - u)) is in range, else from the asymptote
        # y^2 = t - log(pi t) / 2, t = -log u.
        f"{q} {c} tc_erfcinv_tail{f}({c} u) {{"
        f" {c} t = -log{f}(u), w = -log{f}(u * (2 - u));"
        f" {c} y = w < 16 ? tc_erfinv_start{f}(w) * (1 - u)"
        f" : sqrt{f}(t - ({c})0.5 * log{f}(({c})3.141592653589793 * t));"
        f" for (int i = 0; i < 3; i++) {{ {c} e = tc_erfcx{f}(y);"
        f" y += (log{f}(e) - y * y + t) * e * ({c})0.886226925452758; }} return y; }}",
        # erfinv(+-1) = +-inf; outside [-1, 1] (and NaN) it is NaN, as in SciPy and
        # CUDA (the seeds' helper gave +-inf there too). Past 1/2, erfinv(x) =
        # erfcinv(1 - |x|) with its sign, 1 - |x| exact there (near +-1, erf's steps
        # had lost up to 3% of the value in double).
        f"{q} {c} tc_erfinv{f}({c} x) {{"
        f" if (x == -1) return -({c})INFINITY; if (x == 1) return ({c})INFINITY;"
        f" if (!(x > -1 && x < 1)) return ({c})NAN;"
        f" return fabs{f}(x) <= ({c})0.5 ? tc_erfinv_mid{f}(x)"
        f" : copysign{f}(tc_erfcinv_tail{f}(1 - fabs{f}(x)), x); }}",
        # erfcinv(2 - u) = -erfcinv(u), 2 - u exact for u in [1, 2]; erfcinv(u) =
        # erfinv(1 - u) for u in [1/2, 1], 1 - u exact there (the seeds' erfinv(1 - x)
        # gave inf for x below 6e-8 in float: found by fuzzing).
        f"{q} {c} tc_erfcinv{f}({c} x) {{"
        f" if (x == 0) return ({c})INFINITY; if (x == 2) return -({c})INFINITY;"
        f" if (!(x > 0 && x < 2)) return ({c})NAN;"
        f" {c} u = x > 1 ? 2 - x : x, y = u >= ({c})0.5 ? tc_erfinv_mid{f}(1 - u)"
        f" : tc_erfcinv_tail{f}(u); return x > 1 ? -y : y; }}",
        f"{q} {c} tc_normcdfinv{f}({c} x) "
        f"{{ return -({c})1.4142135623730951 * tc_erfcinv{f}(2 * x); }}",
    ]


def _to_int(q: str, t: str, c: str, f: str) -> str:
    """`tc_to_{t}{f}`: a float of C type c converted to integer type t, saturating (C
    leaves an out-of-range conversion undefined): NaN gives 0, anything beyond the range
    its nearest end; in range, truncation toward zero. The bounds are powers of two,
    exact in every float type. A signed type's (-1, 1) gives its 0 explicitly: gcc folded
    `(float)(int64_t)x` into truncf(x), -0 for x in (-1, 0), where an integer 0 is +0
    (fuzz seed 2079, program 1816)."""
    it = C_TYPES[t]
    info = np.iinfo(t)
    top = literal(2.0 ** (info.bits - (info.min < 0)), "float32" if f else "float64")
    if info.min == 0:
        hi, low = f"({it})-1", "x <= 0 ? 0"
    else:
        hi = literal(int(info.max), t)
        low = f"x <= -{top} ? ({it})(-{hi} - 1) : x > -1 && x < 1 ? 0"
    return (
        f"{q} {it} tc_to_{t}{f}({c} x) {{ return x != x ? 0 : {low} : "
        f"x >= {top} ? {hi} : ({it})x; }}"
    )


def cname(tensor: str) -> str:
    """C name of a tensor (TC names may be C keywords or start with a digit)."""
    return f"t_{tensor}"


@dataclass(frozen=True)
class Dialect:
    """The hooks in which targets differ."""

    def parallel_pragma(self, options: MappingOptions, *, simd: bool, collapse: int = 1) -> str:
        threads = f" num_threads({options.threads})" if options.threads else ""
        folded = f" collapse({collapse})" if collapse > 1 else ""
        kind = " simd" if simd else ""
        return f"#pragma omp parallel for{kind}{folded} schedule(static){threads}"

    def simd_pragma(self) -> str:
        return "#pragma omp simd"

    def reduction_pragma(self, op: str, acc: str) -> str:
        return f"#pragma omp simd reduction({op}:{acc})"

    def record_error(self, code: int) -> str:
        """What a failed index check runs, its bad value in `v`: in C, leave the kernel
        with check `code` failed."""
        return f"*err = v; code = {code}; goto done;"

    def signed_wraps(self) -> bool:
        """Whether the compiler makes signed overflow wrap (the C target passes -fwrapv);
        where not, the printer computes signed `+ - *` and negation in unsigned."""
        return True

    def math_name(self, fn: str, dtype: str) -> str | None:
        """The dialect's own function for a builtin in this dtype, if it has one: in C,
        expf, erff and tanhf are the prelude's tc_expf, tc_erff and tc_tanhf, which gcc
        vectorizes (see codegen/prelude.py)."""
        return f"tc_{fn}f" if dtype == "float32" and fn in ("exp", "erf", "tanh") else None


C_OPENMP = Dialect()


class ExprPrinter:
    """Expressions as C text, with a dialect's hooks. `private` maps a temporary in a local
    array to its box's offsets (C) and sizes (set by the statement printer), `renamed`
    such an array to its C name where that is not the tensor's; `tmp` numbers the locals
    of statement expressions."""

    def __init__(self, scop: Scop, dialect: Dialect) -> None:
        self.scop = scop
        self.dialect = dialect
        self.program = scop.program
        self.tmp = 0
        self.private: dict[str, tuple[tuple[str, ...], tuple[int, ...]]] = {}
        # A private box held in a buffer of another name (an outer kernel's block).
        self.renamed: dict[str, str] = {}

    def extent(self, tensor: str, k: int) -> str:
        """Dimension k of a tensor as C: its size, or, in a kernel for every size, its
        expression over the sizes the kernel reads."""
        sym = self.scop.symbolic
        return str(self.scop.shapes[tensor][k]) if sym is None else f"({sym.extents[tensor][k]})"

    def linear(self, tensor: str, subs: Sequence[str]) -> str:
        shape: Sequence[int | str] = [self.extent(tensor, k) for k in range(len(subs))]
        if tensor in self.private:
            # A local array (poly/local.py): the box of one loop iteration, its offsets; a
            # dimension of one element contributes nothing.
            offsets, shape = self.private[tensor]
            subs = [
                "0" if n == 1 else s if o == "0" else f"({s}) - ({o})"
                for s, o, n in zip(subs, offsets, shape, strict=True)
            ]
            if all(s == "0" for s in subs):
                return "0"
        if not subs:
            return "0"
        text = f"(int64_t)({subs[0]})"
        for k in range(1, len(subs)):
            text = f"({text} * {shape[k]} + (int64_t)({subs[k]}))"
        return text

    def expr(self, e: ir.Expr, env: Mapping[str, str]) -> str:
        dt = C_TYPES.get(e.dtype, "")
        match e:
            case ir.Const(value=v):
                return literal(v, e.dtype)
            case ir.Index(name=n):
                return f"(({dt})({env[n]}))"
            case ir.Size(name=n) if self.scop.symbolic is not None:
                return f"(({dt})({n}))"
            case ir.DimSize(tensor=t, dim=k) if self.scop.symbolic is not None:
                return f"(({dt}){self.extent(t, k)})"
            case ir.Size() | ir.DimSize():
                raise AssertionError("sizes are specialized before printing")
            case ir.Read(tensor=t, subscripts=subs):
                idx = self.linear(t, [self.expr(s, env) for s in subs])
                return f"{self.renamed.get(t, cname(t))}[{idx}]"
            case ir.Unary(op="!", operand=x):
                return f"(!({self.expr(x, env)}))"
            case ir.Unary(operand=x):
                ct = compute_type(e.dtype)
                if self.wraps_here(ct):  # -MIN is MIN
                    return f"(({dt})({self.wrapping('-', '0', self.expr(x, env), ct)}))"
                return f"(({dt})(-({C_TYPES[ct]})({self.expr(x, env)})))"
            case ir.Binary(op=op, left=a, right=b, compute=ct):
                return self.binary(e, op, a, b, ct, env)
            case ir.Select(cond=c, then=a, other=b):
                return (
                    f"(({self.expr(c, env)}) ? ({dt})({self.expr(a, env)}) : "
                    f"({dt})({self.expr(b, env)}))"
                )
            case ir.Call(fn=fn, args=args):
                return self.call(fn, [self.expr(a, env) for a in args], e.dtype)
            case ir.Cast(operand=x):
                return store(self.expr(x, env), e.dtype, x.dtype)
        raise TypeError(e)

    def binary(
        self, e: ir.Expr, op: str, a: ir.Expr, b: ir.Expr, ct: str, env: Mapping[str, str]
    ) -> str:
        x, y = self.expr(a, env), self.expr(b, env)
        if op in ir.LOGICAL:
            return f"(({x}) {op} ({y}))"
        c = C_TYPES[ct]
        if op in ir.COMPARISONS:
            return f"(({c})({x}) {op} ({c})({y}))"
        if op in ("/", "%") and ct in INT_TYPES:
            fn = "tc_div" if op == "/" else "tc_mod"
            text = f"{fn}_{ct}(({c})({x}), ({c})({y}))"
        else:
            text = self.wrapping(op, x, y, ct)
        return text if e.dtype == ct else f"(({C_TYPES[e.dtype]}){text})"

    def wraps_here(self, ct: str) -> bool:
        """Signed arithmetic in ct must be printed unsigned to wrap on this target."""
        return ct in ("int32", "int64") and not self.dialect.signed_wraps()

    def wrapping(self, op: str, x: str, y: str, ct: str) -> str:
        """x op y in type ct; signed `+ - *` wrap (docs/language.md) also where the
        compiler does not promise it (OpenCL C and CUDA: clang folded (a - b) / -1 as if
        a - b could not overflow), computed in the unsigned type and converted back."""
        c = C_TYPES[ct]
        if op in "+-*" and self.wraps_here(ct):
            u = C_TYPES[f"u{ct}"]
            return f"(({c})(({u})({x}) {op} ({u})({y})))"
        return f"(({c})({x}) {op} ({c})({y}))"

    def call(self, fn: str, args: list[str], dtype: str) -> str:
        c = C_TYPES[dtype]
        cast = [f"({c})({a})" for a in args]
        if fn in ("min", "max") and dtype.startswith("float"):
            # On floats, min and max ignore NaN like the min=/max= reductions (fmin/fmax).
            return f"tc_f{fn}{'' if dtype == 'float64' else 'f'}({', '.join(cast)})"
        if fn in ("min", "max"):
            op = "<" if fn == "min" else ">"
            self.tmp += 1
            a, b = f"_a{self.tmp}", f"_b{self.tmp}"
            return f"({{ {c} {a} = {cast[0]}, {b} = {cast[1]}; {a} {op} {b} ? {a} : {b}; }})"
        if fn == "abs":
            self.tmp += 1
            a = f"_a{self.tmp}"
            return f"({{ {c} {a} = {cast[0]}; {a} < 0 ? -{a} : {a}; }})"
        suffix = "f" if dtype == "float32" else ""
        name = f"{fn}{suffix}" if fn in LIBM else f"tc_{fn}{suffix}"
        return f"{self.dialect.math_name(fn, dtype) or name}({', '.join(cast)})"


def literal(v: int | float | bool, dtype: str) -> str:
    if dtype in FLOAT_TYPES:
        f = float(v)
        suffix = "f" if dtype == "float32" else ""
        if math.isnan(f):
            return f"(({C_TYPES[dtype]})NAN)"
        if math.isinf(f):
            return f"(({C_TYPES[dtype]})({'-' if f < 0 else ''}INFINITY))"
        return f"(({C_TYPES[dtype]}){f!r}{suffix})"
    if dtype == "bool":
        return "1" if v else "0"
    if dtype in ("int64", "uint64"):
        return f"(({C_TYPES[dtype]})INT64_C({int(v)}))"
    return f"(({C_TYPES[dtype]})({int(v)}))"


def identity(op: str, dtype: str) -> str:
    if op in _IDENTITY:
        return _IDENTITY[op]
    if dtype.startswith("float"):
        return "INFINITY" if op == "min" else "-INFINITY"
    if dtype == "bool":
        return "1" if op == "min" else "0"
    info = np.iinfo(dtype)
    value = int(info.max) if op == "min" else int(info.min)
    return literal(value, dtype) if value > -(2**63) else "INT64_MIN"


def acc_start(op: str, old: str, acc_t: str) -> str:
    """The accumulator's first value, the old value in type acc_t. `min=`/`max=` ignore
    NaN (docs/language.md): a NaN old value counts as the identity, so the accumulator is
    never NaN and `combine`'s select drops NaN values (as x86's max does, vectorized)."""
    c = C_TYPES[acc_t]
    if op in _IDENTITY or not acc_t.startswith("float"):
        return f"({c}){old}"
    return f"({{ {c} _o = ({c}){old}; _o != _o ? ({c})({identity(op, acc_t)}) : _o; }})"


def combine(op: str, acc: str, value: str, ctype: str) -> str:
    if op in ("+", "*"):
        return f"({acc} {op} {value})"
    cmp = "<" if op == "min" else ">"
    return f"({{ {ctype} _v = {value}, _c = {acc}; _v {cmp} _c ? _v : _c; }})"


def store(value: str, dtype: str, src: str) -> str:
    """value, of type src, converted to dtype: bool is `!= 0` (a half compared as float,
    as the printers compute half: CUDA's `__half != 0` is ambiguous), a float into an
    integer saturates (`tc_to_*`), everything else is C's conversion."""
    if dtype == "bool":
        return f"((uint8_t)(({'(float)' if src == 'float16' else ''}({value})) != 0))"
    if dtype in INT_TYPES and src.startswith("float"):
        return f"tc_to_{dtype}{'' if src == 'float64' else 'f'}({value})"
    return f"(({C_TYPES[dtype]})({value}))"
