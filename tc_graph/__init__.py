"""tc_graph: Tensor Comprehensions, compiled; ONNX subgraphs fused into native kernels."""

from .api import TcFunction, TcModule, define
from .errors import TcError, TcWarning
from .options import MappingOptions
from .runtime.kernel import Kernel

__all__ = ["Kernel", "MappingOptions", "TcError", "TcFunction", "TcModule", "TcWarning", "define"]
__version__ = "0.1.0"
