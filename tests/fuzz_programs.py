"""Grammar-based random TC programs, well typed and with their inputs, for differential
testing of the compiled targets against the NumPy reference (tests/fuzz_oracle.py runs
them; scripts/fuzz.py for as long as asked, tests/cpu/test_fuzz_programs.py in CI).

A program is determined by (seed, index): `generate(seed, index)` builds it from its own
`np.random.SeedSequence([seed, index])`, so a finding is reproduced from two integers. The
generator does not import tc_graph: what it writes is a function of the language
(docs/language.md), not of the compiler under test.

What a program holds: a `main` def (the entry) with 1 to 6 statements, sometimes a helper
def that main calls; inputs of random dtypes and ranks with sizes that include 0 and 1;
temporaries and outputs (some with declared types or shapes); `=`, `+= *= min= max=` with
and without `!`, in-place pointwise updates and accumulations; `where` ranges, lets and
`exists`; casts, builtins, `?:`, integer `/` and `%`; strided and shifted subscripts;
indirect subscripts through integer index tensors, nested up to three deep, with index
values in bounds, clamped with min/max, or hostile (then every target must raise TcError);
integer and float scalar parameters; and, with `options="random"`, MappingOptions drawn
like the autotuner's search space (as a dict: the oracle builds the MappingOptions).

Floating point is compared within tolerances, so the generator keeps discontinuous
operations (comparisons, floor, casts to integers, fmod, functions with a restricted
domain, `?:` conditions) on *exact* operands: values every target computes bit for bit
(inputs, literals, integers, casts of those), never on rounded arithmetic whose last bit
may differ between targets (FMA contraction, summation order).

KNOWN lists the generated features that hit bugs being fixed right now (issue 12). While
an entry is present the generator avoids or guards that feature, as its comment says;
delete the entry when its fix merges, and the fuzzer covers the feature again.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

KNOWN: dict[str, str] = {
    # Each entry: a feature that hits an open bug, the generator's guard for it, and the
    # finding it stands for; delete the entry (and its guard) with the fix. None is open.
}

# ----------------------------------------------------------------------------- types

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTEGERS = SIGNED + UNSIGNED
DTYPES = ("bool", *INTEGERS, *FLOATS)
ALIASES = {
    "float32": "float",
    "float64": "double",
    "float16": "half",
    "int32": "int",
    "int64": "long",
    "uint8": "byte",
}


def _bits(t: str) -> int:
    return 1 if t == "bool" else int("".join(ch for ch in t if ch.isdigit()))


def _kind(t: str) -> str:
    return "b" if t == "bool" else "f" if t in FLOATS else "u" if t in UNSIGNED else "i"


def arith(t: str) -> str:
    """C's integer promotion: bool and 8- and 16-bit integers compute as int32."""
    return "int32" if _kind(t) in "biu" and _bits(t) < 32 else t


def promote(a: str, b: str) -> str:
    """The type of `a op b` (docs/language.md, Types)."""
    a, b = arith(a), arith(b)
    if a == b:
        return a
    if a in FLOATS or b in FLOATS:
        fs = [t for t in (a, b) if t in FLOATS]
        return max(fs, key=_bits)
    if _kind(a) == _kind(b):
        return max((a, b), key=_bits)
    u, s = (a, b) if _kind(a) == "u" else (b, a)
    return u if _bits(u) >= _bits(s) else s


def lossy_store(value: str, tensor: str) -> bool:
    """A store that must be written as a cast: float into an integer or bool, float64 into
    a narrower float, a 64-bit integer into a narrower integer (or bool)."""
    if value in FLOATS:
        return tensor not in FLOATS or _bits(value) > _bits(tensor)
    return value in ("int64", "uint64") and tensor not in FLOATS and _bits(tensor) < 64


# --------------------------------------------------------------------------- builtins

# Continuous functions with bounded slopes on moderate arguments: any operand.
SMOOTH_1 = (
    "sin",
    "cos",
    "tanh",
    "atan",
    "erf",
    "erfc",
    "fabs",
    "asinh",
    "cbrt",
    "sinpi",
    "cospi",
    "normcdf",
    "exp",
    "expm1",
    "exp2",
    "sinh",
    "cosh",
)
SMOOTH_2 = ("fmax", "fmin", "hypot", "fdim")
SMOOTH_3 = ("fma", "norm3d")
# Discontinuous, or defined on part of the line: exact operands only.
EXACT_1 = (
    "floor",
    "ceil",
    "trunc",
    "round",
    "rint",
    "nearbyint",
    "log",
    "log2",
    "log10",
    "log1p",
    "sqrt",
    "rsqrt",
    "acos",
    "asin",
    "acosh",
    "atanh",
    "lgamma",
    "tgamma",
    "j0",
    "j1",
    "y0",
    "y1",
    "erfinv",
    "erfcinv",
    "erfcx",
    "logb",
    "normcdfinv",
    "rcbrt",
    "tan",
    "exp10",
)
EXACT_2 = ("pow", "fmod", "remainder", "copysign", "nextafter", "atan2", "rhypot")
EXACT_3 = ("rnorm3d",)
EXACT_4 = ("norm4d", "rnorm4d")
BUILTINS = SMOOTH_1 + SMOOTH_2 + SMOOTH_3 + EXACT_1 + EXACT_2 + EXACT_3 + EXACT_4


@dataclass
class Expr:
    text: str
    dtype: str
    exact: bool  # every target computes it bit for bit
    nan_free: bool = True  # no NaN can come out of it (finite exact inputs only)


@dataclass
class Tensor:
    name: str
    dtype: str
    classes: tuple[str, ...]  # the extent class of each dimension
    role: str  # "input", "index", "written"
    exact: bool = True
    nan_free: bool = True
    bound: int = 0  # index tensors: their values are subscripts below this
    mode: str = "in"  # index tensors: "in" (in bounds), "clamp" (anything), "hostile"
    declared: str = ""  # outputs: the declaration ("float64 O", "int32(N, M) O")
    frozen: bool = False  # written by a literal-only fill: never written again


