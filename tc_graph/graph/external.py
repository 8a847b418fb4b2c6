"""Models whose tensors live outside the .onnx file (ONNX external data).

A model over 2 GB can only be stored that way, and protobuf cannot serialize it in one
piece. So tc_graph leaves big initializers where they are: a model is loaded with them
still external (their values are read through read-only memory maps when needed), and
onnxruntime sessions get the small serialized model plus the folder its data lives in
(onnxruntime maps the files itself). A model that holds too much data in memory to
serialize goes to onnxruntime as a file with external data in a temporary folder, and
save_model writes any such model with onnx's layouts, copying data file to file.
"""

from __future__ import annotations

import errno
import math
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import external_data_helper, numpy_helper

from ..errors import TcError

# Initializers of the main graph from this size on stay in their file when loading.
KEEP_EXTERNAL_BYTES = 1 << 16
# A model holding more tensor data than this in memory is not serialized for onnxruntime
# (protobuf's limit is 2 GB, and copying a gigabyte into bytes is slow already).
INLINE_MAX_BYTES = 1 << 30
# onnxruntime's session option: where external data of a model given as bytes lives.
FOLDER_CONFIG = "session.model_external_initializers_file_folder_path"
_ALIGN = 4096  # data offsets in files we write: page-aligned, so onnxruntime can map them
_CHUNK = 1 << 26  # bytes copied at a time from one data file to another


def nbytes(tensor: onnx.TensorProto) -> int:
    """The size of a tensor's data as its dims and type say (0 for unknown types)."""
    try:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).itemsize
    except Exception:  # an unknown or string type: never external, never big here
        return 0
    return math.prod(int(d) for d in tensor.dims) * itemsize


def is_external(tensor: onnx.TensorProto) -> bool:
    """Whether the tensor's data is in another file (onnx's test, by data_location)."""
    return external_data_helper.uses_external_data(tensor)


def uses_external(model: onnx.ModelProto) -> bool:
    """Whether some initializer of the main graph has its data in another file."""
    return any(is_external(t) for t in model.graph.initializer)


def load(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """The model at `path` with the data of its big main-graph initializers left in their
    files (see KEEP_EXTERNAL_BYTES); every other external tensor is read in, so shape
    inference and constant folding see small tensors as usual."""
    proto = onnx.load_model(os.fspath(path), load_external_data=False)
    base = str(Path(path).resolve().parent)
    for tensor in _tensors_to_read(proto.graph, top=True):
        if is_external(tensor):
            external_data_helper.load_external_data_for_tensor(tensor, base)
    for tensor in proto.graph.initializer:
        if is_external(tensor):
            _checked_file(tensor, base)  # refused now, not when first read
    return proto


def _tensors_to_read(graph: onnx.GraphProto, *, top: bool) -> Iterator[onnx.TensorProto]:
    for tensor in graph.initializer:
        if not top or nbytes(tensor) < KEEP_EXTERNAL_BYTES:
            yield tensor
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t
            yield from attr.tensors
            for sub in [attr.g] if attr.HasField("g") else []:
                yield from _tensors_to_read(sub, top=False)
            for sub in attr.graphs:
                yield from _tensors_to_read(sub, top=False)


def array(tensor: onnx.TensorProto, base_dir: str | None) -> np.ndarray:
    """A read-only memory map of an external tensor's data. The file must lie inside
    `base_dir` (the model's folder), as onnx and onnxruntime require, and hold as many
    bytes as the tensor's dims say."""
    path, offset = _checked_file(tensor, base_dir)
    dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)).newbyteorder("<")
    shape = tuple(int(d) for d in tensor.dims)
    if nbytes(tensor) == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def _checked_file(tensor: onnx.TensorProto, base_dir: str | None) -> tuple[Path, int]:
    """The file and offset of an external tensor's data, which must hold all of it."""
    info = external_data_helper.ExternalDataInfo(tensor)
    if base_dir is None:
        raise TcError(
            f"initializer '{tensor.name}' keeps its data in '{info.location}', and a ModelProto "
            "does not say which folder that is relative to",
            hint="pass the model's path instead, or load it with onnx.load(path)",
        )
    path = _resolve(base_dir, info.location, tensor.name)
    size, offset = nbytes(tensor), int(info.offset or 0)
    if (info.length is not None and int(info.length) != size) or (
        offset + size > path.stat().st_size
    ):
        raise TcError(
            f"initializer '{tensor.name}' needs {size} bytes at offset {offset} of "
            f"'{info.location}', which that file (or its length entry) does not hold",
            hint="the model's external data file is truncated or belongs to another model",
        )
    return path, offset


