"""The `tc-graph` command."""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from . import ir
from .api import TcModule
from .errors import TcError, TcWarning


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


def _check(path: str) -> int:
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
    except OSError as e:
        print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
        return 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TcWarning)
        try:
            mod = TcModule(source)
        except TcError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return 1
    for w in caught:
        print(f"{path}: {w.message}", file=sys.stderr)
    for name in mod.names:
        print("\n".join(_describe(name, mod)))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tc-graph", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse and check a TC file; print ranges and shapes")
    check.add_argument("file")
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args.file)
    return 2


if __name__ == "__main__":
    sys.exit(main())
