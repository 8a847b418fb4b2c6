"""Rows groups: one TcKernel for every size of a model's symbolic leading dimension.

A model with symbolic dimensions (a dynamic batch) is optimized at sample sizes
(`Dynamic`): its groups are chosen and measured on the model pinned at the first sample
of each symbol. A group then becomes a rows group, whose TcKernel serves every size
(docs/onnx.md, "Symbolic dimensions"), when three things hold:

- between the model pinned at the samples and pinned at other sizes, the group's inputs
  and outputs differ only in their leading dimension, all by the same symbol, every
  output among them (`row_values`);
- its translation, with that dimension declared as the size ROWS, reads the same at
  both pinnings: nothing in it depends on the number of rows;
- its program computes each row from that row alone (`separable`): every statement that
  writes a tensor leading with ROWS walks its rows with its first index over exactly
  0:ROWS, and reads a tensor leading with ROWS only at that row; nothing else reads one.

Then a kernel compiled for r rows, run on r consecutive rows of each such tensor,
computes those rows of the result: the native op runs a kernel per sample size on
chunks of the rows it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import islpy as isl
import onnx

from .. import ir
from .model import Graph
from .partition import Group
from .translate import ROWS

# The sample sizes of a symbolic dimension the user gives none for (docs/onnx.md): one
# that leads an input (a batch), and one that does not (a sequence).
LEADING_SAMPLES = (1, 8)
INNER_SAMPLES = (128,)


def default_samples(graph: onnx.GraphProto, name: str) -> tuple[int, ...]:
    """The samples of symbolic dimension `name` where the user gives none."""
    for value in graph.input:
        dims = value.type.tensor_type.shape.dim if value.type.HasField("tensor_type") else ()
        if dims and dims[0].dim_param == name:
            return LEADING_SAMPLES
    return INNER_SAMPLES


@dataclass(frozen=True)
class Dynamic:
    """A model with symbolic dimensions at its sample sizes: `pinned` at the first sample
    of each symbol (where groups are decided), `other` at sizes no sample has (each
    symbol its own), `symbolic` as the user gave it (what is rewritten), and the
    samples of each symbol, the first first."""

    symbolic: Graph
    pinned: Graph
    other: Graph
    samples: Mapping[str, tuple[int, ...]]  # each symbol's, descending
    other_sizes: Mapping[str, int]
    load: Callable[[Mapping[str, int]], Graph] = field(compare=False)
    aligned: bool = True  # same_nodes of the three: else no group serves every size
    _loaded: dict[int, Graph] = field(default_factory=dict, compare=False, repr=False)

    def pins(self, k: int) -> dict[str, int]:
        """The k-th sample of each symbol (its last where it has fewer)."""
        return {s: sizes[min(k, len(sizes) - 1)] for s, sizes in self.samples.items()}

    def sample_graphs(self) -> list[Graph]:
        """The model pinned at each round of samples (every sample of every symbol), the
        first `pinned`; each loaded once."""
        out = [self.pinned]
        for k in range(1, max(len(sizes) for sizes in self.samples.values())):
            if k not in self._loaded:
                self._loaded[k] = self.load(self.pins(k))
            out.append(self._loaded[k])
        return out

    def describe_round(self, k: int) -> str:
        return ", ".join(f"{s}={n}" for s, n in self.pins(k).items())

    def row_sizes(self, symbol: str) -> tuple[int, ...]:
        """The sizes a rows node on `symbol` has kernels for: its samples, and 1."""
        return tuple(sorted({*self.samples[symbol], 1}, reverse=True))

    def describe(self) -> str:
        return ", ".join(f"{s}={','.join(map(str, v))}" for s, v in self.samples.items())


def other_sizes(samples: Mapping[str, Sequence[int]]) -> dict[str, int]:
    """A size per symbol that is none of its samples and no other symbol's pair: which
    symbol a dimension follows is told by how it changes."""
    out: dict[str, int] = {}
    for k, (name, sizes) in enumerate(samples.items()):
        size = max(sizes) + 7 + 2 * k
        out[name] = size
    return out


def same_nodes(graphs: Sequence[Graph]) -> bool:
    """Whether the graphs list the same nodes in the same order: a group's node indices
    then mean the same nodes in each."""
    first = [(n.op_type, n.input, n.output) for n in graphs[0].model.graph.node]
    return all(
        [(n.op_type, n.input, n.output) for n in g.model.graph.node] == first for g in graphs[1:]
    )


@dataclass(frozen=True)
class RowValues:
    """A group's inputs and outputs that lead with the rows, and the symbol they follow
    ("" and none: a group no symbol reaches, which every size shares)."""

    symbol: str
    values: frozenset[str]


def row_values(dyn: Dynamic, group: Group, outputs: Sequence[str]) -> RowValues | str:
    """Which of the group's values lead with the rows, or why it cannot be a rows group."""
    first = {s: sizes[0] for s, sizes in dyn.samples.items()}
    symbols: set[str] = set()
    values: set[str] = set()
    g, h = dyn.pinned, dyn.other
    if not dyn.aligned:
        return "the model's nodes differ at different sizes of its symbolic dimensions"
    for v in [*group.inputs, *outputs]:
        if v in g.constants:
            if v not in h.constants or not _same_array(g.constants[v], h.constants[v]):
                return f"the constant '{v}' changes with the symbolic sizes"
            continue
        if v not in g.types or v not in h.types:
            return f"'{v}' has no static type at the sample sizes"
        a, b = g.types[v][1], h.types[v][1]
        if a == b:
            continue
        follows = [s for s in first if a[:1] == (first[s],) and b[:1] == (dyn.other_sizes[s],)]
        if len(a) != len(b) or a[1:] != b[1:] or len(follows) != 1:
            return f"'{v}' changes with the symbolic sizes other than in its leading dimension"
        symbols.add(follows[0])
        values.add(v)
    if len(symbols) > 1:
        return f"its values lead with different symbolic dimensions ({', '.join(sorted(symbols))})"
    if values and not all(o in values for o in outputs):
        fixed = next(o for o in outputs if o not in values)
        return f"its output '{fixed}' does not lead with the rows its inputs have"
    return RowValues(symbols.pop() if symbols else "", frozenset(values))