@dataclass
class Def:
    """A def as parts, so that the reducer can drop statements and outputs."""

    name: str
    params: list[str]
    outputs: list[str]
    statements: list[str]

    def render(self) -> str:
        body = "".join(f"  {s}\n" for s in self.statements)
        head = f"def {self.name}({', '.join(self.params)}) -> ({', '.join(self.outputs)})"
        return f"{head} {{\n{body}}}\n"


@dataclass(frozen=True)
class Case:
    """One generated program with its inputs and options."""

    seed: int
    index: int
    defs: tuple[Def, ...]
    entry: str
    args: tuple[Any, ...]
    options: dict[str, Any] | None
    features: frozenset[str]

    @property
    def source(self) -> str:
        return "\n".join(d.render() for d in self.defs)

    def with_defs(self, defs: tuple[Def, ...]) -> Case:
        return replace(self, defs=defs)


# ---------------------------------------------------------------------- the generator


@dataclass
class _Env:
    """The tensors, sizes and extent classes of one def under construction."""

    tensors: dict[str, Tensor] = field(default_factory=dict)
    extent: dict[str, int] = field(default_factory=dict)  # class -> concrete extent
    class_text: dict[str, str] = field(default_factory=dict)  # class -> size expression
    params: list[str] = field(default_factory=list)
    scalars: dict[str, str] = field(default_factory=dict)  # name -> dtype
    int_sizes: list[str] = field(default_factory=list)  # integer scalar params
    statements: list[str] = field(default_factory=list)
    last: str = ""  # the tensor the last statement wrote
    sizes: set[str] = field(default_factory=set)  # the size names of the signature
    helper: bool = False  # index tensors become inputs of main, passed through the call
    index_inputs: list[Tensor] = field(default_factory=list)
    counter: int = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"


