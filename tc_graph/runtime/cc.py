"""Compile generated C with the system compiler, cache the shared objects on disk, load them.

Cache layout (shared with the native onnxruntime library, see DESIGN.md "ONNX integration"):
``<cache>/<key>/`` holds ``kernel.c`` (kept for error messages and debugging), ``kernel.so``
and ``meta.json`` (``key``: the entry's own key, ``sha256`` of kernel.so's bytes,
``source_sha256``, ``compiler``, ``created``, ``cpu_features``: the CPU features the flags
let the compiler use, which the onnxruntime library checks before loading the kernel, and
for kernels filed under a TcKernel node's key a ``stamp`` naming the tc_graph and compiler
that built them). Every file is written to a unique temporary name in the same directory
and ``os.replace``d into place, meta.json last, so concurrent processes never see half a
file and an entry whose .so does not match its meta.json is simply rebuilt. Only regular
files of bounded size are read (a symlink to /dev/zero is a damaged entry, not an endless
read), and a kernel is loaded from the very bytes whose sha256 was checked (through a
memfd), so nothing on disk can change between.
"""

from __future__ import annotations

import _ctypes
import contextlib
import contextvars
import ctypes
import errno
import fcntl
import functools
import hashlib
import json
import logging
import os
import platform
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypedDict, TypeVar

from ..errors import TcError
from ..options import VectorUnit

log = logging.getLogger(__name__)
_T = TypeVar("_T")

DEFAULT_CC = "cc"
_CC_HINT = (
    "install gcc (on Debian or Ubuntu: sudo apt-get install gcc) or set CC to a working C "
    "compiler with OpenMP"
)
DEFAULT_CFLAGS: tuple[str, ...] = (
    "-O3",
    "-march=native",
    "-fopenmp",
    "-fPIC",
    "-fwrapv",
    # No program reads the floating-point exception flags: without this, gcc kept the
    # clamps of the prelude's tc_expf as branches, and no loop calling it vectorized.
    "-fno-trapping-math",
    "-shared",
    "-std=gnu11",
)
# GCC's only (clang has no such option): every loop a region of the register allocator.
# With its default ("mixed", loops of low pressure left out), gcc 12 kept the 4-row
# register block of a kernel for every size on the stack: MLP1 3.3x and MLP3 2.9x slower
# than with this flag, which left specialised kernels as they were (Zen 4, within 3%).
GCC_CFLAGS: tuple[str, ...] = ("-fira-region=all",)
# Libraries go after the source file; libm so generated code may call sinf, pow, ...
_LIBS: tuple[str, ...] = ("-lm",)
COMPILE_TIMEOUT_S = 120.0
_VERSION_TIMEOUT_S = 30.0
_MAX_STDERR_LINES = 40

SO_NAME = "kernel.so"
SOURCE_NAME = "kernel.c"
META_NAME = "meta.json"
_LOCK_NAME = ".lock"
# Bounds on what the cache may hand us (ort_op.c has the same): anything larger is damage.
MAX_KERNEL_BYTES = 256 << 20
MAX_META_BYTES = 64 << 10

# Keys name directories: no separators, no leading dot (temp files and ".." start with one).
_KEY_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")

compilations: int = 0
"""How many times the C compiler actually ran in this process (tests read it)."""

