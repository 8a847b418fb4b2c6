"""Export a small MLP and a small CNN with torch.onnx.export: `python models/export_torch.py`.

The graphs are what PyTorch's exporter writes (Gemm or MatMul+Add, Flatten, Conv,
BatchNormalization, MaxPool, GlobalAveragePool, Softmax, ...), with random weights from a
fixed seed. The .onnx files are committed beside this script, so tests need no torch;
run it again (with torch installed) only to refresh them.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _modules():  # torch is imported here only: it is not a dependency of tc_graph
    import torch
    from torch import nn

    class Mlp(nn.Module):
        """Two hidden layers with GELU and LayerNorm, a softmax head."""

        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(32, 64)
            self.norm = nn.LayerNorm(64)
            self.fc2 = nn.Linear(64, 64)
            self.head = nn.Linear(64, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = nn.functional.gelu(self.fc1(x))
            h = self.norm(h + torch.sigmoid(self.fc2(h)))
            return torch.softmax(self.head(h), dim=-1)

    class Cnn(nn.Module):
        """Conv+BN+ReLU twice with a max pool, global average pool, a linear head."""

        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
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
            self.head = nn.Linear(16, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.features(x))

    return torch, Mlp, Cnn


def export(out: Path) -> list[Path]:
    """Write torch_mlp.onnx (input (8, 32)) and torch_cnn.onnx (input (2, 3, 16, 16))."""
    torch, mlp_cls, cnn_cls = _modules()
    torch.manual_seed(0)
    written = []
    for name, module, shape in (
        ("torch_mlp", mlp_cls(), (8, 32)),
        ("torch_cnn", cnn_cls(), (2, 3, 16, 16)),
    ):
        module.eval()
        for m in module.modules():  # non-trivial running statistics for BatchNorm
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        path = out / f"{name}.onnx"
        torch.onnx.export(
            module,
            (torch.randn(*shape),),
            str(path),
            input_names=["x"],
            output_names=["y"],
            opset_version=17,
            dynamo=False,
        )
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="directory (default: models/)")
    args = parser.parse_args(argv)
    for path in export(args.out):
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
