"""ONNX graphs: loading, partitioning into fusable groups, translation and rewriting."""
