"""Language conformance: every case of tests/data/conformance.toml.

A case is either accepted (expected output shapes, optionally dtypes and values) or
rejected (an expected TcError substring at define or call time). See the header of the
TOML file for the format.
"""

from __future__ import annotations

import contextlib
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tc_graph as tg

TABLE = Path(__file__).resolve().parents[1] / "data" / "conformance.toml"
MAX_DIM = 12
MIN_CASES = 80
STAGES = ("define", "call", "either")

TYPE_DTYPES: dict[str, str] = {
    **{
        t: t
        for t in (
            "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
            "float16", "float32", "float64",
        )
    },
    "float": "float32",
    "double": "float64",
    "half": "float16",
    "int": "int32",
    "byte": "uint8",
    "long": "int64",
}  # fmt: skip

_COMMENT = re.compile(r"#[^\n]*")
_DEF = re.compile(r"\bdef\s+([A-Za-z0-9_]+)\s*\(")
_PARAM = re.compile(r"^\s*([A-Za-z0-9_]+)\s*(?:\(([^()]*)\))?\s*([A-Za-z0-9_]+)\s*$")
_CARET_LINE = re.compile(r"^[ \t|]*\^[\^~ \t]*$", re.MULTILINE)
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _load_cases() -> list[dict[str, Any]]:
    with TABLE.open("rb") as f:
        return list(tomllib.load(f)["case"])


CASES = _load_cases()
SHAPE_CASES = [c for c in CASES if "error" not in c]
ERROR_CASES = [c for c in CASES if "error" in c]


# -- reading the TC signature (only to know parameter dtypes) -------------------------------


def _strip_comments(source: str) -> str:
    return _COMMENT.sub("", source)


def def_names(source: str) -> list[str]:
    return _DEF.findall(_strip_comments(source))


def entry_of(case: dict[str, Any]) -> str:
    if "entry" in case:
        return str(case["entry"])
    names = def_names(case["source"])
    assert len(names) == 1, f"{case['name']}: {len(names)} defs, give `entry`"
    return names[0]


def signature(source: str, entry: str) -> list[tuple[str, str | None, list[str] | None]]:
    """(name, numpy dtype or None if unknown, dims or None for 0-d) per parameter of `entry`."""
    text = _strip_comments(source)
    for m in _DEF.finditer(text):
        if m.group(1) != entry:
            continue
        depth, i = 1, m.end()
        while depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        inner = text[m.end() : i - 1]
        pieces: list[str] = []
        depth, start = 0, 0
        for j, ch in enumerate(inner):
            depth += {"(": 1, ")": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                pieces.append(inner[start:j])
                start = j + 1
        pieces.append(inner[start:])
        params = []
        for piece in pieces:
            if not piece.strip():
                continue
            pm = _PARAM.match(piece)
            assert pm is not None, f"cannot read parameter {piece!r} of {entry}"
            type_name, dims, name = pm.groups()
            dim_list = [d.strip() for d in dims.split(",")] if dims is not None else None
            params.append((name, TYPE_DTYPES.get(type_name), dim_list))
        return params
    raise AssertionError(f"no def {entry!r} in the source")


# -- building arguments ---------------------------------------------------------------------


def build_args(case: dict[str, Any]) -> list[Any]:
    """The call's arguments, in the TOML table's order (the def's parameter order)."""
    declared = {name: dtype for name, dtype, _ in signature(case["source"], entry_of(case))}
    rng = np.random.default_rng(0)
    args: list[Any] = []
    for name, spec in case.get("args", {}).items():
        if isinstance(spec, bool | int | float):
            args.append(spec)
            continue
        table: dict[str, Any] = spec if isinstance(spec, dict) else {"shape": spec}
        dtype = np.dtype(table.get("dtype") or declared.get(name) or "float32")
        shape = tuple(int(d) for d in table["shape"])
        if "values" in table:
            arr = np.array(table["values"], dtype=dtype).reshape(shape)
        elif dtype.kind == "f":
            arr = rng.standard_normal(shape).astype(dtype)
        elif "low" in table:
            arr = rng.integers(table["low"], table["high"], size=shape).astype(dtype)
        else:
            arr = np.zeros(shape, dtype=dtype)
        args.append(arr)
    return args


# -- checks ---------------------------------------------------------------------------------


def _substrings(case: dict[str, Any]) -> list[str]:
    err = case["error"]
    return [err] if isinstance(err, str) else list(err)


def check_message(case: dict[str, Any], exc: BaseException, *, caret: bool) -> None:
    text = str(exc)
    for s in _substrings(case):
        assert s.lower() in text.lower(), f"expected {s!r} in the error message:\n{text}"
    if caret:
        assert _CARET_LINE.search(text), f"expected a source line with a caret:\n{text}"


@contextlib.contextmanager
def maybe_warns(case: dict[str, Any]) -> Iterator[None]:
    if "warns" in case:
        with pytest.warns(tg.TcWarning, match="(?i)" + re.escape(case["warns"])):
            yield
    else:
        yield


def define(case: dict[str, Any]) -> Any:
    with maybe_warns(case):
        mod = tg.define(case["source"])
    if "names" in case:
        assert tuple(mod.names) == tuple(case["names"])
    return mod


def check_values(case: dict[str, Any], outs: tuple[np.ndarray, ...]) -> None:
    for k, (out, expected) in enumerate(zip(outs, case["values"], strict=True)):
        got = np.asarray(out).ravel()
        if got.dtype.kind == "b":
            want = np.array(expected, dtype=bool)
            np.testing.assert_array_equal(got, want, err_msg=f"output {k}")
        elif got.dtype.kind in "iu":
            want = np.array(expected, dtype=np.int64)
            np.testing.assert_array_equal(got.astype(np.int64), want, err_msg=f"output {k}")
        else:
            want = np.array(expected, dtype=np.float64)
            np.testing.assert_allclose(
                got.astype(np.float64), want, rtol=1e-5, atol=1e-6, err_msg=f"output {k}"
            )


# -- the tests ------------------------------------------------------------------------------


@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c["name"] for c in SHAPE_CASES])
def test_accepted(case: dict[str, Any]) -> None:
    mod = define(case)
    fn = mod[entry_of(case)]
    args = build_args(case)
    expected = tuple(tuple(int(d) for d in s) for s in case["shapes"])

    assert tuple(tuple(s) for s in fn.output_shapes(*args)) == expected
    if "dtypes" in case:
        want = tuple(np.dtype(d) for d in case["dtypes"])
        assert tuple(np.dtype(d) for d in fn.output_dtypes(*args)) == want

    result = fn(*args, target="reference")
    if len(expected) == 1:
        assert isinstance(result, np.ndarray), (
            f"one output should come back as an ndarray, got {type(result)}"
        )
        outs: tuple[np.ndarray, ...] = (result,)
    else:
        assert isinstance(result, tuple), (
            f"several outputs should come back as a tuple, got {type(result)}"
        )
        outs = result
    assert len(outs) == len(expected)
    for k, (out, shape) in enumerate(zip(outs, expected, strict=True)):
        assert out.shape == shape, f"output {k}: shape {out.shape}, expected {shape}"
        if "dtypes" in case:
            assert out.dtype == np.dtype(case["dtypes"][k]), f"output {k}: dtype {out.dtype}"
    if "values" in case:
        check_values(case, outs)


