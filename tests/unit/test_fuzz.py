"""Robustness: mutated TC sources either define cleanly or raise tg.TcError.

Hypothesis takes valid programs (embedded below) and applies a few random
edits: character and token deletions, insertions, replacements and swaps,
duplicated, deleted or swapped lines, and inserted operators, identifiers,
numbers, brackets, `where` clauses and `!`. Whatever comes out, `tg.define`
must either succeed or raise `tg.TcError`; any other exception (IndexError,
KeyError, RecursionError, an islpy error, ...) is a bug.

A second property mutates only the body of the first def, so its parameter
list is intact, and also calls that def with the original program's arguments
on the reference evaluator: again only success or `tg.TcError` is allowed.

Warnings (`tg.TcWarning`, and NumPy's RuntimeWarning for inf/nan arithmetic a
mutated program may well do) never fail these tests. Runs are derandomized so
CI sees the same examples every time.
"""

from __future__ import annotations

import re
import string
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tc_graph as tg

Args = tuple[Any, ...]


def _f32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _idx(rng: np.random.Generator, hi: int, *shape: int, dtype: Any = np.int32) -> np.ndarray:
    return rng.integers(0, hi, size=shape).astype(dtype)


@dataclass(frozen=True)
class Program:
    name: str
    source: str
    make_args: Callable[[np.random.Generator], Args]  # arguments of the FIRST def

    def args(self) -> Args:
        return self.make_args(np.random.default_rng(zlib.crc32(self.name.encode())))


