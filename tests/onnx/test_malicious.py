"""Malicious and damaged models and caches (issue 12, items 1, 3 and 4).

A model is data: opening one, through `tg.InferenceSession`, `tg.prepare` or a plain
onnxruntime session with tc_graph's library registered, must never crash, corrupt memory,
return another kernel's results or run code other than kernels tc_graph compiled from the
model's own TC source. Each case edits a TcKernel node's attributes, contradicts the
graph's declared types, or tampers with the kernel cache, and asserts a clean error (a
TcError from tc_graph, an exception from onnxruntime) or the right answer. Cases that
crashed the process before the fix run a plain onnxruntime session in a child process,
whose return code must be 0.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

import tc_graph as tg
from tc_graph.errors import TcError
from tc_graph.graph.rewrite import kernel_key
from tc_graph.runtime import cc

REPO = Path(__file__).resolve().parents[2]
F32, F64, U8 = onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.UINT8

# Y = X + 1 (the victim); a same-interface impostor that answers 42.
VICTIM = "def plus_one(float(N) X) -> (Y) { Y(i) = X(i) + 1 }"
IMPOSTOR = "def plus_one(float(N) X) -> (Y) { Y(i) = X(i) * 0 + 42 }"


def attrs_of(
    source: str,
    entry: str,
    n: int,
    *,
    in_dtype: int = F32,
    out_dtype: int = F32,
    options: str = "{}",
) -> dict[str, object]:
    """A one-input one-output TcKernel node's attributes, key derived from the rest."""
    attrs: dict[str, object] = {
        "source": source,
        "entry": entry,
        "options": options,
        "input_dtypes": [in_dtype],
        "output_dtypes": [out_dtype],
        "input_ranks": [1],
        "output_ranks": [1],
        "input_shapes": [n],
        "output_shapes": [n],
    }
    attrs["kernel_key"] = kernel_key(attrs)
    return attrs


def node_model(
    attrs: dict[str, object],
    *,
    n: int,
    declared_in: int = F32,
    declared_out: int = F32,
    out_shape: bool = True,
) -> onnx.ModelProto:
    """One TcKernel node X -> Y with the graph declaring X and Y as given (Y of unknown
    shape unless ``out_shape``)."""
    node = helper.make_node("TcKernel", ["X"], ["Y"], domain="ai.tc_graph", name="k")
    for name, value in attrs.items():
        kind = onnx.AttributeProto.INTS if isinstance(value, list) else None
        node.attribute.append(helper.make_attribute(name, value, attr_type=kind))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", declared_in, [n])],
        [helper.make_tensor_value_info("Y", declared_out, [n] if out_shape else None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ai.tc_graph", 1)]
    )
    model.ir_version = 8
    return model


def victim(n: int = 3) -> onnx.ModelProto:
    return node_model(attrs_of(VICTIM, "plus_one", n), n=n)


def entry_of(model: onnx.ModelProto) -> Path:
    key = next(a.s.decode() for a in model.graph.node[0].attribute if a.name == "kernel_key")
    return cc.cache_dir() / key


def plain(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.register_custom_ops_library(tg.ort_library_path())
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})[0]


# A plain onnxruntime session in a child: prints {"ok": ..., "y" or "error": ...}; a crash
# shows as a nonzero (negative: a signal) return code.
CHILD = """
import json, sys
import numpy as np, onnxruntime as ort
library, model, x = sys.argv[1:4]
so = ort.SessionOptions()
so.register_custom_ops_library(library)
try:
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"X": np.load(x)})[0]
except Exception as e:  # onnxruntime's own exception types
    print(json.dumps({"ok": False, "error": str(e)}))
else:
    print(json.dumps({"ok": True, "y": y[:8].astype(float).tolist(), "dtype": str(y.dtype)}))
"""


