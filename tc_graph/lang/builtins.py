"""The builtin functions: CUDA's single-precision math set, plus min/max/abs.

Each entry is the number of arguments. The seeds write C's `f`-suffixed names
(`fmaxf`); any `<name>f` of a builtin is accepted as an alias of it.
"""

from __future__ import annotations

FLOAT_BUILTINS: dict[str, int] = {
    **dict.fromkeys(
        (
            "acos", "acosh", "asin", "asinh", "atan", "atanh", "cbrt", "ceil", "cos", "cosh",
            "cospi", "erf", "erfc", "erfcinv", "erfcx", "erfinv", "exp", "exp10", "exp2", "expm1",
            "fabs", "floor", "j0", "j1", "lgamma", "log", "log10", "log1p", "log2", "logb",
            "nearbyint", "normcdf", "normcdfinv", "rcbrt", "rint", "round", "rsqrt", "sin", "sinh",
            "sinpi", "sqrt", "tan", "tanh", "tgamma", "trunc", "y0", "y1",
        ),
        1,
    ),
    **dict.fromkeys(
        (
            "atan2", "copysign", "fdim", "fmax", "fmin", "fmod", "hypot", "nextafter", "pow",
            "remainder", "rhypot",
        ),
        2,
    ),
    "fma": 3,
    "norm3d": 3,
    "rnorm3d": 3,
    "norm4d": 4,
    "rnorm4d": 4,
}  # fmt: skip

# Builtins whose result has the promoted type of their arguments (integers stay integers).
GENERIC_BUILTINS: dict[str, int] = {"min": 2, "max": 2, "abs": 1}


def resolve(name: str) -> str | None:
    """The canonical builtin for `name` (`fmaxf` is `fmax`), or None."""
    if name in FLOAT_BUILTINS or name in GENERIC_BUILTINS:
        return name
    if name.endswith("f") and name[:-1] in FLOAT_BUILTINS:
        return name[:-1]
    return None


def arity(name: str) -> int:
    return FLOAT_BUILTINS.get(name) or GENERIC_BUILTINS[name]
