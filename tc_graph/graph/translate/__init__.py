"""Translation of a group of ONNX nodes into one multi-statement TC.

Every supported op type has a TC template in the `operators/` library (shipped in the
wheel as `tc_graph/operators`; library.py reads it). A template is a def with `${fields}`:
TC defs are rank-specific, so the fields (parameter declarations, index lists, literals)
are filled from the node's attributes and the static shapes, by the op's translator. The
translators live one operator family to a module (elementwise, linear, conv, pool, reduce,
normalize, movement), each registered for its op types with `@translator(...)`
(registry.py); they share the context (context.py) and the TC text helpers (text.py). The
driver (driver.py) makes the group one entry def that calls the instantiated defs in
topological order.

Shapes are static and concrete: the entry's parameters and outputs are declared with
integer dimensions (the compiled kernel is specialized on them anyway), which also makes
tc_graph check at each call that its inferred output shapes are ONNX's. A rows group's
inputs and outputs that lead with a model's symbolic dimension declare it as the size
ROWS instead (graph/rows.py).
"""

from .context import Untranslatable, ValueType
from .driver import (
    ROWS,
    TRANSLATABLE,
    Translation,
    opset_version,
    row_names,
    translatable,
    translate,
)

__all__ = [
    "ROWS",
    "TRANSLATABLE",
    "Translation",
    "Untranslatable",
    "ValueType",
    "opset_version",
    "row_names",
    "translatable",
    "translate",
]
