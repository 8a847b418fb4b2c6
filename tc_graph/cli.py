"""tc-graph: check, compile and tune Tensor Comprehensions, and fuse ONNX models with them.

Run `tc-graph COMMAND --help` for a command's options. -v (debug messages) and -q (only
warnings, errors and results) go before or after the command; without them the level is
TC_GRAPH_LOG's (debug, info, warning or error; default info).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import compiler, ir, timing
from .api import TcFunction, TcModule, define
from .compare import mismatch, rtol
from .compiler import STAGES
from .errors import TcError, TcWarning, not_too_deep
from .graph.optimize import BUDGET_S, MIN_SPEEDUP
from .options import MappingOptions
from .runtime import cc

if TYPE_CHECKING:
    import onnx


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


# Longer is no TC source (characters; 16 Mi): `tc-graph check /dev/zero` read until
# memory ran out.
MAX_SOURCE_CHARS = 16 * 2**20


def _load(path: str) -> TcModule | None:
    """The module of a TC file, printing warnings and errors; None on error."""
    try:
        with open(path, encoding="utf-8") as f:
            source = f.read(MAX_SOURCE_CHARS + 1)
        if len(source) > MAX_SOURCE_CHARS:
            print(f"error: {path} is larger than {MAX_SOURCE_CHARS // 2**20} MiB: not a TC "
                  "source", file=sys.stderr)  # fmt: skip
            return None
    except OSError as e:
        print(f"error: cannot read {path}: {e.strerror}", file=sys.stderr)
        return None
    except UnicodeDecodeError:
        print(f"error: {path} is not TC text: {_what_file(path)}", file=sys.stderr)
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TcWarning)
        try:
            mod = define(source)
        except TcError as e:
            print(f"{path}: {e}", file=sys.stderr)
            return None
    for w in caught:
        print(f"{path}: {w.message}", file=sys.stderr)
    return mod


def _what_file(path: str) -> str:
    """What a file that is not UTF-8 text seems to be, and the command that takes it."""
    import onnx

    try:
        model = onnx.load(path, load_external_data=False)
    except Exception:  # protobuf's DecodeError and friends: not an ONNX model either
        return "it is binary data (TC sources are UTF-8 text files)"
    if not model.graph.node:
        return "it is binary data (TC sources are UTF-8 text files)"
    return (
        f"it is an ONNX model; to fuse it run `tc-graph optimize {path} OUT.onnx`, "
        f"or `tc-graph prepare {path}` if it holds TcKernels already"
    )


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
        if name.strip() in out:
            raise TcError(f"--shapes names '{name.strip()}' twice", hint="give each parameter once")
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
        except MemoryError:
            raise TcError(f"--shapes: {n}={text} is too large to allocate here") from None
    return args


def _entry(mod: TcModule, args: argparse.Namespace) -> TcFunction:
    """The def --entry names (or the only one)."""
    entry = args.entry or (mod.names[0] if len(mod.names) == 1 else None)
    if entry is None:
        raise TcError(f"--entry is required: {args.file} defines {', '.join(mod.names)}")
    if entry not in mod:
        raise TcError(f"no def '{entry}' in {args.file} (it defines {', '.join(mod.names)})")
    return mod[entry]


def _compile(args: argparse.Namespace) -> int:
    mod = _load(args.file)
    if mod is None:
        return 1
    try:
        fn = _entry(mod, args)
        options = MappingOptions.from_json(args.options) if args.options else None
        bound = compiler.bind(fn, _example_args(fn, _parse_shapes(args.shapes)))
        with not_too_deep():
            if args.emit == "c":
                # The kernel --target compiles (into the cache), as `fn.compile` gives it.
                text = compiler.kernel(bound, args.target, options).source
            else:
                # Any other stage is printed, not built: GPU text needs no device.
                text = compiler.show(bound, args.emit, args.target, options)
    except TcError as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    print(text, end="")
    return 0


def _cache(action: str) -> int:
    if action == "info":
        info = cc.cache_info()
        print(f"cache: {info['path']}")
        print(f"entries: {info['entries']}")
        print(f"size: {info['bytes'] / 1e6:.1f} MB")
    else:
        from .graph.cost import clear_calibration
        from .graph.optimize import clear_decisions

        print(f"removed {cc.cache_clear()} entries from {cc.cache_dir()}")
        try:
            if clear_decisions():
                print("removed the cached optimize decisions")
            if clear_calibration():
                print("removed the cached cost-model calibration")
        except TcError as e:
            print(e, file=sys.stderr)
            return 1
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .tune.tuner import plot_history, tune

    mod = _load(args.file)
    if mod is None:
        return 1
    try:
        fn = _entry(mod, args)
        if args.plot:
            plot_history(None, args.plot)  # fail before the slow part, not after it
        values = _random_args(fn, _example_args(fn, _parse_shapes(args.shapes)), args.seed)
        result = tune(
            fn,
            *values,
            target=args.target,
            generations=args.generations,
            population=args.population,
            seed=args.seed,
            progress=_on_terminal(),
        )
        if args.plot:
            plot_history(result, args.plot)
    except TcError as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if result.interrupted:
        print("stopped early: keeping the best options found so far", file=sys.stderr)
    failed = len(result.failures)
    print(
        f"{fn.name}: default {result.default_s * 1e6:.1f} us, tuned {result.best_s * 1e6:.1f} us "
        f"({result.default_s / result.best_s:.2f}x); {result.evaluated} candidates, "
        f"{failed} discarded; stored in {cc.cache_dir()}"
    )
    if args.plot:
        _status(f"wrote {args.plot}")
    print(result.best.to_json())
    return 0


def _random_args(fn: TcFunction, args: list[object], seed: int | None) -> list[object]:
    """Tuning data for `tc-graph tune`: floats normal, integers in [0, the smallest input
    dimension) so they are valid as indices of any dimension (a gather's, say)."""
    rng = np.random.default_rng(seed)
    dims = [n for a in args if isinstance(a, np.ndarray) for n in a.shape]
    high = max(1, min(dims, default=1))
    out: list[object] = []
    for a in args:
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif a.dtype.kind == "f":
            out.append(rng.standard_normal(a.shape).astype(a.dtype))
        elif a.dtype.kind in "iu":
            out.append(rng.integers(0, high, a.shape).astype(a.dtype))
        else:
            out.append(rng.integers(0, 2, a.shape).astype(a.dtype))
    return out


# ----------------------------------------------------------------------------- ONNX

# `tc-graph demo` compares with plain onnxruntime at this tolerance: float32 sums may be
# reassociated by the fused kernels, nothing more.
# Interleaved timing: rounds, and seconds per contender per round (small, full-size models).
DEMO_ROUNDS = 5
DEMO_ROUND_S = {False: 0.02, True: 0.1}


def _tc_kernels(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    from .onnx_domain import TC_DOMAIN, TC_OP

    return [n for n in model.graph.node if n.domain == TC_DOMAIN and n.op_type == TC_OP]


def _on_terminal() -> bool:
    """Progress bars only where a person watches: redrawn frames would fill a CI log."""
    return sys.stderr.isatty()


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _optimize(args: argparse.Namespace) -> int:
    from .graph.external import save_model, uses_external
    from .graph.optimize import SUMMARY_KEY, optimize, read_model

    try:
        if args.graph_png:
            _plotting()  # fail before the slow part, not after it
        fixed = _by_name("--fix-shape", args.fix_shape)
        samples = _by_name("--shape", args.shape)
        model = read_model(args.input)
        result = optimize(
            args.input,
            force=args.force,
            tune=args.tune,
            report=args.report,
            progress=_on_terminal(),
            remeasure=args.remeasure,
            budget_s=args.budget,
            threads=args.threads,
            min_speedup=args.min_speedup,
            fix_shapes=fixed,
            shapes=samples,
        )
        try:
            save_model(
                result,
                args.output,
                base_dir=Path(args.input).resolve().parent,
                save_as_external_data=uses_external(model),
            )
        except (OSError, ValueError) as e:
            raise TcError(f"cannot write {args.output}: {e}") from None
        if args.graph_png:
            _draw_partition(model, result, args.graph_png)
        if args.graph_dot:
            _write_dot(result, args.graph_dot)
    except TcError as e:
        print(f"{args.input}: {e}", file=sys.stderr)
        return 1
    _note_device_providers()
    kernels = len(_tc_kernels(result))
    _status(
        f"wrote {args.output}: {_plural(len(model.graph.node), 'node')} -> "
        f"{len(result.graph.node)}, {_plural(kernels, 'TcKernel')}"
    )
    for extra in (args.graph_png, args.graph_dot):
        if extra:
            _status(f"wrote {extra}")
    summary = next((p.value for p in result.metadata_props if p.key == SUMMARY_KEY), "")
    if summary and not args.report:  # the report ends with it
        _status(summary)
    return 0


def _note_device_providers() -> None:
    """Where this onnxruntime offers a GPU provider, say that TcKernels run on the CPU."""
    import onnxruntime as onnxrt

    from .runtime.ort import cpu_only_note

    note = cpu_only_note(onnxrt.get_available_providers())
    if note:
        print(f"warning: {note}", file=sys.stderr)


def _write_dot(optimized: onnx.ModelProto, path: str) -> None:
    """The optimized graph as Graphviz DOT text (no Graphviz needed to write it)."""
    from .graph.dot import to_dot

    try:
        Path(path).write_text(to_dot(optimized), encoding="utf-8")
    except OSError as e:
        raise TcError(f"cannot write {path}: {e.strerror}") from None


def _prepare(path: str) -> int:
    from .graph.optimize import prepare, read_model

    try:
        model = read_model(path)
        prepare(model)
    except TcError as e:
        print(f"{path}: {e}", file=sys.stderr)
        return 1
    kernels = _plural(len(_tc_kernels(model)), "TcKernel")
    _status(f"{path}: {kernels} compiled in {cc.cache_dir()}")
    return 0


def _add_package(sub: Any) -> None:
    """`tc-graph package MODEL.onnx -o DIR [--isa ISA]` (docs/onnx.md "Deploying")."""
    from .graph.package import ISAS

    pkg = sub.add_parser(
        "package", help="write a directory that runs a model with onnxruntime alone, elsewhere"
    )
    pkg.add_argument("model", metavar="MODEL.onnx")
    pkg.add_argument("-o", "--output", required=True, metavar="DIR", help="a new directory")
    pkg.add_argument(
        "--isa", default="native", choices=ISAS, help="the CPUs the kernels run on (-march)"
    )


def _package(args: argparse.Namespace) -> int:
    from .graph.optimize import read_model
    from .graph.package import package

    try:
        manifest = package(read_model(args.model), args.output, isa=args.isa)
    except TcError as e:
        print(f"{args.model}: {e}", file=sys.stderr)
        return 1
    kernels = _plural(len(manifest["kernels"]), "kernel")
    features = " ".join(manifest["cpu_features"]) or "none"
    print(f"wrote {args.output}: {manifest['model']}, {kernels} for {args.isa}, the library")
    print(f"CPU features needed: {features}")
    print(f"run with session config {manifest['kernel_dir_config']}={args.output}/kernels")
    return 0


def _plotting() -> Any:
    """matplotlib's Figure class; matplotlib is the optional `plot` extra."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TcError(
            "--graph-png needs matplotlib, which is not installed",
            hint="pip install matplotlib",
        ) from None
    return Figure


def _fused_by(original: onnx.ModelProto, optimized: onnx.ModelProto) -> dict[int, str]:
    """Which TcKernel of `optimized` computes each node of `original` (node index -> name).

    Walks back from each kernel's outputs through the original producers of values that
    no kept node computes, stopping at the kernel's inputs: a group is convex and every
    member feeds one of its outputs, so the walk finds exactly its members."""
    from .onnx_domain import TC_DOMAIN

    producer = {v: i for i, n in enumerate(original.graph.node) for v in n.output if v}
    kept = {v for n in optimized.graph.node if n.domain != TC_DOMAIN for v in n.output}
    owner: dict[int, str] = {}
    for k, node in enumerate(_tc_kernels(optimized)):
        name = node.name or f"TcKernel {k}"
        stop = set(node.input)
        stack = [v for v in node.output if v]
        while stack:
            v = stack.pop()
            i = producer.get(v)
            if v in stop or i is None or i in owner or v in kept:
                continue
            owner[i] = name
            stack.extend(x for x in original.graph.node[i].input if x)
    return owner


def _draw_partition(original: onnx.ModelProto, optimized: onnx.ModelProto, path: str) -> None:
    """The original graph in topological layers, each node coloured by the TcKernel that
    replaced it, grey where onnxruntime still runs it."""
    import networkx as nx
    from matplotlib.patches import Patch

    figure = _plotting()
    nodes = list(original.graph.node)
    owner = _fused_by(original, optimized)
    producer = {v: i for i, n in enumerate(nodes) for v in n.output if v}
    g = nx.DiGraph()
    g.add_nodes_from(range(len(nodes)))
    g.add_edges_from(
        (producer[v], i) for i, n in enumerate(nodes) for v in n.input if v in producer
    )
    layers = list(nx.topological_generations(g))
    pos = {
        i: (j - (len(layer) - 1) / 2, -depth)
        for depth, layer in enumerate(layers)
        for j, i in enumerate(sorted(layer))
    }
    kernels = list(dict.fromkeys(owner[i] for i in sorted(owner)))
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2"]
    colour = {k: palette[n % len(palette)] for n, k in enumerate(kernels)}
    ort_colour = "#c7c7c7"
    width = max((len(layer) for layer in layers), default=1)
    fig = figure(figsize=(max(5.0, 1.8 * width), max(3.0, 0.9 * len(layers) + 1.5)))
    ax = fig.subplots()
    nx.draw_networkx_edges(g, pos, ax=ax, arrows=True, node_size=1400, edge_color="#555555")
    nx.draw_networkx_nodes(
        g,
        pos,
        ax=ax,
        node_shape="s",
        node_size=1400,
        node_color=[colour.get(owner.get(i, ""), ort_colour) for i in g.nodes],
    )
    labels = {i: n.op_type for i, n in enumerate(nodes)}
    nx.draw_networkx_labels(g, pos, labels=labels, ax=ax, font_size=7)
    handles = [Patch(color=colour[k], label=f"{k} (TcKernel)") for k in kernels]
    handles.append(Patch(color=ort_colour, label="left to onnxruntime"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.set_title(
        f"{original.graph.name or 'model'}: {_plural(len(nodes), 'node')}, "
        f"{_plural(len(kernels), 'TcKernel')}",
        fontsize=9,
    )
    ax.axis("off")
    margin = 0.6
    xs = [x for x, _ in pos.values()] or [0.0]
    ys = [y for _, y in pos.values()] or [0.0]
    ax.set_xlim(min(xs) - margin, max(xs) + margin)
    ax.set_ylim(min(ys) - margin, max(ys) + margin)
    try:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise TcError(f"cannot write {path}: {e}") from None


def _run_ort(session: Any, feeds: dict[str, np.ndarray], what: str) -> list[np.ndarray]:
    """session.run, with onnxruntime's own exception types turned into a TcError."""
    try:
        return session.run(None, feeds)
    except Exception as e:  # onnxruntime's exceptions derive from Exception only
        raise TcError(f"{what} failed in onnxruntime: {str(e).splitlines()[0]}") from None


def _race(
    plain: Any, ours: Any, feeds: dict[str, np.ndarray], budget_s: float
) -> tuple[float, float, float]:
    """Plain and optimized sessions timed in interleaved rounds (alternating which goes
    first, so drift and warm caches favour neither): medians in µs and the median of
    the per-round ratios plain / optimized."""
    runs = {"plain": lambda: plain.run(None, feeds), "ours": lambda: ours.run(None, feeds)}
    times = timing.rounds(runs, DEMO_ROUNDS, budget_s)
    ratios = [p / o for p, o in zip(times["plain"], times["ours"], strict=True)]
    return (
        statistics.median(times["plain"]) * 1e6,
        statistics.median(times["ours"]) * 1e6,
        statistics.median(ratios),
    )


def _demo(args: argparse.Namespace) -> int:
    try:
        return _demo_models(args)
    except TcError as e:
        print(f"tc-graph demo: {e}", file=sys.stderr)
        return 1


def _demo_models(args: argparse.Namespace) -> int:
    import onnxruntime as onnxrt

    from .graph import bench_models
    from .graph.optimize import InferenceSession, optimize

    names = [n.strip() for n in args.models.split(",") if n.strip()] if args.models else None
    names = names or list(bench_models.NAMES)
    unknown = [n for n in names if n not in bench_models.NAMES]
    if unknown:
        raise TcError(
            f"--models: unknown model {', '.join(unknown)}",
            hint=f"choose from {', '.join(bench_models.NAMES)}",
        )
    size = "full-size" if args.full else "small"
    rows: list[tuple[str, ...]] = []
    failed: list[str] = []
    for name in names:
        _status(f"{name} ({size}): building, optimizing, verifying, timing", file=sys.stderr)
        model = bench_models.build(name, small=not args.full)
        feeds = bench_models.sample_inputs(model, seed=0)
        plain = onnxrt.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        want = _run_ort(plain, feeds, f"{name} (original)")
        optimized = optimize(model, progress=_on_terminal())
        ours = InferenceSession(optimized)
        why = mismatch(_run_ort(ours, feeds, f"{name} (optimized)"), want)
        if why is not None:
            print(f"error: {name}: the optimized model is wrong: {why}", file=sys.stderr)
            failed.append(name)
            continue
        plain_us, ours_us, speedup = _race(plain, ours, feeds, DEMO_ROUND_S[args.full])
        rows.append(
            (
                name,
                f"{len(model.graph.node)} -> {len(optimized.graph.node)}",
                str(len(_tc_kernels(optimized))),
                f"{plain_us:.1f}",
                f"{ours_us:.1f}",
                f"{speedup:.2f}x",
            )
        )
    header = ("model", "nodes", "TcKernels", "ORT µs", "optimized µs", "speedup")
    widths = [max(len(r[k]) for r in (header, *rows)) for k in range(len(header))]
    for r in (header, *rows):
        print(
            "  ".join(
                c.ljust(w) if k == 0 else c.rjust(w)
                for k, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    print(
        f"\n{size} models; outputs match onnxruntime's (float32 within {rtol(np.dtype('f4')):g} "
        "of themselves plus a tenth of that of each output's largest value).\nTimes: medians of {DEMO_ROUNDS} interleaved rounds; speedup: the "
        "median per-round ratio.\nGroups that did not beat onnxruntime when measured are "
        "left to it (TcKernels 0)."
    )
    if failed:
        print(f"error: optimized outputs differ for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}


def _add_log_flags(parsers: Sequence[argparse.ArgumentParser]) -> None:
    """-v and -q on the command and on every subcommand (the later one given wins)."""
    flags = (
        ("-v", "--verbose", "debug", "also print debug messages: what is measured, compiled, "
         "found in the cache"),
        ("-q", "--quiet", "warning", "print only warnings, errors and results"),
    )  # fmt: skip
    for p in parsers:
        for short, long, level, what in flags:
            p.add_argument(
                short,
                long,
                dest="log_level",
                action="store_const",
                const=level,
                default=argparse.SUPPRESS,
                help=what,
            )


class _LogFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        text = f"{record.levelname.lower()}: {record.name}: {record.getMessage()}"
        return f"{text}\n{self.formatException(record.exc_info)}" if record.exc_info else text


class _LogHandler(logging.Handler):
    """Records on stderr, written above a progress bar rather than through it."""

    def emit(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # logging's contract: a failing handler reports, never raises
            self.handleError(record)


def _configure_logging(flag: str | None) -> None:
    """The level of tc_graph's loggers: -v/-q, else TC_GRAPH_LOG, else info. Only the
    command line configures logging; the library just logs."""
    name = flag or os.environ.get("TC_GRAPH_LOG", "").strip().lower() or "info"
    if name not in LOG_LEVELS:
        raise TcError(
            f"TC_GRAPH_LOG={name!r} is not a log level",
            hint=f"use one of {', '.join(LOG_LEVELS)}, or unset it",
        )
    logger = logging.getLogger("tc_graph")
    for old in [h for h in logger.handlers if isinstance(h, _LogHandler)]:
        logger.removeHandler(old)
    handler = _LogHandler()
    handler.setFormatter(_LogFormatter())
    logger.addHandler(handler)
    logger.setLevel(LOG_LEVELS[name])
    logger.propagate = False


def _logging_set_up(args: argparse.Namespace) -> bool:
    """Configure logging for the command; False (the error printed) on a bad TC_GRAPH_LOG."""
    try:
        _configure_logging(getattr(args, "log_level", None))
    except TcError as e:
        print(f"tc-graph: {e}", file=sys.stderr)
        return False
    return True


def _status(text: str, file: Any = None) -> None:
    """A line saying what was done (not a command's result): silenced by -q."""
    if logging.getLogger("tc_graph").isEnabledFor(logging.INFO):
        print(text, file=file or sys.stdout)


def _version() -> str:
    """The installed distribution's version ("unknown" when run from a bare source tree)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tc_graph")
    except PackageNotFoundError:
        return "unknown"


def _output_path(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`optimize IN OUT` and `optimize IN -o OUT` both name the output; one is needed."""
    given = {p for p in (args.output_path, args.output) if p}
    if not given:
        parser.error("optimize: name the output file: tc-graph optimize IN.onnx OUT.onnx")
    if len(given) > 1:
        parser.error(f"optimize: two output files given ({' and '.join(sorted(given))})")
    args.output = given.pop()


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # The reader went away (`tc-graph check f.tc | head`): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _fixed_dim(text: str) -> tuple[str, int]:
    """--fix-shape's NAME=N."""
    name, eq, size = text.partition("=")
    if not eq or not name.strip() or not size.strip().isdigit() or int(size) < 1:
        raise argparse.ArgumentTypeError(f"expected NAME=N with N a positive integer: {text!r}")
    return name.strip(), int(size)


def _sample_sizes(text: str) -> tuple[str, list[int]]:
    """--shape's NAME=N,N,..."""
    name, eq, sizes = text.partition("=")
    values = [v.strip() for v in sizes.split(",")]
    if not eq or not name.strip() or not all(v.isdigit() and int(v) >= 1 for v in values):
        raise argparse.ArgumentTypeError(
            f"expected NAME=N[,N...] with positive integers N: {text!r}"
        )
    return name.strip(), [int(v) for v in values]


def _by_name(flag: str, pairs: list[tuple[str, Any]] | None) -> dict[str, Any]:
    """A repeatable NAME=... option's values by name; a name given twice is a TcError."""
    named: dict[str, Any] = {}
    for name, value in pairs or []:
        if name in named:
            raise TcError(f"{flag} names '{name}' twice", hint="give each dimension once")
        named[name] = value
    return named


def _optimize_parser(sub: Any) -> None:
    """`tc-graph optimize` and its options."""
    opt = sub.add_parser(
        "optimize", help="fuse the groups of an ONNX model that beat onnxruntime into TcKernels"
    )
    opt.add_argument("input", metavar="IN.onnx")
    opt.add_argument("output_path", nargs="?", metavar="OUT.onnx", help="where to write the result")
    opt.add_argument("-o", "--output", metavar="OUT.onnx", help="the same as OUT.onnx")
    opt.add_argument("--force", action="store_true", help="fuse every group, without measuring")
    opt.add_argument("--tune", action="store_true", help="autotune each chosen group first")
    opt.add_argument("--report", action="store_true", help="print the per-group table (stderr)")
    opt.add_argument(
        "--remeasure", action="store_true", help="measure again, ignoring cached decisions"
    )
    opt.add_argument(
        "--budget",
        type=_seconds_or_none,
        default=BUDGET_S,
        metavar="SECONDS",
        help=f"time to spend deciding ({BUDGET_S:.0f}; 'none': no bound); groups not "
        "decided in time stay with onnxruntime",
    )
    opt.add_argument(
        "--threads", type=int, metavar="N", help="the intra-op threads the model will run with"
    )
    opt.add_argument(
        "--min-speedup",
        type=float,
        default=MIN_SPEEDUP,
        metavar="X",
        help=f"keep a group only when it is X times faster ({MIN_SPEEDUP})",
    )
    opt.add_argument(
        "--fix-shape",
        action="append",
        type=_fixed_dim,
        metavar="NAME=N",
        help="pin the symbolic dimension NAME to N (repeatable): the result runs at that size only",
    )
    opt.add_argument(
        "--shape",
        action="append",
        type=_sample_sizes,
        metavar="NAME=N,N",
        help="decide at these sizes of the symbolic dimension NAME (repeatable); the "
        "result runs at every size, with kernels for these (docs/onnx.md)",
    )
    opt.add_argument(
        "--graph-png", metavar="FILE", help="draw the partitioned graph (needs matplotlib)"
    )
    opt.add_argument(
        "--graph-dot", metavar="FILE", help="write the optimized graph as Graphviz DOT text"
    )


def _parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its options."""
    parser = argparse.ArgumentParser(
        prog="tc-graph", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"tc-graph {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="parse and check a TC file; print ranges and shapes")
    check.add_argument("file")
    comp = sub.add_parser("compile", help="compile one def for given shapes; print the code")
    comp.add_argument("file")
    comp.add_argument("--entry", help="the def to compile (needed when the file has several)")
    comp.add_argument(
        "--shapes", required=True, help='shapes and scalar values, e.g. "A=128x64,B=64x32,sh=2"'
    )
    comp.add_argument("--target", default="cpu", choices=list(compiler.TARGETS))
    comp.add_argument(
        "--emit",
        default="c",
        choices=list(STAGES),
        help="what to print: a stage of --target's pipeline (scop, schedule, mapped tree, isl "
        "AST, forms: each CPU loop's form or why not) or a kernel's text (c: the kernel "
        "--target builds; cuda, opencl: printed only)",
    )
    comp.add_argument("--options", help="MappingOptions as JSON")
    cache = sub.add_parser("cache", help="the compiled-kernel cache")
    cache.add_argument("action", choices=["info", "clear"])
    _optimize_parser(sub)
    tune = sub.add_parser(
        "tune", help="autotune one def for given shapes; store the best options for this machine"
    )
    tune.add_argument("file")
    tune.add_argument("--entry", help="the def to tune (needed when the file has several)")
    tune.add_argument("--shapes", required=True, help='shapes and scalars, e.g. "A=128x64,B=64x32"')
    tune.add_argument("--target", default="cpu", choices=["cpu"])
    tune.add_argument("--generations", type=int, default=10)
    tune.add_argument("--population", type=int, default=50)
    tune.add_argument("--seed", type=int, help="the same seed gives the same search")
    tune.add_argument(
        "--plot",
        metavar="FILE.png",
        help="best and median runtime per generation (needs matplotlib)",
    )
    prep = sub.add_parser(
        "prepare", help="compile a model's TcKernels into the cache for plain onnxruntime"
    )
    prep.add_argument("model", metavar="MODEL.onnx")
    _add_package(sub)
    demo = sub.add_parser(
        "demo", help="build sample models, optimize, verify, print the speedup table"
    )
    demo.add_argument("--full", action="store_true", help="the full-size models (slower)")
    demo.add_argument("--models", help="comma-separated subset of the sample models")
    _add_log_flags([parser, *sub.choices.values()])
    return parser


def _seconds_or_none(text: str) -> float | None:
    """--budget's value: seconds, or 'none' for no bound."""
    if text.strip().lower() == "none":
        return None
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds or 'none'") from None


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not _logging_set_up(args):
        return 1
    if args.command == "optimize":
        _output_path(parser, args)
    if args.command == "check":
        return _check(args.file)
    if args.command == "compile":
        return _compile(args)
    if args.command == "optimize":
        return _optimize(args)
    if args.command == "tune":
        return _tune(args)
    if args.command == "prepare":
        return _prepare(args.model)
    if args.command == "demo":
        return _demo(args)
    if args.command == "package":
        return _package(args)
    return _cache(args.action)


if __name__ == "__main__":
    sys.exit(main())