@pytest.mark.parametrize("case", ERROR_CASES, ids=[c["name"] for c in ERROR_CASES])
def test_rejected(case: dict[str, Any]) -> None:
    stage = case.get("error_at", "define")
    if stage == "define":
        with pytest.raises(tg.TcError) as info:
            tg.define(case["source"])
        check_message(case, info.value, caret=True)
        return
    if stage == "either":
        try:
            mod = tg.define(case["source"])
        except tg.TcError as exc:
            check_message(case, exc, caret=True)
            return
    else:
        mod = define(case)
    fn = mod[entry_of(case)]
    args = build_args(case)
    with pytest.raises(tg.TcError) as info:
        fn(*args, target="reference")
    check_message(case, info.value, caret=False)


# -- the table itself -----------------------------------------------------------------------


def test_table_size_and_unique_names() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) >= MIN_CASES, f"only {len(names)} cases"
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert not duplicates, f"duplicate case names: {duplicates}"
    bad = [n for n in names if not _NAME.match(n)]
    assert not bad, f"names not snake_case: {bad}"


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case_is_well_formed(case: dict[str, Any]) -> None:
    """Catches mistakes in the table itself; needs nothing from tc_graph."""
    assert ("error" in case) != ("shapes" in case), "a case has either `shapes` or `error`"
    if "error" in case:
        assert case.get("error_at", "define") in STAGES
        assert all(isinstance(s, str) and s for s in _substrings(case))
        if case.get("error_at", "define") == "define":
            return
    entry = entry_of(case)
    assert entry in def_names(case["source"])
    args = case.get("args", {})
    for spec in args.values():
        if isinstance(spec, list | dict):
            shape = spec if isinstance(spec, list) else spec["shape"]
            assert all(0 <= d <= MAX_DIM for d in shape), f"dims must be <= {MAX_DIM}: {shape}"
    if "error" in case:
        return
    for s in case["shapes"]:
        assert all(0 <= d <= MAX_DIM for d in s), f"dims must be <= {MAX_DIM}: {s}"
    for key in ("dtypes", "values"):
        if key in case:
            assert len(case[key]) == len(case["shapes"]), f"one `{key}` entry per output"
    if "values" in case:
        for s, v in zip(case["shapes"], case["values"], strict=True):
            assert len(v) == int(np.prod(s, dtype=np.int64)), f"{len(v)} values for shape {s}"

    # Accepted cases must pass the arguments in parameter order, with consistent sizes.
    params = signature(case["source"], entry)
    assert list(args) == [p[0] for p in params], "args must follow the parameter order"
    sizes: dict[str, int] = {}
    for (name, _dtype, dims), spec in zip(params, args.values(), strict=True):
        if dims is None:
            assert isinstance(spec, bool | int | float), f"{name} is 0-d: give a number"
            continue
        shape = spec if isinstance(spec, list) else spec["shape"]
        assert len(shape) == len(dims), f"{name}: rank {len(shape)}, declared {len(dims)}"
        for dim, extent in zip(dims, shape, strict=True):
            if dim.isdigit():
                assert int(dim) == extent, f"{name}: constant dimension {dim}, got {extent}"
            else:
                assert sizes.setdefault(dim, extent) == extent, f"size {dim} disagrees at {name}"
