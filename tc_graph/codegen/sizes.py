"""ABI version 2: the shape rules a kernel for every size carries for the native op as C
(docs/onnx.md, "Kernels for every size"; its metadata table is codegen/phases.py's), so
that the op runs no Python: `tc_shapes` reads the sizes off the input dimensions, checks
every other dimension and the program's preconditions (a violation is a message for
onnxruntime's error), and computes the output dimensions, the temporaries' bytes and each
phase's iterations. tc_kernel and tc_phase take the sizes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import islpy as isl

from ..errors import TcError
from ..lang.types import SCALARS

if TYPE_CHECKING:
    from .phases import PhasePlan, PhasePrinter

SIZES_ABI_VERSION = 2
"""Version of a kernel for every size: its entry points take the sizes."""


def c_list(values: Sequence[int | str], *, scalar: bool) -> str:
    """A C initializer (C forbids empty arrays: an unused 0 stands in)."""
    if scalar:
        return str(values[0])
    return "{" + ", ".join(str(v) for v in values or [0]) + "}"


def c_string(text: str) -> str:
    """text as a C string literal (ASCII; anything else becomes '?')."""
    out = []
    for ch in text:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("?")
    return '"' + "".join(out) + '"'


def tc_shapes(printer: PhasePrinter, plans: Sequence[PhasePlan]) -> list[str]:
    """tc_shapes: 0, or 1 (a dimension) or 2 (a precondition) with the message in why."""
    p = printer.program
    sym = printer.scop.symbolic
    assert sym is not None
    dims = [(n, k) for n in p.inputs for k in range(p.tensors[n].rank)]
    head = [
        "int tc_shapes(const int64_t *in_dims, int64_t *sizes, int64_t *out_dims, "
        "int64_t *temp_bytes, int64_t *trips, char *why, size_t why_size) {"
    ]
    sources = []
    for i, name in enumerate(sym.params):
        j = next((j for j, (n, k) in enumerate(dims) if sym.extents[n][k] == name), None)
        if j is None:
            raise TcError(f"internal: size '{name}' is no input's dimension")
        sources.append(j)
        head.append(f"  const int64_t {name} = in_dims[{j}]; sizes[{i}] = {name};")
    for name, value in p.constants.items():
        if name in p.params:
            head.append(f"  const int64_t {name} = {value}; (void){name};")
    return [*head, *_dimension_checks(printer, dims, sources), *_precondition_checks(printer),
            *_results(printer, [plan.trips for plan in plans]), "  return 0;", "}"]  # fmt: skip


def _dimension_checks(
    printer: PhasePrinter, dims: list[tuple[str, int]], sources: list[int]
) -> list[str]:
    """Every input dimension is its extent (those the sizes are read from are), and at
    most 2^31 - 1."""
    sym = printer.scop.symbolic
    assert sym is not None
    out = []
    for j, (n, k) in enumerate(dims):
        want = sym.extents[n][k]
        i = printer.program.inputs.index(n)
        text = c_string(
            f"dimension {k} of input {i} ('{n}') is %lld, expected "
            + (want if want.lstrip("-").isdigit() else f"{want} = %lld")
            + " (sizes up to 2^31 - 1)"
        )
        value = "" if want.lstrip("-").isdigit() else f", (long long)({want})"
        differs = "" if j in sources else f"in_dims[{j}] != (int64_t)({want}) || "
        out += [
            f"  if ({differs}in_dims[{j}] > 2147483647) {{",
            f"    snprintf(why, why_size, {text}, (long long)in_dims[{j}]{value});",
            "    return 1;",
            "  }",
        ]
    return out


def _precondition_checks(printer: PhasePrinter) -> list[str]:
    """The program's preconditions (sizes for which an access would leave its tensor)."""
    p = printer.program
    sym = printer.scop.symbolic
    assert sym is not None
    out = []
    for pre in p.preconditions:
        space = pre.violated.get_space()
        build = isl.AstBuild.from_context(isl.Set.universe(space))
        cond = build.expr_from_set(pre.violated).to_C_str()
        names = ", ".join(f"{n}=%lld" for n in sym.params)
        values = "".join(f", (long long){n}" for n in sym.params)
        text = c_string(f"{pre.message} for these sizes ({names})")
        out += [
            f"  if ({cond}) {{",
            f"    snprintf(why, why_size, {text}{values});",
            "    return 2;",
            "  }",
        ]
    return out


def _results(printer: PhasePrinter, trips: Sequence[int | str]) -> list[str]:
    """The outputs' dimensions, the temporaries' bytes, the phases' iterations."""
    p = printer.program
    sym = printer.scop.symbolic
    assert sym is not None
    out = []
    dims = [sym.extents[n][k] for n in p.outputs for k in range(p.tensors[n].rank)]
    for j, d in enumerate(dims):
        out.append(f"  out_dims[{j}] = max((int64_t)0, (int64_t)({d}));")
    for t, n in enumerate(printer.shared_temps()):
        extents = [f"max((int64_t)0, (int64_t)({d}))" for d in sym.extents[n]]
        count = " * ".join(["(int64_t)1", *extents])
        out.append(
            f"  temp_bytes[{t}] = max((int64_t)1, {count}) * {SCALARS[p.tensors[n].dtype].bytes};"
        )
    for k, trip in enumerate(trips):
        out.append(f"  trips[{k}] = (int64_t)({trip});")
    return out
