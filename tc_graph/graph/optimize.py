"""`optimize`, `prepare` and `InferenceSession`: the ONNX face of tc_graph.

`optimize` partitions a model, translates each candidate group into one TC, compiles
it, and keeps it only where its kernel, run inside onnxruntime through the native
library, beats onnxruntime on the same subgraph (both timed on the spot, interleaved,
same session settings) and computes the same values; then the whole rewritten model
must not be slower than the original either: that race runs on every optimize, so a
cached decision is checked again in the model. Group measurements whose rounds agree are
remembered in the cache (`decisions.json`), keyed by the kernel and everything else that
changes them (see _context_key), so optimizing a model again is fast. `force=True` keeps
every group that compiles, without measuring.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import itertools
import json
import logging
import math
import mmap
import os
import re
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import compiler, ir, timing
from ..api import define_entry
from ..arguments import number, seconds, whole
from ..compare import mismatch
from ..errors import TcError, TcWarning
from ..lang.canonical import canonical
from ..lang.types import ONNX_TYPES
from ..onnx_domain import TC_DOMAIN, TC_DOMAIN_VERSION, TC_OP
from ..options import MappingOptions
from ..poly.contraction import panel_width
from ..runtime import cc, machine, ort
from ..runtime.kernel import CompileTimeout, Kernel, code_version, compile_timeout
from ..runtime.parametric import ParametricKernel
from ..tune.tuner import ModelTuning
from . import cost, external, kept, memo, rows, symbols
from . import translate as tr
from .fold import batch_norms_folded
from .linear import linears_composed
from .model import Graph, checked_model_argument, input_symbols, model_file, symbolic_dims
from .partition import Group, candidate_groups, components, excluded, is_convex, make_group
from .rewrite import (
    EVERY_SIZE,
    EVERY_SIZE_AT,
    EVERY_SIZE_FROM,
    KEY_INTS,
    KEY_STRINGS,
    ROW_INTS,
    NodeAttrs,
    kernel_key,
    make_tc_node,
    other_key,
    rewrite,
    row_source,
    special_key,
    variant_key,
)  # fmt: skip

log = logging.getLogger(__name__)

# A group must be at least this much faster (median of per-round ratios) to be fused:
# measurements on a busy machine move by a few percent, and a near tie must stay unfused.
MIN_SPEEDUP = 1.05
# ...and the whole model with every kept group must not be slower than the original.
MIN_WHOLE_SPEEDUP = 1.0
ROUNDS = 7
ROUND_S = 0.02
# Rounds disagree when the interquartile range of their ratios exceeds this fraction of
# the median ratio (a loaded machine): the rounds are then run again, at most TRIES times
# in all, and a race that never settles leaves the group with onnxruntime.
MAX_SPREAD = 0.15
TRIES = 3
# A race stops after EARLY_ROUNDS where the fused side ran at most CLEAR_LOSS times
# onnxruntime's speed in each (see _clearly_lost).
EARLY_ROUNDS = 3
CLEAR_LOSS = 0.8
# Fused outputs are compared with onnxruntime's before a group is kept.
_DECISIONS = "decisions.json"
BUDGET_S = 90.0
"""optimize's default time for deciding, in seconds. Compiling a group takes up to about
12 s (see partition.MAX_GROUP_NODES) and the last one started may finish past the
budget, so at 90 s a whole network (densenet121: 910 translatable nodes) is done in
under the 120 s promised, the groups not reached left to onnxruntime."""

OVER_BUDGET = "not measured within the budget"
# The clock the budget is counted on (a seam for tests).
_clock = time.monotonic

# Gather tables from this size on are fed to the measured sessions rather than embedded.
_FED_BYTES = 1 << 24
# Sample inputs of a measurement (a group's, or the whole model's) may take this much
# memory in all; a model that needs more is not measured, and says so.
_SAMPLE_MAX_BYTES = 1 << 30
# Placeholders from this size on are mapped, not allocated (see _placeholder).
_MAPPED_BYTES = 1 << 20
# Linux's MAP_NORESERVE (Python's mmap does not name it): no swap is reserved for a
# mapping that is never written, so a placeholder of any declared size costs nothing.
_MAP_NORESERVE = 0x4000 if sys.platform.startswith("linux") else 0
# Set while optimize(tune=True) compiles again: the kernels of the groups it chose are
# tuned (the tuner runs them, so even forced compiles get sample inputs: valid, spread
# Gather indices, not placeholders).
_TUNING: contextvars.ContextVar[ModelTuning | None] = contextvars.ContextVar(
    "tc_graph_tuning", default=None
)
# The onnxruntime session settings copied into the measured sessions.
_SESSION_SETTINGS = (
    "intra_op_num_threads", "inter_op_num_threads", "execution_mode", "execution_order",
    "graph_optimization_level", "enable_cpu_mem_arena", "enable_mem_pattern",
    "enable_mem_reuse", "use_deterministic_compute",
)  # fmt: skip


@dataclass(frozen=True)
class _Measuring:
    """How one optimize call measures: the user's session settings (threads overriding
    their intra-op thread count), the margin a group needs, and whether the cached
    decisions count."""

    sess_options: Any = None
    threads: int | None = None
    min_speedup: float = MIN_SPEEDUP
    remeasure: bool = False
    budget_s: float | None = None


_MEASURING: contextvars.ContextVar[_Measuring | None] = contextvars.ContextVar(
    "tc_graph_measuring", default=None
)


def _now() -> _Measuring:
    """The measuring settings of the optimize call in progress (the defaults outside)."""
    return _MEASURING.get() or _Measuring()


# The model at its sample sizes, where it has symbolic dimensions (rows.py).
_DYNAMIC: contextvars.ContextVar[rows.Dynamic | None] = contextvars.ContextVar(
    "tc_graph_dynamic", default=None
)

# The folder of the model being optimized, where its external data lives (None for a
# ModelProto): the measured sessions read it from there (see external.session).
_BASE_DIR: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "tc_graph_base_dir", default=None
)


@dataclass(frozen=True)
class Decision:
    """What optimize decided for one group (one row of the report)."""

    ops: str
    shapes: str
    fused_us: float | None
    ort_us: float | None
    fused: bool
    why: str


@dataclass(frozen=True)
class _Compiled:
    group: Group
    attrs: NodeAttrs
    feeds: dict[str, np.ndarray]  # sample values of the group's runtime inputs
    unsampled: str = ""  # why there are no samples (too large): it cannot be measured
    runtime: tuple[str, ...] = ()  # the runtime inputs a measurement makes samples of


@dataclass(frozen=True)
class _Choice:
    """A group kept, with its report row (an index into the decisions)."""

    group: Group
    attrs: NodeAttrs
    decision: int


def optimize(
    model: str | os.PathLike[str] | onnx.ModelProto,
    *,
    force: bool = False,
    tune: bool = False,
    report: bool = False,
    progress: bool = False,
    sess_options: Any = None,
    threads: int | None = None,
    min_speedup: float = MIN_SPEEDUP,
    remeasure: bool = False,
    budget_s: float | None = BUDGET_S,
    fix_shapes: Mapping[str, int] | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
) -> onnx.ModelProto:
    """A copy of the model with every group that pays off replaced by a TcKernel node,
    measured under the session settings the model will run with (`sess_options`, and
    `threads` intra-op threads), a group kept when it is `min_speedup` times faster.
    `remeasure` ignores the decisions cached by earlier calls. A model file's big
    initializers stored as external data stay there: the result names them as
    `onnx.load(path, load_external_data=False)` would (save it with save_model).
    `budget_s` bounds the time spent deciding (None: no bound): once it is spent, no
    compile or measurement goes on, and the groups left stay with onnxruntime, "not
    measured within the budget". `fix_shapes` pins symbolic dimensions to sizes
    ({"batch": 8}) before anything else, so a model with a dynamic batch fuses; the
    result accepts only those sizes, as onnxruntime's make_dynamic_shape_fixed would.
    The symbolic dimensions left are decided at sample sizes, `shapes` ({"batch": [1, 8]},
    else rows.default_samples): a group that leads with one of them is kept when it wins
    at the largest and the whole model wins at every one; its TcKernel has a kernel per
    sample size and serves every size (docs/onnx.md, "Symbolic dimensions")."""
    measuring = replace(_measuring(sess_options, threads, min_speedup, remeasure),
                        budget_s=budget_s)  # fmt: skip
    fixed = dict(_mapping("fix_shapes", fix_shapes, "sizes", "8"))
    samples = dict(_mapping("shapes", shapes, "lists of sizes", "[1, 8]"))
    token = _MEASURING.set(measuring)
    budget = _DEADLINE.set(_deadline(budget_s))
    try:
        return _optimize_model(model, force=force, tune=tune, report=report, progress=progress,
                               fixed=fixed, shapes=samples)  # fmt: skip
    finally:
        _DEADLINE.reset(budget)
        _MEASURING.reset(token)


def _mapping(name: str, value: object, of: str, example: str) -> Mapping[str, Any]:
    """A by-name argument (shapes, fix_shapes), checked to be a mapping (TcError
    otherwise); its entries are checked where they are used."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TcError(
            f"{name} must be a mapping of dimension names to {of}, not {type(value).__name__}",
            hint=f'e.g. {name}={{"batch": {example}}}',
        )
    return value


def _checked_session_options(sess_options: Any) -> None:
    """TcError unless sess_options is an onnxruntime.SessionOptions or None."""
    import onnxruntime as onnxrt

    if sess_options is not None and not isinstance(sess_options, onnxrt.SessionOptions):
        raise TcError(
            f"sess_options must be an onnxruntime.SessionOptions or None, not "
            f"{type(sess_options).__name__}",
            hint="pass the SessionOptions the optimized model will run with",
        )


def _measuring(
    sess_options: Any, threads: int | None, min_speedup: float, remeasure: bool
) -> _Measuring:
    """optimize's measuring arguments, checked (TcError otherwise)."""
    _checked_session_options(sess_options)
    count = None if threads is None else whole(threads)
    if threads is not None and (count is None or count < 1):
        raise TcError(
            f"threads must be a positive integer or None, not {threads!r}",
            hint="pass the intra-op thread count the model will run with, or None for "
            "onnxruntime's default (or sess_options' own)",
        )
    speedup = number(min_speedup)
    if speedup is None or speedup < 1.0:
        raise TcError(
            f"min_speedup must be a finite number of at least 1.0, not {min_speedup!r}",
            hint=f"a group is fused only when it is faster; the default is {MIN_SPEEDUP}",
        )
    return _Measuring(sess_options, count, speedup, bool(remeasure))


def _optimize_model(
    model: str | os.PathLike[str] | onnx.ModelProto,
    *,
    force: bool,
    tune: bool,
    report: bool,
    progress: bool,
    fixed: Mapping[str, int],
    shapes: Mapping[str, Sequence[int]],
) -> onnx.ModelProto:
    """optimize inside its measuring settings: with tune, twice (see below)."""
    if tune:
        # Choose the groups, then choose again, tuning their kernels as they compile: the
        # tuned options land in the TcKernel nodes, and a tuned group is measured again.
        again = functools.partial(_optimize_model, model, force=force, tune=False, fixed=fixed,
                                  shapes=shapes)  # fmt: skip
        first = again(report=False, progress=progress)
        if not _tc_nodes(first):
            return again(report=True, progress=False) if report else first
        token = _TUNING.set(ModelTuning.of(first, progress=progress))
        try:
            return again(report=report, progress=progress)
        finally:
            _TUNING.reset(token)
    g = Graph.from_model(model, fixed, simplify=_simplified)
    dyn = _dynamic(model, fixed, g, shapes)
    token = _BASE_DIR.set(g.base_dir)
    dynamic = _DYNAMIC.set(dyn)
    try:
        result = _optimize(g if dyn is None else dyn.pinned, force=force, report=report,
                           progress=progress)  # fmt: skip
    finally:
        _DYNAMIC.reset(dynamic)
        _BASE_DIR.reset(token)
    return result


