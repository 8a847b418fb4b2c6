"""tc_graph: Tensor Comprehensions, compiled; ONNX subgraphs fused into native kernels."""

from .api import TcFunction, TcModule, define
from .errors import TcError, TcWarning
from .graph.external import save_model
from .graph.optimize import InferenceSession, optimize, prepare
from .options import MappingOptions
from .runtime.kernel import Kernel
from .runtime.ort import library_path as ort_library_path
from .runtime.parametric import ParametricKernel
from .tune.tuner import autotune

__all__ = [
    "InferenceSession",
    "Kernel",
    "MappingOptions",
    "ParametricKernel",
    "TcError",
    "TcFunction",
    "TcModule",
    "TcWarning",
    "autotune",
    "define",
    "optimize",
    "ort_library_path",
    "prepare",
    "save_model",
]
__version__ = "0.1.0"
