"""The `tc-graph` command."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence

import numpy as np

from . import ir
from .api import TcFunction, TcModule
from .errors import TcError, TcWarning
from .options import MappingOptions
from .runtime import cc


def _describe(fn_name: str, mod: TcModule) -> list[str]:
    fn = mod[fn_name]
    d = fn.checked
    params = ", ".join(
        f"{t.dtype}({', '.join(ir.to_text(x) for x in t.dims or ())}) {n}"
        if t.rank
        else f"{t.dtype} {n}"
        for n, t in ((n, d.tensors[n]) for n in d.inputs)
    )
    lines = [f"def {d.name}({params}) -> ({', '.join(d.outputs)})"]
    p = fn.program
    if p is None:
        scalars = ", ".join(d.index_scalars)
        lines.append(f"  ranges depend on the values of {scalars}: inferred at each call")
        return lines
    for st in p.statements:
        lhs = f"{st.tensor}({', '.join(st.lhs)})"
        op = "=" if st.op == "=" else f"{st.op}={'!' if st.init else ''}"
        lines.append(f"  {lhs} {op} {ir.to_text(st.rhs)}")
        ranges = ", ".join(
            f"{v} in {ir.pw_to_text(lo, p)}:{ir.pw_to_text(hi, p)}"
            for v, (lo, hi) in zip(st.iterators, st.bounds, strict=True)
        )
        lines.append(f"      {ranges}" if ranges else "      (no indices)")
    for name in (*p.outputs, *p.temporaries):
        t = p.tensors[name]
        shape = ", ".join(ir.pw_to_text(x, p) for x in t.shape)
        kind = "output" if t.role == "output" else "temporary"
        lines.append(f"  {kind} {name}: {t.dtype}({shape})")
    for pre in p.preconditions:
        lines.append(f"  checked at each call: {pre.message}")
    return lines


def _load(path: str) -> TcModule | None:
    """The module of a TC file, printing warnings and errors; None on error."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TcWarning)
        try:
            mod = TcModule(source)
        except TcError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return None
    for w in caught:
        print(f"{path}: {w.message}", file=sys.stderr)
    return mod


def _check(path: str) -> int:
    mod = _load(path)
    if mod is None:
        return 1
    for name in mod.names:
        print("\n".join(_describe(name, mod)))
    return 0


def _parse_shapes(text: str) -> dict[str, str]:
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise TcError(f"--shapes item {item!r} is not NAME=SHAPE (e.g. A=128x64) or NAME=VALUE")
        out[name.strip()] = value.strip()
    return out


def _example_args(fn: TcFunction, given: dict[str, str]) -> list[object]:
    """Arguments of the declared dtypes with the given shapes (zeros) and scalar values."""
    d = fn.checked
    missing = [n for n in d.inputs if n not in given]
    unknown = [n for n in given if n not in d.inputs]
    if missing or unknown:
        raise TcError(
            f"--shapes must give every parameter of '{d.name}' ({', '.join(d.inputs)})"
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    args: list[object] = []
    for n in d.inputs:
        t = d.tensors[n]
        text = given[n]
        try:
            if t.rank == 0:
                args.append(float(text) if t.dtype.startswith("float") else int(text))
            else:
                shape = tuple(int(x) for x in text.lower().split("x"))
                args.append(np.zeros(shape, dtype=t.dtype))
        except ValueError:
            raise TcError(f"--shapes: cannot read {n}={text!r}") from None
    return args


def _compile(args: argparse.Namespace) -> int:
    mod = _load(args.file)
    if mod is None:
        return 1
    try:
        entry = args.entry or (mod.names[0] if len(mod.names) == 1 else None)
        if entry is None:
            raise TcError(f"--entry is required: {args.file} defines {', '.join(mod.names)}")
        if entry not in mod:
            raise TcError(f"no def '{entry}' in {args.file} (it defines {', '.join(mod.names)})")
        fn = mod[entry]
        options = MappingOptions.from_json(args.options) if args.options else None
        kernel = fn.compile(
            *_example_args(fn, _parse_shapes(args.shapes)), target=args.target, options=options
        )
    except TcError as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    print(kernel.source, end="")
    return 0


def _cache(action: str) -> int:
    if action == "info":
        info = cc.cache_info()
        print(f"cache: {info['path']}")
        print(f"entries: {info['entries']}")
        print(f"size: {info['bytes'] / 1e6:.1f} MB")
    else:
        print(f"removed {cc.cache_clear()} entries from {cc.cache_dir()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`tc-graph check f.tc | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog="tc-graph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse and check a TC file; print ranges and shapes")
    check.add_argument("file")
    comp = sub.add_parser("compile", help="compile one def for given shapes; print the code")
    comp.add_argument("file")
    comp.add_argument("--entry", help="the def to compile (needed when the file has several)")
    comp.add_argument(
        "--shapes", required=True, help='shapes and scalar values, e.g. "A=128x64,B=64x32,sh=2"'
    )
    comp.add_argument("--target", default="cpu", choices=["cpu"])
    comp.add_argument("--emit", default="c", choices=["c"], help="what to print")
    comp.add_argument("--options", help="MappingOptions as JSON")
    cache = sub.add_parser("cache", help="the compiled-kernel cache")
    cache.add_argument("action", choices=["info", "clear"])
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args.file)
    if args.command == "compile":
        return _compile(args)
    return _cache(args.action)


if __name__ == "__main__":
    sys.exit(main())