def _dynamic(
    model: str | os.PathLike[str] | onnx.ModelProto,
    fixed: Mapping[str, int],
    g: Graph,
    shapes: Mapping[str, Sequence[int]],
) -> rows.Dynamic | None:
    """The model at its sample sizes where symbolic dimensions of its inputs are left
    unpinned (None where none is); `shapes` checked (TcError otherwise)."""
    names = input_symbols(g.model.graph)
    given: dict[str, list[int]] = {}
    for name, sizes in shapes.items():
        if name in fixed:
            raise TcError(f"shapes: '{name}' is pinned by fix_shapes, so it has no sample sizes",
                          hint="name it in one of the two")  # fmt: skip
        if name not in names:
            have = ", ".join(names) if names else "none"
            raise TcError(f"shapes: the model has no symbolic input dimension '{name}'",
                          hint=f"its symbolic input dimensions: {have}")  # fmt: skip
        if not isinstance(sizes, Sequence | np.ndarray) or isinstance(sizes, str):
            raise TcError(f"shapes: the sample sizes of '{name}' must be a list of positive "
                          f"integers, not {sizes!r}", hint=f'e.g. {{"{name}": [1, 8]}}')  # fmt: skip
        wholes = [whole(n) for n in sizes]
        if not wholes or any(n is None or not 1 <= n < 2**31 for n in wholes):
            raise TcError(f"shapes: the sample sizes of '{name}' must be positive integers, "
                          f"not {list(sizes)!r}", hint="sizes are 1 to 2^31 - 1")  # fmt: skip
        given[name] = [n for n in wholes if n is not None]
    if not names:
        return None
    samples = {
        n: tuple(sorted(set(given.get(n) or rows.default_samples(g.model.graph, n)), reverse=True))
        for n in names
    }

    simplify = _simplified

    def at(pins: Mapping[str, int]) -> Graph:
        return Graph.from_model(model, {**fixed, **pins}, simplify=simplify)

    sizes = rows.other_sizes(samples)
    first = {n: s[0] for n, s in samples.items()}
    pinned, other = at(first), at(sizes)
    if len({_gemms(x.model) for x in (g, pinned, other)}) > 1:
        # Gemms composed at some sizes only (a flattened width is a number once the batch
        # is pinned, not before): no group could serve every size, so none composes.
        simplify = batch_norms_folded
        g = Graph.from_model(model, fixed, simplify=simplify)
        pinned, other = at(first), at(sizes)
    return rows.Dynamic(g, pinned, other, samples, sizes, at,
                        aligned=rows.same_nodes([g, pinned, other]),
                        vector=machine.vector_unit().floats)  # fmt: skip


def _optimize(g: Graph, *, force: bool, report: bool, progress: bool) -> onnx.ModelProto:
    opset = tr.opset_version(g.model)
    deadline = _DEADLINE.get()

    def translatable(node: onnx.NodeProto) -> str | None:
        return tr.translatable(node, g.types, g.constants, opset=opset)

    groups = candidate_groups(g, translatable=translatable)
    ops = ", ".join(_describe(g, group)[0] for group in groups)
    log.debug("%s: %s", _plural(len(groups), "candidate group"), ops)
    chosen: list[_Choice] = []
    decisions: list[Decision] = []
    rates = None if force or not groups or _clock() >= deadline else _calibration()
    with _progress(len(groups), progress) as step:
        for k, group in enumerate(groups):
            name = f"fused{len(decisions)}"
            _decide(g, group, force, chosen, decisions, name=name, deadline=deadline, rates=rates)
            step()
            _log_progress(k + 1, len(groups), decisions[-1], deadline)
    raced = None if force else _keep_what_pays_whole(g, chosen, decisions, deadline)
    whole = raced.speedup if raced is not None else None
    composed = None if force or chosen else _composed_alone(g, deadline)
    # The summary names why nodes were not translated only where there is no group.
    left = untranslated(g, translatable) if report or not decisions else []
    nodes = len(g.model.graph.node)
    line = summary(decisions, left, whole=whole, force=force, nodes=nodes) + _pin_hint(g, left)
    if composed is not None:
        line += (
            f"; its Gemms composed (linear.py): {composed:.2f} times faster on the sample inputs"
        )
    dyn = _DYNAMIC.get()
    if dyn is not None:
        line += f"; decided at {dyn.describe()}, for every size"
    if report:
        print_report(decisions, file=sys.stderr, untranslated=left, summary=line)
    base = _base(g)
    pairs = [(c.group, c.attrs) for c in chosen]
    if chosen:
        result = raced.model if raced is not None else rewrite(base.model, pairs)
    else:
        result = _unchanged(base) if composed is None else _copy(base.model)
    setattr_decisions(result, decisions, summary=line)
    return result


def _simplified(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model the groups are chosen in: batch normalizations folded into the
    convolutions before them, Gemms composed into the Gemms that read them (fold.py,
    linear.py)."""
    return linears_composed(batch_norms_folded(model))


def _base(g: Graph) -> Graph:
    """The model the groups are put into: the one they were decided on, or where that is
    the model pinned at sample sizes, the model with its symbolic dimensions."""
    dyn = _DYNAMIC.get()
    return g if dyn is None else dyn.symbolic


def _unchanged(g: Graph) -> onnx.ModelProto:
    """A copy of the user's model: keeping no group, optimize changes nothing (its own
    simplifications ran light_inception_v2 4-5% slower in onnxruntime), unless its Gemms
    composed and that won (_composed_alone)."""
    return _copy(_original(g))


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    return out


def _composed_alone(g: Graph, deadline: float) -> float | None:
    """Keeping no group: the speedup of the model with its Gemms composed (linear.py) over
    the user's, where composing removed a Gemm and the whole-model race confirms it in
    steady rounds (a DLRM whose lookups lost still does 3x fewer multiply-adds); else
    None. Raced only there: a batch-norm fold alone is onnxruntime's own (it ran
    light_inception_v2 4-5% slower), and a race would cost every CNN seconds on each
    optimize."""
    base = _base(g)
    if _gemms(base.model) == _gemms(_original(base)) or _clock() >= deadline:
        return None
    samples = _sample_feeds(g)
    if not samples or None in samples:
        return None
    known = _race_samples(base, base.model, samples)  # type: ignore[arg-type]
    log.debug("the model with its Gemms composed: %s", _ran(known))
    steady = _confirmed(known) and not known.get("unsteady")
    return _verdict(known) if steady else None


def _gemms(model: onnx.ModelProto) -> int:
    return sum(n.op_type == "Gemm" for n in model.graph.node)


def _decide(
    g: Graph,
    group: Group,
    force: bool,
    chosen: list[_Choice],
    decisions: list[Decision],
    *,
    name: str,
    deadline: float = math.inf,
    rates: cost.Rates | None = None,
) -> None:
    """Keep the group, or else try its parts (see _split), recursively. A model like
    prodmodel then keeps the parts that pay. (Dropping a big Gemm that loses alone and
    fusing all the rest, Concat with the lookups, measured slower on prodmodel: 1.14x
    against 1.23x for this split, interleaved.) A group whose timing never settled is not
    split: its parts would meet the same load. Past the deadline nothing more is
    compiled: the group stays with onnxruntime."""
    left = deadline - _clock()
    if left <= 0:
        decisions.append(_over_budget(g, group, force=force))
        return
    token = _MEASURE_DEADLINE.set(deadline)
    try:
        with compile_timeout(left):
            decision, compiled = _evaluate(g, group, force, name=name, rates=rates)
    except (CompileTimeout, _OverBudget):
        log.debug("%s: its compile or measurement ran past the budget", name)
        decisions.append(_over_budget(g, group, force=force))
        return
    finally:
        _MEASURE_DEADLINE.reset(token)
    # A timing that never settled is noise, not a loss; past the budget, no parts (nor
    # for a group remembered as past it: the same budget gives the same model).
    undecided = decision.why.startswith(_UNSTEADY) or decision.why == OVER_BUDGET
    if not decision.fused and not undecided and _clock() < deadline:
        parts = _split(g, group)
        if parts:
            log.debug("%s: trying its %s instead", name, _plural(len(parts), "part"))
            if decision.why.startswith(cost.SPLIT):
                decisions.append(decision)  # the report says why it was split
            for k, part in enumerate(parts):
                _decide(g, part, force, chosen, decisions, name=f"{name}_{k}", deadline=deadline,
                        rates=rates)  # fmt: skip
            return
    decisions.append(decision)
    if decision.fused and compiled is not None:
        chosen.append(_Choice(group, compiled.attrs, len(decisions) - 1))


def _deadline(budget_s: float | None) -> float:
    """The monotonic time past which optimize starts no new compile."""
    if budget_s is None:
        return math.inf
    spent = seconds(budget_s)
    if spent is None:
        raise TcError(
            f"budget_s must be a number of seconds >= 0, not {budget_s!r}",
            hint="pass budget_s=None for no bound",
        )
    return _clock() + spent


# The _clock() past which the optimize call in progress decides nothing more.
_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar(
    "tc_graph_optimize_deadline", default=math.inf
)
# The _clock() past which a group's measurement stops (see _within_budget).
_MEASURE_DEADLINE: contextvars.ContextVar[float] = contextvars.ContextVar(
    "tc_graph_measure_deadline", default=math.inf
)


class _OverBudget(Exception):
    """A group's measurement stopped at the budget (caught in _decide; nothing cached)."""


def _within_budget() -> None:
    """Between rounds of a group's race: a kernel far slower than onnxruntime took 44 s
    to time on densenet121, so the budget must bound measuring too."""
    if _clock() >= _MEASURE_DEADLINE.get():
        raise _OverBudget


def _over_budget(g: Graph, group: Group, *, force: bool) -> Decision:
    """A group not decided in time: a loss remembered from before is still given (it
    costs no compile); otherwise the group stays with onnxruntime, and that is
    remembered with the budget, so that optimizing again with the same budget gives the
    same model at once (a warm densenet121 spent its whole budget deciding what the
    cold run had no time for). A larger budget, or remeasure, decides it."""
    ops, shapes = _describe(g, group)
    key, known = _remembered(g, group, force)
    if known is not None and not _won(known):
        return _decision(ops, shapes, known)
    before = None if key is None else _known_decision(key)
    if key is not None and (before is None or before.get("why") == OVER_BUDGET):
        _store_decision(key, {"why": OVER_BUDGET, "budget_s": _now().budget_s})
    return Decision(ops, shapes, None, None, False, OVER_BUDGET)


def _remembered(g: Graph, group: Group, force: bool) -> tuple[str | None, dict[str, Any] | None]:
    """The group's recall key (None when forced, tuning, or where it does not translate)
    and the outcome remembered under it that stands for this optimize (see _recalled)."""
    if force or _TUNING.get():
        return None, None
    try:
        key = _recall_key(g, _translate(g, group, "group"))
    except TcError:
        return None, None
    known = None if _now().remeasure else _known_decision(key)
    return key, known if known is not None and _recalled(known) else None


def _recall_key(g: Graph, t: tr.Translation) -> str:
    """The key a group's outcome is remembered under before it is compiled (see
    _translation_key); optimizing for every size, with the samples: a group that lost at
    one of them may win with the model pinned at another."""
    dyn = _DYNAMIC.get()
    every = "" if dyn is None else f":every size at {dyn.describe()}"
    return f"loss:{_translation_key(g, t)}:{_context_key()}{every}"