# x86 CPU features a kernel may need, by the compiler macro that says the flags enable them
# and the name __builtin_cpu_supports knows them by (ort_op.c checks the same names).
_X86_FEATURES: dict[str, str] = {
    "__SSE3__": "sse3", "__SSSE3__": "ssse3", "__SSE4_1__": "sse4.1", "__SSE4_2__": "sse4.2",
    "__SSE4A__": "sse4a", "__POPCNT__": "popcnt", "__LZCNT__": "lzcnt", "__MOVBE__": "movbe",
    "__BMI__": "bmi", "__BMI2__": "bmi2", "__AES__": "aes", "__PCLMUL__": "pclmul",
    "__SHA__": "sha", "__XSAVE__": "xsave", "__F16C__": "f16c", "__FMA__": "fma",
    "__FMA4__": "fma4", "__AVX__": "avx", "__AVX2__": "avx2", "__AVXVNNI__": "avxvnni",
    "__GFNI__": "gfni", "__VPCLMULQDQ__": "vpclmulqdq", "__AVX512F__": "avx512f",
    "__AVX512BW__": "avx512bw", "__AVX512CD__": "avx512cd", "__AVX512DQ__": "avx512dq",
    "__AVX512VL__": "avx512vl", "__AVX512VNNI__": "avx512vnni", "__AVX512BF16__": "avx512bf16",
    "__AVX512FP16__": "avx512fp16", "__AVX512VBMI__": "avx512vbmi",
    "__AVX512VBMI2__": "avx512vbmi2", "__AVX512IFMA__": "avx512ifma",
    "__AVX512BITALG__": "avx512bitalg", "__AVX512VPOPCNTDQ__": "avx512vpopcntdq",
}  # fmt: skip

# Flags that go after all others while set (target_flags): a package's -march.
_target: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar(
    "tc_graph_target_flags", default=()
)
_load_lock = threading.Lock()


class CacheInfo(TypedDict):
    """What ``tc-graph cache info`` prints."""

    path: str
    entries: int
    bytes: int


# ---------------------------------------------------------------------------- locations


def cache_dir() -> Path:
    """The kernel cache directory, created private (0o700): kernels are code we execute."""
    override = os.environ.get("TC_GRAPH_CACHE")
    if override:
        path = Path(override).expanduser()
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
        path = base / "tc_graph"
    if not path.is_dir():
        try:
            path.mkdir(mode=0o700, parents=True)
        except FileExistsError:
            pass  # another process won the race; it used the same mode
        except OSError as exc:
            raise TcError(
                f"cannot create the kernel cache directory {path}: {exc}",
                hint="set TC_GRAPH_CACHE to a writable directory",
            ) from None
        else:
            # mkdir's mode is filtered by the umask; make sure nobody else can write here.
            path.chmod(0o700)
        if not path.is_dir():
            raise TcError(
                f"the kernel cache path {path} exists but is not a directory",
                hint="remove it or set TC_GRAPH_CACHE to a directory",
            )
    return path


# ----------------------------------------------------------------------------- compiler


def compiler() -> tuple[str, list[str]]:
    """The C compiler executable and every argument to pass it before ``-o``.

    ``CC`` may carry arguments (``CC="ccache gcc -m64"``): the first word is the executable,
    the rest come first in the list, then the defaults, then ``TC_GRAPH_CFLAGS`` so user
    flags win, then the flags of an enclosing ``target_flags`` (a package's ``-march``).
    """
    argv = _cc_argv()
    try:
        extra = shlex.split(os.environ.get("TC_GRAPH_CFLAGS", ""))
    except ValueError as exc:
        raise TcError(f"cannot parse TC_GRAPH_CFLAGS: {exc}") from None
    gcc = GCC_CFLAGS if _is_gcc() else ()
    return argv[0], [*argv[1:], *DEFAULT_CFLAGS, *gcc, *extra, *_target.get()]


@contextlib.contextmanager
def target_flags(flags: Sequence[str]) -> Iterator[None]:
    """Compile with ``flags`` last (``-march=x86-64-v3``, say) inside the block: they are
    part of the compiler identity, so cache keys, vector_unit and cpu_features follow them."""
    token = _target.set(tuple(flags))
    try:
        yield
    finally:
        _target.reset(token)


def active_target_flags() -> tuple[str, ...]:
    """The flags of the enclosing target_flags (none outside one)."""
    return _target.get()


def per_compiler(fn: Callable[[], _T]) -> Callable[[], _T]:
    """fn memoized per (CC, TC_GRAPH_CFLAGS, target flags): what the compiler says for them
    (or a probe built with them measures) does not change, and asking costs ~10 ms or more."""
    memo: dict[tuple[str | None, str | None, tuple[str, ...]], _T] = {}

    @functools.wraps(fn)
    def memoized() -> _T:
        key = (os.environ.get("CC"), os.environ.get("TC_GRAPH_CFLAGS"), _target.get())
        if key not in memo:
            memo[key] = fn()
        return memo[key]

    return memoized