def _resolve(base_dir: str, location: str, name: str) -> Path:
    """The file of an external tensor, refused where its location leaves the folder."""
    base = Path(base_dir).resolve()
    where = Path(location)
    full = (base / where).resolve()
    if not location or where.is_absolute() or ".." in where.parts or not full.is_relative_to(base):
        raise TcError(
            f"initializer '{name}' names external data '{location}' outside the model's folder",
            hint="external data files must lie in the model's folder or below it",
        )
    if not full.is_file():
        raise TcError(f"initializer '{name}': external data file '{full}' does not exist")
    return full


def inline_bytes(model: onnx.ModelProto) -> int:
    """The main graph's initializer data held in memory (external data not counted)."""
    return sum(nbytes(t) for t in model.graph.initializer if not is_external(t))


def session(
    model: onnx.ModelProto,
    sess_options: Any,
    providers: Sequence[Any],
    *,
    base_dir: str | None = None,
    **kw: Any,
) -> Any:
    """An onnxruntime.InferenceSession of `model`, never serializing more than
    INLINE_MAX_BYTES: external data stays in `base_dir` (mapped by onnxruntime); a model
    holding more in memory is written to a temporary folder with external data first."""
    import onnxruntime as onnxrt

    if uses_external(model) and base_dir is None:
        raise TcError(
            "the model keeps tensors in external data files, and a ModelProto does not say "
            "which folder they are in",
            hint="save it with tc_graph.save_model(model, PATH, base_dir=...) and pass PATH",
        )
    if inline_bytes(model) <= INLINE_MAX_BYTES:
        if base_dir is not None and uses_external(model):
            sess_options.add_session_config_entry(FOLDER_CONFIG, str(base_dir))
        return onnxrt.InferenceSession(
            model.SerializeToString(), sess_options, providers=list(providers), **kw
        )
    with tempfile.TemporaryDirectory(prefix="tc_graph-", ignore_cleanup_errors=True) as tmp:
        path = Path(tmp) / "model.onnx"
        save_model(model, path, base_dir=base_dir, save_as_external_data=True)
        return onnxrt.InferenceSession(str(path), sess_options, providers=list(providers), **kw)


def save_model(
    model: onnx.ModelProto,
    path: str | os.PathLike[str],
    *,
    base_dir: str | os.PathLike[str] | None = None,
    save_as_external_data: bool = False,
    all_tensors_to_one_file: bool = True,
    location: str | None = None,
    size_threshold: int = 1024,
) -> None:
    """onnx.save_model for models whose tensors may still be in external data files of
    `base_dir` (what tc_graph.optimize returns for such a file), with onnx's layout
    options: initializers of `size_threshold` bytes or more go to `location` (default
    `<file name>.data`) beside `path`, or each to a file of its own. Their data is copied
    file to file, never held in memory; `model` is not modified; stale data files are
    replaced, not appended to. A model without external data and small enough for one
    protobuf, not asked for external data, is simply onnx.save_model'd."""
    path = Path(path)
    if not (
        save_as_external_data or uses_external(model) or inline_bytes(model) > INLINE_MAX_BYTES
    ):
        onnx.save_model(model, str(path))
        return
    from .model import copy_without_initializers  # model.py imports this module

    out = copy_without_initializers(model)
    base = None if base_dir is None else os.fspath(base_dir)
    sources = {_checked_file(t, base)[0] for t in model.graph.initializer if is_external(t)}
    with _DataFiles(path.parent, sources) as files:
        for tensor in model.graph.initializer:
            if (
                nbytes(tensor) < max(size_threshold, 1)
                or tensor.data_type == onnx.TensorProto.STRING
            ):
                out.graph.initializer.append(_in_memory(tensor, base))
                continue
            name = (location or f"{path.name}.data") if all_tensors_to_one_file else None
            where, offset = files.write(tensor, base, name)
            ref = out.graph.initializer.add(name=tensor.name, data_type=tensor.data_type)
            ref.dims.extend(tensor.dims)
            ref.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", where), ("offset", offset), ("length", nbytes(tensor))):
                entry = ref.external_data.add()
                entry.key, entry.value = key, str(value)
    onnx.save_model(out, str(path))