def _recalled(known: Mapping[str, Any]) -> bool:
    """Whether a remembered outcome stands for this optimize: all do but "not measured
    within the budget", which stands only for a budget no larger than the one it ran out
    of (None: no bound)."""
    if known.get("why") != OVER_BUDGET:
        return True
    then, now = known.get("budget_s"), _now().budget_s
    if then is None:
        return True
    valid = isinstance(then, int | float) and not isinstance(then, bool)
    return valid and now is not None and now <= then


def _log_progress(done: int, total: int, last: Decision, deadline: float) -> None:
    """Progress for logs (the bar shows it on a terminal): groups done, the latest
    verdict, and the budget left."""
    left = deadline - _clock()
    budget = "" if math.isinf(deadline) else f"; {max(0.0, left):.0f} s of the budget left"
    ops = last.ops if len(last.ops) <= 60 else last.ops[:57] + "..."
    log.info("group %d of %d (%s): %s%s", done, total, ops, verdict(last), budget)


@dataclass(frozen=True)
class _Whole:
    """The whole-model race's verdict on the groups kept, and the model it raced (what
    optimize returns: a rewrite copies every initializer, 1 s of 2LUT's warm optimize)."""

    speedup: float
    model: onnx.ModelProto


def _keep_what_pays_whole(
    g: Graph, chosen: list[_Choice], decisions: list[Decision], deadline: float = math.inf
) -> _Whole | None:
    """Run the whole model as rewritten against the original, and drop the chosen group
    that won by the least until it is not slower (MIN_WHOLE_SPEEDUP) and computes the
    same values. Each group won alone, on its subgraph; inside the whole model, the
    traffic between a TcKernel and onnxruntime's kernels around it can undo a small win
    (the small MLP3 of the demo measured 0.74x with one of its layer pairs fused). A
    kept set is never cached as a win: this race is the check of cached group decisions,
    so every optimize races what it keeps (a DLRM model ran 0.61x on a cached verdict
    taken under load). What the races dropped is remembered (kept.py): optimizing the
    same model and groups again starts from the set kept last time, and keeping nothing
    races nothing. A race whose rounds never agree drops every group: nothing confirms
    them. Skipped where a graph input has no static shape (no sample can be made). Past
    the `deadline`, a losing race drops every group at once (each race of a big model
    takes seconds). Returns the speedup of the whole model as kept and that model, or
    None when it was not measured."""
    samples = _sample_feeds(g) if chosen else []
    if chosen and None in samples:
        log.debug("the whole model is not measured: an input has no static shape or is too large")
    if not chosen or None in samples:
        return None
    base = _base(g)
    memory = kept.key(base.model, [(c.group.nodes, c.attrs.kernel_key) for c in chosen],
                      _context_key())  # fmt: skip
    dropped, past = _drop_remembered(memory, chosen, decisions)
    steady = True
    while chosen:
        pairs = [(c.group, c.attrs) for c in chosen]
        log.debug("measuring the whole model with %s", _plural(len(chosen), "group"))
        rewritten = rewrite(base.model, pairs)
        known = _race_samples(base, rewritten, samples)  # type: ignore[arg-type]
        log.debug("whole model: %s", _ran(known))
        if _confirmed(known):
            if steady and not known.get("unsteady"):
                kept.store(memory, [c.group.nodes for c in chosen], dropped, past)
            return _Whole(_verdict(known), rewritten)
        worst, why = _worst(chosen, decisions, known, deadline)
        steady = steady and why != _UNSTEADY_WHOLE
        past = _now().budget_s if why == OVER_BUDGET else past
        for c, said in worst:
            _drop(c, said, chosen, decisions)
            dropped[c.group.nodes] = said
    if steady:
        kept.store(memory, [], dropped, past)
    return None


def _drop_remembered(
    memory: str, chosen: list[_Choice], decisions: list[Decision]
) -> tuple[dict[kept.Nodes, str], float | None]:
    """Drop what the last optimize of the same model and groups dropped, as it said why
    (nothing under remeasure, or where nothing or something else is remembered, or drops
    past a budget smaller than this optimize's), and the budget those drops ran out of."""
    last = None if _now().remeasure else kept.recall(memory)
    nodes = {c.group.nodes for c in chosen}
    if last is None or not last.stands(_now().budget_s):
        return {}, None
    if last.kept | set(last.dropped) != nodes or last.kept & set(last.dropped):
        return {}, None
    for c in [c for c in chosen if c.group.nodes in last.dropped]:
        _drop(c, last.dropped[c.group.nodes], chosen, decisions)
    log.debug("whole model: %s as the last optimize kept", _plural(len(chosen), "group"))
    return dict(last.dropped), last.budget_s


def _drop(c: _Choice, why: str, chosen: list[_Choice], decisions: list[Decision]) -> None:
    decisions[c.decision] = replace(decisions[c.decision], fused=False, why=why)
    chosen.remove(c)


def _confirmed(known: Mapping[str, Any]) -> bool:
    """Whether a whole-model race says the model is not slower (MIN_WHOLE_SPEEDUP): its
    median where the rounds agree; else the worst round of its last try, where they
    never agreed (such a verdict is used, not remembered: a BERT export on a busy 2-core
    VM kept nothing while every round of its race won by 1.5x or more)."""
    decided = known.get("unsteady") or not known.get("why")
    return bool(decided) and _verdict(known) >= MIN_WHOLE_SPEEDUP


def _verdict(known: Mapping[str, Any]) -> float:
    """A whole-model race's speedup: its median where the rounds agree, else the worst
    round of its last try."""
    return known.get("worst", 0.0) if known.get("unsteady") else known.get("ratio", 0.0)


def _ran(known: Mapping[str, Any]) -> str:
    return known.get("why") or f"{known.get('ratio', 0.0):.2f}x"


def _worst(
    chosen: list[_Choice], decisions: list[Decision], known: Mapping[str, Any], deadline: float
) -> tuple[list[tuple[_Choice, str]], str]:
    """The groups a losing whole-model race drops, each with why, and the kind of drop:
    every group where the rounds never agreed (_UNSTEADY_WHOLE: not remembered) or past
    the budget (OVER_BUDGET: remembered with it); else the one that won by the least
    (""). A loss in every round whose rounds disagreed on by how much is a loss."""
    ran = _ran(known)
    if "spread" in known:  # no verdict at all, not even a loss in every round
        return [(c, f"{_UNSTEADY_WHOLE} ({known['spread']})") for c in chosen], _UNSTEADY_WHOLE
    if _clock() >= deadline:
        return [(c, f"{_DROPPED} {ran}, past the budget") for c in chosen], OVER_BUDGET
    why = f"{_DROPPED} {ran}"
    return [(min(chosen, key=lambda c: _won_by(decisions[c.decision])), why)], ""


_DROPPED = "dropped: the whole model with it ran"


def _won_by(d: Decision) -> float:
    return d.ort_us / d.fused_us if d.ort_us and d.fused_us else 0.0


def _sample_feeds(g: Graph) -> list[dict[str, np.ndarray] | None]:
    """The model's feeds at each round of sample sizes (one round where it has no
    symbolic dimensions)."""
    dyn = _DYNAMIC.get()
    return [_model_feeds(x) for x in (dyn.sample_graphs() if dyn else [g])]


def _race_samples(
    base: Graph, rewritten: onnx.ModelProto, samples: Sequence[dict[str, np.ndarray]]
) -> dict[str, Any]:
    """The whole-model race at each round of sample sizes, until one is not confirmed
    (its outcome then); confirmed at all, the smallest speedup."""
    confirmed = []
    for feeds in samples:
        fed = dict(feeds)
        known = _race(*_fed_models(base, rewritten, fed), fed)
        log.debug("whole model at inputs %s: %s", _feed_shapes(feeds), _ran(known))
        if not _confirmed(known):
            return known
        confirmed.append(known)
    out = dict(min(confirmed, key=_verdict))
    if any(k.get("unsteady") for k in confirmed):
        out.update(unsteady=True, worst=_verdict(out))
    return out


def _feed_shapes(feeds: Mapping[str, np.ndarray]) -> str:
    return ", ".join(f"{k} {'x'.join(map(str, v.shape))}" for k, v in feeds.items())


def _model_feeds(g: Graph) -> dict[str, np.ndarray] | None:
    """Sample values for the model's runtime inputs (valid Gather indices), or None where
    an input has no static shape or the samples would be too large (not measured)."""
    runtime = [v for v in g.graph_inputs if v not in g.constants and v not in g.defaults]
    if any(v not in g.types for v in runtime):
        return None
    try:
        return _samples(g, runtime, _index_extents(g, range(len(g.model.graph.node))))
    except _TooLarge:
        return None


def _fed_models(
    g: Graph, rewritten: onnx.ModelProto, feeds: dict[str, np.ndarray]
) -> tuple[onnx.ModelProto, onnx.ModelProto]:
    """The user's model (g.original) and the rewritten one with big Gather tables made
    inputs (and added to `feeds`), as in _subgraph_models: serializing them into two
    sessions cost seconds. The baseline is the user's model, not the simplified g.model
    it was rewritten from: with its batch normalizations folded (and its constants),
    light_inception_v2 ran 4-5% slower in onnxruntime, a handicap a kept set of groups
    could hide (it ran 0.90x, the race against the simplified model having said >= 1)."""
    original = _original(g)
    own = {t.name for t in original.graph.initializer}
    tables = {
        n.input[0]
        for n in g.model.graph.node
        if n.op_type == "Gather" and n.input[0] in g.constants and n.input[0] in own
        and g.constants[n.input[0]].nbytes >= _FED_BYTES
    }  # fmt: skip
    for v in tables:
        feeds[v] = np.asarray(g.constants[v])

    def fed(model: onnx.ModelProto) -> onnx.ModelProto:
        if not tables:
            return model
        graph = model.graph
        dtype_of = {t.name: t.data_type for t in graph.initializer}
        inputs = [*graph.input]
        inputs += [
            helper.make_tensor_value_info(v, dtype_of[v], list(feeds[v].shape))
            for v in sorted(tables)
            if v in dtype_of
        ]
        kept = [t for t in graph.initializer if t.name not in tables]
        out = helper.make_model(
            helper.make_graph(
                list(graph.node), graph.name, inputs, list(graph.output), kept,
                value_info=list(graph.value_info),
            ),
            opset_imports=list(model.opset_import),
            ir_version=model.ir_version,
        )  # fmt: skip
        return out

    return fed(original), fed(rewritten)


def _original(g: Graph) -> onnx.ModelProto:
    """The model as the user gave it (checked, symbolic dimensions pinned)."""
    return g.original if g.original is not None else g.model


# Operators that start a cluster; the others join the cluster of their producer.
_ANCHORS = frozenset({
    "MatMul", "Gemm", "Conv", "Gather", "Concat", "MaxPool", "AveragePool", "Softmax",
    "LogSoftmax", "LayerNormalization", "BatchNormalization",
})  # fmt: skip


def _clusters(g: Graph, group: Group) -> list[list[int]]:
    """The group's operator clusters: an anchor with the operators that follow it."""
    position = g.reach.position
    cluster_of: dict[int, int] = {}
    clusters: list[list[int]] = []
    for n in group.nodes:
        producers = [p for p in g.dag.predecessors(n) if p in cluster_of]
        if g.node(n).op_type not in _ANCHORS and producers:
            k = cluster_of[max(producers, key=position.__getitem__)]
        else:
            k = len(clusters)
            clusters.append([])
        clusters[k].append(n)
        cluster_of[n] = k
    return clusters


def _split(g: Graph, group: Group) -> list[Group]:
    """The parts to try when a group does not pay: its components; or its memory-bound
    clusters apart from its contractions (see _by_class); or two halves split between
    operator clusters (so a Gemm keeps its Relu)."""
    parts = components(g, group)
    if len(parts) > 1:
        return parts
    clusters = _clusters(g, group)
    if len(clusters) < 2:
        return []
    parts = _by_class(g, clusters)
    if parts:
        return parts
    half = len(clusters) // 2
    halves = [[n for c in clusters[:half] for n in c], [n for c in clusters[half:] for n in c]]
    if not all(is_convex(g, h) for h in halves):
        return []
    return [make_group(g, h) for h in halves]


