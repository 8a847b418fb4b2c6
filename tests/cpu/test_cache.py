"""The kernel cache: compile once, reuse across processes, survive races and corruption.

Every test points TC_GRAPH_CACHE at its own tmp_path. Compilation is detected two ways: the
module's `compilations` counter in this process, and, across processes, a CC wrapper script
that logs each invocation before exec'ing the real compiler.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import pytest

from tc_graph.errors import TcError
from tc_graph.runtime import cc

REPO = Path(__file__).resolve().parents[2]
REAL_CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(REAL_CC is None, reason="no C compiler on this machine")

ANSWER_C = "int answer(void) { return 42; }\n"
OTHER_C = "int answer(void) { return 43; }\n"
BROKEN_C = "int answer(void) { return undeclared_tc_symbol; }\n"
KEY = "0123456789abcdef0123456789abcdef"

# Run in a fresh interpreter: build + load ANSWER_C under KEY, report what happened.
CHILD = f"""
import json, os, sys, time
from pathlib import Path
from tc_graph.runtime import cc
ready, go = sys.argv[1:3]
if ready:
    Path(ready).touch()
    deadline = time.monotonic() + 30
    while not Path(go).exists() and time.monotonic() < deadline:
        time.sleep(0.001)
path = cc.build({ANSWER_C!r}, {KEY!r})
lib = cc.load(path)
print(json.dumps({{"answer": lib.answer(), "compilations": cc.compilations}}))
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("TC_GRAPH_CACHE", str(root))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("TC_GRAPH_CFLAGS", raising=False)
    return root


@pytest.fixture
def cc_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cache: Path) -> Path:
    """Install a CC wrapper that appends its arguments to a log; return the log's path."""
    assert REAL_CC is not None
    log = tmp_path / "cc.log"
    log.touch()
    wrapper = tmp_path / "cc-wrapper.sh"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"echo \"$*\" >> '{log}'\n"
        'case "$*" in *kernel.c*) [ -n "$TC_TEST_CC_SLEEP" ] && sleep "$TC_TEST_CC_SLEEP";; esac\n'
        f"exec '{REAL_CC}' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    return log


def compile_runs(log: Path) -> int:
    """Compiler invocations that compiled a kernel (the identity probe runs --version)."""
    return sum("kernel.c" in line for line in log.read_text().splitlines())


def answer(path: Path) -> int:
    fn = cc.load(path).answer
    fn.restype = ctypes.c_int
    fn.argtypes = []
    return int(fn())


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


@needs_cc
def test_build_and_call(cache: Path) -> None:
    before = cc.compilations
    path = cc.build(ANSWER_C, KEY)
    assert cc.compilations == before + 1
    assert path == cache / KEY / "kernel.so"
    assert (cache / KEY / "kernel.c").read_text() == ANSWER_C
    meta = json.loads((cache / KEY / "meta.json").read_text())
    assert set(meta) >= {"sha256", "source_sha256", "compiler", "created"}
    assert meta["compiler"] == cc.compiler_identity()
    assert answer(path) == 42
    assert not [p.name for p in (cache / KEY).iterdir() if p.name.endswith(".tmp")]


@needs_cc
def test_second_build_same_process_is_a_hit(cache: Path) -> None:
    path = cc.build(ANSWER_C, KEY)
    before = cc.compilations
    t0 = time.perf_counter()
    assert cc.build(ANSWER_C, KEY) == path
    assert cc.compilations == before
    assert time.perf_counter() - t0 < 0.05  # a warm hit costs milliseconds
    assert cc.load(path) is cc.load(path)


@needs_cc
def test_second_process_reuses_entry(cache: Path, cc_log: Path) -> None:
    assert answer(cc.build(ANSWER_C, KEY)) == 42
    assert compile_runs(cc_log) == 1
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "", ""],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"answer": 42, "compilations": 0}
    assert compile_runs(cc_log) == 1  # the second process did not run the compiler


