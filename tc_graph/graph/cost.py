"""The cost model: a candidate group's time, fused and in onnxruntime, predicted from its
FLOPs and bytes before anything is compiled.

Compiling and timing groups that lose is most of optimize's time (each convolution of
alexnet compiled and raced at 0.05x-0.18x), so optimize asks this model first: a group
predicted to lose by more than 2x is neither compiled nor measured, and a group that
joins memory-bound clusters with a contraction is split before measuring unless its
fused kernel is predicted to win.

Each node has a kernel class. A contraction or convolution costs its FLOPs at the class's
rate, or its bytes at the streaming rate where that is slower (a matrix-vector product);
the memory-bound classes cost their bytes at their own rate. onnxruntime pays every node's
bytes and a per-node overhead; a fused kernel pays only the bytes that enter or leave
the group (its intermediates stay in registers or cache) and one kernel's overhead. Both
sides pay the session call the race times them through. The rates are measured once per
machine by small probes (`calibrate`), for onnxruntime's kernels and for tc_graph's, and
cached as JSON in the kernel cache under the key of the measurements they stand for.
"""

from __future__ import annotations

import logging
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from .. import timing
from . import memo
from .bench_models import make_model
from .model import Graph
from .partition import Group

log = logging.getLogger(__name__)

CONTRACTION, CONVOLUTION, POOLING = "contraction", "convolution", "pooling"
ELEMENTWISE, LOOKUP = "elementwise", "lookup"
REDUCTION, NORMALIZATION = "reduction", "normalization"
# Not an operator's class: the bytes rate of a contraction whose bytes outweigh its FLOPs
# (a matrix-vector product streaming its weights; tc_graph's ran at a quarter of
# onnxruntime's speed on alexnet's fully connected layers, where its Add streams as fast).
STREAMING = "streaming"
CLASSES = (
    CONTRACTION, CONVOLUTION, POOLING, ELEMENTWISE, LOOKUP, REDUCTION, NORMALIZATION, STREAMING
)  # fmt: skip
COMPUTE = frozenset({CONTRACTION, CONVOLUTION})
_CLASS_OF: dict[str, str] = {
    "MatMul": CONTRACTION,
    "Gemm": CONTRACTION,
    "Conv": CONVOLUTION,
    "MaxPool": POOLING,
    "AveragePool": POOLING,
    "Gather": LOOKUP,
    **dict.fromkeys(("Softmax", "LogSoftmax", "LayerNormalization"), NORMALIZATION),
}

MIN_PREDICTED = 0.5
"""A group predicted to run below this ratio (to lose by more than 2x) is not compiled:
the model is off by up to about 2x, so a closer call is left to the measurement."""
PREDICTED = "not measured"
SPLIT = "split before measuring"
_CALIBRATION = "calibration.json"
# No rate is faster than this many units (FLOPs or bytes) per second, whatever a probe
# on a loaded machine made of a tiny difference of two timings.
_MAX_RATE = 1e13
_MIN_SECONDS = 1e-8
# Each probe side is timed in this many interleaved rounds of _ROUND_S of calls.
_ROUNDS = 7
_ROUND_S = 0.005
# Rounds whose interquartile range exceeds this fraction of their median disagree (a
# loaded machine): the probe is timed again, _TRIES times at most. Two tries left one
# probe of ten unsteady in most calibrations on a 2-core Zen 3 VM (so none was cached,
# and every warm optimize calibrated again, 2 s); three, one in three.
_MAX_SPREAD = 0.2
_TRIES = 3
# The overhead probe's chain of Adds: long enough that its slope (the per-node overhead,
# about a µs) stands above the noise of a session call (10-20 µs).
_CHAIN = 32


def kind(op_type: str) -> str:
    """The kernel class of an operator (reductions by name, the rest elementwise)."""
    if op_type.startswith("Reduce"):
        return REDUCTION
    return _CLASS_OF.get(op_type, ELEMENTWISE)


@dataclass(frozen=True)
class Work:
    """What one node does: its class, FLOPs, and the bytes of each value it reads and
    writes (a Gather reads only the rows it gathers)."""

    kind: str
    flops: float
    reads: tuple[tuple[str, int], ...]
    writes: tuple[tuple[str, int], ...]

    def bytes(
        self, inside: frozenset[str] = frozenset(), kept: frozenset[str] = frozenset()
    ) -> int:
        """Bytes moved, leaving out reads of values made `inside` the group and writes of
        values that do not leave it (those `inside` but not `kept`)."""
        reads = sum(b for v, b in self.reads if v not in inside)
        writes = sum(b for v, b in self.writes if v not in inside or v in kept)
        return reads + writes


def _nbytes(g: Graph, value: str) -> int:
    dtype, shape = g.types[value]
    return math.prod(shape) * np.dtype(dtype).itemsize