class _Gen:
    """Draws one Case. Every random choice goes through self.rng, in program order."""

    def __init__(self, seed: int, index: int, known: frozenset[str], options: str) -> None:
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
        self.seed, self.index = seed, index
        self.known = known
        self.options_mode = options
        self.features: set[str] = set()
        self.inputs: list[Tensor] = []  # of main, in parameter order
        self.scalar_values: dict[str, Any] = {}
        self.helper: Def | None = None
        self.has_zero = False

    # -- small draws
    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def pick(self, seq: Any) -> Any:
        seq = list(seq)
        return seq[int(self.rng.integers(len(seq)))]

    def weighted(self, pairs: list[tuple[Any, float]]) -> Any:
        w = np.array([p for _, p in pairs], dtype=float)
        return pairs[int(self.rng.choice(len(pairs), p=w / w.sum()))][0]

    def dtype(self) -> str:
        return self.weighted(
            [
                ("float32", 8),
                ("float64", 3),
                ("float16", 2),
                ("int32", 4),
                ("int64", 2),
                ("uint8", 1.5),
                ("int8", 1),
                ("int16", 1),
                ("uint16", 0.7),
                ("uint32", 1),
                ("uint64", 0.7),
                ("bool", 1),
            ]
        )

    def size_value(self) -> int:
        return int(
            self.weighted(
                [
                    (0, 0.05),
                    (1, 0.15),
                    (int(self.rng.integers(2, 9)), 0.55),
                    (int(self.rng.integers(9, 41)), 0.2),
                    (int(self.rng.integers(60, 131)), 0.05),
                ]
            )
        )

    # -- the program
    def case(self) -> Case:
        env = _Env()
        names = ["N", "M", "K", "L", "P"]
        for n in names[: int(self.rng.integers(2, 5))]:
            v = self.size_value()
            env.extent[n], env.class_text[n] = v, n
            self.features.add(f"size{min(v, 2)}")
        for k in range(int(self.rng.integers(1, 5))):
            self.add_input(env, "ABCDEFGH"[k])
        used = {c for t in env.tensors.values() for c in t.classes}
        for n in [n for n in env.extent if n not in used]:  # a size no input declares
            del env.extent[n], env.class_text[n]
        env.sizes = set(env.extent)
        self.has_zero = any(v == 0 for v in env.extent.values())
        self.features.add("has_zero" if self.has_zero else "no_zero")
        if self.chance(0.3):
            self.add_scalar(env, "a", self.pick(["float32", "float64", "int32", "float16"]))
        if self.chance(0.15):
            self.add_int_size(env, "s")
        for _ in range(int(self.rng.integers(1, 7))):
            self.statement(env, allow_call=True)
        while not env.statements:
            self.statement(env, allow_call=False)
        written = [t for t in env.tensors.values() if t.role == "written"]
        outputs = [
            t.declared or t.name
            for t in written
            if t.declared or t.name == env.last or self.chance(0.4)
        ]
        main = Def("main", env.params, outputs, env.statements)
        defs = (self.helper, main) if self.helper else (main,)
        if self.helper and self.chance(0.5):
            defs = (main, self.helper)  # callee after caller
        args = tuple(self.values(env, t) for t in self.inputs)
        options = self.mapping_options(env) if self.options_mode == "random" else None
        return Case(self.seed, self.index, defs, "main", args, options, frozenset(self.features))

    # -- parameters
    def add_input(self, env: _Env, name: str) -> None:
        rank = int(self.weighted([(0, 0.08 if env.tensors else 0), (1, 0.35), (2, 0.4), (3, 0.17)]))
        size_classes = list(env.extent)
        classes = tuple(self.pick(size_classes) for _ in range(rank))
        dt = self.dtype()
        t = Tensor(name, dt, classes, "input")
        env.tensors[name] = t
        self.inputs.append(t)
        shape = f"({', '.join(classes)})" if classes else ""
        env.params.append(f"{self.type_name(dt)}{shape} {name}")
        self.features.add(f"input:{dt}")

    def add_scalar(self, env: _Env, name: str, dt: str) -> None:
        t = Tensor(name, dt, (), "input")
        env.tensors[name] = t
        env.scalars[name] = dt
        self.inputs.append(t)
        env.params.append(f"{self.type_name(dt)} {name}")
        self.features.add("scalar_param")

    def add_int_size(self, env: _Env, name: str) -> None:
        """An integer scalar used as a size: a `where` bound (a compile-time constant)."""
        t = Tensor(name, "int32", (), "input")
        env.tensors[name] = t
        env.scalars[name] = "int32"
        self.inputs.append(t)
        env.params.append(f"int32 {name}")
        v = int(self.rng.integers(0, 4))
        self.scalar_values[name] = v
        cls = f"${name}"
        env.extent[cls], env.class_text[cls] = v, name
        env.int_sizes.append(name)
        self.has_zero |= v == 0
        self.features.add("int_size_param")

    def type_name(self, dt: str) -> str:
        return ALIASES[dt] if dt in ALIASES and self.chance(0.3) else dt

    def index_tensor(self, env: _Env, classes: tuple[str, ...], bound: int, mode: str) -> Tensor:
        """A new integer input whose values are subscripts below `bound` (mode "in"),
        anything (mode "clamp", read through min/max) or in bounds but for one hostile
        value (mode "hostile": every target must raise TcError)."""
        for t in env.tensors.values():
            if (
                t.role == "index"
                and t.classes == classes
                and t.bound == bound
                and t.mode == mode == "in"
                and self.chance(0.5)
            ):
                return t
        if bound > 127:
            dt = self.pick(["int32", "int64", "int16", "uint32"])
        else:
            dt = self.weighted(
                [
                    ("int32", 6),
                    ("int64", 2),
                    ("uint8", 1),
                    ("int8", 1),
                    ("uint32", 1),
                    ("int16", 0.5),
                    ("uint64", 0.5),
                ]
            )
        name = env.fresh("I")
        t = Tensor(name, dt, classes, "index", bound=bound, mode=mode)
        env.tensors[name] = t
        if env.helper:
            env.index_inputs.append(t)
        else:
            self.inputs.append(t)
        shape = f"({', '.join(env.class_text[c] for c in classes)})"
        env.params.append(f"{self.type_name(dt)}{shape} {name}")
        self.features.add(f"index:{mode}")
        return t

    # -- statements
    def statement(self, env: _Env, allow_call: bool) -> None:
        written = [t for t in env.tensors.values() if t.role == "written" and not t.frozen]
        kinds: list[tuple[str, float]] = [("map", 3), ("reduce", 3), ("shape", 0.6), ("fill", 0.4)]
        if written:
            kinds += [("accumulate", 1.5), ("reinit", 0.6), ("inplace", 1.2)]
        if allow_call and self.helper is None:
            kinds.append(("call", 0.5))
        kind = self.weighted(kinds)
        self.features.add(f"stmt:{kind}")
        if kind == "call":
            self.call(env)
        elif kind == "shape":
            self.shape_statement(env)
        elif kind == "fill":
            self.fill(env)
        elif kind in ("map", "reduce"):
            self.new_tensor_statement(env, kind == "reduce")
        else:
            self.update_statement(env, self.pick(written), kind)

    def new_lhs(self, env: _Env, rank: int) -> Tensor:
        classes = tuple(
            self.pick([c for c in env.extent if env.extent[c] < 1000]) for _ in range(rank)
        )
        return Tensor(env.fresh("T"), "", classes, "written")

    def declare(self, env: _Env, t: Tensor) -> None:
        """Sometimes a declared output: its dtype, and its shape when every extent is a
        size name of the signature."""
        if not self.chance(0.2):
            return
        t.dtype = self.dtype()
        named = all(c in env.sizes for c in t.classes)
        name = self.type_name(t.dtype)
        if named and self.chance(0.5):
            t.declared = f"{name}({', '.join(t.classes)}) {t.name}"
        else:
            t.declared = f"{name} {t.name}"
        self.features.add("typed_output")

    def new_tensor_statement(self, env: _Env, reduce: bool) -> None:
        """Mostly shaped after one tensor it reads (its anchor), as `O(i, j) = f(A(i, j))`
        or `O(i) +=! A(i, k) * ...` with some of the anchor's dimensions reduced."""
        readable = [t for t in env.tensors.values() if t.role in ("input", "written") and t.classes]
        anchor = self.pick(readable) if readable and self.chance(0.85) else None
        if anchor is None:
            rank = int(self.weighted([(0, 0.1 if reduce else 0.03), (1, 0.4), (2, 0.4), (3, 0.1)]))
            t = self.new_lhs(env, rank)
            red_classes = [self.pick(list(env.extent)) for _ in range(int(reduce))]
            anchor_vars: list[str] = []
        else:
            dims = list(range(len(anchor.classes)))
            reduced = set()
            if reduce:
                n = int(self.rng.integers(1, len(dims) + 1)) if self.chance(0.8) else 0
                reduced = set(self.rng.permutation(dims)[:n].tolist())
            kept = [d for d in dims if d not in reduced]
            if self.chance(0.2):
                kept = self.rng.permutation(kept).tolist()
            classes = [anchor.classes[d] for d in kept]
            if self.chance(0.15) and len(classes) < 3:
                classes.insert(
                    int(self.rng.integers(len(classes) + 1)), self.pick(list(env.extent))
                )
            t = Tensor(env.fresh("T"), "", tuple(classes), "written")
            red_classes = [anchor.classes[d] for d in sorted(reduced)]
            if reduce and not reduced:
                red_classes = [self.pick(list(env.extent))]
            lhs_of = {d: f"i{k}" for k, d in enumerate(kept)}
            red_of = {d: f"r{k}" for k, d in enumerate(sorted(reduced))}
            anchor_vars = [lhs_of.get(d) or red_of[d] for d in dims]
        self.declare(env, t)
        lhs_vars = {f"i{k}": c for k, c in enumerate(t.classes)}
        red_vars = {f"r{k}": c for k, c in enumerate(red_classes)}
        op = self.pick(["+", "*", "min", "max", "+"]) + "=!" if reduce else "="
        force = (anchor, anchor_vars) if anchor is not None else None
        self.emit(env, t, op, lhs_vars, red_vars, new=True, force=force)

    def update_statement(self, env: _Env, t: Tensor, kind: str) -> None:
        lhs_vars = {f"i{k}": c for k, c in enumerate(t.classes)}
        red_vars: dict[str, str] = {}
        if kind == "inplace":
            op = "="
        else:
            base = self.pick(["+", "+", "*", "min", "max"])
            op = base + ("=!" if kind == "reinit" else "=")
            if self.chance(0.6):
                pool = [c for tt in env.tensors.values() for c in tt.classes if tt.role != "index"]
                red_vars["r0"] = self.pick(pool or list(env.extent))
        self.features.add(f"update:{op}")
        self.emit(env, t, op, lhs_vars, red_vars, new=False, inplace=kind == "inplace")

    def emit(
        self,
        env: _Env,
        t: Tensor,
        op: str,
        lhs_vars: dict[str, str],
        red_vars: dict[str, str],
        *,
        new: bool,
        inplace: bool = False,
        force: tuple[Tensor, list[str]] | None = None,
    ) -> None:
        """Write `t(lhs) op rhs where ...`: the right side from random reads of the
        statement's variables; every variable no plain read anchors gets a `where`."""
        ctx = _Stmt(self, env, {**lhs_vars, **red_vars}, t)
        ctx.force = force
        if not new and (inplace or (op != "=" and self.chance(0.3))):
            ctx.self_read = True
            self.features.add("self_read")
        lets = []
        if self.chance(0.2):
            # An unused let takes no part in range inference: its reads anchor nothing.
            saved = set(ctx.anchored), set(ctx.mentioned)
            let = ctx.expr(2)
            ctx.anchored, ctx.mentioned = saved
            name = env.fresh("x")
            lets.append(f"{name} = {let.text}")
            ctx.lets[name] = let
            self.features.add("let")
        # Stores into integers and bools are discontinuous: exact right sides only.
        depth = int(self.pick([1, 2, 2, 3]))
        rhs = ctx.expr(depth, want_exact=t.dtype not in ("", *FLOATS), need_read=True)
        if t.dtype == "":
            t.dtype = rhs.dtype
        rhs = self.fit(rhs, t.dtype, op)
        t.exact = (
            t.exact
            and rhs.exact
            and (op in ("=", "min=!", "max=!", "min=", "max=") or t.dtype not in FLOATS)
        )
        t.nan_free = t.nan_free and rhs.nan_free
        where = lets + ctx.anchors(new)
        lhs = f"{t.name}({', '.join(lhs_vars)})" if lhs_vars or self.chance(0.5) else t.name
        text = f"{lhs} {op} {rhs.text}"
        if where:
            text += " where " + ", ".join(where)
        if ctx.volume() > 200_000:
            return  # too big for the reference: drop the statement
        if new:
            t.frozen = ctx.reads == 0 and not t.declared  # typed by a later statement
            env.tensors[t.name] = t
        env.statements.append(text)
        env.last = t.name

    def fit(self, rhs: Expr, dt: str, op: str) -> Expr:
        """The right side as a legal store into dtype dt (a cast where it would lose
        information, sometimes one anyway)."""
        if op.startswith("*") and dt in FLOATS:
            # A float product over many factors may overflow, and whether it ends as inf,
            # or as NaN where a zero meets the inf, depends on the reduction's order, which
            # the language leaves open: factors in [-1, 1] keep every order finite.
            rhs = Expr(
                f"fmax(fmin({rhs.text}, 1.0), -1.0)", promote(rhs.dtype, "float32"), rhs.exact
            )
        if lossy_store(rhs.dtype, dt) or (rhs.dtype != dt and self.chance(0.15)):
            rhs = self.cast(rhs, dt)
        return rhs

    def cast(self, e: Expr, dt: str) -> Expr:
        """`dt(e)`, unclamped: a float out of an integer's range saturates, as
        docs/language.md defines, on every target alike."""
        self.features.add("cast")
        text = e.text
        if e.dtype in FLOATS and dt not in FLOATS and dt != "bool":
            self.features.add("cast:float->int")
        return Expr(f"{self.type_name(dt)}({text})", dt, e.exact, True)

    def shape_statement(self, env: _Env) -> None:
        """A new rank-1 tensor from a shifted, strided or windowed read: its extent is a
        new class, which later statements read like any other."""
        srcs = [t for t in env.tensors.values() if t.role != "index" and len(t.classes) == 1]
        if not srcs:
            self.new_tensor_statement(env, reduce=False)
            return
        src = self.pick(srcs)
        e = env.extent[src.classes[0]]
        form = self.pick(["window", "stride", "pool", "shift"])
        t = Tensor(env.fresh("S"), "", ("?",), "written")
        if form == "window":
            c = int(self.rng.integers(1, 4))
            text, ext, op = f"{src.name}(i0 + r0) where r0 in 0:{c}", max(0, e - c + 1), "+=!"
        elif form == "stride":
            text, ext, op = f"{src.name}(2 * i0)", (e + 1) // 2, "="
        elif form == "pool":
            text, ext, op = f"{src.name}(2 * i0 + r0) where r0 in 0:2", e // 2, "max=!"
        else:
            if e < 1:
                self.new_tensor_statement(env, reduce=False)
                return
            text, ext, op = f"{src.name}(i0 - 1)", e + 1, "="
        cls = f"{t.name}.0"
        t.dtype = src.dtype
        t.classes = (cls,)
        t.exact = src.exact and (op != "+=!" or t.dtype not in FLOATS)
        t.nan_free = src.nan_free
        env.tensors[t.name] = t
        env.extent[cls], env.class_text[cls] = ext, cls
        env.statements.append(f"{t.name}(i0) {op} {text}")
        env.last = t.name
        self.features.add(f"shape:{form}")

    def fill(self, env: _Env) -> None:
        """`T(i, j) = literal where exists X(i, j)`: a literal-only tensor."""
        srcs = [t for t in env.tensors.values() if t.classes and t.role != "index"]
        if not srcs:
            self.new_tensor_statement(env, reduce=False)
            return
        src = self.pick(srcs)
        lit = self.pick(["2.5", "0", "-3", "1e-3", "7"])
        dt = "float32" if "." in lit or "e" in lit else "int32"
        t = Tensor(env.fresh("F"), dt, src.classes, "written", frozen=True)
        vs = [f"i{k}" for k in range(len(src.classes))]
        env.tensors[t.name] = t
        env.statements.append(
            f"{t.name}({', '.join(vs)}) = {lit} where exists {src.name}({', '.join(vs)})"
        )
        env.last = t.name
        self.features.add("exists")

    def call(self, env: _Env) -> None:
        """A helper def over some of main's tensors, and `(H...) = helper(args)`."""
        # Not a literal-only tensor: a call sees it untyped ("expects float32 for 'X0', but
        # 'F1' has dtype " at define: reported, issue 12 fuzzer findings).
        cands = [
            t
            for t in env.tensors.values()
            if t.role in ("input", "written") and t.classes and not t.frozen
        ]
        if not cands:
            self.new_tensor_statement(env, reduce=False)
            return
        args = [self.pick(cands) for _ in range(int(self.rng.integers(1, 3)))]
        sub = _Env(helper=True)
        rename: dict[str, str] = {}
        for a in args:
            for c in a.classes:
                if c not in rename:
                    rename[c] = f"Q{len(rename)}"
                    sub.extent[rename[c]] = env.extent[c]
                    sub.class_text[rename[c]] = rename[c]
                    if c in env.sizes:  # index tensors of the helper become main's inputs
                        sub.sizes.add(rename[c])
        for k, a in enumerate(args):
            name = f"X{k}"
            classes = tuple(rename[c] for c in a.classes)
            sub.tensors[name] = Tensor(
                name, a.dtype, classes, "input", exact=a.exact, nan_free=a.nan_free
            )
            sub.params.append(f"{a.dtype}({', '.join(classes)}) {name}")
        for _ in range(int(self.rng.integers(1, 4))):
            self.statement(sub, allow_call=False)
        written = [t for t in sub.tensors.values() if t.role == "written"]
        if not written:
            self.new_tensor_statement(env, reduce=False)
            return
        # After a statement that ends in a name (`... where i in 0:N`), `(X, Y) = f(A)`
        # reads as N(X, Y): then one result, written `X = f(A)`.
        bare = bool(env.statements) and (
            env.statements[-1][-1].isalnum() or env.statements[-1][-1] in "_."
        )
        results = [
            t
            for t in written
            if t.name == sub.last or (not bare and (t.declared or self.chance(0.3)))
        ]
        back = {v: k for k, v in rename.items()}
        names = []
        for r in results:
            name = env.fresh("H")
            classes = []
            for d, c in enumerate(r.classes):
                if c in back:
                    classes.append(back[c])
                else:
                    cls = f"{name}.{d}"
                    env.extent[cls], env.class_text[cls] = sub.extent[c], cls
                    classes.append(cls)
            env.tensors[name] = Tensor(
                name, r.dtype, tuple(classes), "written", exact=r.exact, nan_free=r.nan_free
            )
            names.append(name)
        passed = [a.name for a in args]
        for ix in sub.index_inputs:
            name = env.fresh("I")
            t = replace(ix, name=name, classes=tuple(back[c] for c in ix.classes))
            env.tensors[name] = t
            self.inputs.append(t)
            dims = ", ".join(env.class_text[c] for c in t.classes)
            env.params.append(f"{t.dtype}({dims}) {name}")
            passed.append(name)
        self.helper = Def(
            "helper", sub.params, [r.declared or r.name for r in results], sub.statements
        )
        lhs = names[0] if bare else f"({', '.join(names)})"
        env.statements.append(f"{lhs} = helper({', '.join(passed)})")
        env.last = names[0]
        self.features.add("call")

    # -- inputs
    def values(self, env: _Env, t: Tensor) -> Any:
        if t.name in self.scalar_values:
            return np.int32(self.scalar_values[t.name])
        shape = tuple(env.extent[c] for c in t.classes)
        if t.role == "index":
            return self.index_values(t, shape)
        arr = self.array(t.dtype, shape)
        return arr[()] if not shape else arr

    def array(self, dt: str, shape: tuple[int, ...]) -> np.ndarray:
        rng = self.rng
        if dt in FLOATS:
            a = rng.uniform(-2, 2, size=shape)
            if a.size and self.chance(0.15):
                specials = [0.0, -0.0, 1.0, -1.0, 0.5, 1e30, -1e30, 1e-30, np.inf, -np.inf, np.nan]
                flat = a.reshape(-1)
                for _ in range(int(rng.integers(1, 4))):
                    flat[int(rng.integers(flat.size))] = self.pick(specials)
                self.features.add("special_floats")
            with np.errstate(over="ignore"):  # 1e30 is inf in float16
                return a.astype(dt)
        if dt == "bool":
            return rng.random(size=shape) < 0.5
        info = np.iinfo(dt)
        lo, hi = max(int(info.min), -20), min(int(info.max), 20)
        a = rng.integers(lo, hi + 1, size=shape).astype(dt)
        if a.size and self.chance(0.1):
            flat = a.reshape(-1)
            flat[int(rng.integers(flat.size))] = self.pick([info.min, info.max, 0])
            self.features.add("int_extremes")
        return a

    def index_values(self, t: Tensor, shape: tuple[int, ...]) -> np.ndarray:
        info = np.iinfo(t.dtype)
        rng = self.rng
        if t.mode == "clamp":
            a = rng.integers(max(int(info.min), -30), min(int(info.max), 30) + 1, size=shape)
            a = a.astype(t.dtype)
            if a.size and self.chance(0.3):
                a.reshape(-1)[int(rng.integers(a.size))] = self.pick([info.min, info.max])
            return a
        a = rng.integers(0, max(t.bound, 1), size=shape).astype(t.dtype)
        if t.mode == "hostile" and a.size:
            bad = [t.bound, t.bound + 1000, info.max]
            if info.min < 0:
                bad += [-1, info.min]
            bad = [b for b in bad if info.min <= b <= info.max]
            a.reshape(-1)[int(rng.integers(a.size))] = self.pick(bad)
        return a

    # -- options
    def mapping_options(self, env: _Env) -> dict[str, Any]:
        """MappingOptions fields, drawn like tc_graph.tune.space.search_space draws them
        (tile sizes: powers of two, the sizes and their ceil-divisors), plus values it
        never proposes (odd tiles, small reduction chunks, 1- and 64-wide vectors)."""
        sizes = [v for v in env.extent.values() if v > 0] or [1]
        top = max(sizes)
        pow2 = [1 << k for k in range(top.bit_length() + 1) if 1 << k <= max(top, 1)]
        tiles = sorted({*pow2, *sizes, *(-(-s // k) for s in sizes for k in range(2, 9)), 3, 5, 7})
        o: dict[str, Any] = {
            "fusion": self.pick(["max", "preserve3coincident", "min"]),
            "tile": tuple(int(self.pick(tiles)) for _ in range(int(self.rng.integers(0, 4)))),
            "unroll": int(self.pick([1, 1, 2, 4, 8, 16, 32, 128])),
            "parallel_depth": int(self.pick([0, 1, 1])),
            "vector_width": int(
                self.weighted([(4, 3), (8, 3), (16, 3), (1, 1), (2, 1), (32, 0.5), (64, 0.5)])
            ),
            "register_tile": int(self.pick([0, 1, 2, 4, 8])),
            "dot_tile": self.pick(
                [(1, 8), (2, 4), (2, 8), (3, 4), (4, 4), (4, 6), (8, 3), (1, 1), (5, 4)]
            ),
            "reduction_chunk": int(self.pick([0, 0, 1, 2, 3, 64, 128])),
            "prefetch_distance": int(self.pick([0, 2, 4, 8, 16, 32])),
            "threads": int(self.pick([0, 1, 2, 3, 4])),
            "allow_skewing": self.chance(0.3),
            "allow_negative": self.chance(0.2),
            "block": self.pick(
                [(32, 8), (32,), (16, 4), (8, 8, 2), (64, 2), (1,), (128, 4), (4, 4, 4)]
            ),
            "grid": self.pick([(), (), (8,), (16, 4), (1,), (1024,)]),
            "use_shared_memory": self.chance(0.5),
            "use_private_memory": self.chance(0.5),
            "unroll_copy_shared": self.chance(0.3),
            "shared_depth": int(self.pick([0, 0, 1, 2])),
            "private_depth": int(self.pick([0, 0, 1, 2])),
            "max_shared_memory": int(self.pick([48 * 1024, 48 * 1024, 1024, 0])),
        }
        if self.chance(0.05):
            o[self.pick(["threads", "unroll", "reduction_chunk"])] = int(
                self.pick([100_000, 10**9, 2**31])
            )
            self.features.add("huge_option")
        if o["allow_skewing"]:
            self.features.add("option:skewing")
        return o


class _Stmt:
    """The right side of one statement: expressions over its index variables."""

    def __init__(self, gen: _Gen, env: _Env, variables: dict[str, str], lhs: Tensor) -> None:
        self.g, self.env, self.vars, self.lhs = gen, env, variables, lhs
        self.self_read = False
        self.lets: dict[str, Expr] = {}
        self.anchored: set[str] = set()
        self.mentioned: set[str] = set()
        self.reads = 0  # reads of tensors and scalars (a literal-only right side types late)
        self.force: tuple[Tensor, list[str]] | None = None  # the first read, if any

    def volume(self) -> int:
        return int(np.prod([max(self.env.extent[c], 1) for c in self.vars.values()]))

    def anchors(self, new: bool) -> list[str]:
        """`where` items for the variables no plain read anchors (and an `exists` now and
        then): a range as written, sometimes starting at 1."""
        out = []
        for v, c in self.vars.items():
            if v in self.anchored:
                continue
            lhs_var = v.startswith("i")
            if lhs_var and not new and v not in self.mentioned and self.g.chance(0.5):
                continue  # ranges over the tensor's extent
            ones = [
                t
                for t in self.env.tensors.values()
                if t.classes == (c,) and t.role != "index" and t.name != self.lhs.name
            ]
            if ones and self.g.chance(0.25):
                out.append(f"exists {self.g.pick(ones).name}({v})")
                self.g.features.add("exists")
                continue
            lo = "1" if self.g.chance(0.1) else "0"
            out.append(f"{v} in {lo}:{self.env.class_text[c]}")
            self.g.features.add("where_range")
        return out

    # -- leaves
    def read(self, want_exact: bool) -> Expr | None:
        env = self.env
        cands = [
            t
            for t in env.tensors.values()
            if t.role in ("input", "written")
            and t.name not in env.int_sizes
            and (t.name != self.lhs.name or self.self_read)
            and (t.exact or not want_exact)
            and t.name in env.tensors
        ]
        if not self.self_read:
            cands = [t for t in cands if t.name != self.lhs.name]
        if self.force is not None and (self.force[0].exact or not want_exact):
            t, vs = self.force
            self.force = None
            self.reads += 1
            self.anchored.update(vs)
            self.mentioned.update(vs)
            return Expr(f"{t.name}({', '.join(vs)})", t.dtype, t.exact, t.nan_free)
        if not cands:
            return None
        # Prefer tensors whose every dimension has a variable, and those that use the
        # statement's unused variables.
        unused = {c for v, c in self.vars.items() if v not in self.mentioned}
        have = set(self.vars.values())
        scored = [
            (t, 1.0 + 6 * (set(t.classes) <= have) + 3 * len(unused & set(t.classes)))
            for t in cands
        ]
        t = self.g.weighted(scored)
        if t.name == self.lhs.name:
            self.reads += 1
            subs = list(self.vars)[: len(t.classes)]
            self.mentioned.update(subs)
            return Expr(
                f"{t.name}({', '.join(subs)})" if subs else t.name, t.dtype, t.exact, t.nan_free
            )
        self.reads += 1
        if not t.classes:
            return Expr(t.name, t.dtype, t.exact, t.nan_free)
        subs = [self.subscript(c) for c in t.classes]
        return Expr(f"{t.name}({', '.join(subs)})", t.dtype, t.exact, t.nan_free)

    def subscript(self, cls: str) -> str:
        """A subscript of a dimension of class cls: mostly a plain variable of that class;
        else a reversed, clamped, wrapped, constant or indirect one."""
        g, env = self.g, self.env
        same = [v for v, c in self.vars.items() if c == cls]
        ext, text = env.extent[cls], env.class_text[cls]
        forms: list[tuple[str, float]] = [("indirect", 1), ("clamp", 0.6)]
        if same:
            forms += [("plain", 14), ("reverse", 0.4), ("wrap", 0.4)]
        if ext >= 1:
            forms.append(("const", 0.3))
        form = g.weighted(forms)
        g.features.add(f"sub:{form}")
        if form == "plain":
            v = g.pick(same)
            self.anchored.add(v)
            self.mentioned.add(v)
            return v
        if form == "reverse":
            v = g.pick(same)
            self.mentioned.add(v)
            return f"{text} - 1 - {v}"
        if form == "const":
            return g.pick(["0", f"{text} - 1"])
        v = g.pick(list(self.vars)) if self.vars else None
        if form == "wrap" or (form == "clamp" and v is not None):
            v = v if form == "clamp" else g.pick(same)
            self.mentioned.add(v)
            d = int(g.rng.integers(-2, 3))
            inner = f"{v} + {d}" if d > 0 else f"{v} - {-d}" if d < 0 else v
            if form == "wrap":
                return f"({inner}) % {text}"
            return f"max(min({inner}, {text} - 1), 0)"
        if v is None:
            return "0"
        return self.indirect(cls, 1 + int(g.weighted([(0, 0.7), (1, 0.25), (2, 0.05)])), True)

    def indirect(self, cls: str, depth: int, outer: bool) -> str:
        """An index-tensor read whose values are subscripts of class cls, itself indexed
        by a variable (depth 1) or by another indirect read (nested)."""
        g, env = self.g, self.env
        ext, text = env.extent[cls], env.class_text[cls]
        computed = [
            t
            for t in env.tensors.values()
            if t.role == "written" and t.dtype in INTEGERS and t.classes and t.name != self.lhs.name
        ]
        if outer and computed and g.chance(0.25):
            t = g.pick(computed)
            subs = ", ".join(self.subscript(c) for c in t.classes)
            g.features.add("sub:computed_index")
            form = g.pick(["wrap", "clamp", "raw"])
            if form == "raw":
                return f"{t.name}({subs})"
            if form == "wrap":
                return f"{t.name}({subs}) % {text}"
            return f"max(min({t.name}({subs}), {text} - 1), 0)"
        mode = g.weighted([("in", 6), ("clamp", 2), ("hostile", 1)])
        g.features.add("indirect" if depth == 1 else f"nested{depth}")
        usable = [v for v, c in self.vars.items() if c in env.sizes]
        if not usable:
            return f"max(min({g.pick(list(self.vars))}, {text} - 1), 0)"
        if depth == 1:
            v = g.pick(usable)
            self.mentioned.add(v)
            ix = g.index_tensor(env, (self.vars[v],), ext, mode)
            inner = v
        elif depth == 2 and g.chance(0.3):  # B(C(C(i))): one tensor at both levels
            v = g.pick(usable)
            self.mentioned.add(v)
            c = self.vars[v]
            ix = g.index_tensor(env, (c,), min(ext, env.extent[c]), "in")
            inner = f"{ix.name}({v})"
            g.features.add("self_nested")
        else:
            mid = g.pick([c for c in env.sizes if env.extent[c] >= 1] or [self.vars[usable[0]]])
            ix = g.index_tensor(env, (mid,), ext, mode)
            inner = self.indirect(mid, depth - 1, False)
        read = f"{ix.name}({inner})"
        if mode == "clamp":
            return f"max(min({read}, {text} - 1), 0)"
        return read

    # -- expressions
    def leaf(self, want_exact: bool, need_read: bool) -> Expr:
        g = self.g
        kinds: list[tuple[str, float]] = [("read", 6 if need_read else 4), ("literal", 1.5)]
        if self.vars:
            kinds.append(("index", 0.6))
        if self.env.scalars:
            kinds.append(("scalar", 0.8))
        if self.lets:
            kinds.append(("let", 1.5))
        kinds.append(("size", 0.4))
        kind = g.weighted(kinds) if not need_read else "read"
        if kind == "read":
            e = self.read(want_exact)
            if e is not None:
                return e
            kind = "literal"
        if kind == "index":
            v = g.pick(list(self.vars))
            self.mentioned.add(v)
            return Expr(v, "int32", True)
        if kind == "scalar":
            n = g.pick(list(self.env.scalars))
            self.reads += 1
            return Expr(n, self.env.scalars[n], True)
        if kind == "let":
            n = g.pick(list(self.lets))
            e = self.lets[n]
            if e.exact or not want_exact:
                return Expr(n, e.dtype, e.exact, e.nan_free)
        if kind == "size":
            c = g.pick(sorted(self.env.sizes) or ["0"])
            if c != "0":
                return Expr(c, "int32", True)
        lit = g.weighted(
            [
                ("1", 2),
                ("2", 2),
                ("0", 1),
                ("-3", 1),
                ("7", 1),
                ("0.5", 2),
                ("2.", 1),
                (".25", 1),
                ("3E-1", 1),
                ("1e-3", 0.5),
                ("1e30", 0.2),
                ("2147483647", 0.2),
                ("100", 0.5),
                ("-1", 1),
            ]
        )
        dt = "float32" if any(ch in lit for ch in ".eE") else "int32"
        return Expr(lit, dt, True)

    def expr(self, depth: int, want_exact: bool = False, need_read: bool = False) -> Expr:
        g = self.g
        if depth <= 0 or g.chance(0.35 if not need_read else 0.2):
            return self.leaf(want_exact, need_read)
        kinds = [
            ("arith", 5),
            ("builtin", 2),
            ("unary", 0.5),
            ("cast", 0.6),
            ("compare", 0.4),
            ("select", 0.4),
            ("intdiv", 0.6),
            ("minmax", 0.6),
            ("logic", 0.2),
        ]
        if want_exact:
            kinds = [
                (k, w)
                for k, w in kinds
                if k in ("unary", "cast", "minmax", "intdiv", "compare", "select", "logic")
            ]
        kind = g.weighted(kinds)
        g.features.add(f"expr:{kind}")
        return getattr(self, f"e_{kind}")(depth - 1, want_exact, need_read)

    def e_arith(self, d: int, _exact: bool, need_read: bool) -> Expr:
        a, b = self.expr(d, need_read=need_read), self.expr(d)
        op = self.g.pick(["+", "-", "*", "+", "*"])
        t = promote(a.dtype, b.dtype)
        exact = a.exact and b.exact and t not in FLOATS
        if t in FLOATS and op == "*" and self.g.chance(0.5):
            op = "/"
            self.g.features.add("float_div")
        return Expr(
            f"({a.text} {op} {b.text})", t, exact, a.nan_free and b.nan_free and t not in FLOATS
        )

    def e_intdiv(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        a = self.int_expr(d, need_read)
        b = self.int_expr(d, False)
        t = promote(a.dtype, b.dtype)
        op = self.g.pick(["/", "%"])
        return Expr(f"({a.text} {op} {b.text})", t, True)

    def int_expr(self, d: int, need_read: bool) -> Expr:
        e = self.expr(d, want_exact=True, need_read=need_read)
        if e.dtype in FLOATS:
            e = self.g.cast(e, self.g.pick(["int32", "int64", "int8", "uint32"]))
        return e

    # Operands of discontinuous operations are drawn exact (never drawn and then
    # replaced: a dropped operand would leave its reads counted as anchors).
    def e_unary(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        if self.g.chance(0.7):
            a = self.expr(d, want_exact, need_read)
            return Expr(
                f"-{a.text}" if not a.text.startswith("-") else f"-({a.text})",
                arith(a.dtype),
                a.exact,
                a.nan_free,
            )
        a = self.expr(d, True, need_read)
        return Expr(f"!{a.text}", "bool", True)

    def e_cast(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        dt = self.g.dtype()
        a = self.expr(d, want_exact or dt not in FLOATS, need_read)
        return self.g.cast(a, dt)

    def e_compare(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        a, b = self.expr(d, True, need_read), self.expr(d, True)
        op = self.g.pick(["<", "<=", ">", ">=", "==", "!="])
        return Expr(f"({a.text} {op} {b.text})", "bool", True)

    def e_logic(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        a, b = self.expr(d, True, need_read), self.expr(d, True)
        return Expr(f"({a.text} {self.g.pick(['&&', '||'])} {b.text})", "bool", True)

    def e_select(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        c = self.expr(d, True)
        a, b = self.expr(d, want_exact, need_read), self.expr(d, want_exact)
        t = promote(a.dtype, b.dtype)
        return Expr(
            f"({c.text} ? {a.text} : {b.text})", t, a.exact and b.exact, a.nan_free and b.nan_free
        )

    def e_minmax(self, d: int, want_exact: bool, need_read: bool) -> Expr:
        a, b = self.expr(d, want_exact, need_read), self.expr(d, want_exact)
        fn = self.g.pick(["min", "max", "abs"])
        if fn == "abs":
            t = arith(a.dtype)
            return Expr(f"abs({a.text})", t, a.exact, a.nan_free)
        t = promote(a.dtype, b.dtype)
        return Expr(f"{fn}({a.text}, {b.text})", t, a.exact and b.exact, a.nan_free and b.nan_free)

    def e_builtin(self, d: int, _exact: bool, need_read: bool) -> Expr:
        g = self.g
        table = [
            (SMOOTH_1, 5),
            (SMOOTH_2, 2),
            (SMOOTH_3, 0.5),
            (EXACT_1, 4),
            (EXACT_2, 2),
            (EXACT_3, 0.3),
            (EXACT_4, 0.3),
        ]
        names = g.weighted([(t, w) for t, w in table])
        fn = g.pick(names)
        arity = (
            1
            if names in (SMOOTH_1, EXACT_1)
            else 2
            if names in (SMOOTH_2, EXACT_2)
            else (3 if names in (SMOOTH_3, EXACT_3) else 4)
        )
        exact_args = names in (EXACT_1, EXACT_2, EXACT_3, EXACT_4)
        args = [self.expr(d, exact_args, need_read and k == 0) for k in range(arity)]
        texts = [a.text for a in args]
        if fn in ("sin", "cos", "sinpi", "cospi"):
            # A large argument's last bit (a float sum's rounding, which the reduction's
            # order decides) moves the angle: arguments in [-100, 100] keep it comparable.
            texts = [f"fmin(fmax({texts[0]}, -100.0), 100.0)"]
        if fn in ("j0", "j1", "y0", "y1"):
            # Bessel functions of huge arguments are ill-conditioned: libm's float32 j0f
            # and the reference's double j0 rounded to float32 differ in every digit at
            # 9e18. Moderate arguments (exact, still) keep them comparable.
            texts = [f"fmin(fmax({texts[0]}, -1000.0), 1000.0)"]
        if g.chance(0.15) and fn not in ("fabs", "round", "rint"):
            fn += "f"  # the C-style alias
        g.features.add(f"builtin:{fn}")
        t = "float64" if any(a.dtype == "float64" for a in args) else "float32"
        return Expr(f"{fn}({', '.join(texts)})", t, False, False)


def generate(
    seed: int, index: int, *, known: frozenset[str] | None = None, options: str = "random"
) -> Case:
    """The program (seed, index); `known` (default: KNOWN's keys) are the known-bug
    features to guard; options "random" draws MappingOptions, "default" leaves them."""
    known = frozenset(KNOWN) if known is None else known
    return _Gen(seed, index, known, options).case()