def _by_class(g: Graph, clusters: Sequence[Sequence[int]]) -> list[Group]:
    """The memory-bound clusters and the compute-bound ones (contractions, convolutions)
    as two groups, where the group mixes both and each part is convex; else none."""
    compute = [c for c in clusters if cost.kind(g.node(c[0]).op_type) in cost.COMPUTE]
    memory = [c for c in clusters if c not in compute]
    parts = [[n for c in side for n in c] for side in (memory, compute)]
    if not all(parts) or not all(is_convex(g, p) for p in parts):
        return []
    return [make_group(g, p) for p in parts]


def _describe(g: Graph, group: Group) -> tuple[str, str]:
    ops = "+".join(g.node(n).op_type for n in group.nodes)
    shapes = ", ".join("x".join(map(str, g.types[v][1])) or "scalar" for v in group.outputs)
    return ops, shapes


def _evaluate(
    g: Graph, group: Group, force: bool, *, name: str, rates: cost.Rates | None = None
) -> tuple[Decision, _Compiled | None]:
    """The group's decision: an outcome remembered from an earlier optimize that is not a
    win (a loss, a race that never settled, the budget run out: neither compiled nor
    raced; before the cost model, which would split the group), predicted (cost model),
    or compiled and then measured, or recalled (a win remembered for its translation,
    which twin groups share: their value names differ, so their kernels do)."""
    ops, shapes = _describe(g, group)
    loss_key, known = _remembered(g, group, force)
    if known is not None and not _won(known):
        log.debug("%s (%s -> %s): remembered: %s", name, ops, shapes, known.get("why") or "a loss")
        return _decision(ops, shapes, known), None
    predicted = None if force or rates is None else _predicted(g, group, rates, name=name)
    if predicted:
        return Decision(ops, shapes, None, None, False, predicted), None
    try:
        made = _rows_translation(g, group, name)
        if isinstance(made, str):
            every = _every_size_translation(g, group, name)
            if isinstance(every, str):
                why = f"{_ONE_SIZE}: {made}; for every size: {every}"
                return Decision(ops, shapes, None, None, False, why), None
            return _for_every_size(g, group, force, known, loss_key, name=name, t=every)
        t, row_values = made
        compiled = _compile(g, group, name=name, sample=not force or _TUNING.get() is not None, t=t)
        if force:
            forced = Decision(ops, shapes, None, None, True, "forced")
            return forced, _as_rows(g, compiled, row_values, name)
        if known is None:  # else a win remembered (a twin's, perhaps): compiled, not raced
            known = _measured(g, compiled, name=name, what=f"{ops} -> {shapes}")
            known = _at_every_sample(compiled, row_values, known, name=name, what=ops)
        if loss_key is not None:  # a win replaces a loss
            _store_decision(loss_key, known)
        decision = _decision(ops, shapes, known)
        log.debug("%s: %s", name, verdict(decision))
        if not decision.fused:
            return decision, compiled
        made = _as_rows(g, compiled, row_values, name)
        lost = _in_chunks(made, row_values, name=name, what=ops)
        return (decision if lost is None else _decision(ops, shapes, lost)), made
    except TcError as e:  # a kernel of a rows group, for another size, included
        first = str(e).splitlines()[0]
        return Decision(ops, shapes, None, None, False, f"not compiled: {first}"), None


_ONE_SIZE = "not fused: it would serve one size of the symbolic dimensions"


def _every_size_translation(g: Graph, group: Group, name: str) -> tr.Translation | str:
    """The group translated with its symbolic dimensions as sizes (symbols.py), where that
    translation reads the same at sizes no sample has and the constants it reads are
    those of every size; else why not."""
    dyn = _DYNAMIC.get()
    assert dyn is not None  # a group with one size only where the model has symbols
    named = symbols.named_shapes(dyn, [*group.inputs, *group.outputs])
    if isinstance(named, str):
        return named
    t = _translate(g, group, name, named=named)
    try:
        other = _translate(dyn.other, group, name, named=named)
    except TcError:
        other = None
    if other is None or (other.source, other.inputs) != (t.source, t.inputs):
        return "its translation changes with the symbolic sizes"
    return rows.same_constants(dyn, t.inputs) or t


def _for_every_size(
    g: Graph,
    group: Group,
    force: bool,
    known: dict[str, Any] | None,
    loss_key: str | None,
    *,
    name: str,
    t: tr.Translation,
) -> tuple[Decision, _Compiled | None]:
    """A group for every size: one kernel (compiler.parametric_kernel) and kernels
    specialised to the samples, raced at every round of samples and at sizes no sample
    has; kept only where it wins at all."""
    ops, shapes = _describe(g, group)
    compiled = _specialised(_compile(g, group, name=name, sample=not force, t=t, every_size=True))
    if force:
        return Decision(ops, shapes, None, None, True, "forced, for every size"), compiled
    if known is None:  # else a win remembered: compiled, not raced
        known = _every_round(compiled, name=name, what=ops)
    if loss_key is not None:
        _store_decision(loss_key, known)
    decision = _decision(ops, shapes, known)
    log.debug("%s: %s", name, verdict(decision))
    return decision, compiled


def _specialised(compiled: _Compiled) -> _Compiled:
    """A node for every size with a kernel specialised to each round of samples (the
    native op runs it at exactly those sizes; every_size_at) and, where the samples span
    a range, another kernel for every size with its choices made midway (rows.middle; the
    op runs it at sizes nearer there than the largest samples; every_size_from), compiled
    into the cache."""
    dyn = _DYNAMIC.get()
    assert dyn is not None
    a = compiled.attrs
    fn = define_entry(a.source, a.entry)
    assert fn is not None  # a translation defines its entry
    symbol = {symbols.size_name(s): s for s in dyn.samples}
    names = fn.program_for({}).size_params
    if not names or not all(n in symbol for n in names):
        return compiled
    rounds = range(len(dyn.sample_graphs()))
    at = tuple(dict.fromkeys(tuple(dyn.pins(k)[symbol[n]] for n in names) for k in rounds))
    own, middle = (tuple(pins[symbol[n]] for n in names) for pins in (dyn.pins(0), dyn.middle()))
    a = replace(a, every_size_at=at, every_size_from=(own, middle) if middle != own else ())
    a = replace(a, kernel_key=kernel_key(a.attributes()))
    _prepare_node(make_tc_node("every", a), _stamp())
    return replace(compiled, attrs=a)


def _every_round(compiled: _Compiled, *, name: str, what: str) -> dict[str, Any]:
    """A node for every size raced at each round of samples, then at sizes no sample has:
    the first loss, with its sizes, else the first round's win."""
    dyn = _DYNAMIC.get()
    assert dyn is not None
    rounds = [(gk, dyn.describe_round(k)) for k, gk in enumerate(dyn.sample_graphs())]
    rounds.append((dyn.other, ", ".join(f"{s}={n}" for s, n in dyn.other_sizes.items())))
    if compiled.attrs.every_size_from:  # its other kernel for every size, where it chose
        rounds.append((dyn.middle_graph(), ", ".join(f"{s}={n}" for s, n in dyn.middle().items())))
    first: dict[str, Any] | None = None
    for gk, at in rounds:
        there = _measured(gk, compiled, name=name, what=f"{what} at {at}, for every size", at=at)
        if not _won(there):
            why = there.get("why") or _ratio_why(there.get("ratio", 0.0))
            return {**there, "why": f"{why} at {at}, for every size"}
        first = first or there
    assert first is not None
    return first


def _at_every_sample(
    compiled: _Compiled,
    found: rows.RowValues | None,
    known: dict[str, Any],
    *,
    name: str,
    what: str,
) -> dict[str, Any]:
    """A rows group that won at the first samples, raced at each other round of samples
    too (compiled for it): the first loss there, with its sizes, else the win. A DLRM
    export won 1.12x at batch 8 as one group and lost 0.74x at batch 1."""
    dyn = _DYNAMIC.get()
    if dyn is None or found is None or not found.values or not _won(known):
        return known
    for k, gk in enumerate(dyn.sample_graphs()[1:], start=1):
        t = _translate(gk, compiled.group, name, found)
        other = _compile(gk, compiled.group, name=name, sample=True, t=t)
        at = dyn.describe_round(k)
        there = _measured(gk, other, name=name, what=f"{what} at {at}")
        if not _won(there):
            why = there.get("why") or _ratio_why(there.get("ratio", 0.0))
            return {**there, "why": f"{why} at {at}"}
    return known


def _in_chunks(
    made: _Compiled, found: rows.RowValues | None, *, name: str, what: str
) -> dict[str, Any] | None:
    """A rows node that won at every round of samples, raced at the sizes no sample has
    (the model pinned there), which it runs in chunks of its sizes: the loss, with those
    sizes, or None. Sizes between the samples are what a user of a dynamic batch runs
    too."""
    dyn = _DYNAMIC.get()
    if dyn is None or found is None or not found.values:
        return None
    at = ", ".join(f"{s}={n}" for s, n in dyn.other_sizes.items())
    there = _measured(dyn.other, made, name=name, what=f"{what} at {at} in chunks")
    if _won(there):
        return None
    why = there.get("why") or _ratio_why(there.get("ratio", 0.0))
    return {**there, "why": f"{why} at {at}, in chunks"}


def _rows_translation(
    g: Graph, group: Group, name: str
) -> tuple[tr.Translation, rows.RowValues | None] | str:
    """The group's translation and, where the model has symbolic dimensions, which of its
    values lead with the rows (rows.py); or why it cannot serve every size: its values
    change otherwise, its translation changes with the sizes, or its rows depend on
    each other."""
    dyn = _DYNAMIC.get()
    if dyn is None:
        return _translate(g, group, name), None
    found = rows.row_values(dyn, group, group.outputs)
    if isinstance(found, str):
        return found
    t = _translate(g, group, name, found)
    if not found.values:
        return t, found
    try:
        other = _translate(dyn.other, group, name, found)
    except TcError:
        other = None
    if other is None or (other.source, other.inputs) != (t.source, t.inputs):
        return "its translation changes with the symbolic sizes"
    changed = rows.same_constants(dyn, t.inputs)
    if changed:
        return changed
    fn = define_entry(t.source, t.entry)
    assert fn is not None  # a translation defines its entry
    why = rows.separable(fn.program_for({}))
    return why if why else (t, found)


def _as_rows(g: Graph, compiled: _Compiled, found: rows.RowValues | None, name: str) -> _Compiled:
    """A fused group's node as a rows node (docs/onnx.md), where some of its values lead
    with a symbolic dimension: a kernel compiled for each sample size and for 1 row, each
    from the group translated for that many rows (a weight may be packed for one and
    not another), all taking the node's inputs."""
    dyn = _DYNAMIC.get()
    if dyn is None or found is None or not found.values:
        return compiled
    group, a = compiled.group, compiled.attrs
    sizes = dyn.row_sizes(found.symbols)
    made = {r: _translate_rows(g, dyn, group, name, found, r) for r in sizes}
    inputs, declare = _declared(g, made.values())
    sources = {r: _translate_rows(g, dyn, group, name, found, r, declare).source for r in sizes}
    added = {t.name: t for m in made.values() for t in m.initializers}
    first = {**declare, **rows.types_at(dyn, [*inputs, *a.outputs], found.symbols, sizes[0])}
    flags = tuple(len(found.symbols) * (v in found.values) for v in (*inputs, *a.outputs))
    a = replace(
        a, source=sources[sizes[0]], inputs=tuple(inputs), initializers=tuple(added.values()),
        input_dtypes=tuple(helper.np_dtype_to_tensor_dtype(np.dtype(declare[v][0]))
                           for v in inputs),
        input_shapes=tuple(tuple(first[v][1]) for v in inputs),
        output_shapes=tuple(tuple(first[v][1]) for v in a.outputs), row_sizes=sizes,
        row_tensors=flags,
        row_symbols=found.symbols,
        row_sources={r: text for r, text in sources.items() if text != sources[sizes[0]]},
    )  # fmt: skip
    a = replace(a, kernel_key=kernel_key(a.attributes()))
    _prepare_node(make_tc_node("rows", a), _stamp())
    return replace(compiled, attrs=a)


