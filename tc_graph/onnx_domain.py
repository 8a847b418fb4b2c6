"""The ONNX names tc_graph reads and writes, kept in one place: its own op and domain
(runtime/ort_op.c spells them too; tests/unit/test_tables.py checks that it agrees), the
default domain's two spellings, and the opset and IR version of the models tc_graph builds."""

TC_DOMAIN = "ai.tc_graph"
TC_OP = "TcKernel"
TC_DOMAIN_VERSION = 1  # the version of TC_DOMAIN a model with TcKernel nodes imports

ONNX_DOMAINS = ("", "ai.onnx")  # the standard ops' domain, by either of its names

# The default domain's version of the models tc_graph builds, and the one constant folding
# assumes for a model that imports none.
OPSET = 17
IR_VERSION = 8  # the IR version of opset 17; onnx's newer default is too new for onnxruntime
