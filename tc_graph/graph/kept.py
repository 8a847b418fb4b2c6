"""What the whole-model race dropped, remembered between optimize calls (issue 14: a
warm optimize in under 5 s). Cold, the race drops the group that won by the least until
the model is not slower, one race per drop (light_resnet50: 8 races, 14 of a warm run's
25 s). Optimizing the same model and groups again drops at once what was dropped, as it
was said why, and races the set that was kept: every kept set is still confirmed by a
race on every optimize, and keeping nothing races nothing. Only losses are remembered:
a kept set that now loses is dropped from as before; `remeasure` ignores this memory.
Drops made past the budget stand, like a group not measured within it, only for a budget
no larger than the one that ran out (a warm inception_v1 raced 11 times, 10 s, after a
cold run that reached its budget at the whole-model race).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import onnx

from . import memo

_FILE = "kept.json"

Nodes = tuple[int, ...]


@dataclass(frozen=True)
class Kept:
    """The groups (by their node indices) the last races kept, and why they dropped each
    other one ("dropped: the whole model with it ran 0.85x")."""

    kept: frozenset[Nodes]
    dropped: Mapping[Nodes, str]
    budget_s: float | None = None  # the budget a drop ran out of (None: none did)

    def stands(self, budget_s: float | None) -> bool:
        """Whether the memory holds for an optimize with this budget (None: no bound)."""
        return self.budget_s is None or (budget_s is not None and budget_s <= self.budget_s)


def key(model: onnx.ModelProto, chosen: Iterable[tuple[Nodes, str]], context: str) -> str:
    """The key of one whole-model race: the model's graph (its nodes and the types of its
    inputs, outputs and initializers, not their values), the chosen groups (their nodes
    and kernel keys) and the measuring context (optimize._context_key)."""
    h = hashlib.sha256(context.encode())
    graph = model.graph
    for part in (*graph.node, *graph.input, *graph.output):
        h.update(part.SerializeToString())
    for t in graph.initializer:
        h.update(f"{t.name}:{t.data_type}:{list(t.dims)}".encode())
    for nodes, kernel in sorted(chosen):
        h.update(f"{_name(nodes)}={kernel};".encode())
    return "kept-" + h.hexdigest()[:40]


def recall(k: str) -> Kept | None:
    """The outcome stored under the key, or None where absent or malformed (measured
    again, never trusted nor a crash)."""
    known = memo.load(_FILE).get(k)
    if not isinstance(known, dict):
        return None
    kept, dropped, budget = known.get("kept"), known.get("dropped"), known.get("budget_s")
    if not isinstance(kept, list) or not isinstance(dropped, dict):
        return None
    if not all(isinstance(v, str) and v for v in (*kept, *dropped, *dropped.values())):
        return None
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float)):
        return None
    try:
        nodes = frozenset(map(_nodes, kept)), {_nodes(n): w for n, w in dropped.items()}
    except ValueError:
        return None
    return Kept(*nodes, budget_s=budget)


def store(
    k: str, kept: Iterable[Nodes], dropped: Mapping[Nodes, str], budget_s: float | None
) -> None:
    """Remember what the races kept and dropped; `budget_s` where a drop ran out of it."""
    entry: dict[str, object] = {
        "kept": sorted(map(_name, kept)),
        "dropped": {_name(n): why for n, why in sorted(dropped.items())},
    }
    if budget_s is not None:
        entry["budget_s"] = budget_s
    memo.store(_FILE, k, entry)


def clear() -> bool:
    """Forget every remembered race (`tc-graph cache clear`); True if there were some."""
    return memo.clear(_FILE, "the remembered whole-model races")


def _name(nodes: Nodes) -> str:
    return ",".join(map(str, nodes))


def _nodes(name: str) -> Nodes:
    return tuple(int(n) for n in name.split(","))