def node_work(g: Graph, index: int) -> Work:
    """The node's Work, from the static types of its values."""
    node = g.node(index)
    outputs = [v for v in node.output if v and v in g.types]
    writes = tuple((v, _nbytes(g, v)) for v in outputs)
    reads = [(v, _nbytes(g, v)) for v in node.input if v and v in g.types]
    if node.op_type == "Gather" and reads and writes:
        reads[0] = (reads[0][0], min(reads[0][1], writes[0][1]))
    out_elements = sum(math.prod(g.types[v][1]) for v in outputs)
    return Work(kind(node.op_type), _flops(g, node, out_elements), tuple(reads), writes)


def _flops(g: Graph, node: onnx.NodeProto, out_elements: int) -> float:
    """Multiply-adds count two, the rest one: a contraction's bias, an elementwise
    operator per output element, a pool per window element, a reduction or normalization
    per input element; a Gather, Reshape or Concat moves data and counts none."""
    shape = {v: g.types[v][1] for v in node.input if v and v in g.types}
    if node.op_type == "MatMul":
        return 2.0 * out_elements * shape[node.input[0]][-1]
    if node.op_type == "Gemm":
        trans_a = next((a.i for a in node.attribute if a.name == "transA"), 0)
        k = shape[node.input[0]][0 if trans_a else 1]
        bias = 1.0 if len(node.input) > 2 and node.input[2] else 0.0
        return (2.0 * k + bias) * out_elements
    if node.op_type == "Conv":
        weight = shape[node.input[1]]  # (M, C / group, kH, kW...): one output's reduction
        bias = 1.0 if len(node.input) > 2 and node.input[2] else 0.0
        return (2.0 * math.prod(weight[1:]) + bias) * out_elements
    cls = kind(node.op_type)
    if cls == ELEMENTWISE and node.op_type not in _MOVES:
        return float(out_elements)
    if cls == POOLING:
        window = next((a.ints for a in node.attribute if a.name == "kernel_shape"), [])
        return float(out_elements * math.prod(window))
    if cls in (REDUCTION, NORMALIZATION):
        return float(math.prod(shape[node.input[0]]))
    return 0.0


# Elementwise-class operators that only move data.
_MOVES = frozenset({
    "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "Transpose",
    "Concat", "Cast",
})  # fmt: skip


@dataclass(frozen=True)
class Rates:
    """One machine's calibration: units per second by class (FLOPs for the compute
    classes, bytes for the others and STREAMING) for onnxruntime's kernels and
    tc_graph's, and the overheads: onnxruntime's per node, a TcKernel's per kernel, and a
    session call (paid by both sides)."""

    ort: Mapping[str, float]
    tc: Mapping[str, float]
    ort_node_s: float
    tc_kernel_s: float
    run_s: float

    def seconds(self, side: str, work: Work, nbytes: int) -> float:
        rates = self.ort if side == "ort" else self.tc
        if work.kind in COMPUTE:
            return max(work.flops / rates[work.kind], nbytes / rates[STREAMING])
        return nbytes / rates[work.kind]


@dataclass(frozen=True)
class Prediction:
    """A group's predicted times (seconds, a session call included) and what it mixes:
    the memory-bound classes it joins with a contraction or convolution ("" if none)."""

    fused_s: float
    ort_s: float
    mixed: str = ""
    run_s: float = 0.0  # the session call, in both times

    @property
    def ratio(self) -> float:
        return self.ort_s / self.fused_s


def predict(g: Graph, group: Group, rates: Rates, clusters: Sequence[Sequence[int]]) -> Prediction:
    """The group's time fused and in onnxruntime. `clusters` are its operator clusters
    (an anchor with the nodes that follow it): one anchored by a memory-bound node next to
    one anchored by a contraction makes the group mixed."""
    works = {n: node_work(g, n) for n in group.nodes}
    inside = frozenset(v for w in works.values() for v, _ in w.writes)
    kept = frozenset(group.outputs)
    ort = sum(rates.seconds("ort", w, w.bytes()) + rates.ort_node_s for w in works.values())
    fused = sum(rates.seconds("tc", w, w.bytes(inside, kept)) for w in works.values())
    anchors = {works[c[0]].kind for c in clusters if c}
    memory = sorted(anchors - COMPUTE) if anchors & COMPUTE else []
    return Prediction(
        fused_s=rates.run_s + rates.tc_kernel_s + fused,
        ort_s=rates.run_s + ort,
        mixed=" and ".join(memory),
        run_s=rates.run_s,
    )


