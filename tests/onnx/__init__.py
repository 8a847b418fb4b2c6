"""Tests of the ONNX integration."""