@needs_cc
def test_concurrent_processes_same_key(
    cache: Path, cc_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TC_TEST_CC_SLEEP", "0.3")  # keep the first compile in flight
    go = tmp_path / "go"
    readies = [tmp_path / f"ready{i}" for i in range(2)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(ready), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        for ready in readies
    ]
    try:
        deadline = time.monotonic() + 30
        while not all(r.exists() for r in readies) and time.monotonic() < deadline:
            time.sleep(0.005)
        go.touch()  # both start building at once
        results = [p.communicate(timeout=60) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert json.loads(out)["answer"] == 42
    # The entry lock lets one compile and the other wait for it.
    assert compile_runs(cc_log) == 1
    assert sum(json.loads(out)["compilations"] for out, _ in results) == 1
    assert answer(cc.build(ANSWER_C, KEY)) == 42


@needs_cc
def test_concurrent_builders_without_lock(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Correctness rests on the atomic renames, not on the lock: both compile, both win."""
    monkeypatch.setattr(cc, "_locked", lambda _path: nullcontext())
    barrier = threading.Barrier(4)
    paths: list[Path] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            barrier.wait()
            paths.append(cc.build(ANSWER_C, KEY))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(paths) == 4
    assert answer(paths[0]) == 42
    before = cc.compilations
    cc.build(ANSWER_C, KEY)  # the entry left behind is consistent
    assert cc.compilations == before
    assert not [p.name for p in (cache / KEY).iterdir() if p.name.endswith(".tmp")]


def _truncate(so: Path) -> None:
    data = so.read_bytes()
    so.write_bytes(data[: len(data) // 2])


def _flip(so: Path) -> None:
    data = bytearray(so.read_bytes())
    mid = len(data) // 2
    for i in range(mid, mid + 16):
        data[i] ^= 0xFF
    so.write_bytes(bytes(data))


def _drop_meta(so: Path) -> None:
    (so.parent / "meta.json").unlink()


def _garble_meta(so: Path) -> None:
    (so.parent / "meta.json").write_text('{"sha256": ')


@needs_cc
@pytest.mark.parametrize("damage", [_truncate, _flip, _drop_meta, _garble_meta])
def test_damaged_entry_is_rebuilt(cache: Path, damage: Callable[[Path], None]) -> None:
    path = cc.build(ANSWER_C, KEY)
    assert answer(path) == 42
    good = path.read_bytes()
    damage(path)
    before = cc.compilations
    rebuilt = cc.build(ANSWER_C, KEY)
    assert cc.compilations == before + 1
    assert rebuilt == path
    meta = json.loads((path.parent / "meta.json").read_text())
    assert meta["sha256"] == cc._sha256(path.read_bytes())
    assert len(path.read_bytes()) == len(good)
    assert answer(rebuilt) == 42


@needs_cc
def test_rebuilt_object_is_reloaded(cache: Path) -> None:
    """Same key and path, other bytes: load must not hand back dlopen's stale handle."""
    path = cc.build(ANSWER_C, KEY)
    assert answer(path) == 42
    before = cc.compilations
    assert cc.build(OTHER_C, KEY) == path  # other source under the same key: rebuilt
    assert cc.compilations == before + 1
    assert answer(path) == 43
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".so") and p != path]


def test_missing_compiler(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CC", "/nonexistent/cc")
    with pytest.raises(TcError, match="install") as info:
        cc.build(ANSWER_C, KEY)
    assert "/nonexistent/cc" in str(info.value)
    with pytest.raises(TcError, match="install"):
        cc.compiler()


@needs_cc
def test_compile_error(cache: Path) -> None:
    with pytest.raises(TcError) as info:
        cc.build(BROKEN_C, KEY)
    text = str(info.value)
    assert "undeclared_tc_symbol" in text  # the compiler's own message
    assert str(cache / KEY / "kernel.c") in text
    assert (cache / KEY / "kernel.c").read_text() == BROKEN_C
    assert not (cache / KEY / "kernel.so").exists()


@needs_cc
def test_a_compiler_without_openmp_is_named_not_blamed_on_the_kernel(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CC that cannot build OpenMP code (clang without libomp: "'omp.h' file not found")
    fails every kernel: the error says so and how to fix it, where it called the
    generated source a tc_graph bug."""
    fake = tmp_path / "no-openmp-cc.sh"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *-fopenmp*) echo "fatal error: omp.h: file not found" >&2; exit 1;; esac\n'
        f"exec '{REAL_CC}' \"$@\"\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    with pytest.raises(TcError) as info:
        cc.build(ANSWER_C, KEY)
    text = str(info.value)
    assert "cannot build OpenMP" in text and "omp.h" in text, text
    assert "tc_graph bug" not in text
    assert info.value.hint is not None and "OpenMP" in info.value.hint


@needs_cc
def test_flags_the_compiler_refuses_are_named_not_blamed_on_openmp(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flag the compiler rejects (TC_GRAPH_CFLAGS) fails every compile too, the OpenMP
    probe included: the error says the flags, not OpenMP, are what it cannot build with
    (a review found it blamed OpenMP)."""
    monkeypatch.setenv("TC_GRAPH_CFLAGS", "-fbogus-tc-flag")
    with pytest.raises(TcError) as info:
        cc.build(ANSWER_C, KEY)
    text = str(info.value)
    assert "OpenMP" not in text and "-fbogus-tc-flag" in text, text
    assert "tc_graph bug" not in text
    assert info.value.hint is not None and "TC_GRAPH_CFLAGS" in info.value.hint


def _banner() -> str:
    proc = subprocess.run(["cc", "--version"], capture_output=True, text=True, check=False)
    return proc.stdout + proc.stderr


@needs_cc
def test_compiler_and_flags(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gcc = list(cc.GCC_CFLAGS) if "Free Software Foundation" in _banner() else []
    exe, flags = cc.compiler()
    assert exe == "cc"
    assert flags == [*cc.DEFAULT_CFLAGS, *gcc]
    monkeypatch.setenv("CC", f"{REAL_CC} -DFROM_CC=1")
    monkeypatch.setenv("TC_GRAPH_CFLAGS", "-O1 -DNAME='a b'")
    exe, flags = cc.compiler()
    assert exe == REAL_CC
    assert flags == ["-DFROM_CC=1", *cc.DEFAULT_CFLAGS, *gcc, "-O1", "-DNAME=a b"]


@pytest.mark.parametrize(
    ("banner", "gcc"),
    [
        ("cc (Debian 12.2.0-14) 12.2.0\nCopyright (C) 2022 Free Software Foundation, Inc.", True),
        ("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu", False),
        ("icx (ICX) 2024.0.0", False),
    ],
)
def test_gcc_flags_only_for_gcc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, banner: str, gcc: bool
) -> None:
    """GCC's own options go to GCC only: another compiler would refuse them."""
    fake = tmp_path / "fake-cc.sh"
    fake.write_text(f"#!/bin/sh\nprintf '{banner}\\n'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    _, flags = cc.compiler()
    assert all(f in flags for f in cc.GCC_CFLAGS) == gcc
    assert flags[: len(cc.DEFAULT_CFLAGS)] == list(cc.DEFAULT_CFLAGS)


@needs_cc
def test_cache_key(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key = cc.cache_key("a", "bc")
    assert len(key) == 32 and int(key, 16) >= 0
    assert cc.cache_key("a", "bc") == key
    assert cc.cache_key("ab", "c") != key
    assert cc.cache_key("a", "bc", "") != key
    monkeypatch.setenv("TC_GRAPH_CFLAGS", "-DX=1")
    assert cc.cache_key("a", "bc") != key  # the compiler identity is part of the key
    assert "-DX=1" in cc.compiler_identity()
    with pytest.raises(TcError, match="invalid kernel cache key"):  # not a ValueError
        cc.build(ANSWER_C, "../escape")


def test_cache_dir_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "deep" / "tc"
    monkeypatch.setenv("TC_GRAPH_CACHE", str(root))
    old = os.umask(0o022)
    try:
        assert cc.cache_dir() == root
    finally:
        os.umask(old)
    assert stat.S_IMODE(root.stat().st_mode) == 0o700


def test_cache_dir_fallbacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TC_GRAPH_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cc.cache_dir() == tmp_path / "xdg" / "tc_graph"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cc.cache_dir() == tmp_path / "home" / ".cache" / "tc_graph"
    assert stat.S_IMODE(cc.cache_dir().stat().st_mode) == 0o700


@needs_cc
def test_cache_info_and_clear(cache: Path) -> None:
    cc.build(ANSWER_C, KEY)
    cc.build(OTHER_C, "other")
    (cache / "tuning.json").write_text("{}")
    (cache / "unrelated").mkdir()
    info = cc.cache_info()
    assert info["path"] == str(cache)
    assert info["entries"] == 2
    assert info["bytes"] > 0
    assert cc.cache_clear() == 2
    assert not (cache / KEY).exists() and not (cache / "other").exists()
    assert (cache / "tuning.json").exists() and (cache / "unrelated").exists()
    assert cc.cache_info()["entries"] == 0
    before = cc.compilations
    assert answer(cc.build(ANSWER_C, KEY)) == 42  # rebuilt after a clear
    assert cc.compilations == before + 1


def test_cache_dir_not_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("TC_GRAPH_CACHE", str(tmp_path / "file"))
    with pytest.raises(TcError, match="not a directory"):
        cc.cache_dir()


def _kernel_mappings(cache: Path) -> int:
    """Mappings of this process that belong to loaded kernels (from the cache or a memfd)."""
    lines = Path("/proc/self/maps").read_text().splitlines()
    return sum(str(cache) in line or "memfd:tc_kernel" in line for line in lines)


@needs_cc
def test_kernels_are_unloaded_with_their_last_user(cache: Path) -> None:
    """Issue 12: 300 distinct kernels left 1,500 mappings, never dlclosed."""
    import gc

    sources = [f"int answer(void) {{ return {k}; }}\n" for k in range(100, 106)]
    paths = [cc.build(text, f"unload-{k}") for k, text in enumerate(sources)]
    gc.collect()
    before = _kernel_mappings(cache)
    fns = [cc.load(path).answer for path in paths]  # a function pointer holds its library
    gc.collect()
    assert _kernel_mappings(cache) >= before + len(paths)
    assert [fn() for fn in fns] == list(range(100, 106))
    del fns
    gc.collect()
    assert _kernel_mappings(cache) == before
    assert answer(paths[0]) == 100  # loaded again after the unload


@needs_cc
def test_load_refuses_bytes_that_do_not_match_meta(cache: Path) -> None:
    path = cc.build(ANSWER_C, KEY)
    other = cc.build(OTHER_C, "other")
    shutil.copyfile(other, path)
    with pytest.raises(TcError, match=r"does not match its meta\.json"):
        cc.load(path)
    (path.parent / "meta.json").unlink()
    (path.parent / "meta.json").symlink_to("/dev/zero")
    with pytest.raises(TcError, match="cannot read compiled kernel"):
        cc.load(path)
    assert answer(cc.build(ANSWER_C, KEY)) == 42  # rebuilt


@needs_cc
def test_damaged_entries_are_tc_errors(cache: Path) -> None:
    path = cc.build(ANSWER_C, KEY)
    path.unlink()
    path.mkdir()  # a directory where kernel.so belongs
    with pytest.raises(TcError, match="cannot write the kernel cache entry"):
        cc.build(ANSWER_C, KEY)
    shutil.rmtree(path.parent)
    path.parent.write_text("")  # a file where the entry belongs
    with pytest.raises(TcError, match="tc-graph cache clear"):
        cc.build(ANSWER_C, KEY)