def verdict(
    p: Prediction, min_speedup: float, *, splittable: bool, apart: Sequence[Prediction] = ()
) -> str | None:
    """Why the group is not compiled, or None to compile and measure it: predicted to
    lose by more than 2x; or mixed (and splittable) and not predicted to win, or, given
    its memory-bound and compute-bound parts (`apart`), predicted to win less joined than
    apart, each part on the side predicted faster (the session call paid once)."""
    if p.ratio < MIN_PREDICTED:
        return f"predicted {p.ratio:.2f}x, {PREDICTED}"
    if not (p.mixed and splittable):
        return None
    head = f"{SPLIT}: memory-bound {p.mixed} joined with a contraction"
    if p.ratio < min_speedup:
        return f"{head}, predicted {p.ratio:.2f}x"
    joined = p.fused_s - p.run_s
    split_s = sum(min(q.fused_s, q.ort_s) - q.run_s for q in apart)
    if apart and joined * min_speedup > split_s:
        return f"{head}, predicted {joined * 1e6:.1f} µs joined, {split_s * 1e6:.1f} µs apart"
    return None


def reason_kind(why: str) -> str | None:
    """A cost-model reason without its ratio (like reasons count together), else None."""
    if why.startswith("predicted ") and why.endswith(PREDICTED):
        return f"predicted to lose by more than {1 / MIN_PREDICTED:.0f}x, {PREDICTED}"
    if why.startswith(SPLIT):
        return why.split(", predicted")[0]
    return None


# A probe runner: the probe model's onnxruntime session call and, when asked for, its
# call as one TcKernel (compiled as optimize compiles a group), else None.
Call = Callable[[], object]
Runner = Callable[[onnx.ModelProto, bool], tuple[Call, Call | None]]


def calibrate(runner: Runner) -> tuple[Rates, str]:
    """Measure this machine's rates with small probes (tens of ms each): one Add of 16
    floats and a chain of _CHAIN (the overheads), then one node of each class and a
    matrix-vector product, on both sides. Timings are medians of interleaved rounds; a
    rate is never 0 nor absurd. Also returns the probes whose rounds never agreed ("" if
    none): such a calibration is used, not cached."""
    unsteady: list[str] = []
    ort_one, tc_one = _settled(runner, _adds(1), "overhead", unsteady)
    ort_chain, _ = _settled(runner, _adds(_CHAIN), "overhead", unsteady, fused=False)
    node_s = max((ort_chain - ort_one) / (_CHAIN - 1), _MIN_SECONDS)
    run_s = max(ort_one - node_s, _MIN_SECONDS)
    kernel_s = max(tc_one - run_s, _MIN_SECONDS)
    ort: dict[str, float] = {}
    tc: dict[str, float] = {}
    for name, model in _probes().items():
        g = Graph.from_model(model)
        work = node_work(g, g.order[0])
        units = work.flops if work.kind in COMPUTE and name != STREAMING else work.bytes()
        ort_s, tc_s = _settled(runner, model, name, unsteady)
        ort[name] = _rate(units, ort_s - run_s - node_s)
        tc[name] = _rate(units, tc_s - run_s - kernel_s)
    return Rates(ort, tc, node_s, kernel_s, run_s), ", ".join(dict.fromkeys(unsteady))


def _rate(units: float, seconds: float) -> float:
    return min(units / max(seconds, _MIN_SECONDS), _MAX_RATE)


def _settled(
    runner: Runner, model: onnx.ModelProto, name: str, unsteady: list[str], *, fused: bool = True
) -> tuple[float, float]:
    """A probe's median seconds per call on each side (see _time), timed again, up to
    _TRIES times in all, while its rounds disagree (a loaded machine); the steadiest try,
    and the probe's name added to `unsteady` if none agreed."""
    calls = runner(model, fused)
    tries = []
    for _ in range(_TRIES):
        tries.append(_time(*calls))
        if tries[-1][2] <= _MAX_SPREAD:
            break
    ort_s, tc_s, spread = min(tries, key=lambda t: t[2])
    if spread > _MAX_SPREAD:
        unsteady.append(name)
    return ort_s, tc_s


def _time(ort_call: Call, tc_call: Call | None) -> tuple[float, float, float]:
    """Median seconds per call of each side (0.0 for a side not given) over _ROUNDS
    interleaved rounds (timing.rounds), and how much the rounds disagree (the larger
    side's spread)."""
    calls = {"ort": ort_call, **({"tc": tc_call} if tc_call is not None else {})}
    times = timing.rounds(calls, _ROUNDS, _ROUND_S, min_samples=3)
    medians = {who: statistics.median(t) for who, t in times.items()}
    spread = max(timing.spread(t) for t in times.values())
    return medians["ort"], medians.get("tc", 0.0), spread


