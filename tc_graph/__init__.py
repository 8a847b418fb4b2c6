"""tc_graph: Tensor Comprehensions, compiled; ONNX subgraphs fused into native kernels."""

from .api import TcFunction, TcModule, define
from .errors import TcError, TcWarning

__all__ = ["TcError", "TcFunction", "TcModule", "TcWarning", "define"]
__version__ = "0.1.0"