def _in_memory(tensor: onnx.TensorProto, base_dir: str | None) -> onnx.TensorProto:
    """The tensor with its data in it (read from its file where it is external)."""
    if not is_external(tensor):
        return tensor
    out = onnx.TensorProto()
    out.CopyFrom(tensor)
    out.ClearField("external_data")
    out.data_location = onnx.TensorProto.DEFAULT
    out.raw_data = array(tensor, base_dir).tobytes()
    return out


class _DataFiles:
    """The data files save_model writes, each created (truncated) on first use."""

    def __init__(self, folder: Path, sources: set[Path]) -> None:
        self.folder = folder
        self.sources = sources  # the data files read: never written
        self.open: dict[str, Any] = {}

    def __enter__(self) -> _DataFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self.open.values():
            f.truncate()  # the size at the position: a trailing hole counts
            f.close()

    def write(
        self, tensor: onnx.TensorProto, base_dir: str | None, name: str | None
    ) -> tuple[str, int]:
        """Append the tensor's data to file `name` (a new file of its own for None), at a
        page-aligned offset; (file name, offset)."""
        if name is None:
            stem = re.sub(r"[^A-Za-z0-9_.-]", "_", tensor.name) or "tensor"
            name, k = stem, 1
            while name in self.open or name.startswith("."):
                name, k = f"{stem}_{k}", k + 1
        f = self.open.get(name)
        if f is None:
            target = (self.folder / name).resolve()
            if target in self.sources:
                raise TcError(
                    f"saving would overwrite '{target}', which holds the model's own tensors",
                    hint="choose another output file name or location",
                )
            f = self.open[name] = open(target, "wb")
        f.write(b"\0" * (-f.tell() % _ALIGN))
        offset = f.tell()
        if is_external(tensor):
            source, start = _checked_file(tensor, base_dir)
            _copy(source, start, nbytes(tensor), f)
        else:
            data = numpy_helper.to_array(tensor)
            f.write(np.ascontiguousarray(data, dtype=data.dtype.newbyteorder("<")).data)
        return name, offset


def _copy(source: Path, start: int, length: int, dst: Any) -> None:
    """Copy `length` bytes of `source` from `start` to the end of `dst`, in chunks; holes
    of a sparse source stay holes (skipped, not written as zeros)."""
    with open(source, "rb") as src:
        pos, end = start, start + length
        while pos < end:
            data, hole = _data_run(src.fileno(), pos, end)
            if data > pos:
                dst.seek(data - pos, os.SEEK_CUR)
            src.seek(data)
            left = hole - data
            while left > 0:
                chunk = src.read(min(left, _CHUNK))
                if not chunk:
                    raise TcError(f"external data file '{source}' ended early")
                dst.write(chunk)
                left -= len(chunk)
            pos = hole


def _data_run(fd: int, pos: int, end: int) -> tuple[int, int]:
    """The next run of data at or after `pos` (before `end`): (start, stop); all of
    [pos, end) where the system cannot tell holes from data."""
    if not hasattr(os, "SEEK_DATA"):
        return pos, end
    try:
        data = min(os.lseek(fd, pos, os.SEEK_DATA), end)
    except OSError as e:  # ENXIO: only a hole follows; else the system cannot say
        return (end, end) if e.errno == errno.ENXIO else (pos, end)
    return data, min(os.lseek(fd, data, os.SEEK_HOLE), end) if data < end else end