def _adds(count: int) -> onnx.ModelProto:
    """A chain of `count` Adds on 16 floats: all overhead."""
    c = np.ones(16, np.float32)
    nodes = [helper.make_node("Add", [f"v{k}", "c"], [f"v{k + 1}"]) for k in range(count)]
    return make_model(
        nodes, {"v0": (np.float32, [16])}, {"c": c}, {f"v{count}": [16]}, name="probe"
    )


def _probes() -> dict[str, onnx.ModelProto]:
    """One node of each class, each a few hundred µs to a few ms in onnxruntime."""
    rng = np.random.default_rng(0)
    f32 = np.float32

    def normal(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape, dtype=f32)

    def one(op: str, inputs: Mapping[str, Any], inits: Mapping[str, np.ndarray],
            out: Sequence[int], **attrs: Any) -> onnx.ModelProto:  # fmt: skip
        node = helper.make_node(op, [*inputs, *inits], ["y"], **attrs)
        return make_model([node], inputs, inits, {"y": out}, name="probe")

    return {
        CONTRACTION: one("MatMul", {"x": (f32, [256, 256])}, {"w": normal(256, 256)}, [256, 256]),
        # A ResNet-like layer: tc_graph's convolutions fall behind as channels grow
        # (0.7x onnxruntime's speed at 32 channels, 0.25x at 128, on a Zen 3).
        CONVOLUTION: one(
            "Conv",
            {"x": (f32, [1, 128, 14, 14])},
            {"w": normal(128, 128, 3, 3)},
            [1, 128, 14, 14],
            pads=[1, 1, 1, 1],
        ),
        POOLING: one(
            "MaxPool",
            {"x": (f32, [1, 64, 56, 56])},
            {},
            [1, 64, 27, 27],
            kernel_shape=[3, 3],
            strides=[2, 2],
        ),
        ELEMENTWISE: one(
            "Add", {"x": (f32, [256, 1024]), "z": (f32, [256, 1024])}, {}, [256, 1024]
        ),
        LOOKUP: _lookup(normal(20000, 64)),
        STREAMING: one(
            "Gemm", {"x": (f32, [1, 4096])}, {"w": normal(1024, 4096)}, [1, 1024], transB=1
        ),
        REDUCTION: one(
            "ReduceSum",
            {"x": (f32, [256, 64, 64])},
            {"a": np.array([1])},
            [256, 64],
            keepdims=0,
        ),
        NORMALIZATION: one("Softmax", {"x": (f32, [256, 1024])}, {}, [256, 1024], axis=-1),
    }


def _lookup(table: np.ndarray) -> onnx.ModelProto:
    """4096 rows gathered from a 20000-row table (the table first, as Gather reads it)."""
    node = helper.make_node("Gather", ["t", "i"], ["y"], axis=0)
    return make_model(
        [node], {"i": (np.int64, [4096])}, {"t": table}, {"y": [4096, 64]}, name="probe"
    )


def rates(key: str, runner: Runner, *, remeasure: bool = False) -> Rates:
    """This machine's calibration under `key` (see optimize._context_key): the cached one,
    or this process's, or else (and always under `remeasure`) measured now. A steady
    calibration is cached (in a kernel cache that lacks it too); one whose probes never
    timed steadily serves this process only, as an unsteady race decides nothing."""
    if not remeasure:
        known = _from_json(memo.load(_CALIBRATION).get(key))
        if known is not None:
            return known
    if remeasure or key not in _MEMO:
        measured, unsteady = calibrate(runner)
        if unsteady:
            log.info("the cost model's probes never timed steadily (%s): calibrated for "
                     "this process only, not cached", unsteady)  # fmt: skip
        _MEMO[key] = (measured, not unsteady)
    measured, steady = _MEMO[key]
    if steady:
        memo.store(_CALIBRATION, key, asdict(measured))
    return measured


# This process's calibrations by key, and whether each timed steadily: the machine is the
# same whichever kernel cache a later optimize uses (the tests give many a fresh one).
_MEMO: dict[str, tuple[Rates, bool]] = {}


def _from_json(value: object) -> Rates | None:
    """A cached calibration, or None where it is absent or malformed (calibrated again)."""
    if not isinstance(value, dict):
        return None
    try:
        r = Rates(**value)
        numbers = [*r.ort.values(), *r.tc.values(), r.ort_node_s, r.tc_kernel_s, r.run_s]
        complete = set(r.ort) == set(r.tc) == set(CLASSES)
    except (TypeError, AttributeError):
        return None
    ok = complete and all(
        isinstance(x, int | float) and not isinstance(x, bool) and 0 < x < math.inf for x in numbers
    )
    return r if ok else None


def clear_calibration() -> bool:
    """Forget every cached calibration (`tc-graph cache clear`), this process's too; True
    if the cache had one."""
    _MEMO.clear()
    return memo.clear(_CALIBRATION, "the cached cost-model calibration")