def types_at(dyn: Dynamic, values: Iterable[str], symbol: str, rows: int) -> dict[str, Any]:
    """The types of a rows group's values (every input and output of its nodes) with `rows`
    rows: those whose leading dimension follows `symbol` (it is its first sample in the
    pinned model and its other size in the other) take `rows` there."""
    g, h = dyn.pinned, dyn.other
    out = {}
    for v in values:
        if v not in g.types or v not in h.types:
            continue
        dtype, a = g.types[v]
        b = h.types[v][1]
        lead = (dyn.samples[symbol][0], dyn.other_sizes[symbol])
        follows = len(a) == len(b) and a[1:] == b[1:] and (a[:1], b[:1]) == ((lead[0],), (lead[1],))
        out[v] = (dtype, (rows, *a[1:])) if follows else (dtype, a)
    return out


def _same_array(a: object, b: object) -> bool:
    import numpy as np

    x, y = np.asarray(a), np.asarray(b)
    return x.shape == y.shape and x.dtype == y.dtype and bool(np.array_equal(x, y))


def separable(program: ir.Program) -> str | None:
    """None when the program computes each of its ROWS rows from that row alone (see the
    module docstring); else why not."""
    if ROWS not in program.params:
        return None
    k = program.params.index(ROWS)
    rows = _param(program, k)
    led = {n for n, t in program.tensors.items() if t.shape and t.shape[0].is_equal(rows)}
    for n, t in program.tensors.items():
        dims = t.shape[1:] if n in led else t.shape
        if any(_involves(d, k) for d in dims):
            return f"the size of '{n}' depends on the rows other than as its leading dimension"
    for n in program.outputs:
        if n not in led:
            return f"its output '{n}' does not lead with the rows"
    for pre in program.preconditions:
        if pre.violated.involves_dims(isl.dim_type.param, k, 1):
            return f"a precondition depends on the rows: {pre.message}"
    for st in program.statements:
        why = _statement(st, led, rows, k)
        if why:
            return why
    return None


def _param(program: ir.Program, k: int) -> isl.PwAff:
    space = program.context.get_space()
    aff = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.param, k)
    return isl.PwAff.from_aff(aff)


def _involves(pa: isl.PwAff, k: int) -> bool:
    return bool(pa.involves_dims(isl.dim_type.param, k, 1))


def _statement(st: ir.Statement, led: set[str], rows: isl.PwAff, k: int) -> str | None:
    """Why statement st does not compute a row from that row alone (None if it does)."""
    row = st.lhs[0] if st.tensor in led and st.lhs else None
    where = f"the statement that writes '{st.tensor}'"
    for v, (lo, hi) in zip(st.iterators, st.bounds, strict=True):
        if v == row:
            if not (lo.is_equal(rows.sub(rows)) and hi.is_equal(rows)):
                return f"{where} does not walk all its rows with '{v}'"
        elif _involves(lo, k) or _involves(hi, k):
            return f"{where} has a loop over '{v}' whose range depends on the rows"
    if not _row_only(st.rhs, row, led):
        return f"{where} reads other rows than the one it writes, or their number"
    return None


def _row_only(e: ir.Expr, row: str | None, led: set[str]) -> bool:
    """Whether `row` appears in e only as the leading subscript of a read of a tensor
    leading with the rows, which every such read has, and nothing reads the rows' size."""
    match e:
        case ir.Index(name=name):
            return name != row
        case ir.Size(name=name):
            return name != ROWS
        case ir.DimSize(tensor=t, dim=d):
            return not (t in led and d == 0)
        case ir.Read(tensor=t, subscripts=subs) if t in led:
            lead = subs[0] if subs else None
            if row is None or not (isinstance(lead, ir.Index) and lead.name == row):
                return False
            return all(_row_only(s, row, led) for s in subs[1:])
    return all(_row_only(c, row, led) for c in ir.children(e))
