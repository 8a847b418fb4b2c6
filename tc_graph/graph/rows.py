"""Rows groups: one TcKernel for every size of a model's symbolic leading dimensions.

A model with symbolic dimensions (a dynamic batch, and sequence) is optimized at sample
sizes (`Dynamic`): its groups are chosen and measured on the model pinned at the largest
sample of each symbol. A group then becomes a rows group, whose TcKernel serves every
size (docs/onnx.md, "Symbolic dimensions"), when three things hold:

- between the model pinned at the samples and pinned at other sizes, the group's inputs
  and outputs differ only in their leading dimensions, all following the same symbols in
  the same order, every output among them (`row_values`);
- its translation, with those dimensions declared as the sizes ROWS, ROWS_1, ..., reads
  the same at both pinnings: nothing in it depends on the number of rows;
- its program computes each row (one index of the leading dimensions) from that row
  alone (`separable`): every statement that writes a tensor leading with the rows walks
  all of them with its first indices, and reads such a tensor only at those indices;
  nothing else reads one.

Then a kernel compiled for r rows (r, 1, ..., 1 in the leading dimensions), run on r
consecutive rows of each such tensor, computes those rows of the result: the native op
runs a kernel per size on chunks of the rows it is given.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import islpy as isl
import numpy as np
import onnx

from .. import ir
from .model import Graph
from .partition import Group
from .translate import row_names

# The sample sizes of a symbolic dimension the user gives none for (docs/onnx.md): one
# that leads an input (a batch), and one that does not (a sequence); each has 1, where
# a group of a model's layers loses most (per-run costs, one-row products).
LEADING_SAMPLES = (1, 8)
INNER_SAMPLES = (128, 1)


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
    vector: int = 1  # floats per vector register of the kernels (middle_sizes)
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

    def middle(self) -> dict[str, int]:
        """Where a node for every size's other kernel makes its choices (`middle_sizes`).
        Choices made at the largest samples suit large sizes only: a BERT-style layer
        decided at 8 x 128 tokens ran in 17 phases at 8 x 16, the model 1.5x the time it
        took with its choices made at 8 x 16 (which ran it 1.3x slower at 64 x 77)."""
        return middle_sizes(self.samples, self.vector)

    def middle_graph(self) -> Graph:
        """The model pinned at `middle`, loaded once."""
        if -1 not in self._loaded:
            self._loaded[-1] = self.load(self.middle())
        return self._loaded[-1]

    def row_sizes(self, symbols: Sequence[str]) -> tuple[int, ...]:
        """The sizes a rows node over `symbols` has kernels for: the products of their
        samples, and every power of four below the largest, so that any other number of
        rows runs in at most three chunks per power (a BERT export at 15 rows, with kernels
        for 1024, 128 and 1, ran 15 chunks of one row: 0.8x onnxruntime; powers of two,
        at most one chunk per power, took twice the compiles: 40 s for its 6 groups)."""
        sizes = {math.prod(c) for c in itertools.product(*(self.samples[s] for s in symbols))}
        top = max(sizes)
        sizes |= {1 << k for k in range(0, top.bit_length(), 2) if 1 << k < top}
        return tuple(sorted(sizes, reverse=True))

    def describe(self) -> str:
        return ", ".join(f"{s}={','.join(map(str, v))}" for s, v in self.samples.items())


def middle_sizes(samples: Mapping[str, Sequence[int]], vector: int) -> dict[str, int]:
    """Each symbol's size midway between its largest and smallest samples, as sizes scale
    (their geometric mean, rounded), but a vector's floats where that is fewer and the
    largest sample has more: choices made at fewer give up the vector forms of the
    loops over that size (a BERT-style layer decided at 11 tokens, fewer than AVX-512's
    16 floats, kept its attention's scores in plain loops) for every size above.
    BERT-style export at 1, 3, 8 and 64 x 16 tokens: 1.7-2.0x -> 2.0-2.3x onnxruntime
    with the choices at 3 x 16 instead of 3 x 11."""
    out = {}
    for s, v in samples.items():
        mid = max(1, round(math.sqrt(max(v) * min(v))))
        out[s] = vector if mid < vector < max(v) else mid
    return out


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
    """A group's inputs and outputs that lead with the rows, and the symbols their leading
    dimensions follow, in order (none: a group no symbol reaches, which every size
    shares). The rows are the product of those dimensions."""

    symbols: tuple[str, ...]
    values: frozenset[str]


def _leading(dyn: Dynamic, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[str, ...] | None:
    """The symbols the leading dimensions of a value follow, which is `a` in the pinned
    model and `b` in the other; None where it changes otherwise."""
    if len(a) != len(b):
        return None
    out: list[str] = []
    for x, y in zip(a, b, strict=True):
        if x == y:
            break
        found = [s for s, n in dyn.other_sizes.items() if (x, y) == (dyn.samples[s][0], n)]
        if len(found) != 1:
            return None
        out.append(found[0])
    return tuple(out) if a[len(out) :] == b[len(out) :] else None


def row_values(dyn: Dynamic, group: Group, outputs: Sequence[str]) -> RowValues | str:
    """Which of the group's values lead with the rows, or why it cannot be a rows group."""
    leads: set[tuple[str, ...]] = set()
    values: set[str] = set()
    g, h = dyn.pinned, dyn.other
    if not dyn.aligned:
        return "the model's nodes differ at different sizes of its symbolic dimensions"
    for v in [*group.inputs, *outputs]:
        if v in g.constants:  # what the translation reads of it: same_constants
            continue
        if v not in g.types or v not in h.types:
            return f"'{v}' has no static type at the sample sizes"
        lead = _leading(dyn, g.types[v][1], h.types[v][1])
        if lead is None:
            return f"'{v}' changes with the symbolic sizes other than in its leading dimensions"
        if lead:
            leads.add(lead)
            values.add(v)
    if len(leads) > 1:
        shown = "; ".join(", ".join(x) for x in sorted(leads))
        return f"its values lead with different symbolic dimensions ({shown})"
    if values and not all(o in values for o in outputs):
        fixed = next(o for o in outputs if o not in values)
        return f"its output '{fixed}' does not lead with the rows its inputs have"
    return RowValues(leads.pop() if leads else (), frozenset(values))


def same_constants(dyn: Dynamic, names: Iterable[str]) -> str | None:
    """None when the constants among `names` (those a translation passes to its kernel)
    are the same at both pinnings; else why not. Constants a translation reads while it
    writes the text (a Reshape's target, a Slice's starts) show in the text instead."""
    g, h = dyn.pinned, dyn.other
    for v in names:
        if v in g.constants and (
            v not in h.constants or not _same_array(g.constants[v], h.constants[v])
        ):
            return f"the constant '{v}' changes with the symbolic sizes"
    return None


def types_at(dyn: Dynamic, values: Iterable[str], symbols: Sequence[str], rows: int) -> dict:
    """The types of a rows group's values (every input and output of its nodes) with `rows`
    rows: those whose leading dimensions follow `symbols` take `rows` in the first and 1
    in the others."""
    g, h = dyn.pinned, dyn.other
    out: dict[str, Any] = {}
    for v in values:
        if v in g.types and v in h.types:
            dtype, a = g.types[v]
            follows = _leading(dyn, a, h.types[v][1]) == tuple(symbols)
            lead = (rows, *[1] * (len(symbols) - 1))
            out[v] = (dtype, (*lead, *a[len(symbols) :])) if follows else (dtype, a)
    return out


def _same_array(a: object, b: object) -> bool:
    x, y = np.asarray(a), np.asarray(b)
    return x.shape == y.shape and x.dtype == y.dtype and bool(np.array_equal(x, y))


def separable(program: ir.Program) -> str | None:
    """None when the program computes each of its rows (the product of its leading sizes
    ROWS, ROWS_1, ...) from that row alone (see the module docstring); else why not."""
    names = [n for n in row_names(len(program.params) + 1) if n in program.params]
    if not names:
        return None
    ks = [program.params.index(n) for n in names]
    rows = [_param(program, k) for k in ks]
    n = len(rows)
    led = {
        name for name, t in program.tensors.items()
        if len(t.shape) >= n and all(d.is_equal(r) for d, r in zip(t.shape, rows, strict=False))
    }  # fmt: skip
    for name, t in program.tensors.items():
        dims = t.shape[n:] if name in led else t.shape
        if any(_involves(d, ks) for d in dims):
            return f"the size of '{name}' depends on the rows other than as its leading dimensions"
    for name in program.outputs:
        if name not in led:
            return f"its output '{name}' does not lead with the rows"
    for pre in program.preconditions:
        if any(pre.violated.involves_dims(isl.dim_type.param, k, 1) for k in ks):
            return f"a precondition depends on the rows: {pre.message}"
    for st in program.statements:
        why = _statement(st, led, rows, ks)
        if why:
            return why
    return None


def _param(program: ir.Program, k: int) -> isl.PwAff:
    space = program.context.get_space()
    aff = isl.Aff.var_on_domain(isl.LocalSpace.from_space(space), isl.dim_type.param, k)
    return isl.PwAff.from_aff(aff)


def _involves(pa: isl.PwAff, ks: Sequence[int]) -> bool:
    return any(pa.involves_dims(isl.dim_type.param, k, 1) for k in ks)


def _statement(
    st: ir.Statement, led: set[str], rows: Sequence[isl.PwAff], ks: Sequence[int]
) -> str | None:
    """Why statement st does not compute a row from that row alone (None if it does)."""
    n = len(rows)
    row = tuple(st.lhs[:n]) if st.tensor in led and len(st.lhs) >= n else None
    where = f"the statement that writes '{st.tensor}'"
    for v, (lo, hi) in zip(st.iterators, st.bounds, strict=True):
        if row is not None and v in row:
            r = rows[row.index(v)]
            if not (lo.is_equal(r.sub(r)) and hi.is_equal(r)):
                return f"{where} does not walk all its rows with '{v}'"
        elif _involves(lo, ks) or _involves(hi, ks):
            return f"{where} has a loop over '{v}' whose range depends on the rows"
    if not _row_only(st.rhs, row, led, n):
        return f"{where} reads other rows than the one it writes, or their number"
    return None


def _row_only(e: ir.Expr, row: tuple[str, ...] | None, led: set[str], n: int) -> bool:
    """Whether the indices in `row` appear in e only as the leading subscripts of a read
    of a tensor leading with the rows, which every such read has, and nothing reads the
    rows' sizes."""
    match e:
        case ir.Index(name=name):
            return row is None or name not in row
        case ir.Size(name=name):
            return name not in row_names(n)
        case ir.DimSize(tensor=t, dim=d):
            return not (t in led and d < n)
        case ir.Read(tensor=t, subscripts=subs) if t in led:
            lead = tuple(x.name if isinstance(x, ir.Index) else None for x in subs[:n])
            if row is None or lead != row:
                return False
            return all(_row_only(x, row, led, n) for x in subs[n:])
    return all(_row_only(c, row, led, n) for c in ir.children(e))
