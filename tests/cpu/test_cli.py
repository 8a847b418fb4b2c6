"""The `tc-graph` command, run as a user would (a subprocess)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tc_graph.cli", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        timeout=120,
    )


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
    env = {"TC_GRAPH_CACHE": str(tmp_path / "cache")}
    r = run("compile", "examples/paper.tc", "--entry", "tmm", "--shapes", "A=16x8,B=12x8", env=env)
    assert r.returncode == 0, r.stderr
    assert "int tc_kernel(" in r.stdout
    assert "#pragma omp parallel for" in r.stdout
    info = run("cache", "info", env=env)
    assert "entries: 1" in info.stdout
    cleared = run("cache", "clear", env=env)
    assert "removed 1 entries" in cleared.stdout
    assert "entries: 0" in run("cache", "info", env=env).stdout


@pytest.mark.parametrize(
    ("shapes", "message"),
    [("A=16x8", "missing B"), ("A=16x8,B=12x8,Z=3", "unknown Z"), ("A=16y8,B=1", "cannot read")],
)
def test_compile_rejects_bad_shapes(shapes: str, message: str) -> None:
    r = run("compile", "examples/paper.tc", "--entry", "tmm", "--shapes", shapes)
    assert r.returncode == 1
    assert message in r.stderr