def _cc_argv() -> list[str]:
    """``CC`` split into argv, checked to exist so users get an actionable message."""
    raw = os.environ.get("CC", "").strip()
    try:
        argv = shlex.split(raw) if raw else [DEFAULT_CC]
    except ValueError as exc:
        raise TcError(f"cannot parse CC={raw!r}: {exc}", hint="fix the quoting in CC") from None
    if not argv:
        argv = [DEFAULT_CC]
    if shutil.which(argv[0]) is None:
        raise TcError(f"no C compiler found (tried {argv[0]!r})", hint=_CC_HINT)
    return argv


@per_compiler
def compiler_identity() -> str:
    """Compiler command, its ``--version`` first line, flags and CPU: part of every cache key.

    An upgraded compiler, other flags or another CPU (``-march=native``) must not reuse old
    objects.
    """
    cc, args = compiler()
    proc = _ask_compiler("--version")  # CC's own arguments may pick the compiler (ccache gcc)
    lines = (proc.stdout or proc.stderr).strip().splitlines()
    version = lines[0].strip() if lines else "unknown version"
    resolved = shutil.which(cc) or cc
    return " | ".join([resolved, version, shlex.join(args), _cpu_identity()])


@per_compiler
def _is_gcc() -> bool:
    """Whether CC is GCC, which alone takes GCC_CFLAGS: its ``--version`` names the Free
    Software Foundation (``cc`` is often gcc under another name) and not clang."""
    proc = _ask_compiler("--version")
    text = f"{proc.stdout}{proc.stderr}"
    return "Free Software Foundation" in text and "clang" not in text