def _translate_rows(
    g: Graph,
    dyn: rows.Dynamic,
    group: Group,
    name: str,
    found: rows.RowValues,
    count: int,
    declare: Mapping[str, tr.ValueType] | None = None,
) -> tr.Translation:
    """The rows group translated for `count` rows."""
    values = {v for n in group.nodes for v in (*g.node(n).input, *g.node(n).output) if v}
    types = {**g.types, **rows.types_at(dyn, values, found.symbols, count)}
    return _translate(g, group, name, found, types=types, declare=declare)


def _declared(
    g: Graph, made: Iterable[tr.Translation]
) -> tuple[list[str], dict[str, tr.ValueType]]:
    """Every input of the translations in order of first use, with its type (a packed
    weight's from its array)."""
    inputs: list[str] = []
    declare: dict[str, tr.ValueType] = {}
    for t in made:
        packed = {p.name: numpy_helper.to_array(p) for p in t.initializers}
        for v in t.inputs:
            if v not in declare:
                inputs.append(v)
                declare[v] = (packed[v].dtype, packed[v].shape) if v in packed else g.types[v]
    return inputs, declare


def _measured(
    g: Graph, compiled: _Compiled, *, name: str, what: str, at: str = ""
) -> dict[str, Any]:
    """The compiled group's race against onnxruntime, from the cache when it was run
    before. Every outcome is remembered, a race that never settled included: it left the
    group with onnxruntime, which is never slower, and racing it again on every optimize
    spent the budget of a warm densenet121 (116 s). Only a steady race is a win (_won);
    --remeasure races again. `at` names the sizes of `g` where one node runs at several
    (a node for every size)."""
    key = f"{compiled.attrs.kernel_key}:{_context_key()}" + (f":{at}" if at else "")
    known = None if _now().remeasure else _known_decision(key)
    if compiled.unsampled:
        return {"why": f"not measured: {compiled.unsampled}"}
    if known is not None:
        log.debug("%s (%s): decision cache hit", name, what)
        return known
    log.debug("measuring %s (%s) against onnxruntime", name, what)
    known = _measure(g, compiled)
    _store_decision(key, known)
    return known


def _won(known: Mapping[str, Any]) -> bool:
    """A steady race at the speedup asked for (rounds that disagree are never a win, even
    recalled under a lower min_speedup: with noisy wins let in, the zoo's squeezenet and
    vgg19 kept marginal groups, 0.97x, and raced them on every warm optimize)."""
    steady = not known.get("why") and not known.get("unsteady")
    return steady and known.get("ratio", 0.0) >= _now().min_speedup


def _decision(ops: str, shapes: str, known: Mapping[str, Any]) -> Decision:
    why = known.get("why", "")
    reason = why or _ratio_why(known.get("ratio", 0.0))
    return Decision(ops, shapes, known.get("fused_us"), known.get("ort_us"), _won(known), reason)


def _translation_key(g: Graph, t: tr.Translation) -> str:
    """What a group's measurement depends on that is known before compiling: its TC text
    and the types of its inputs (the kernel key adds the options, which defining the
    program would cost: seconds over a big model's groups)."""
    added = {p.name: (p.data_type, tuple(p.dims)) for p in t.initializers}
    types = []
    for v in t.inputs:
        if v in added:
            types.append(repr(added[v]))
        elif v in g.constants:
            value = g.constants[v]
            types.append(repr((value.dtype.str, value.shape)))
        else:
            types.append(repr(g.types[v]))
    # Canonical text: twin groups (the same operators on the same types, at another place
    # in the model, so with other value names) share what was decided for either.
    text, names = canonical(t.source)
    return cc.cache_key("tc_graph group", text, names[t.entry], *types)


def _predicted(g: Graph, group: Group, rates: cost.Rates, *, name: str) -> str | None:
    """Why the cost model leaves the group uncompiled (see cost.verdict), or None."""
    p = cost.predict(g, group, rates, _clusters(g, group))
    log.debug("%s: predicted %.2fx (fused %.1f µs, onnxruntime %.1f µs)",
              name, p.ratio, p.fused_s * 1e6, p.ort_s * 1e6)  # fmt: skip
    if not p.mixed:
        return cost.verdict(p, _now().min_speedup, splittable=False)
    parts = _by_class(g, _clusters(g, group))
    apart = [cost.predict(g, part, rates, _clusters(g, part)) for part in parts]
    return cost.verdict(p, _now().min_speedup, splittable=bool(_split(g, group)), apart=apart)


def _calibration() -> cost.Rates | None:
    """The cost model's rates for this machine and these session settings (cached like
    the decisions), or None where a probe failed: then every group is measured."""
    try:
        return cost.rates(_context_key(), _probe, remeasure=_now().remeasure)
    except Exception as e:  # onnxruntime raises its own exception types
        log.warning("the cost model could not be calibrated (%s): every group is measured", e)
        return None


def _probe(model: onnx.ModelProto, fused: bool) -> tuple[Callable[[], object], Any]:
    """A calibration probe's call in onnxruntime and, if `fused`, as one TcKernel
    compiled and run as a group is (see cost.calibrate)."""
    g = Graph.from_model(model)
    feeds = _model_feeds(g) or {}
    if not fused:
        plain = external.session(model, _session_options(), ["CPUExecutionProvider"])
        return lambda: plain.run(None, feeds), None
    c = _compile(g, make_group(g, g.order), name="probe", sample=True)
    plain, ours = _sessions(*_subgraph_models(g, replace(c, feeds=feeds))[:2])
    return lambda: plain.run(None, feeds), lambda: ours.run(None, feeds)


def _ratio_why(ratio: float) -> str:
    """A measured group's reason: how much faster, or why that is not enough."""
    needed = _now().min_speedup
    if ratio >= needed:
        return f"{ratio:.2f}x faster"
    if ratio < 1:
        return f"{ratio:.2f}x, slower than onnxruntime"
    return f"{ratio:.2f}x, less than the {needed:.2f}x needed"


def _translate(
    g: Graph,
    group: Group,
    name: str,
    found: rows.RowValues | None = None,
    *,
    types: Mapping[str, tr.ValueType] | None = None,
    declare: Mapping[str, tr.ValueType] | None = None,
    named: Mapping[str, tuple[int | str, ...]] | None = None,
) -> tr.Translation:
    """The group's translation; a rows group's (`found`) declares its rows, with `types`
    where they are not the graph's (another number of rows); a group for every size
    declares its values' symbolic dimensions as sizes (`named`), and has no weights packed
    in panels (a kernel for every size has no outer-product form to read them)."""
    return tr.translate(
        [g.node(n) for n in group.nodes],
        types=g.types if types is None else types,
        constants=g.constants,
        outputs=group.outputs,
        name=name,
        opset=tr.opset_version(g.model),
        panel=0 if named else panel_width(machine.vector_unit()),
        rows=found.values if found else (),
        row_dims=len(found.symbols) if found and found.symbols else 1,
        declare=declare,
        named=named,
    )


def _compile(
    g: Graph,
    group: Group,
    *,
    name: str,
    sample: bool,
    t: tr.Translation | None = None,
    every_size: bool = False,
) -> _Compiled:
    """The group translated (unless `t` is its translation) and compiled, for `g`'s sizes
    or, with `every_size`, once for every size (its choices made at `g`'s). With `sample`,
    its runtime inputs get sample values for measuring (unless they would take more than
    _SAMPLE_MAX_BYTES); otherwise, or then, the compiler gets placeholders, which cost no
    memory: it reads only shapes."""
    t = t or _translate(g, group, name)
    added = {p.name: numpy_helper.to_array(p) for p in t.initializers}
    runtime = [v for v in t.inputs if v not in added and v not in g.constants]
    feeds: dict[str, np.ndarray] = {}
    unsampled = ""
    if sample:
        try:
            # Only the tuner runs kernels while compiling; a measurement makes its
            # samples itself, and a cached decision needs none (they took most of a
            # warm optimize).
            _check_sample_size(g, runtime)
            if _TUNING.get():
                feeds = _samples(g, runtime, _index_extents(g, group.nodes))
        except _TooLarge as e:
            unsampled = str(e)
    values: list[np.ndarray] = []
    for v in t.inputs:
        if v in added:
            values.append(added[v])
        elif v in g.constants:
            values.append(np.asarray(g.constants[v]))
        elif v in feeds:
            values.append(feeds[v])
        else:
            dtype, shape = g.types[v]
            values.append(_placeholder(np.dtype(dtype), shape))
    fn = define_entry(t.source, t.entry)
    assert fn is not None  # a translation defines its entry
    bound = compiler.bind(fn, values)
    tuning = _TUNING.get()
    tuned = None if tuning is None else tuning.options(fn, values, "cpu")
    if every_size:
        kernel: Kernel | ParametricKernel = compiler.parametric_kernel(bound, tuned)
    else:
        kernel = compiler.kernel(bound, "cpu", tuned)
    out_shapes, out_dtypes = bound.output_shapes, bound.output_dtypes
    attrs = NodeAttrs(
        source=t.source,
        entry=t.entry,
        options=kernel.options.to_json(),
        kernel_key="",
        inputs=t.inputs,
        outputs=t.outputs,
        input_dtypes=tuple(helper.np_dtype_to_tensor_dtype(a.dtype) for a in values),
        input_shapes=tuple(tuple(a.shape) for a in values),
        output_dtypes=tuple(helper.np_dtype_to_tensor_dtype(d) for d in out_dtypes),
        output_shapes=tuple(tuple(s) for s in out_shapes),
        initializers=t.initializers,
        every_size=every_size,
    )
    attrs = replace(attrs, kernel_key=kernel_key(attrs.attributes()))
    cc.adopt(attrs.kernel_key, kernel.library, stamp=_stamp())
    return _Compiled(group, attrs, feeds, unsampled, runtime=tuple(runtime) if sample else ())


def _index_extents(g: Graph, nodes: Iterable[int]) -> dict[str, int]:
    """Runtime inputs used as Gather indices, and the extent they index: the sample
    values must be valid and spread, or the timing would measure one cached row. A
    Gather whose axis is out of range is skipped: it is never translated, and
    onnxruntime reports the invalid node itself."""
    out: dict[str, int] = {}
    for n in nodes:
        node = g.node(n)
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[0] in g.types:
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            shape = g.types[node.input[0]][1]
            if not shape:
                out[node.input[1]] = 1
            elif -len(shape) <= axis < len(shape):
                out[node.input[1]] = int(shape[axis])
    return out


class _TooLarge(Exception):
    """Sample inputs that would take too much memory (caught in this module)."""


def _check_sample_size(g: Graph, names: Sequence[str]) -> int:
    """The bytes samples of these runtime inputs take; _TooLarge past _SAMPLE_MAX_BYTES."""
    names = list(dict.fromkeys(names))
    total = sum(math.prod(g.types[v][1]) * np.dtype(g.types[v][0]).itemsize for v in names)
    if total > _SAMPLE_MAX_BYTES:
        raise _TooLarge(
            f"its sample inputs would take {total / 2**20:.0f} MiB "
            f"(the limit is {_SAMPLE_MAX_BYTES / 2**20:.0f} MiB)"
        )
    return total


