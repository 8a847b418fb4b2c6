"""Export models with PyTorch's own exporter: `python models/export_torch.py [--full DIR]`.

The graphs are what torch.onnx.export writes, with random weights from a fixed seed:
- torch_mlp, torch_cnn: a small MLP (Gemm, LayerNorm, GELU, softmax) and a small CNN;
- torch_resnet18: ResNet-18 (basic blocks, BatchNorm folded into Conv, residual adds);
- torch_bert: a 2-layer BERT-style encoder (embedding lookups, multi-head self-attention
  with MatMul and Softmax, LayerNorm, GELU feed-forward);
- torch_dlrm: a DLRM-style model (two embedding bags as Gather+ReduceSum, a bottom MLP on
  the dense features, a dense layer, Concat, a top MLP).
- torch_bert_dyn, torch_dlrm_dyn: the same two with symbolic dimensions (batch and
  sequence; batch), as `dynamic_shapes` exports them.
Without --full the small versions are written beside this script; they are committed, so
tests need no torch. `--full DIR` writes ResNet-18 at 224x224, BERT at hidden 256 and
sequence 128, and DLRM with two 100,000x64 tables, a 1000x1024 dense layer and batch 128
into DIR as torch_*_full.onnx, for `scripts/bench.py zoo --full DIR`. Needs torch:
`pip install ".[export]"`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class ResNetSize:
    width: int  # channels of the first stage (64 in ResNet-18); each stage doubles them
    image: int  # height and width of the input
    batch: int
    classes: int


@dataclass(frozen=True)
class BertSize:
    vocab: int
    hidden: int
    heads: int
    ffn: int
    seq: int
    batch: int
    layers: int = 2


@dataclass(frozen=True)
class DlrmSize:
    batch: int
    dense_in: int  # dense features into the bottom MLP
    bottom: tuple[int, ...]  # bottom MLP widths; the last is the embedding width
    rows: int  # rows of each of the two tables
    bag: int  # indices per sample and table
    wide_in: int  # the dense layer: wide_in -> wide_out
    wide_out: int
    top: tuple[int, ...]  # top MLP widths after the concatenation; the last is 1


SMALL = {
    "resnet18": ResNetSize(width=4, image=32, batch=1, classes=10),
    "bert": BertSize(vocab=100, hidden=32, heads=2, ffn=64, seq=16, batch=1),
    "dlrm": DlrmSize(8, 4, (16, 8), 500, 6, 64, 128, (32, 1)),
}
FULL = {
    "resnet18": ResNetSize(width=64, image=224, batch=1, classes=1000),
    "bert": BertSize(vocab=30522, hidden=256, heads=4, ffn=1024, seq=128, batch=1),
    "dlrm": DlrmSize(128, 13, (512, 256, 64), 100_000, 50, 1000, 1024, (512, 256, 1)),
}


def _torch() -> Any:
    """torch is imported here only: it is not a dependency of tc_graph."""
    try:
        import torch
    except ImportError as exc:
        raise SystemExit('models/export_torch.py needs torch: pip install ".[export]"') from exc
    return torch


def _mlp(torch: Any, _: None) -> tuple[Any, dict[str, Any]]:
    """Two hidden layers with GELU and LayerNorm, a softmax head; input (8, 32)."""
    nn = torch.nn

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(32, 64)
            self.norm = nn.LayerNorm(64)
            self.fc2 = nn.Linear(64, 64)
            self.head = nn.Linear(64, 10)

        def forward(self, x: Any) -> Any:
            h = nn.functional.gelu(self.fc1(x))
            h = self.norm(h + torch.sigmoid(self.fc2(h)))
            return torch.softmax(self.head(h), dim=-1)

    return Mlp(), {"x": torch.randn(8, 32)}


def _cnn(torch: Any, _: None) -> tuple[Any, dict[str, Any]]:
    """Conv+BN+ReLU twice with a max pool, global average pool, a linear head; input
    (2, 3, 16, 16)."""
    nn = torch.nn
    features = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
    )
    return nn.Sequential(features, nn.Linear(16, 10)), {"x": torch.randn(2, 3, 16, 16)}


def _resnet18(torch: Any, s: ResNetSize) -> tuple[Any, dict[str, Any]]:
    """ResNet-18: a 7x7 stem and max pool, four stages of two basic blocks (a strided 1x1
    projection where the shape changes), global average pool, a linear head."""
    nn = torch.nn

    def conv_bn(cin: int, cout: int, k: int, stride: int) -> Any:
        conv = nn.Conv2d(cin, cout, k, stride, padding=k // 2, bias=False)
        return nn.Sequential(conv, nn.BatchNorm2d(cout))

    class Block(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.a = conv_bn(cin, cout, 3, stride)
            self.b = conv_bn(cout, cout, 3, 1)
            same = stride == 1 and cin == cout
            self.skip = nn.Identity() if same else conv_bn(cin, cout, 1, stride)

        def forward(self, x: Any) -> Any:
            return torch.relu(self.b(torch.relu(self.a(x))) + self.skip(x))

    w = s.width
    layers = [conv_bn(3, w, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1)]
    for stage, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
        cin = w if stage == 0 else cout // 2
        layers += [Block(cin, cout, 1 if stage == 0 else 2), Block(cout, cout, 1)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8 * w, s.classes)]
    return nn.Sequential(*layers), {"x": torch.randn(s.batch, 3, s.image, s.image)}


def _bert(torch: Any, s: BertSize, dynamic: bool = False) -> tuple[Any, dict[str, Any]]:
    """Token and position embeddings, then post-norm encoder layers: multi-head
    self-attention (MatMul, scale, Softmax, MatMul), residual + LayerNorm, a GELU
    feed-forward, residual + LayerNorm."""
    nn = torch.nn
    h, d = s.heads, s.hidden // s.heads

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.ModuleList(nn.Linear(s.hidden, s.hidden) for _ in range(3))
            self.out = nn.Linear(s.hidden, s.hidden)
            self.norm1 = nn.LayerNorm(s.hidden)
            self.ffn = nn.Sequential(
                nn.Linear(s.hidden, s.ffn), nn.GELU(), nn.Linear(s.ffn, s.hidden)
            )
            self.norm2 = nn.LayerNorm(s.hidden)

        def forward(self, x: Any) -> Any:
            # The sizes as traced where the export is dynamic, else the constants.
            b, n = (x.shape[0], x.shape[1]) if dynamic else (s.batch, s.seq)
            q, k, v = (lin(x).reshape(b, n, h, d).transpose(1, 2) for lin in self.qkv)
            att = torch.softmax(torch.matmul(q, k.transpose(2, 3)) / d**0.5, dim=-1)
            ctx = torch.matmul(att, v).transpose(1, 2).reshape(b, n, s.hidden)
            x = self.norm1(x + self.out(ctx))
            return self.norm2(x + self.ffn(x))

    class Bert(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens = nn.Embedding(s.vocab, s.hidden)
            self.positions = nn.Embedding(s.seq, s.hidden)
            self.norm = nn.LayerNorm(s.hidden)
            self.layers = nn.Sequential(*(Layer() for _ in range(s.layers)))

        def forward(self, ids: Any, pos: Any) -> Any:
            return self.layers(self.norm(self.tokens(ids) + self.positions(pos)))

    ids = torch.randint(0, s.vocab, (s.batch, s.seq))
    pos = torch.arange(s.seq).expand(s.batch, s.seq).contiguous()
    return Bert(), {"ids": ids, "pos": pos}


def _dlrm(torch: Any, s: DlrmSize) -> tuple[Any, dict[str, Any]]:
    """Two embedding bags (a row lookup summed over the bag: Gather+ReduceSum), a ReLU
    bottom MLP on the dense features, a dense layer without activation, all concatenated,
    and a ReLU top MLP with a sigmoid."""
    nn = torch.nn

    def mlp(widths: Sequence[int]) -> list[Any]:
        return [m for a, b in pairwise(widths) for m in (nn.Linear(a, b), nn.ReLU())]

    class Dlrm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            dim = s.bottom[-1]
            self.tables = nn.ParameterList(
                nn.Parameter(torch.randn(s.rows, dim) / s.bag**0.5) for _ in range(2)
            )
            self.bottom = nn.Sequential(*mlp((s.dense_in, *s.bottom)))
            self.wide = nn.Linear(s.wide_in, s.wide_out)
            self.top = nn.Sequential(*mlp((3 * dim + s.wide_out, *s.top))[:-1], nn.Sigmoid())

        def forward(self, dense: Any, wide: Any, idx1: Any, idx2: Any) -> Any:
            pairs = zip((idx1, idx2), self.tables, strict=True)
            bags = [nn.functional.embedding(i, t).sum(dim=1) for i, t in pairs]
            cat = torch.cat([self.bottom(dense), *bags, self.wide(wide)], dim=1)
            return self.top(cat)

    inputs = {
        "dense": torch.randn(s.batch, s.dense_in),
        "wide": torch.randn(s.batch, s.wide_in),
        "idx1": torch.randint(0, s.rows, (s.batch, s.bag)),
        "idx2": torch.randint(0, s.rows, (s.batch, s.bag)),
    }
    return Dlrm(), inputs


def _bert_dynamic(torch: Any, s: BertSize) -> tuple[Any, dict[str, Any]]:
    return _bert(torch, s, dynamic=True)


# name -> (builder, whether torch's default torch.export-based exporter writes it). mlp and
# cnn keep the legacy TorchScript exporter's graphs (GELU as Erf arithmetic, Flatten, opset
# 17), so the zoo has both exporters' styles; the others are the default's (Gelu,
# ReduceMean, opset 20).
_BUILDERS: dict[str, tuple[Callable[[Any, Any], tuple[Any, dict[str, Any]]], bool]] = {
    "mlp": (_mlp, False),
    "cnn": (_cnn, False),
    "resnet18": (_resnet18, True),
    "bert": (_bert, True),
    "dlrm": (_dlrm, True),
    "bert_dyn": (_bert_dynamic, True),
    "dlrm_dyn": (_dlrm, True),
}
# The exports with symbolic dimensions (issue 17): input -> {axis: symbol}.
_DYNAMIC: dict[str, dict[str, dict[int, str]]] = {
    "bert_dyn": {"ids": {0: "batch", 1: "seq"}, "pos": {0: "batch", 1: "seq"}},
    "dlrm_dyn": {k: {0: "batch"} for k in ("dense", "wide", "idx1", "idx2")},
}


def _export(
    torch: Any,
    module: Any,
    inputs: dict[str, Any],
    path: Path,
    dynamo: bool,
    axes: dict[str, dict[int, str]] | None = None,
) -> None:
    """Eval mode (both exporters fold BatchNorm into Conv), the weights inside the file;
    `axes` names the symbolic dimensions of a dynamic export."""
    module.eval()
    for m in module.modules():  # non-trivial running statistics for BatchNorm
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    options: dict[str, Any] = {"external_data": False, "verbose": False} if dynamo else {}
    if axes:
        dims: dict[str, Any] = {}
        options["dynamic_shapes"] = {
            name: {k: dims.setdefault(sym, torch.export.Dim(sym, min=1, max=4096))
                   for k, sym in axes.get(name, {}).items()}
            for name in inputs
        }  # fmt: skip
    torch.onnx.export(
        module,
        tuple(inputs.values()),
        str(path),
        input_names=list(inputs),
        output_names=["y"],
        opset_version=20 if dynamo else 17,
        dynamo=dynamo,
        **options,
    )
    if dynamo:
        _drop_stack_traces(path)


def _drop_stack_traces(path: Path) -> None:
    """The default exporter records each node's Python stack trace: this machine's paths
    and this script's line numbers, which would change the committed files on every edit."""
    import onnx

    model = onnx.load(str(path))
    for node in model.graph.node:
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    onnx.save(model, str(path))


def export(out: Path, *, full: bool = False) -> list[Path]:
    """Write torch_<name>.onnx into `out` (the small sizes), or with full=True the full
    sizes as torch_<name>_full.onnx (ResNet-18, BERT and DLRM only)."""
    torch = _torch()
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, (build, dynamo) in _BUILDERS.items():
        if full and name.removesuffix("_dyn") not in FULL:
            continue
        torch.manual_seed(0)  # each model's weights do not depend on the others
        size = (FULL if full else SMALL).get(name.removesuffix("_dyn"))
        module, inputs = build(torch, size)
        path = out / f"torch_{name}{'_full' if full else ''}.onnx"
        _export(torch, module, inputs, path, dynamo, _DYNAMIC.get(name))
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory (default: models/)")
    parser.add_argument(
        "--full", metavar="DIR", type=Path, help="write the full-size models into DIR instead"
    )
    args = parser.parse_args(argv)
    paths = export(args.full, full=True) if args.full else export(args.out)
    for path in paths:
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