def plain_in_child(model: onnx.ModelProto, x: np.ndarray, tmp_path: Path) -> dict[str, object]:
    library = tg.ort_library_path()
    onnx.save(model, tmp_path / "m.onnx")
    np.save(tmp_path / "x.npy", x)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    r = subprocess.run(
        [sys.executable, "-c", CHILD, library, str(tmp_path / "m.onnx"), str(tmp_path / "x.npy")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert r.returncode == 0, f"the child crashed ({r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def tg_session_result(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    return tg.InferenceSession(model).run(None, {"X": x})[0]


ONES = np.ones(3, np.float32)


# ------------------------------------------------------------------- cache poisoning


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kernel cache for this test (the library is rebuilt in it on first use)."""
    root = tmp_path / "cache"
    monkeypatch.setenv("TC_GRAPH_CACHE", str(root))
    return root


def impostor_of(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with its TcKernel's source swapped for the impostor's, key kept."""
    evil = onnx.ModelProto()
    evil.CopyFrom(model)
    for a in evil.graph.node[0].attribute:
        if a.name == "source":
            a.s = IMPOSTOR.encode()
    return evil


def test_a_borrowed_key_is_refused_and_does_not_poison_the_cache(
    fresh_cache: Path, tmp_path: Path
) -> None:
    """Issue 12 item 3: a model reusing the victim's kernel_key with another source,
    opened first on a shared cache, made the victim answer [42, 42, 42]."""
    good = victim()
    evil = impostor_of(good)
    with pytest.raises(TcError, match=r"kernel_key .* attributes give"):
        tg.prepare(evil)
    with pytest.raises(TcError, match=r"kernel_key .* attributes give"):
        tg.InferenceSession(evil)
    with pytest.raises(Exception, match="does not match its attributes"):
        plain(evil, ONES)
    assert not entry_of(good).exists()
    np.testing.assert_array_equal(tg_session_result(good, ONES), ONES + 1)
    np.testing.assert_array_equal(plain(good, ONES), ONES + 1)


def test_optimize_is_not_poisoned_by_a_borrowed_key(fresh_cache: Path) -> None:
    x = helper.make_tensor_value_info("X", F32, [3])
    y = helper.make_tensor_value_info("Y", F32, [3])
    one = helper.make_tensor("one", F32, [1], [1.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "one"], ["T"]), helper.make_node("Relu", ["T"], ["Y"])],
        "g",
        [x],
        [y],
        [one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    fused = tg.optimize(model, force=True)
    evil = onnx.ModelProto()
    evil.CopyFrom(fused)
    node = next(n for n in evil.graph.node if n.op_type == "TcKernel")
    source = next(a for a in node.attribute if a.name == "source")
    entry = next(a.s.decode() for a in node.attribute if a.name == "entry")
    # Same signature as the fused kernel's (one float input of 3), but answers 42.
    source.s = f"def {entry}(float(N) A) -> (B) {{ B(i) = A(i) * 0 + 42 }}".encode()
    shutil.rmtree(fresh_cache)  # a shared cache the impostor reaches first
    with pytest.raises(TcError, match="kernel_key"):
        tg.InferenceSession(evil)
    again = tg.optimize(model, force=True)
    np.testing.assert_array_equal(tg_session_result(again, -ONES), np.zeros(3, np.float32))
    np.testing.assert_array_equal(tg_session_result(again, ONES), ONES + 1)


def test_a_consistent_impostor_gets_its_own_entry() -> None:
    """A model whose key is its own (other source, other key) runs its own kernel and
    leaves the victim's alone: keys cannot collide across sources."""
    evil = node_model(attrs_of(IMPOSTOR, "plus_one", 3), n=3)
    assert entry_of(evil) != entry_of(victim())
    np.testing.assert_array_equal(tg_session_result(evil, ONES), np.full(3, 42, np.float32))
    np.testing.assert_array_equal(tg_session_result(victim(), ONES), ONES + 1)
    np.testing.assert_array_equal(plain(victim(), ONES), ONES + 1)


# ------------------------------------------------------------ edited node attributes


def _edit(attrs: dict[str, object], name: str, value: object, rekey: bool) -> dict[str, object]:
    out = {**attrs, name: value}
    if rekey:
        out["kernel_key"] = kernel_key(out)
    return out


EDITS: list[tuple[str, object, bool, str]] = [
    # (attribute, new value, recompute the key, what the TcError says)
    ("kernel_key", "../../etc", False, "invalid kernel cache key|kernel_key"),
    ("kernel_key", "tck-" + "0" * 40, False, "kernel_key"),
    ("source", IMPOSTOR, False, "kernel_key"),
    ("options", '{"unroll": 4}', False, "kernel_key"),
    ("options", "{not json", True, "options"),
    ("options", '{"threads": "many"}', True, "options"),
    ("input_dtypes", [999], True, "element type code 999"),
    ("input_dtypes", [8], True, "element type code 8"),
    ("input_dtypes", [1, 1], True, "input_dtypes"),
    ("input_ranks", [1, 0], True, "input_ranks"),
    ("output_ranks", [], True, "output_ranks"),
    ("input_shapes", [3, 3], True, "do not agree"),
    ("input_shapes", [-3], True, "do not agree"),
    ("output_shapes", [4], True, "source does not compute"),
    ("output_dtypes", [F64], True, "source does not compute"),
    ("entry", "nowhere", True, "does not define"),
]


@pytest.mark.parametrize(("name", "value", "rekey", "message"), EDITS)
def test_edited_attributes_are_a_clean_error(
    name: str, value: object, rekey: bool, message: str
) -> None:
    tg.prepare(victim())  # in the cache first: the edited node must leave it usable
    attrs = _edit(attrs_of(VICTIM, "plus_one", 3), name, value, rekey)
    # The graph agrees with the edited outputs: only the node's source contradicts them.
    declared_out = F64 if name == "output_dtypes" else F32
    model = node_model(attrs, n=3, declared_out=declared_out, out_shape=False)
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(TcError, match=message):
            call(model)
    with pytest.raises(Exception):  # noqa: B017 -- onnxruntime's own exception types
        plain(model, ONES)
    np.testing.assert_array_equal(plain(victim(), ONES), ONES + 1)  # still usable


def test_missing_attribute_is_a_clean_error() -> None:
    model = victim()
    del model.graph.node[0].attribute[1]  # entry
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(TcError, match="lacks the string attribute 'entry'"):
            call(model)
    with pytest.raises(Exception, match="no string attribute 'entry'"):
        plain(model, ONES)


# ----------------------------------------------------------- declared graph types


def test_a_wider_kernel_output_than_the_graph_declares_is_refused(tmp_path: Path) -> None:
    """Issue 12 item 1: a float64 kernel output in a graph that declares it uint8 wrote
    8N bytes into an N-byte buffer (a segfault at N = 10**6, silent at 1,000)."""
    n = 10**6
    attrs = attrs_of("def wide(float(N) X) -> (Y) { Y(i) = float64(X(i)) * 2 }", "wide", n,
                     out_dtype=F64)  # fmt: skip
    honest = node_model(attrs, n=n, declared_out=F64)
    lying = node_model(attrs, n=n, declared_out=U8)
    x = np.arange(n, dtype=np.float32)
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(TcError, match="graph declares it"):
            call(lying)
    tg.prepare(honest)  # the kernel is in the cache: only the library stands in the way
    np.testing.assert_array_equal(plain(honest, x), x.astype(np.float64) * 2)
    got = plain_in_child(lying, x, tmp_path)
    assert not got["ok"] and "output 0 is float64, the graph makes it uint8" in str(got["error"])


def test_a_declared_input_type_the_kernel_does_not_read_is_refused() -> None:
    model = node_model(attrs_of(VICTIM, "plus_one", 3), n=3, declared_in=onnx.TensorProto.INT32)
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(TcError, match="graph declares it"):
            call(model)
    tg.prepare(victim())
    with pytest.raises(Exception, match="input 0 must be float32"):
        so = ort.SessionOptions()
        so.register_custom_ops_library(tg.ort_library_path())
        sess = ort.InferenceSession(model.SerializeToString(), so)
        sess.run(None, {"X": np.ones(3, np.int32)})


# -------------------------------------------------------------------- cache tampering


def _truncate(entry: Path, other: Path) -> None:
    so = entry / "kernel.so"
    so.write_bytes(so.read_bytes()[:4096])


def _bit_flip(entry: Path, other: Path) -> None:
    data = bytearray((entry / "kernel.so").read_bytes())
    data[len(data) // 2] ^= 0x10
    (entry / "kernel.so").write_bytes(bytes(data))


def _swap_so(entry: Path, other: Path) -> None:
    shutil.copyfile(other / "kernel.so", entry / "kernel.so")


def _swap_so_and_meta(entry: Path, other: Path) -> None:
    shutil.copyfile(other / "kernel.so", entry / "kernel.so")
    shutil.copyfile(other / "meta.json", entry / "meta.json")


def _dev_zero(entry: Path, other: Path) -> None:
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").symlink_to("/dev/zero")


def _meta_dev_zero(entry: Path, other: Path) -> None:
    (entry / "meta.json").unlink()
    (entry / "meta.json").symlink_to("/dev/zero")


def _so_directory(entry: Path, other: Path) -> None:
    (entry / "kernel.so").unlink()
    (entry / "kernel.so").mkdir()


def _meta_directory(entry: Path, other: Path) -> None:
    (entry / "meta.json").unlink()
    (entry / "meta.json").mkdir()


def _entry_file(entry: Path, other: Path) -> None:
    shutil.rmtree(entry)
    entry.write_text("not a directory")


TAMPERS: dict[str, Callable[[Path, Path], None]] = {
    "truncate": _truncate,
    "bit-flip": _bit_flip,
    "swap-so": _swap_so,
    "swap-so-and-meta": _swap_so_and_meta,
    "so-dev-zero": _dev_zero,
    "meta-dev-zero": _meta_dev_zero,
    "so-directory": _so_directory,
    "meta-directory": _meta_directory,
    "entry-file": _entry_file,
}
# Damage the runtime cannot repair in place: a clean TcError that names the fix.
UNREPAIRABLE = {"so-directory", "meta-directory", "entry-file"}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampered_cache_entries_are_refused_or_rebuilt(tamper: str, tmp_path: Path) -> None:
    n = 5 + sorted(TAMPERS).index(tamper)  # a kernel of its own per case
    model = victim(n)
    other = node_model(attrs_of(IMPOSTOR, "plus_one", n), n=n)
    tg.prepare(model)
    tg.prepare(other)
    x = np.arange(n, dtype=np.float32)
    TAMPERS[tamper](entry_of(model), entry_of(other))
    # A plain session never loads a damaged entry, whatever is left of it.
    got = plain_in_child(model, x, tmp_path)
    assert not got["ok"], got
    # tc_graph rebuilds the entry, or says what to do.
    if tamper in UNREPAIRABLE:
        for call in (tg.prepare, tg.InferenceSession):
            with pytest.raises(TcError, match="tc-graph cache clear"):
                call(model)
        return
    np.testing.assert_array_equal(tg_session_result(model, x), x + 1)
    np.testing.assert_array_equal(plain(model, x), x + 1)


def test_foreign_code_in_the_cache_is_never_loaded(tmp_path: Path) -> None:
    """An object whose constructor leaves a mark, put in place of a kernel (alone, or with
    a meta.json of its own that names another entry), is never dlopened."""
    mark = tmp_path / "loaded"
    evil_c = (
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void mark(void) {\n"
        f'  FILE *f = fopen("{mark}", "w"); if (f) fclose(f);\n'
        "}\n"
    )
    evil = cc.build(evil_c, f"evil-{os.getpid()}")
    model = victim(17)
    tg.prepare(model)
    entry = entry_of(model)
    x = np.arange(17, dtype=np.float32)
    for with_meta in (False, True):
        shutil.copyfile(evil, entry / "kernel.so")
        if with_meta:
            shutil.copyfile(evil.parent / "meta.json", entry / "meta.json")
        assert not plain_in_child(model, x, tmp_path)["ok"]
        with pytest.raises(Exception, match="refusing to load"):
            plain(model, x)
        with pytest.raises(TcError, match=r"does not match its meta\.json|cannot read"):
            cc.load(entry / "kernel.so")
        np.testing.assert_array_equal(tg_session_result(model, x), x + 1)  # rebuilt
        assert not mark.exists()


def test_a_read_only_cache_is_a_clean_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/self is a directory nobody can create entries in, not even root."""
    library = tg.ort_library_path()
    model = victim(23)
    monkeypatch.setenv("TC_GRAPH_CACHE", "/proc/self")
    for call in (tg.prepare, tg.InferenceSession):
        with pytest.raises(TcError, match="cannot write the kernel cache entry"):
            call(model)
    with pytest.raises(TcError, match="cannot write"):
        tg.define(VICTIM).plus_one.compile(np.ones(23, np.float32))
    so = ort.SessionOptions()
    so.register_custom_ops_library(library)
    with pytest.raises(Exception, match="not compiled on this machine"):
        ort.InferenceSession(model.SerializeToString(), so)