def _samples(g: Graph, names: Sequence[str], indices: Mapping[str, int]) -> dict[str, np.ndarray]:
    """Sample values of runtime inputs of static types; _TooLarge where they would take
    more than _SAMPLE_MAX_BYTES in all, or the allocation fails."""
    names = list(dict.fromkeys(names))
    total = _check_sample_size(g, names)
    rng = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {}
    try:
        for v in names:
            dtype, shape = g.types[v]
            feeds[v] = _sample(rng, np.dtype(dtype), shape, indices.get(v))
    except MemoryError:
        raise _TooLarge(f"out of memory making sample inputs of {total / 2**20:.0f} MiB") from None
    return feeds


def _placeholder(dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """A zero-filled array that costs no memory until written: compiling reads only its
    shape and dtype. A big one is a private anonymous mapping that reserves nothing."""
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes < _MAPPED_BYTES:
        return np.zeros(shape, dtype)
    try:
        buffer = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE)
    except (OSError, OverflowError, ValueError) as e:
        raise TcError(
            f"an input of shape {list(shape)} ({dtype.name}, {nbytes} bytes) cannot even be "
            f"mapped: {e}",
            hint="check the model's declared input shapes",
        ) from None
    return np.frombuffer(buffer, dtype).reshape(shape)


def _sample(
    rng: np.random.Generator, dtype: np.dtype, shape: tuple[int, ...], extent: int | None
) -> np.ndarray:
    if dtype.kind in "iu":
        high = extent if extent is not None else 2
        return rng.integers(0, max(1, high), size=shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _subgraph_models(
    g: Graph, c: _Compiled
) -> tuple[onnx.ModelProto, onnx.ModelProto, dict[str, np.ndarray]]:
    """The group as onnxruntime runs it, as one TcKernel node, and the feeds of both.
    Big Gather tables are fed, not embedded: copying them into two models cost seconds,
    and no kernel of either side prepacks a table (weights stay embedded: onnxruntime
    prepacks those)."""
    group, attrs = c.group, c.attrs
    nodes = [g.node(n) for n in group.nodes]
    tables = {n.input[0] for n in nodes if n.op_type == "Gather"}
    feeds = dict(c.feeds) or _samples(g, c.runtime, _index_extents(g, group.nodes))
    for v in sorted(tables):
        if v in g.constants and v not in feeds and g.constants[v].nbytes >= _FED_BYTES:
            feeds[v] = np.asarray(g.constants[v])

    def value_info(name: str) -> onnx.ValueInfoProto:
        dtype, shape = g.types[name]
        return helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), list(shape)
        )

    def constant_inputs(names: Sequence[str]) -> list[onnx.TensorProto]:
        added = {p.name: p for p in attrs.initializers}
        out = []
        for v in dict.fromkeys(names):
            if v in added:
                out.append(added[v])
            elif v in g.external_tensors and v not in feeds:
                out.append(g.external_tensors[v])  # its data stays in its file
            elif v in g.constants and v not in feeds:
                out.append(numpy_helper.from_array(np.asarray(g.constants[v]), v))
            elif v in g.defaults and v not in feeds:
                out.append(g.defaults[v])  # read by the group, not by the kernel
        return out

    inputs = [value_info(v) for v in feeds]
    outputs = [value_info(v) for v in group.outputs]
    reads = [v for n in nodes for v in n.input if v]
    opsets = list(g.model.opset_import)
    original = helper.make_model(
        helper.make_graph(nodes, "group", inputs, outputs, constant_inputs(reads)),
        opset_imports=opsets,
        ir_version=g.model.ir_version,
    )
    fused = helper.make_model(
        helper.make_graph(
            [make_tc_node("tc_fused", attrs)],
            "fused",
            inputs,
            outputs,
            constant_inputs(attrs.inputs),
        ),
        opset_imports=[*opsets, helper.make_opsetid(TC_DOMAIN, TC_DOMAIN_VERSION)],
        ir_version=g.model.ir_version,
    )
    return original, fused, feeds


def _measure(g: Graph, c: _Compiled) -> dict[str, Any]:
    try:
        original, fused, feeds = _subgraph_models(g, c)
    except _TooLarge as e:  # the samples did not fit in memory after all
        return {"why": f"not measured: {e}"}
    return _race(original, fused, feeds)


def _race(
    original: onnx.ModelProto, fused: onnx.ModelProto, feeds: Mapping[str, np.ndarray]
) -> dict[str, Any]:
    """Both models in onnxruntime under the user's session settings (the fused one with
    the native library): their outputs compared, then timed in interleaved rounds. Rounds
    that disagree (see MAX_SPREAD) are run again; if they never agree, the result says so
    ("unsteady", with the "spread" and the "worst" round of the last try): the group
    stays with onnxruntime (a whole model may still be confirmed, see _confirmed). Rounds
    that disagree but lose in every one are a loss at once (marked "unsteady": never a
    win), and a clear loss stops racing early (_clearly_lost)."""
    try:
        plain, ours = _sessions(original, fused)
        want = plain.run(None, dict(feeds))
        got = ours.run(None, dict(feeds))
    except Exception as e:  # onnxruntime raises its own exception types
        return {"why": f"did not run: {str(e).splitlines()[0]}"}
    differ = mismatch(got, want)
    if differ is not None:
        log.debug("the fused side's %s", differ)
        return {"why": "outputs differ from onnxruntime's"}
    calls = {
        "ort": lambda: plain.run(None, dict(feeds)),
        "fused": lambda: ours.run(None, dict(feeds)),
    }
    spread = math.inf
    for attempt in range(TRIES):
        times = _rounds(calls)
        ratios = [o / f for o, f in zip(times["ort"], times["fused"], strict=True)]
        spread = timing.spread(ratios)
        # Rounds that disagree only on how much the fused side loses still agree that
        # it loses: a verdict at once, but not one to remember.
        lost = max(ratios) < _now().min_speedup
        if spread <= MAX_SPREAD or lost:
            known = {
                "fused_us": statistics.median(times["fused"]) * 1e6,
                "ort_us": statistics.median(times["ort"]) * 1e6,
                "ratio": statistics.median(ratios),
            }
            return known if spread <= MAX_SPREAD else {**known, "unsteady": True}
        log.debug("try %d: the rounds disagree (spread %.0f%%)", attempt + 1, spread * 100)
    said = f"rounds spread {spread:.0%}, over {MAX_SPREAD:.0%}, in {TRIES} tries"
    worst = float(min(ratios))
    return {"why": f"{_UNSTEADY} ({said})", "unsteady": True, "spread": said, "worst": worst}


def _sessions(original: onnx.ModelProto, fused: onnx.ModelProto) -> tuple[Any, Any]:
    """onnxruntime sessions of both models under the user's settings (the fused one with
    the native library)."""
    cpu, base_dir = ["CPUExecutionProvider"], _BASE_DIR.get()
    plain = external.session(original, _session_options(), cpu, base_dir=base_dir)
    so = _session_options()
    ort.register(so)
    return plain, external.session(fused, so, cpu, base_dir=base_dir)


_UNSTEADY = "not measured: the timings disagree"
_UNSTEADY_WHOLE = "dropped: the whole model could not be timed steadily"


def _rounds(calls: Mapping[str, Callable[[], object]]) -> dict[str, list[float]]:
    """Up to ROUNDS interleaved rounds of both sides (see timing.rounds), within the
    budget, fewer for a clear loss."""
    return timing.rounds(calls, ROUNDS, ROUND_S, check=_within_budget, settled=_clearly_lost)


def _clearly_lost(times: timing.Times) -> bool:
    """After EARLY_ROUNDS, a fused side slower by CLEAR_LOSS in every round so far has
    lost: most groups of a CNN lose, and the rounds left would only say by how much."""
    ratios = [o / f for o, f in zip(times["ort"], times["fused"], strict=True)]
    return len(ratios) >= EARLY_ROUNDS and max(ratios) < CLEAR_LOSS


def _session_options() -> Any:
    """Fresh onnxruntime SessionOptions with the user's settings (those that change how
    fast a model runs) and their thread count: the measured sessions run as theirs will.
    A copy, so the user's own object is never changed (the library is registered on the
    fused side's copy). Its idle intra-op threads spin for at most SPIN_US: the race
    runs two sessions in turn, and onnxruntime's threads went on spinning for 50-200 ms
    after one session's turn, taking the cores from the other's (two identical
    squeezenet sessions on two cores: rounds of 5.3 to 16.9 ms, their ratios spread
    100-236%; bounded, 5.2-5.3 ms and 1-2%). Between the calls of one turn, as between
    a user's back-to-back runs, they still spin: stopping them at the end of every run
    (session.force_spinning_stop) had cost MLP3's onnxruntime side 40 of its 50 us."""
    import onnxruntime as onnxrt

    m = _now()
    so = onnxrt.SessionOptions()
    if m.sess_options is not None:
        for name in _SESSION_SETTINGS:
            setattr(so, name, getattr(m.sess_options, name))
    if m.threads is not None:
        so.intra_op_num_threads = m.threads
    so.add_session_config_entry("session.intra_op.spin_duration_us", str(SPIN_US))
    return so


SPIN_US = 1000


def _context_key() -> str:
    """What besides the kernel changes a measurement, as one hash: tc_graph's code,
    onnxruntime's version, the session settings (threads above all; the default is one
    per core), and the compiler, CPU model and ISA (cc.compiler_identity names the CPU
    and its features, vector_unit what the kernels use)."""
    import onnxruntime as onnxrt

    so = _session_options()
    settings = {name: str(getattr(so, name)) for name in _SESSION_SETTINGS}
    return cc.cache_key(
        "tc_graph decision",
        code_version(),
        f"onnxruntime {onnxrt.__version__}",
        json.dumps(settings, sort_keys=True),
        f"cores {os.cpu_count()}",
        repr(machine.vector_unit()),
    )


def _known_decision(key: str) -> dict[str, Any] | None:
    """The cached measurement of a key, or None when absent or malformed (a damaged or
    hand-edited file is measured again, never trusted nor a crash: issue 12). A valid one
    is what _race returns: a reason it was not measured, or the times and their ratio."""
    known = memo.load(_DECISIONS).get(key)
    if not isinstance(known, dict):
        return None
    if "why" in known:
        return known if isinstance(known["why"], str) and known["why"] else None
    times = [known.get(k) for k in ("fused_us", "ort_us", "ratio")]
    return known if all(_positive(t) for t in times) else None