PROGRAMS: tuple[Program, ...] = (
    Program(
        "matmul",
        """
def matmul(float(M,K) A, float(K,N) B) -> (C) {
    C(m, n) +=! A(m, k) * B(k, n)
}
""",
        lambda r: (_f32(r, 3, 4), _f32(r, 4, 2)),
    ),
    Program(
        "conv1d",
        """
def conv1d(float(N) I, float(K) W) -> (O) {
    O(i) +=! I(i + k) * W(k)   # valid convolution
}
""",
        lambda r: (_f32(r, 6), _f32(r, 2)),
    ),
    Program(
        "maxpool",
        """
def maxpool(float(B,C,H,W) I) -> (O) {
    O(b, c, i, j) max=! I(b, c, 2 * i + kh, 2 * j + kw)
        where kh in 0:2, kw in 0:2
}
""",
        lambda r: (_f32(r, 1, 2, 5, 4),),
    ),
    Program(
        "gather",
        """
def gather(float(N) X, int32(A,B) I) -> (Z) {
    Z(i, j) = X(I(i, j))
}
""",
        lambda r: (_f32(r, 5), _idx(r, 5, 2, 3)),
    ),
    Program(
        "lut",
        """
def lut(float(J) B, int32(I) C) -> (A) {
    A(i) = B(max(min(C(i), J - 1), 0))
}
""",
        lambda r: (_f32(r, 4), np.array([-2, 0, 3, 7, 1], dtype=np.int32)),
    ),
    Program(
        "2LUT",
        """
def 2LUT(float(E1,D) LUT1, int32(B,L1) I1, float(E2,D) LUT2, int32(B,L2) I2) -> (O1, O2) {
    O1(i, j) +=! LUT1(I1(i, k), j)
    O2(i, j) +=! LUT2(I2(i, k), j)
}
""",
        lambda r: (_f32(r, 5, 3), _idx(r, 5, 2, 3), _f32(r, 4, 3), _idx(r, 4, 2, 2)),
    ),
    Program(
        "mlp1",
        """
def MLP1(float(B,M) I, float(N,M) W1, float(N) B1) -> (O1) {
    O1(b, n) = B1(n)
    O1(b, n) += I(b, m) * W1(n, m)
    O1(b, n) = fmax(O1(b, n), 0)
}
""",
        lambda r: (_f32(r, 2, 3), _f32(r, 4, 3), _f32(r, 4)),
    ),
    Program(
        "softmax",
        """
def softmax(float(N,D) X) -> (Y) {
    M(n) max=! X(n, d)
    E(n, d) = exp(X(n, d) - M(n))
    S(n) +=! E(n, d)
    Y(n, d) = E(n, d) / S(n)
}
""",
        lambda r: (_f32(r, 2, 4),),
    ),
    Program(
        "layernorm",
        """
def layernorm(float(N,D) X, float(D) gamma, float(D) beta) -> (Y) {
    S(n) +=! X(n, d)
    mu(n) = S(n) / D
    V(n) +=! (X(n, d) - mu(n)) * (X(n, d) - mu(n))
    Y(n, d) = (X(n, d) - mu(n)) * rsqrt(V(n) / D + 0.00001) * gamma(d) + beta(d)
}
""",
        lambda r: (_f32(r, 2, 4), _f32(r, 4), _f32(r, 4)),
    ),
    Program(
        "sgemm",
        """
def sgemm(float a, float b, float(N,M) A, float(M,K) B) -> (C) {
    C(i, j) = b * C(i, j)              # initialization
    C(i, j) += a * A(i, k) * B(k, j)   # accumulation
}
""",
        lambda r: (0.5, 2.0, _f32(r, 2, 3), _f32(r, 3, 4)),
    ),
    Program(
        "integers",
        """
def ints(int8(N) A, int32(N) B, float(N) X) -> (int8(N) C, Q, R, T) {
    C(i) = A(i) * 3 + B(i)
    Q(i) = B(i) / A(i)
    R(i) = B(i) % 3
    T(i) = float(B(i)) + float(int32(X(i)))
}
""",
        lambda r: (
            r.integers(-128, 128, size=5).astype(np.int8),
            r.integers(-50, 50, size=5).astype(np.int32),
            _f32(r, 5),
        ),
    ),
    Program(
        "let_ternary_exists",
        """
def misc(float(N) A, float c) -> (O, P, F) {
    O(i) = x * x + 1 where x = A(i) * 2
    P(i) = A(i) > 0 ? A(i) : 0.5 * A(i)
    F(i) = c where exists A(i)
}
""",
        lambda r: (_f32(r, 4), 1.5),
    ),
    Program(
        "call",
        """
def caller(float(P,Q) X, float(Q,R) Y) -> (O) {
    (C1, C2) = linrelu(X, Y)
    O(i, j) = C1(i, j) - C2(i, j)
}
def linrelu(float(N,K) A, float(K,M) B) -> (C1, C2) {
    C1(i, j) +=! A(i, k) * B(k, j)
    C2(i, j) = fmaxf(C1(i, j), 0)
}
""",
        lambda r: (_f32(r, 2, 3), _f32(r, 3, 2)),
    ),
    Program(
        "zero_d_concat",
        """
def parts(float(B,M) X, float(B,N) Y) -> (S, Z, T) {
    S() +=! X(b, m)
    Z(b, j) = X(b, j) where j in 0:M
    Z(b, j) = Y(b, j - M) where j in M:M+N
    T(b) +=! Y(b, j) where j in 1:Y.1
}
""",
        lambda r: (_f32(r, 2, 2), _f32(r, 2, 3)),
    ),
    Program(
        "strided_conv",
        """
def sconv2d(int sh, int sw, float(N,C,H,W) I, float(F,C,KH,KW) Wt, float(F) Bias) -> (O) {
    O(n, f, h, w) = Bias(f)
    O(n, f, h, w) += I(n, c, sh * h + kh, sw * w + kw) * Wt(f, c, kh, kw)
}
""",
        lambda r: (2, 1, _f32(r, 1, 2, 5, 4), _f32(r, 2, 2, 2, 2), _f32(r, 2)),
    ),
    Program(
        "half_shift",
        """
def hshift(half(N) A, half(N) B) -> (O, M) {
    O(i) = A(i) + B(i - 2)
    M(i) min=! A(i) * B(k)
}
""",
        lambda r: (
            r.uniform(0, 1, 5).astype(np.float16),
            r.uniform(0, 1, 5).astype(np.float16),
        ),
    ),
)

# --------------------------------------------------------------------------- #
# Mutation vocabulary
# --------------------------------------------------------------------------- #

TOKEN_RE = re.compile(
    r"\s+|(?:min|max)=!?|[A-Za-z0-9_]+(?:\.[0-9]+)?|[+*]=!?|->|==|!=|<=|>=|&&|\|\||.",
    re.DOTALL,
)