def _ask_compiler(*args: str) -> subprocess.CompletedProcess[str]:
    """CC run with these arguments for what it prints (its version, its macros)."""
    argv = _cc_argv()
    try:
        return _run([*argv, *args], _VERSION_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TcError(f"cannot run the C compiler {argv[0]!r}: {exc}", hint=_CC_HINT) from None


def vector_unit() -> VectorUnit:
    """The vector registers the compiler targets with its flags (``-march=native``: this
    CPU's), read from its predefined macros."""
    macros = _predefined_macros()
    if "__AVX512F__" in macros:
        return VectorUnit(floats=16, registers=32)
    if "__AVX__" in macros:
        return VectorUnit(floats=8, registers=16)
    # SSE, NEON and the rest: 16-byte registers
    return VectorUnit(floats=4, registers=32 if "__aarch64__" in macros else 16)


def cpu_features() -> tuple[str, ...]:
    """The x86 CPU features the compiler may use with its flags, sorted, by the names
    ``__builtin_cpu_supports`` knows (empty elsewhere): what a kernel needs to run."""
    macros = _predefined_macros()
    return tuple(sorted(name for macro, name in _X86_FEATURES.items() if macro in macros))


@per_compiler
def _predefined_macros() -> frozenset[str]:
    """The names the compiler predefines with its flags."""
    _, args = compiler()
    proc = _ask_compiler(*args, "-dM", "-E", "-x", "c", os.devnull)
    return frozenset(ln.split()[1] for ln in proc.stdout.splitlines() if ln.startswith("#define "))


def _cpu_identity() -> str:
    """Machine and CPU model, so ``-march=native`` objects are not shared across CPUs."""
    model = ""
    features = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(errors="replace").splitlines():
            name, _, value = line.partition(":")
            name = name.strip()
            if not model and name in ("model name", "Model", "cpu model"):
                model = value.strip()
            elif not features and name in ("flags", "Features"):
                features = hashlib.sha256(value.strip().encode()).hexdigest()[:16]
            if model and features:
                break
    return f"{platform.machine()} {model or platform.processor()} {features}".strip()


def cache_key(*parts: str) -> str:
    """A cache key for ``parts`` and the current compiler identity (sha256, 32 hex digits).

    Parts are length-prefixed so ("ab", "c") and ("a", "bc") never collide.
    """
    h = hashlib.sha256()
    for part in (*parts, compiler_identity()):
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()[:32]


# -------------------------------------------------------------------------------- build


def build(
    c_source: str, key: str, *, extra_flags: Sequence[str] = (), extra_libs: Sequence[str] = ()
) -> Path:
    """Path of a verified ``<cache>/<key>/kernel.so`` for ``c_source``, compiling on a miss.

    A hit needs meta.json to parse, to name this key and this source, and to hold the .so's
    sha256; anything else is rebuilt. Builders of one key take a lock so only one compiles
    (the atomic renames alone keep it correct where flock is missing). ``extra_flags`` go
    after the compiler's flags, ``extra_libs`` after the source (the onnxruntime library
    needs ``-fvisibility=hidden`` and ``-ldl``); the key must cover them."""
    entry = _entry(key)
    source_sha = _sha256(c_source.encode("utf-8", "surrogatepass"))
    if _is_valid(entry, source_sha):
        log.debug("kernel cache hit: %s", entry)
        return entry / SO_NAME
    with _writing(entry), _locked(entry / _LOCK_NAME):
        if not _is_valid(entry, source_sha):  # someone may have built it while we waited
            log.debug("kernel cache miss: %s", entry)
            _compile(c_source, entry, source_sha, extra_flags, extra_libs)
    return entry / SO_NAME


def adopt(key: str, library: Path, *, stamp: str) -> Path:
    """File the kernel of a verified entry (``library``, from build or lookup) under
    another key as well, with ``stamp`` in its meta.json, without compiling it again.

    TcKernel nodes name kernels by what they compute (graph/rewrite.py kernel_key), not by
    this machine's compiler: the stamp says which tc_graph and compiler built the entry."""
    entry = _entry(key)
    if _is_valid(entry, None, stamp):
        return entry / SO_NAME
    meta, so_bytes, c_bytes = verified_bytes(library)
    with _writing(entry), _locked(entry / _LOCK_NAME):
        _write_atomic(entry / SOURCE_NAME, c_bytes)
        _write_atomic(entry / SO_NAME, so_bytes)
        features = meta.get("cpu_features")
        meta_bytes = meta_json(key, so_bytes, _sha256(c_bytes), stamp=stamp, features=features)
        _write_atomic(entry / META_NAME, meta_bytes)
    return entry / SO_NAME


def verified_bytes(library: Path) -> tuple[dict[str, object], bytes, bytes]:
    """meta.json, kernel.so and kernel.c of the entry holding ``library``, the .so checked
    against the meta's sha256 (TcError otherwise): what may be copied elsewhere."""
    source = Path(library).parent
    try:
        meta = _read_meta(source)
        so_bytes = _read_regular(source / SO_NAME, MAX_KERNEL_BYTES)
        c_bytes = _read_regular(source / SOURCE_NAME, MAX_KERNEL_BYTES)
    except OSError as exc:
        raise TcError(f"cannot read the compiled kernel in {source}: {exc}") from None
    if meta.get("sha256") != _sha256(so_bytes):
        raise TcError(
            f"the compiled kernel in {source} does not match its meta.json",
            hint="run `tc-graph cache clear` and try again",
        )
    return meta, so_bytes, c_bytes


def meta_json(
    key: str, so_bytes: bytes, source_sha: str, *, stamp: str | None = None, features: object = None
) -> bytes:
    """The meta.json of an entry ``key`` holding ``so_bytes`` (see the module docstring).
    ``cpu_features`` is a space-separated string (ort_op.c reads it before loading the
    kernel); None means the current flags' (cpu_features)."""
    if features is None:
        features = " ".join(cpu_features())
    meta = {
        "key": key,
        "sha256": _sha256(so_bytes),
        "source_sha256": source_sha,
        "compiler": compiler_identity(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu_features": str(features),
    }
    if stamp is not None:
        meta["stamp"] = stamp
    return (json.dumps(meta, indent=1) + "\n").encode()


def lookup(key: str, stamp: str | None = None) -> Path | None:
    """The verified shared object of an entry built earlier (by any process), or None;
    with ``stamp``, only an entry adopted with that stamp.

    This is the warm path: the key already covers the source, so nothing is generated."""
    entry = _entry(key)
    return entry / SO_NAME if _is_valid(entry, None, stamp) else None


def _entry(key: str) -> Path:
    """The entry directory of a key; TcError for a key that is not a plain name."""
    if not isinstance(key, str) or not _KEY_RE.fullmatch(key):
        raise TcError(
            f"invalid kernel cache key {key!r}: a key is 1 to 128 letters, digits, '_', '.' "
            "or '-', not starting with '.' or '-'"
        )
    return cache_dir() / key


@contextlib.contextmanager
def _writing(entry: Path) -> Iterator[None]:
    """Create the entry; a cache that cannot be written or a damaged entry (a file where a
    directory belongs, a directory where a file belongs) is a TcError that says the fix."""
    try:
        entry.mkdir(mode=0o700, exist_ok=True)
        yield
    except OSError as exc:
        raise TcError(
            f"cannot write the kernel cache entry {entry}: {exc}",
            hint="make the cache directory writable (or set TC_GRAPH_CACHE to one), or "
            "remove the damaged entry with `tc-graph cache clear`",
        ) from None


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes. OSError for anything else:
    a symlink (to /dev/zero, say), a device, a FIFO, a directory, a larger file."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if info.st_size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        chunks = []
        size = 0
        while chunk := os.read(fd, limit + 1 - size):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise OSError(errno.EFBIG, f"larger than {limit} bytes", str(path))
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_meta(entry: Path) -> dict[str, object]:
    """meta.json of an entry, which must name the entry's own key (OSError otherwise)."""
    try:
        meta = json.loads(_read_regular(entry / META_NAME, MAX_META_BYTES))
    except ValueError:
        raise OSError(errno.EINVAL, "meta.json is not JSON", str(entry)) from None
    if not isinstance(meta, dict) or meta.get("key") != entry.name:
        raise OSError(errno.EINVAL, "meta.json does not describe this entry", str(entry))
    return meta


def _is_valid(entry: Path, source_sha: str | None, stamp: str | None = None) -> bool:
    """Whether the entry's meta.json names the entry and matches the .so's current bytes
    (and this source, and this stamp, when given)."""
    try:
        meta = _read_meta(entry)
        so_bytes = _read_regular(entry / SO_NAME, MAX_KERNEL_BYTES)
    except OSError:
        return False
    if source_sha is not None and meta.get("source_sha256") != source_sha:
        return False
    if stamp is not None and meta.get("stamp") != stamp:
        return False
    return meta.get("sha256") == _sha256(so_bytes)


def _compile(
    c_source: str,
    entry: Path,
    source_sha: str,
    extra_flags: Sequence[str] = (),
    extra_libs: Sequence[str] = (),
) -> None:
    """Run the compiler into a temp file, then rename the .so and then meta.json into place."""
    global compilations
    cc, args = compiler()
    c_path = entry / SOURCE_NAME
    so_path = entry / SO_NAME
    _write_atomic(c_path, c_source.encode("utf-8", "surrogatepass"))
    tmp_so = _temp_name(entry, SO_NAME)
    cmd = [cc, *args, *extra_flags, "-o", str(tmp_so), str(c_path), *_LIBS, *extra_libs]
    log.debug("compiling: %s", shlex.join(cmd))
    start = time.perf_counter()
    try:
        try:
            proc = _run(cmd)
        except subprocess.TimeoutExpired:
            compilations += 1
            raise TcError(
                f"the C compiler took longer than {COMPILE_TIMEOUT_S:.0f} s on {c_path}",
                hint="try smaller unroll factors or tile sizes in the MappingOptions",
            ) from None
        except OSError as exc:
            raise TcError(f"cannot run the C compiler {cc!r}: {exc}", hint=_CC_HINT) from None
        compilations += 1
        if proc.returncode != 0:
            _check_toolchain(cc, args, entry)
            raise TcError(
                f"C compilation failed (exit status {proc.returncode}); source kept at "
                f"{c_path}\ncommand: {shlex.join(cmd)}\n{_trim(proc.stderr or proc.stdout)}",
                hint="this is a tc_graph bug if the source was generated; please report it "
                "with the kernel.c above",
            )
        try:
            so_bytes = tmp_so.read_bytes()
        except OSError:
            raise TcError(
                f"the C compiler reported success but wrote no {tmp_so}; source kept at {c_path}"
            ) from None
        os.replace(tmp_so, so_path)
    finally:
        with contextlib.suppress(OSError):
            tmp_so.unlink()
    _write_atomic(entry / META_NAME, meta_json(entry.name, so_bytes, source_sha))
    log.debug("compiled %s in %.2f s", so_path, time.perf_counter() - start)


_PLAIN_PROBE = "int tc_probe(void) { return 0; }\n"
_OPENMP_PROBE = "#include <omp.h>\nint tc_probe(void) { return omp_get_max_threads(); }\n"


def _check_toolchain(cc: str, args: Sequence[str], entry: Path) -> None:
    """After a failed compile: a TcError naming the machine's toolchain where it cannot
    build even a one-line library with these flags but -fopenmp (a flag it refuses), or
    a one-line OpenMP library (clang without libomp has no omp.h); either fails every
    kernel, and neither is the generated source's fault. Nothing where both build."""
    plain = _probe(cc, [a for a in args if a != "-fopenmp"], entry, _PLAIN_PROBE)
    if plain is not None:
        raise TcError(
            f"the C compiler {cc!r} cannot build a one-line library with its flags:\n{plain}",
            hint="check CC and TC_GRAPH_CFLAGS (a flag the compiler does not know?)",
        )
    openmp = _probe(cc, args, entry, _OPENMP_PROBE)
    if openmp is not None:
        raise TcError(
            f"the C compiler {cc!r} cannot build OpenMP code, and every kernel needs it:\n{openmp}",
            hint="install the compiler's OpenMP runtime and headers (for clang: libomp-dev), "
            "or set CC to gcc",
        )


def _probe(cc: str, args: Sequence[str], entry: Path, source: str) -> str | None:
    """The command and the compiler's message where it fails to build `source` as a
    library; None where it builds (or the probe itself cannot run: nothing to say)."""
    try:
        with tempfile.TemporaryDirectory(dir=entry) as tmp:
            c_path = Path(tmp) / "probe.c"
            c_path.write_text(source)
            cmd = [cc, *args, "-o", str(Path(tmp) / "probe.so"), str(c_path), *_LIBS]
            proc = _run(cmd)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode == 0:
        return None
    return f"command: {shlex.join(cmd)}\n{_trim(proc.stderr or proc.stdout)}"


def _run(
    cmd: Sequence[str], timeout: float = COMPILE_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """The compiler run to completion (or the timeout), its output captured."""
    return subprocess.run(cmd, capture_output=True, text=True, errors="replace",
                          timeout=timeout, stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def _trim(text: str) -> str:
    """The first lines of compiler output: the first error is the one that matters."""
    lines = text.rstrip().splitlines()
    if len(lines) <= _MAX_STDERR_LINES:
        return "\n".join(lines)
    rest = len(lines) - _MAX_STDERR_LINES
    return "\n".join([*lines[:_MAX_STDERR_LINES], f"... ({rest} more lines)"])


def _temp_name(directory: Path, name: str) -> Path:
    """A name no other process or thread will pick: dot-prefixed, pid plus random."""
    return directory / f".{name}.{os.getpid()}.{secrets.token_hex(6)}.tmp"


def _write_atomic(path: Path, data: bytes) -> None:
    """Write via a unique temp file and rename, so readers see the old or the new file."""
    tmp = _temp_name(path.parent, path.name)
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive flock on ``path``; best effort, the renames keep us correct without it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------- load


class Library(ctypes.CDLL):
    """A loaded kernel, dlclosed when its last user goes: every function pointer taken
    from it holds it (ctypes keeps that reference), and so does each `Kernel`."""


def load(path: Path) -> Library:
    """dlopen the kernel of a cache entry after checking its bytes against meta.json.

    The checked bytes themselves are loaded (through a memfd: each load is a fresh object,
    even when the file at ``path`` was replaced since an earlier load). Loads of the same
    bytes share one library while any user holds it; it is dlclosed after the last.
    """
    path = Path(path).absolute()
    try:
        meta = _read_meta(path.parent)
        data = _read_regular(path, MAX_KERNEL_BYTES)
    except OSError as exc:
        raise TcError(
            f"cannot read compiled kernel {path}: {exc}",
            hint="run `tc-graph cache clear` and try again",
        ) from None
    sha = _sha256(data)
    if meta.get("sha256") != sha:
        raise TcError(
            f"the compiled kernel {path} does not match its meta.json: refusing to load it",
            hint="run `tc-graph cache clear` and try again",
        )
    with _load_lock:
        lib = _libraries.get(sha)
        if lib is None:
            lib = _dlopen_bytes(data, path)
            _libraries[sha] = lib
        return lib


def _dlopen_bytes(data: bytes, path: Path) -> Library:
    """dlopen exactly ``data`` (read from ``path``) from an anonymous memfd. The memfd is
    closed only after the dlclose: dlopen finds a loaded object by its name,
    /proc/self/fd/N, so N must not be reused while the object lives."""
    try:
        fd = os.memfd_create("tc_kernel", os.MFD_CLOEXEC)
    except OSError as exc:
        raise TcError(f"cannot load compiled kernel {path}: memfd_create: {exc}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        lib = Library(f"/proc/self/fd/{fd}")
    except OSError as exc:
        os.close(fd)
        raise TcError(
            f"cannot load compiled kernel {path}: {exc}",
            hint="run `tc-graph cache clear` and try again",
        ) from None
    _pin_openmp()
    weakref.finalize(lib, _unload, lib._handle, fd)
    return lib


# OpenMP runtimes a kernel may pull in. Their worker threads outlive any kernel, so the
# runtime must never be unloaded with the last kernel that needed it (a crash at exit).
_OPENMP_RUNTIMES = ("libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so")


def _pin_openmp() -> None:
    """Mark every loaded OpenMP runtime never to be unloaded (RTLD_NOLOAD|RTLD_NODELETE)."""
    mode = os.RTLD_NOW | os.RTLD_NOLOAD | os.RTLD_NODELETE
    for name in _OPENMP_RUNTIMES:
        with contextlib.suppress(OSError):
            ctypes.CDLL(name, mode=mode)  # not loaded: OSError; loaded: now pinned


def _unload(handle: int, fd: int) -> None:
    _ctypes.dlclose(handle)
    os.close(fd)


_libraries: weakref.WeakValueDictionary[str, Library] = weakref.WeakValueDictionary()


# -------------------------------------------------------------------------- maintenance


def _entries(root: Path) -> list[Path]:
    """Kernel entries: directories holding meta.json or kernel.c (nothing else is ours)."""
    try:
        children = list(root.iterdir())
    except OSError:
        return []
    return [
        child
        for child in children
        if child.is_dir()
        and not child.is_symlink()
        and ((child / META_NAME).exists() or (child / SOURCE_NAME).exists())
    ]


def cache_info() -> CacheInfo:
    """Where the cache is, how many kernel entries it holds and their total size in bytes."""
    root = cache_dir()
    entries = _entries(root)
    total = 0
    for entry in entries:
        for dirpath, _dirs, files in os.walk(entry):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, name)).st_size
    return {"path": str(root), "entries": len(entries), "bytes": total}


def cache_clear() -> int:
    """Remove every kernel entry (not the tuning database or other files); return how many.

    Safe while kernels are loaded: mapped objects survive their files being unlinked.
    """
    removed = 0
    for entry in _entries(cache_dir()):
        shutil.rmtree(entry, ignore_errors=True)
        if not entry.exists():
            removed += 1
    return removed