def _positive(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf


def _store_decision(key: str, value: Mapping[str, Any]) -> None:
    memo.store(_DECISIONS, key, dict(value))


def clear_decisions() -> bool:
    """Forget every cached decision and remembered whole-model race (`tc-graph cache
    clear`); True if there were some."""
    races = kept.clear()
    return memo.clear(_DECISIONS, "the cached decisions") or races


def setattr_decisions(
    model: onnx.ModelProto, decisions: Sequence[Decision], *, summary: str = ""
) -> None:
    """Record the report in the model's metadata: the rows, and the summary line the
    command line prints."""
    entry = model.metadata_props.add()
    entry.key = "tc_graph.decisions"
    entry.value = json.dumps([d.__dict__ for d in decisions])
    if summary:
        entry = model.metadata_props.add()
        entry.key = SUMMARY_KEY
        entry.value = summary


SUMMARY_KEY = "tc_graph.summary"
_RATIO = re.compile(r"^\d+\.\d+x, ")


def verdict(d: Decision) -> str:
    """A group's decision as the report words it."""
    return f"fused ({d.why})" if d.fused else f"left to onnxruntime: {d.why}"


def _reason_kind(why: str) -> str:
    """A reason without its measured ratio or spread, so that like reasons count together."""
    predicted = cost.reason_kind(why)
    if predicted:
        return predicted
    if why.startswith(_DROPPED):
        return "the whole model ran slower with them"
    if why == OVER_BUDGET:
        return f"{why} (a larger budget_s, or --budget, decides more)"
    for unsteady in (_UNSTEADY, _UNSTEADY_WHOLE):
        if why.startswith(unsteady):
            hint = "a busy machine? optimize again when it is quiet, with --remeasure"
            return f"{unsteady} ({hint})"
    return _RATIO.sub("", why)


def summary(
    decisions: Sequence[Decision],
    untranslated: Sequence[tuple[str, str]],
    *,
    whole: float | None,
    force: bool = False,
    nodes: int = 0,
) -> str:
    """One line: how many groups were fused and how much faster the whole model ran on
    the sample inputs, or, when none was, the most common reason. A group split before
    measuring is a row of the report, not a group: its parts are."""
    decisions = [d for d in decisions if not d.why.startswith(cost.SPLIT)]
    fused = sum(d.fused for d in decisions)
    if fused:
        head = f"{fused} of {_plural(len(decisions), 'group')} fused"
        if force:
            return f"{head} (forced: not measured)"
        if whole is None:
            return f"{head}; the whole model was not measured (its inputs are dynamic or too large)"
        return f"{head}, {whole:.2f} times faster on the sample inputs"
    if decisions:
        kinds = Counter(_reason_kind(d.why) for d in decisions)
        total = _plural(len(decisions), "group")
    elif untranslated:
        kinds = Counter(reason for _, reason in untranslated)
        total = _plural(len(untranslated), "node")
    elif nodes:
        return (f"nothing fused: no group computes anything ({_plural(nodes, 'node')}: "
                "copies and constants only)")  # fmt: skip
    else:
        return "nothing fused: the model has no nodes"
    reason, count = kinds.most_common(1)[0]
    return f"nothing fused: {reason} ({count} of {total})"


def _pin_hint(g: Graph, untranslated: Sequence[tuple[str, str]]) -> str:
    """Where nodes stayed for want of a static type and the model has symbolic
    dimensions: how to pin them (a dynamic batch otherwise fuses nothing)."""
    names = symbolic_dims(g.model.graph)
    if not names or not any("no static" in why for _, why in untranslated):
        return ""
    pins = ", ".join(f"{n}=N" for n in names)
    return f"; symbolic dimensions {', '.join(names)}: pin them with --fix-shape {pins}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def untranslated(
    g: Graph, translatable: Callable[[onnx.NodeProto], str | None]
) -> list[tuple[str, str]]:
    """(node, reason) for every node no group can hold: an op without a translation (or
    not with these types and attributes), a value of dynamic shape, a constant. Nodes
    in groups that lost the measurement are in the decisions instead."""
    out = []
    for index, reason in excluded(g, translatable=translatable).items():
        node = g.node(index)
        label = f"{node.op_type} '{node.name}'" if node.name else f"{node.op_type} #{index}"
        out.append((label, reason))
    return out


def print_report(
    decisions: Sequence[Decision],
    *,
    file: Any,
    untranslated: Sequence[tuple[str, str]] = (),
    summary: str = "",
) -> None:
    """One line per group: ops, output shapes, fused and onnxruntime time, decision;
    then the nodes left to onnxruntime untranslated, a line per reason, so users see
    what to expect of a model; then the summary line."""

    def us(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    print(f"{'group':<40} {'outputs':<22} {'fused µs':>9} {'ORT µs':>9}  decision", file=file)
    for d in decisions:
        ops = d.ops if len(d.ops) <= 40 else d.ops[:37] + "..."
        shapes = d.shapes if len(d.shapes) <= 22 else d.shapes[:19] + "..."
        print(
            f"{ops:<40} {shapes:<22} {us(d.fused_us):>9} {us(d.ort_us):>9}  {verdict(d)}",
            file=file,
        )
    if untranslated:
        print(f"\nnot translated ({_plural(len(untranslated), 'node')}):", file=file)
        for line in _untranslated_lines(untranslated):
            print(f"  {line}", file=file)
    if summary:
        print(f"\n{summary}", file=file)


def _untranslated_lines(untranslated: Sequence[tuple[str, str]], named: int = 3) -> list[str]:
    """A line per reason, in order of first appearance: the node alone, or a count and
    the first `named` nodes (a DenseNet export has 836 ConstantOfShape nodes)."""
    by_reason: dict[str, list[str]] = {}
    for label, reason in untranslated:
        by_reason.setdefault(reason, []).append(label)
    lines = []
    for reason, labels in by_reason.items():
        if len(labels) == 1:
            lines.append(f"{labels[0]}: left to onnxruntime: {reason}")
            continue
        names = ", ".join(labels[:named])
        more = f" and {len(labels) - named} more" if len(labels) > named else ""
        lines.append(f"{len(labels)} nodes, left to onnxruntime: {reason}: {names}{more}")
    return lines


@contextlib.contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[], None]]:
    if not show or total == 0:
        yield lambda: None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc="compiling and measuring groups", unit="group") as bar:
        yield lambda: bar.update(1)


def _tc_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.domain == TC_DOMAIN and n.op_type == TC_OP]


def read_model(model: str | os.PathLike[str] | onnx.ModelProto) -> onnx.ModelProto:
    """The model's nodes and attributes (its external data stays in its files), or a
    TcError that names the file."""
    if isinstance(checked_model_argument(model), onnx.ModelProto):
        proto, name = model, "the ModelProto"
    else:
        model_file(model)
        name = repr(os.fspath(model))
        try:
            # Only nodes are read: external data stays where it is (onnxruntime maps it).
            proto = onnx.load(os.fspath(model), load_external_data=False)
        except Exception as e:  # OSError, protobuf's DecodeError, a checker ValidationError
            raise TcError(f"'{os.fspath(model)}' is not a readable ONNX model: {e}") from None
    if not proto.graph.output:
        # An empty file parses as an empty ModelProto.
        raise TcError(f"{name} is not an ONNX model: it has no graph outputs")
    return proto


# Kernels specialised to sizes one node may have (ort_op.c: TC_MAX_SPECIAL).
MAX_SPECIALISED = 64


@dataclass(frozen=True)
class _NodeSpec:
    """A TcKernel node's attributes, checked: what prepare compiles."""

    key: str
    source: str
    entry: str
    options: MappingOptions
    dtypes: tuple[tuple[int, ...], tuple[int, ...]]  # inputs, outputs (ONNX codes)
    shapes: tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...]]
    rows: tuple[int, ...] = ()  # a rows node's sizes (row_sizes), the first the shapes'
    row_tensors: tuple[int, ...] = ()
    row_sources: Mapping[int, str] = field(default_factory=dict)  # sizes with their own
    every_size: bool = False  # one kernel for every size; the shapes are its sample's
    every_size_at: tuple[int, ...] = ()  # its specialised kernels' sizes, one after another
    every_size_from: tuple[int, ...] = ()  # where its kernels for every size chose, likewise

    def variants(self) -> list[_NodeSpec]:
        """One spec per kernel the node needs: itself, or a rows node's one per size, under
        its variant key, with the rows its flagged tensors lead with; a node for every size
        adds its specialised kernels and its other kernels for every size."""
        if self.every_size:
            return [self, *self.specialised(), *self.others()]
        if not self.rows:
            return [self]
        first = (0, len(self.shapes[0]))

        def side(k: int, rows: int) -> tuple[tuple[int, ...], ...]:
            flags = self.row_tensors[first[k] :]
            return tuple(
                (rows, *[1] * (flags[i] - 1), *s[flags[i] :]) if flags[i] else s
                for i, s in enumerate(self.shapes[k])
            )

        return [
            replace(self, key=variant_key(self.key, r), source=self.row_sources.get(r, self.source),
                    shapes=(side(0, r), side(1, r)), rows=(), row_sources={})
            for r in self.rows
        ]  # fmt: skip

    def specialised(self) -> list[_NodeSpec]:
        """A node for every size's kernels of fixed shapes, one per list of sizes in
        every_size_at (the kernel's sizes in the order of its program's), under
        special_key, with the shapes those sizes give its inputs and outputs."""
        return [
            replace(self, key=special_key(self.key, k), every_size=False, every_size_at=(),
                    every_size_from=(), shapes=shapes)
            for k, shapes in enumerate(self._shapes_at(EVERY_SIZE_AT, self.every_size_at))
        ]  # fmt: skip

    def others(self) -> list[_NodeSpec]:
        """A node for every size's other kernels for every size, under other_key, each with
        the shapes of the sizes where its choices are made (every_size_from after the
        node's own)."""
        shapes = self._shapes_at(EVERY_SIZE_FROM, self.every_size_from)[1:]
        return [
            replace(self, key=other_key(self.key, k), every_size_at=(), every_size_from=(),
                    shapes=at)
            for k, at in enumerate(shapes)
        ]  # fmt: skip

    def _shapes_at(
        self, name: str, at: tuple[int, ...]
    ) -> list[tuple[tuple[tuple[int, ...], ...], ...]]:
        """The inputs' and outputs' shapes at each list of sizes in `at` (attribute `name`:
        the kernel's sizes in the order of its program's, one list after another)."""
        if not at:
            return []
        fn = define_entry(self.source, self.entry)
        if fn is None:
            raise TcError(f"TcKernel '{self.key}' names entry '{self.entry}', which its source "
                          "does not define")  # fmt: skip
        names = fn.program_for({}).size_params
        lists, left = divmod(len(at), max(1, len(names)))
        if left or lists > MAX_SPECIALISED:
            raise TcError(f"TcKernel '{self.key}': {name} is not a whole number of lists of "
                          f"its {len(names)} sizes, at most {MAX_SPECIALISED}")  # fmt: skip
        out = []
        for k in range(lists):
            sizes = dict(zip(names, at[k * len(names) : (k + 1) * len(names)], strict=True))
            dims = [fn.checked.tensors[n].dims or () for n in fn.checked.inputs]
            inputs = tuple(
                tuple(sizes[d.name] if isinstance(d, ir.Size) else int(d.value) for d in ds)
                for ds in dims
            )
            arrays = [_placeholder(np.dtype(helper.tensor_dtype_to_np_dtype(t)), s)
                      for t, s in zip(self.dtypes[0], inputs, strict=True)]  # fmt: skip
            outputs = tuple(tuple(s) for s in compiler.bind(fn, arrays).output_shapes)
            out.append((inputs, outputs))
        return out


def _stamp() -> str:
    """Which tc_graph and compiler build a node's kernel (kept in its cache entry): a
    node key names the computation only, so another build must not reuse the entry."""
    return cc.cache_key("tc_graph TcKernel build", code_version())


def _node_error(node: onnx.NodeProto, what: str) -> TcError:
    return TcError(
        f"TcKernel node '{node.name}' {what}",
        hint="re-run tc_graph.optimize on the original model; a TcKernel node's attributes "
        "are written by tc_graph and must not be edited",
    )