OPERATORS = [
    "+", "-", "*", "/", "%", "=", "+=", "+=!", "*=", "*=!", "min=", "min=!", "max=", "max=!",
    "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "?", ":", ",", ".", "->", "#", ";",
]  # fmt: skip
BRACKETS = ["(", ")", "{", "}", "[", "]", "()", ")(", "{}"]
KEYWORDS = [
    "def", "where", "in", "exists", "float", "double", "half", "int", "int8", "int32", "int64",
    "uint8", "uint32", "bool", "byte", "long", "float16", "float64", "void",
]  # fmt: skip
BUILTINS = ["exp", "log", "fmax", "fmaxf", "fmin", "max", "min", "sqrt", "rsqrt", "pow", "tanh"]
IDENTIFIERS = ["i", "j", "k", "x", "A", "B", "C", "N", "M", "K", "O", "tmp", "_", "2LUT", "a1"]
NUMBERS = [
    "0", "1", "2", "-1", "3", "0.5", ".5", "2.", "1e5", "3E-1", "1e-5", "2147483647",
    "2147483648", "-2147483648", "9223372036854775808", "99999999999999999999999", "1e400",
    "0x10", "1L", "07", "1.2.3",
]  # fmt: skip
SNIPPETS = [
    " where ", " where i in 0:2", " where k in 0:N", " where j in 2:0", " where exists A(i)",
    " where x = 1", " where kw = [0, 2[", "!", " ? 1 : 0", "\n", ", ", "()", " A.0 ", " A.7 ",
    "\ndef f() -> () {}\n", "\ndef g(float(N) A) -> (B) { B(i) = A(i) }\n",
    " (X, Y) = matmul(A, B) ", " T = softmax(X) ",
]  # fmt: skip
TOKEN_POOL = OPERATORS + BRACKETS + KEYWORDS + BUILTINS + IDENTIFIERS + NUMBERS
CHARACTERS = string.printable + "\x00\x7fé\u00a0λ→∑"

_first_brace = {p.name: p.source.index("{") + 1 for p in PROGRAMS}
_first_def = {p.name: re.findall(r"def\s+(\w+)", p.source)[0] for p in PROGRAMS}


def _tokens(src: str) -> list[str]:
    return TOKEN_RE.findall(src)


def _mutate(draw: Any, src: str) -> str:
    """Apply one random edit to `src`."""
    kind = draw(
        st.sampled_from(
            [
                "delete_char", "insert_char", "replace_char", "delete_token", "insert_token",
                "replace_token", "swap_tokens", "duplicate_line", "delete_line", "swap_lines",
                "insert_snippet", "duplicate_token",
            ]
        )
    )  # fmt: skip
    if kind in {"delete_char", "insert_char", "replace_char", "insert_snippet"}:
        pos = draw(st.integers(0, len(src)))
        if kind == "delete_char":
            return src[:pos] + src[pos + 1 :]
        if kind == "insert_snippet":
            return src[:pos] + draw(st.sampled_from(SNIPPETS)) + src[pos:]
        ch = draw(st.sampled_from(CHARACTERS))
        if kind == "insert_char":
            return src[:pos] + ch + src[pos:]
        return src[:pos] + ch + src[pos + 1 :]
    if kind in {"duplicate_line", "delete_line", "swap_lines"}:
        lines = src.split("\n")
        a = draw(st.integers(0, len(lines) - 1))
        if kind == "duplicate_line":
            lines.insert(a, lines[a])
        elif kind == "delete_line":
            del lines[a]
        else:
            b = draw(st.integers(0, len(lines) - 1))
            lines[a], lines[b] = lines[b], lines[a]
        return "\n".join(lines)
    toks = _tokens(src)
    solid = [n for n, t in enumerate(toks) if not t.isspace()]
    if not solid:
        return src + draw(st.sampled_from(TOKEN_POOL))
    n = draw(st.sampled_from(solid))
    if kind == "delete_token":
        del toks[n]
    elif kind == "duplicate_token":
        toks.insert(n, toks[n])
    elif kind == "swap_tokens":
        m = draw(st.sampled_from(solid))
        toks[n], toks[m] = toks[m], toks[n]
    else:
        new = draw(st.sampled_from(TOKEN_POOL + [toks[m] for m in solid]))
        if draw(st.booleans()):
            new = f" {new} "
        if kind == "insert_token":
            toks.insert(n + draw(st.integers(0, 1)), new)
        else:
            toks[n] = new
    return "".join(toks)


@st.composite
def mutated_programs(draw: Any, body_only: bool = False) -> tuple[Program, str]:
    program = draw(st.sampled_from(PROGRAMS))
    head, body = "", program.source
    if body_only:
        cut = _first_brace[program.name]
        head, body = program.source[:cut], program.source[cut:]
    for _ in range(draw(st.integers(1, 4))):
        body = _mutate(draw, body)
    return program, head + body


# --------------------------------------------------------------------------- #
# Checks
# --------------------------------------------------------------------------- #


def _define_or_tc_error(src: str) -> Any | None:
    """The module, or None when define raised TcError. Any other exception propagates."""
    try:
        mod = tg.define(src)
    except tg.TcError as err:
        assert str(err).strip(), "a TcError must carry a message"
        return None
    names = mod.names
    assert isinstance(names, tuple)
    assert all(isinstance(n, str) for n in names)
    for n in names:
        assert mod[n] is not None
    return mod


