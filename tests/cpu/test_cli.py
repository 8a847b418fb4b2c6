"""The `tc-graph` command, as a user runs it. Most tests call its `main` in this process
(a fresh interpreter spends about 2 s importing tc_graph, which made this file the
suite's slowest); the process boundary itself is tested where it is the point: the
installed entry point, no progress frames on a stderr that is not a terminal, and the
compiler's debug lines (this process keeps the kernels it built)."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import tc_graph as tg
from tc_graph import cli
from tc_graph.graph import bench_models
from tc_graph.runtime import machine

ROOT = Path(__file__).resolve().parents[2]
OPT = importlib.import_module("tc_graph.graph.optimize")


@pytest.fixture(autouse=True)
def _own_logging() -> Iterator[None]:
    """main configures tc_graph's logger (level, handler): undone after each test."""
    logger = logging.getLogger("tc_graph")
    saved = (logger.level, list(logger.handlers), logger.propagate)
    yield
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]
    logger.propagate = saved[2]


@contextlib.contextmanager
def _environment(env: dict[str, str] | None) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`tc-graph ARGS` in this process, from the repository root, with `env` added: its
    exit code and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with (
        _environment(env),
        contextlib.chdir(ROOT),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = cli.main(list(args))
        except SystemExit as e:  # argparse's errors, --help and --version
            code = e.code if isinstance(e.code, int) else int(e.code is not None)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def test_check_prints_ranges_and_symbolic_shapes() -> None:
    r = run("check", "examples/paper.tc")
    assert r.returncode == 0, r.stderr
    assert "output O1: float32(B, D)" in r.stdout
    assert "i in 0:H / 2" in r.stdout or "i in 0:H / 2," in r.stdout
    assert "output A: float32(I / 2)" in r.stdout


def test_check_error_prints_caret_and_fails(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tc"
    bad.write_text("def f(float(N) A) -> (O) {\n  O(i,j) = A(i)\n}\n")
    r = run("check", str(bad))
    assert r.returncode == 1
    assert "cannot infer the range of 'j'" in r.stderr
    lines = r.stderr.splitlines()
    caret = next(k for k, line in enumerate(lines) if line.strip().startswith("|") and "^" in line)
    source_line = lines[caret - 1]
    assert source_line[lines[caret].index("^")] == "j"


def test_compile_emits_openmp_c(tmp_path: Path) -> None:
    # The kernel's one entry: this process's FMA probe (runtime/machine.py, once per
    # process) is built first, into the suite's cache; run alone, the probe was a second
    # entry of this test's cache and the count failed.
    machine.fma_chains()
    env = {"TC_GRAPH_CACHE": str(tmp_path / "cache")}
    r = run("compile", "examples/paper.tc", "--entry", "tmm", "--shapes", "A=16x8,B=12x8", env=env)
    assert r.returncode == 0, r.stderr
    assert "int tc_kernel(" in r.stdout
    assert "#pragma omp parallel" in r.stdout
    info = run("cache", "info", env=env)
    assert "entries: 1" in info.stdout
    cleared = run("cache", "clear", env=env)
    assert "removed 1 entries" in cleared.stdout
    assert "entries: 0" in run("cache", "info", env=env).stdout


@pytest.mark.parametrize(
    ("shapes", "message"),
    [
        ("A=16x8", "missing B"),
        ("A=16x8,B=12x8,Z=3", "unknown Z"),
        ("A=16y8,B=1", "cannot read"),
        # Found by fuzzing: the last of the two was kept silently.
        ("A=16x8,B=12x8,A=4x8", "--shapes names 'A' twice"),
    ],
)
def test_compile_rejects_bad_shapes(shapes: str, message: str) -> None:
    r = run("compile", "examples/paper.tc", "--entry", "tmm", "--shapes", shapes)
    assert r.returncode == 1
    assert message in r.stderr


# ----------------------------------------------------------------------------- ONNX


def spawn(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`tc-graph ARGS` in a fresh interpreter: for what this process would hide (it keeps
    the kernels it has built, so it never compiles one again)."""
    return subprocess.run(
        [sys.executable, "-m", "tc_graph.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


def _save_small(name: str, path: Path) -> onnx.ModelProto:
    model = bench_models.build(name, small=True)
    onnx.save(model, path)
    return model


def _assert_runs_like(optimized: Path, original: onnx.ModelProto) -> onnx.ModelProto:
    """The optimized file computes what onnxruntime computes on the original model."""
    feeds = bench_models.sample_inputs(original, seed=2)
    want = ort.InferenceSession(original.SerializeToString()).run(None, feeds)
    got = tg.InferenceSession(optimized).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return onnx.load(optimized)


def _tc_kernels(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    return [n for n in model.graph.node if n.op_type == "TcKernel"]


def test_optimize_force_report(tmp_path: Path) -> None:
    original = _save_small("2lut", tmp_path / "in.onnx")
    r = run(
        "optimize",
        str(tmp_path / "in.onnx"),
        "-o",
        str(tmp_path / "out.onnx"),
        "--force",
        "--report",
    )
    assert r.returncode == 0, r.stderr
    assert "decision" in r.stderr and "forced" in r.stderr  # the per-group table
    assert "1 TcKernel" in r.stdout
    result = _assert_runs_like(tmp_path / "out.onnx", original)
    assert [n.op_type for n in result.graph.node] == ["TcKernel"]


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="no matplotlib")
def test_optimize_cost_aware_with_graph_png(tmp_path: Path) -> None:
    original = _save_small("mlp3_gemm", tmp_path / "in.onnx")
    png = tmp_path / "graph.png"
    r = run(
        "optimize",
        str(tmp_path / "in.onnx"),
        "-o",
        str(tmp_path / "out.onnx"),
        "--graph-png",
        str(png),
    )
    assert r.returncode == 0, r.stderr
    _assert_runs_like(tmp_path / "out.onnx", original)
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert png.stat().st_size > 5000


def test_graph_png_without_matplotlib_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _save_small("mlp3_gemm", tmp_path / "in.onnx")
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` fail
    out = tmp_path / "out.onnx"
    r = run("optimize", str(tmp_path / "in.onnx"), "-o", str(out), "--graph-png", "g.png")
    assert r.returncode == 1
    assert "pip install matplotlib" in r.stderr
    assert "Traceback" not in r.stderr
    assert not out.exists()  # it failed before the slow part


def test_prepare_compiles_into_the_cache(tmp_path: Path) -> None:
    _save_small("mlp3_matmul", tmp_path / "in.onnx")
    r = run("optimize", str(tmp_path / "in.onnx"), "-o", str(tmp_path / "out.onnx"), "--force")
    assert r.returncode == 0, r.stderr
    (node,) = _tc_kernels(onnx.load(tmp_path / "out.onnx"))
    key = next(a.s.decode() for a in node.attribute if a.name == "kernel_key")
    cache = tmp_path / "fresh-cache"
    r = run("prepare", str(tmp_path / "out.onnx"), env={"TC_GRAPH_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    assert "1 TcKernel" in r.stdout
    assert (cache / key).is_dir() and any((cache / key).glob("*.so"))


@pytest.mark.parametrize("command", ["optimize", "prepare"])
@pytest.mark.parametrize("content", [None, b"garbage, not protobuf \xff\xfe"])
def test_onnx_commands_reject_bad_files(
    tmp_path: Path, command: str, content: bytes | None
) -> None:
    path = tmp_path / "model.onnx"
    if content is not None:
        path.write_bytes(content)
    extra = ["-o", str(tmp_path / "out.onnx")] if command == "optimize" else []
    r = run(command, str(path), *extra)
    assert r.returncode == 1
    assert "model.onnx" in r.stderr
    assert ("does not exist" if content is None else "not a readable ONNX model") in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "out.onnx").exists()


def test_demo_verifies_and_prints_the_speedup_table() -> None:
    r = run("demo")  # the README's first command
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split()[:3] == ["model", "nodes", "TcKernels"]
    rows = {line.split()[0]: line.split() for line in lines[1 : 1 + len(bench_models.NAMES)]}
    assert set(rows) == set(bench_models.NAMES)
    for name, cells in rows.items():
        before, after = int(cells[1]), int(cells[3])
        assert before == len(bench_models.build(name, small=True).graph.node)
        assert 1 <= after <= before
        assert float(cells[5]) > 0 and float(cells[6]) > 0
        assert cells[7].endswith("x") and float(cells[7][:-1]) > 0


def test_demo_fails_on_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    real = OPT.InferenceSession

    class Off:
        def __init__(self, session: object) -> None:
            self.session = session

        def run(self, *args: object) -> list[np.ndarray]:
            return [x + 1 for x in self.session.run(*args)]

    monkeypatch.setattr(OPT, "InferenceSession", lambda model: Off(real(model)))
    r = run("demo", "--models", "2lut")
    assert r.returncode == 1
    assert "2lut" in r.stderr and "differ" in r.stderr
    assert "Traceback" not in r.stderr


def test_demo_rejects_an_unknown_model() -> None:
    r = run("demo", "--models", "mlp3_gemm,nope")
    assert r.returncode == 1
    assert "nope" in r.stderr and "Traceback" not in r.stderr


def test_the_installed_command_prints_its_version() -> None:
    """Through a fresh interpreter: `python -m tc_graph.cli`, as installed."""
    from importlib.metadata import version

    r = spawn("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tc-graph {version('tc_graph')}"
    assert run("--version").stdout == r.stdout


def test_top_level_help_lists_every_subcommand() -> None:
    r = run("--help")
    assert r.returncode == 0, r.stderr
    for command in ("check", "compile", "tune", "optimize", "prepare", "demo", "cache"):
        assert any(line.split()[:1] == [command] for line in r.stdout.splitlines()), command


def test_check_on_an_onnx_file_names_what_it_got(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(bench_models.build("mlp3_gemm", small=True), str(path))
    r = run("check", str(path))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "ONNX model" in r.stderr and "tc-graph optimize" in r.stderr


def test_check_on_binary_data_is_a_clean_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.tc"
    path.write_bytes(bytes(range(256)))
    r = run("check", str(path))
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "not TC text" in r.stderr


def test_check_on_an_endless_file_is_a_clean_error() -> None:
    """Found by fuzzing the command line: it read /dev/zero until memory ran out."""
    r = run("check", "/dev/zero")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert "larger than" in r.stderr and "not a TC source" in r.stderr


@pytest.mark.parametrize("command", ["prepare", "package"])
def test_an_empty_file_is_no_model(tmp_path: Path, command: str) -> None:
    """Found by fuzzing the command line: an empty file parses as an empty ModelProto,
    and prepare reported '0 TcKernels compiled'."""
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    extra = ["-o", str(tmp_path / "pkg")] if command == "package" else []
    r = run(command, str(path), *extra)
    assert r.returncode == 1
    assert "is not an ONNX model: it has no graph outputs" in r.stderr


def test_optimize_takes_the_output_as_a_positional_argument(tmp_path: Path) -> None:
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(bench_models.build("mlp3_gemm", small=True), str(src))
    r = run("optimize", str(src), str(out), "--force")
    assert r.returncode == 0, r.stderr
    assert onnx.load(str(out)).graph.node


def test_no_progress_frames_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    _save_small("mlp3_gemm", tmp_path / "in.onnx")
    argv = ["optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx"), "--force"]
    # Bytes, not text: text mode would turn the frames' carriage returns into newlines.
    r = subprocess.run(
        [sys.executable, "-m", "tc_graph.cli", *argv], capture_output=True, cwd=ROOT, timeout=120
    )
    assert r.returncode == 0, r.stderr
    assert b"\r" not in r.stderr


# ----------------------------------------------------------------------------- logging


def _optimize_force(
    folder: Path,
    before: Sequence[str] = (),
    after: Sequence[str] = (),
    env: dict[str, str] | None = None,
    fresh: bool = False,
) -> subprocess.CompletedProcess[str]:
    """`tc-graph [BEFORE] optimize IN OUT --force [AFTER]` on the small MLP3 (this compiles
    one kernel, and measures nothing), with the kernel cache in `folder`; in a `fresh`
    process where the compiler's own debug lines are looked for."""
    model = folder / "in.onnx"
    if not model.exists():
        folder.mkdir(parents=True, exist_ok=True)
        _save_small("mlp3_gemm", model)
    argv = ["optimize", str(model), str(folder / "out.onnx"), "--force"]
    env = {"TC_GRAPH_CACHE": str(folder / "cache"), **(env or {})}
    return (spawn if fresh else run)(*before, *argv, *after, env=env)


def test_quiet_silences_the_status_lines_and_the_summary(tmp_path: Path) -> None:
    loud = _optimize_force(tmp_path)
    assert loud.returncode == 0, loud.stderr
    assert "wrote" in loud.stdout and "1 of 1 group fused" in loud.stdout
    assert "debug:" not in loud.stderr  # info is the default level
    for before, after in ((["-q"], []), ([], ["--quiet"])):  # before or after the command
        r = _optimize_force(tmp_path, before, after)
        assert (r.returncode, r.stdout, r.stderr) == (0, "", ""), (before, after)
        assert len(_tc_kernels(onnx.load(tmp_path / "out.onnx"))) == 1  # the work is done


def _assert_debug_lines(stderr: str, *, compiled: bool) -> None:
    """The debug lines of optimize's, the kernel's and the compiler's module loggers."""
    lines = stderr.splitlines()
    assert "debug: tc_graph.graph.optimize: 1 candidate group: Gemm+Relu" in stderr
    state = "miss" if compiled else "hit"
    kernel = f"debug: tc_graph.runtime.kernel: fused0: kernel cache {state}"
    assert any(x.startswith(kernel) for x in lines)
    assert any(x.startswith("debug: tc_graph.runtime.cc: compiling: ") for x in lines) == compiled
    assert any(x.startswith("debug: tc_graph.runtime.cc: compiled ") for x in lines) == compiled


def test_verbose_shows_debug_lines_of_the_module_loggers(tmp_path: Path) -> None:
    fresh = _optimize_force(tmp_path, ["-v"], fresh=True)  # an empty cache: it compiles
    assert fresh.returncode == 0, fresh.stderr
    _assert_debug_lines(fresh.stderr, compiled=True)
    again = _optimize_force(tmp_path, [], ["--verbose"])
    assert again.returncode == 0, again.stderr
    _assert_debug_lines(again.stderr, compiled=False)
    assert "wrote" in again.stdout  # and the info lines


def test_tc_graph_log_sets_the_level_and_flags_override_it(tmp_path: Path) -> None:
    r = _optimize_force(tmp_path, env={"TC_GRAPH_LOG": "debug"}, fresh=True)
    assert r.returncode == 0, r.stderr
    _assert_debug_lines(r.stderr, compiled=True)
    r = _optimize_force(tmp_path, env={"TC_GRAPH_LOG": "WARNING"})
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")
    r = _optimize_force(tmp_path, [], ["-q"], env={"TC_GRAPH_LOG": "debug"})
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_a_bad_tc_graph_log_is_an_error_that_lists_the_levels(tmp_path: Path) -> None:
    r = run("check", "examples/paper.tc", env={"TC_GRAPH_LOG": "verbose"})
    assert r.returncode == 1 and not r.stdout
    assert "TC_GRAPH_LOG='verbose' is not a log level" in r.stderr
    assert "debug, info, warning, error" in r.stderr and "Traceback" not in r.stderr


# ----------------------------------------------------------------------------- summary


def _staged_optimize(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, outcome: str, *flags: str
) -> subprocess.CompletedProcess[str]:
    """optimize on the small MLP3 with its race replaced by a stand-in (the command then
    compiles but measures nothing). A group of more than two nodes loses (so it is
    split); of the Gemm+Relu pairs, the first and third win by 2x and the second loses
    at 0.8x, unless every group loses ("lose"); the whole model runs 1.5x."""
    pairs = iter(range(1, 100))

    def race(original: onnx.ModelProto, fused: onnx.ModelProto, feeds: dict) -> dict:
        if fused.graph.name != "fused":
            ratio = 1.5
        elif len(original.graph.node) > 2 or outcome == "lose":
            ratio = 0.5
        else:
            ratio = 0.8 if next(pairs) == 2 else 2.0
        return {"fused_us": 1.0, "ort_us": ratio, "ratio": ratio}

    monkeypatch.setattr(OPT, "_race", race)
    monkeypatch.setattr(OPT, "_calibration", lambda: None)  # the stand-in decides every group
    _save_small("mlp3_gemm", tmp_path / "in.onnx")
    argv = ["optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx"), *flags]
    return run(*argv, env={"TC_GRAPH_CACHE": str(tmp_path / "cache")})


def _decisions(path: Path) -> list[dict]:
    model = onnx.load(path)
    (entry,) = [p.value for p in model.metadata_props if p.key == "tc_graph.decisions"]
    return json.loads(entry)


def test_report_words_each_decision_and_ends_with_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _staged_optimize(tmp_path, monkeypatch, "mixed", "--report")
    assert r.returncode == 0, r.stderr
    rows = [x for x in r.stderr.splitlines() if x.startswith("Gemm+Relu ")]
    assert [x.split("  ")[-1] for x in rows] == [
        "fused (2.00x faster)",
        "left to onnxruntime: 0.80x, slower than onnxruntime",
        "fused (2.00x faster)",
    ]
    kernels = len(_tc_kernels(onnx.load(tmp_path / "out.onnx")))
    assert kernels == sum(d["fused"] for d in _decisions(tmp_path / "out.onnx")) == 2
    summary = "2 of 3 groups fused, 1.50 times faster on the sample inputs"
    assert r.stderr.rstrip().splitlines()[-1] == summary
    assert summary not in r.stdout  # printed once, at the end of the report


def test_summary_says_why_nothing_was_fused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    r = _staged_optimize(tmp_path, monkeypatch, "lose")
    assert r.returncode == 0, r.stderr
    assert not _tc_kernels(onnx.load(tmp_path / "out.onnx"))
    assert len(_decisions(tmp_path / "out.onnx")) == 3
    # without --report: one line, the last
    assert r.stdout.splitlines()[-1] == "nothing fused: slower than onnxruntime (3 of 3 groups)"


def test_summary_agrees_with_what_was_measured(tmp_path: Path) -> None:
    """Measured for real (either outcome): the summary counts the TcKernels written."""
    _save_small("2lut", tmp_path / "in.onnx")
    argv = ["optimize", str(tmp_path / "in.onnx"), str(tmp_path / "out.onnx")]
    r = run(*argv, env={"TC_GRAPH_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    made = _decisions(tmp_path / "out.onnx")
    kernels = len(_tc_kernels(onnx.load(tmp_path / "out.onnx")))
    summary = r.stdout.splitlines()[-1]
    if kernels:
        head = f"{kernels} of {len(made)} group{'s' * (len(made) > 1)} fused, "
        assert summary.startswith(head) and summary.endswith(" times faster on the sample inputs")
        assert float(summary[len(head) :].split()[0]) >= 1.0  # the whole model is not slower
    else:
        assert summary.startswith("nothing fused: ")
        assert summary.endswith(f" of {len(made)} group{'s' * (len(made) > 1)})")


def test_malformed_input_is_a_one_line_error_not_a_traceback(tmp_path: Path) -> None:
    """Found by fuzzing the command line: a TC file nested 5,000 deep (check, compile)
    printed a RecursionError traceback, as did compiling a 600-term sum, and --shapes too
    large for NumPy to allocate a MemoryError one; each is an error line and exit 1."""
    deep = tmp_path / "deep.tc"
    deep.write_text(
        "def f(float(N) A) -> (B) { B(i) = " + "(" * 5000 + "A(i)" + ")" * 5000 + " }\n"
    )
    mm = tmp_path / "mm.tc"
    mm.write_text("def mm(float(M,K) A, float(K,N) B) -> (C) { C(m,n) +=! A(m,k) * B(k,n) }\n")
    long = tmp_path / "long.tc"  # accepted, then too deep to compile
    long.write_text("def f(float(N) A) -> (B) { B(i) = A(i)" + " + A(i)" * 600 + " }\n")
    for args in (
        ["check", str(deep)],
        ["compile", str(deep), "--shapes", "A=4"],
        ["compile", str(long), "--shapes", "A=4"],
        ["compile", str(mm), "--shapes", "A=3000000x3000000,B=3000000x1"],
    ):
        proc = run(*args)
        assert proc.returncode == 1, (args, proc.stderr)
        assert "Traceback" not in proc.stderr and "error:" in proc.stderr, (args, proc.stderr)