def _node_spec(node: onnx.NodeProto) -> _NodeSpec:
    """The node's attributes with every rule of docs/onnx.md checked (TcError otherwise):
    types, lengths, dtype codes, and the kernel_key the other attributes give."""
    found = {a.name: a for a in node.attribute}
    raw: dict[str, Any] = {}
    for name in ("kernel_key", *KEY_STRINGS):
        a = found.get(name)
        if a is None or a.type != onnx.AttributeProto.STRING:
            raise _node_error(node, f"lacks the string attribute '{name}'")
        raw[name] = a.s
    for name in KEY_INTS:
        a = found.get(name)
        if a is None or a.type != onnx.AttributeProto.INTS:
            raise _node_error(node, f"lacks the ints attribute '{name}'")
        raw[name] = list(a.ints)
    for name in (*ROW_INTS, EVERY_SIZE, EVERY_SIZE_AT, EVERY_SIZE_FROM):
        a = found.get(name)
        if a is not None:
            raw[name] = list(a.ints)
    if len({name in raw for name in ROW_INTS}) > 1:  # the key reads both
        raise _node_error(node, "has malformed row_sizes and row_tensors attributes")
    if raw.get(EVERY_SIZE, [1]) != [1] or (EVERY_SIZE in raw and "row_sizes" in raw):
        raise _node_error(node, f"has a malformed {EVERY_SIZE} attribute (it must be [1], "
                          "on a node without row_sizes)")  # fmt: skip
    for name in (EVERY_SIZE_AT, EVERY_SIZE_FROM):
        if name in raw and (EVERY_SIZE not in raw or any(n < 0 for n in raw[name])):
            raise _node_error(node, f"has {name} without {EVERY_SIZE}, or a negative size")
    for r in raw.get("row_sizes", [])[1:]:
        a = found.get(row_source(r))
        if a is not None and a.type == onnx.AttributeProto.STRING:
            raw[row_source(r)] = a.s
    text = {}
    for name in ("kernel_key", *KEY_STRINGS):
        try:
            text[name] = raw[name].decode("utf-8")
        except UnicodeDecodeError:
            raise _node_error(node, f"has invalid {name}: it is not UTF-8 text") from None
    if kernel_key(raw) != text["kernel_key"]:
        raise _node_error(
            node,
            f"has kernel_key {text['kernel_key'][:80]!r}, but its attributes give "
            f"{kernel_key(raw)!r}: the key must name the kernel's own source, entry, options, "
            "dtypes and shapes",
        )
    try:
        options = MappingOptions.from_json(text["options"])
    except (TcError, ValueError, TypeError, KeyError) as e:
        why = e.message if isinstance(e, TcError) else str(e)
        raise _node_error(node, f"has invalid options: {why}") from None
    sides = [
        _side(node, raw, side, count)
        for side, count in (("input", len(node.input)), ("output", len(node.output)))
    ]
    spec = _NodeSpec(
        key=text["kernel_key"],
        source=text["source"],
        entry=text["entry"],
        options=options,
        dtypes=(sides[0][0], sides[1][0]),
        shapes=(sides[0][1], sides[1][1]),
        every_size=EVERY_SIZE in raw,
        every_size_at=tuple(raw.get(EVERY_SIZE_AT, ())),
        every_size_from=tuple(raw.get(EVERY_SIZE_FROM, ())),
    )
    return _with_rows(node, spec, raw) if "row_sizes" in raw else spec


def _with_rows(node: onnx.NodeProto, spec: _NodeSpec, raw: Mapping[str, Any]) -> _NodeSpec:
    """A rows node's spec, its row_sizes and row_tensors checked as the native op checks
    them: sizes that descend to 1, the first the shapes'; per input and output, how many
    leading dimensions the rows span (0, or the same count for all: the shapes then have
    the first size and 1s there); every output and at least one input with them."""
    sizes, flags = tuple(raw["row_sizes"]), tuple(raw.get("row_tensors", ()))
    n_in = len(spec.shapes[0])
    shapes = (*spec.shapes[0], *spec.shapes[1])
    ok = (
        0 < len(sizes) <= 64
        and sizes[-1] == 1
        and all(a > b for a, b in itertools.pairwise(sizes))
        and len(flags) == len(shapes)
        and 1 <= max(flags, default=0) <= 8
        and all(f in (0, max(flags)) for f in flags)
        and all(flags[n_in:])
        and any(flags[:n_in])
        and all(
            s[:f] == (sizes[0], *[1] * (f - 1)) for s, f in zip(shapes, flags, strict=True) if f
        )
    )
    if not ok:
        raise _node_error(node, "has malformed row_sizes and row_tensors attributes")
    sources = {}
    for r in sizes[1:]:
        if row_source(r) in raw:
            try:
                sources[r] = raw[row_source(r)].decode("utf-8")
            except UnicodeDecodeError:
                raise _node_error(
                    node, f"has invalid {row_source(r)}: it is not UTF-8 text"
                ) from None
    return replace(spec, rows=sizes, row_tensors=flags, row_sources=sources)


def _side(
    node: onnx.NodeProto, raw: Mapping[str, list[int]], side: str, count: int
) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """One side's dtypes and shapes from the `<side>_dtypes/ranks/shapes` attributes."""
    dtypes, ranks, dims = raw[f"{side}_dtypes"], raw[f"{side}_ranks"], raw[f"{side}_shapes"]
    if not len(dtypes) == len(ranks) == count:
        raise _node_error(
            node,
            f"has {count} {side}s but {len(dtypes)} {side}_dtypes and {len(ranks)} {side}_ranks",
        )
    for d in dtypes:
        if d not in _KERNEL_DTYPES:
            raise _node_error(node, f"has {side} element type code {d}, not one a kernel handles")
    if any(r < 0 for r in ranks) or sum(ranks) != len(dims) or any(d < 0 for d in dims):
        raise _node_error(node, f"has {side}_ranks and {side}_shapes that do not agree")
    shapes, at = [], 0
    for r in ranks:
        shapes.append(tuple(dims[at : at + r]))
        at += r
    return tuple(dtypes), tuple(shapes)


# The ONNX element types a TC kernel reads and writes (bool to float64; no strings).
_KERNEL_DTYPES = frozenset(ONNX_TYPES.values())


def _declared_types(model: onnx.ModelProto) -> dict[str, tuple[int, tuple[int | None, ...] | None]]:
    """Element type and (partly known) shape of every value the graph declares."""
    graph = model.graph
    out: dict[str, tuple[int, tuple[int | None, ...] | None]] = {}
    for t in graph.initializer:
        out[t.name] = (t.data_type, tuple(t.dims))
    for v in [*graph.input, *graph.output, *graph.value_info]:
        if not v.type.HasField("tensor_type"):
            continue
        tt = v.type.tensor_type
        shape = None
        if tt.HasField("shape"):
            shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim)
        out.setdefault(v.name, (tt.elem_type, shape))
    return out


def _check_declared(
    node: onnx.NodeProto,
    spec: _NodeSpec,
    declared: Mapping[str, tuple[int, tuple[int | None, ...] | None]],
) -> None:
    """The graph's declared types of the node's values must be the kernel's: onnxruntime
    allocates an output by the graph's type, and a kernel writing a wider type would
    overflow it."""
    for side, names in enumerate((node.input, node.output)):
        for k, (name, dtype, shape) in enumerate(
            zip(names, spec.dtypes[side], spec.shapes[side], strict=True)
        ):
            if name not in declared:
                continue
            elem, dims = declared[name]
            # A rows node's flagged tensors lead with rows of any number (a model pinned
            # after optimize declares its own), an every-size node's with any sizes.
            lead = spec.row_tensors[k + side * len(node.input)] if spec.rows else 0
            same_dims = dims is None or (
                len(dims) == len(shape)
                and (
                    spec.every_size
                    or all(d in (None, s) for d, s in zip(dims[lead:], shape[lead:], strict=True))
                )
            )
            if (elem and elem != dtype) or not same_dims:
                want = f"{helper.tensor_dtype_to_string(dtype)} {list(shape)}"
                shown = ", ".join("?" if d is None else str(d) for d in dims or ())
                got = f"{helper.tensor_dtype_to_string(elem) if elem else '?'} [{shown}]"
                verb = "computes" if side else "takes"
                raise _node_error(
                    node, f"{verb} '{name}' as {want}, but the graph declares it {got}"
                )


def _compile_node(node: onnx.NodeProto, spec: _NodeSpec) -> Path:
    """Compile the node's source for its input types and check the outputs it gives."""
    try:
        arrays = [
            _placeholder(np.dtype(helper.tensor_dtype_to_np_dtype(dtype)), shape)
            for dtype, shape in zip(spec.dtypes[0], spec.shapes[0], strict=True)
        ]
    except TcError as e:
        raise _node_error(node, f"declares inputs too large to compile for: {e.message}") from None
    fn = define_entry(spec.source, spec.entry)
    if fn is None:
        raise _node_error(node, f"names entry '{spec.entry}', which its source does not define")
    bound = compiler.bind(fn, arrays)
    got_dtypes = tuple(helper.np_dtype_to_tensor_dtype(d) for d in bound.output_dtypes)
    got_shapes = tuple(tuple(s) for s in bound.output_shapes)
    if got_dtypes != spec.dtypes[1] or got_shapes != spec.shapes[1]:
        raise _node_error(node, "declares output dtypes or shapes that its source does not compute")
    if spec.every_size:
        return compiler.parametric_kernel(bound, spec.options).library
    return compiler.kernel(bound, "cpu", spec.options).library


def prepare(model: str | os.PathLike[str] | onnx.ModelProto) -> None:
    """Compile every TcKernel of the model into this machine's cache, under the key its
    node names, so a plain onnxruntime session with the library registered can run it.

    Every node is checked first (TcError otherwise): its kernel_key must be the one its
    attributes give, and the graph's declared types of its values must be the kernel's."""
    specs = checked_nodes(read_model(model))
    stamp = _stamp()
    for node, spec in specs:
        _prepare_node(node, stamp, spec)


def _prepare_node(node: onnx.NodeProto, stamp: str, spec: _NodeSpec | None = None) -> None:
    """Compile the node's kernels (a rows node has one per size) into the cache."""
    for one in (spec or _node_spec(node)).variants():
        if cc.lookup(one.key, stamp) is None:
            cc.adopt(one.key, _compile_node(node, one), stamp=stamp)


def checked_nodes(proto: onnx.ModelProto) -> list[tuple[onnx.NodeProto, _NodeSpec]]:
    """The model's TcKernel nodes with their attributes, every node checked first (TcError
    otherwise): its kernel_key must be the one its attributes give, and the graph's
    declared types of its values must be the kernel's."""
    declared = _declared_types(proto)
    specs = [(node, _node_spec(node)) for node in _tc_nodes(proto)]
    for node, spec in specs:
        _check_declared(node, spec, declared)
    return specs


def InferenceSession(
    model: str | os.PathLike[str] | onnx.ModelProto,
    sess_options: Any = None,
    providers: Sequence[str] | None = None,
    **kw: Any,
) -> Any:
    """An onnxruntime.InferenceSession with tc_graph's library registered and every
    TcKernel compiled (from the cache, or now). It does not optimize: see optimize.
    A TcWarning says so where `providers` name a GPU provider: TcKernels run on the CPU."""
    import onnxruntime as onnxrt

    _checked_session_options(sess_options)
    note = ort.cpu_only_note(_providers(providers))
    if note:
        warnings.warn(TcWarning(note), stacklevel=2)
    proto = read_model(model)
    prepare(proto)
    so = sess_options if sess_options is not None else onnxrt.SessionOptions()
    ort.register(so)
    chosen = list(providers) if providers else ["CPUExecutionProvider"]
    if isinstance(model, onnx.ModelProto):
        return external.session(proto, so, chosen, **kw)
    return onnxrt.InferenceSession(os.fspath(model), so, providers=chosen, **kw)


def _providers(providers: Any) -> Sequence[str | tuple[str, Any]]:
    """InferenceSession's providers, checked as onnxruntime takes them: names, or (name,
    options) pairs (TcError otherwise: a TypeError escaped)."""
    if providers is None:
        return ()
    if isinstance(providers, list | tuple) and all(
        isinstance(p, str) or (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str))
        for p in providers
    ):
        return providers
    shown = providers if isinstance(providers, list | tuple) else type(providers).__name__
    raise TcError(
        f"providers must be a list of execution provider names, not {shown}",
        hint='e.g. providers=["CPUExecutionProvider"], or (name, options) pairs',
    )


def signature(model: onnx.ModelProto) -> str:
    """A short hash of a model's TcKernel keys (for logs)."""
    keys = sorted(helper.get_attribute_value(a).decode() for n in _tc_nodes(model)
                  for a in n.attribute if a.name == "kernel_key")  # fmt: skip
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:12]