_WORD = re.compile(r"[A-Za-z0-9_.]+")


def _small_constants_only(src: str) -> bool:
    """True when every numeric literal is at most 8 in size: keeps evaluation loops small.

    Words that start with a letter or `_` are identifiers (`int32`, `LUT1`); a word that
    starts with a digit and has letters other than an exponent is one too (`2LUT`).
    Anything else that does not read as a small number (`1e5`, `3E-1`, `1.2.3`) says no.
    """
    for word in _WORD.findall(src):
        if word[0].isalpha() or word[0] == "_":
            continue
        if re.search(r"[A-DF-Za-df-z_]", word):
            continue
        try:
            value = float(word)
        except ValueError:
            return False
        if abs(value) > 8:
            return False
    return True


def _fuzz_settings(examples: int) -> Any:
    """Reproducible in CI (derandomized, no example database); the mutated sources are
    big and often rejected, which Hypothesis' health checks would otherwise flag."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


@_fuzz_settings(2000)
@given(mutated_programs())
def test_mutated_source_defines_or_raises_tc_error(case: tuple[Program, str]) -> None:
    _, src = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        _define_or_tc_error(src)


@_fuzz_settings(400)
@given(mutated_programs(body_only=True))
def test_mutated_body_calls_or_raises_tc_error(case: tuple[Program, str]) -> None:
    program, src = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        mod = _define_or_tc_error(src)
        if mod is None or not mod.names or not _small_constants_only(src):
            return
        original = _first_def[program.name]
        if mod.names[0] != original:
            return
        try:
            got = mod[original](*program.args(), target="reference")
        except tg.TcError as err:
            assert str(err).strip()
            return
    results = got if isinstance(got, tuple) else (got,)
    assert results
    assert all(isinstance(r, np.ndarray) for r in results)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_seed_programs_are_valid(program: Program) -> None:
    """The fuzzer starts from valid programs that run: otherwise it tests nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        mod = tg.define(program.source)
    assert mod.names[0] == _first_def[program.name]
    got = mod[mod.names[0]](*program.args(), target="reference")
    results = got if isinstance(got, tuple) else (got,)
    assert all(isinstance(r, np.ndarray) for r in results)
    assert _small_constants_only(program.source)


NASTY_SOURCES = [
    "",
    "   \n\t  ",
    "# only a comment",
    "def",
    "def f",
    "def f(",
    "def f() -> () {}",
    "def f(float(N) A) -> (B) {",
    "def f(float(N) A) -> (B) { B(i) = A(i) }}",
    "def f(float(N) A) -> (B) { B(i) = A(i) }\x00",
    "def f(float(N) A) -> (B) { B(i) = A(i) ",
    "def f(float(N) A) -> (B) { B(i) = A(i) } def f(float(N) A) -> (B) { B(i) = A(i) }",
    "def λ(float(N) A) -> (B) { B(i) = A(i) }",
    "def f(float(N) A) -> (B) { B(i) = A(i) where i in 0:99999999999999999999 }",
    "def f(float(N) A) -> (B) { B(i) = A(i) / 0 + A(i) % 0 }",
    "def f(float(N) A) -> (B) { B(i) = A(" + "(" * 5000 + "i" + ")" * 5000 + ") }",
    "def f(float(N) A) -> (B) { B(i) = " + "-" * 5000 + "A(i) }",
    "def f(float(N) A) -> (B) { B(i) = A(i) " + "+ A(i) " * 5000 + "}",
    "def f(" + ", ".join(f"float(N) A{n}" for n in range(300)) + ") -> (B) { B(i) = A0(i) }",
]


@pytest.mark.parametrize("src", NASTY_SOURCES, ids=range(len(NASTY_SOURCES)))
def test_nasty_sources_define_or_raise_tc_error(src: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        _define_or_tc_error(src)


def test_long_but_valid_expression_evaluates() -> None:
    """300 chained additions and 40 nested parentheses are ordinary programs."""
    terms = " + ".join(["A(i)"] * 300)
    nested = "(" * 40 + "A(i)" + ")" * 40
    src = f"def f(float(N) A) -> (B, C) {{ B(i) = {terms}\n C(i) = {nested} * 2 }}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tg.TcWarning)
        mod = tg.define(src)
    a = np.random.default_rng(3).uniform(-1, 1, 5).astype(np.float32)
    b, c = mod.f(a, target="reference")
    np.testing.assert_allclose(b, a.astype(np.float64) * 300, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(c, a.astype(np.float64) * 2, rtol=1e-6)
