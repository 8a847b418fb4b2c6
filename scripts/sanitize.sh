#!/usr/bin/env bash
# The sanitizer job: the onnxruntime library and every kernel built with
# -fsanitize=address,undefined (tests/conftest.py's --sanitize), run on the native-op tests,
# the nodes for every size, the malicious-model tests and part of the fuzzer's CI slice, on two workers. Python itself
# is not instrumented, so ASan's and UBSan's runtimes are preloaded; leak checking is off
# (Python's own allocations would drown it). Extra arguments go to pytest; by default it runs the files below.
set -euo pipefail
cd "$(dirname "$0")/.."
cc=${CC:-cc}
asan=$("$cc" -print-file-name=libasan.so)
ubsan=$("$cc" -print-file-name=libubsan.so)
if [ ! -e "$asan" ] || [ ! -e "$ubsan" ]; then
    echo "sanitize.sh: $cc has no ASan/UBSan runtime (libasan.so, libubsan.so)" >&2
    exit 2
fi
if [ "$#" -eq 0 ]; then
    # One of the fuzzer slice's chunks (30 programs): the suite runs three uninstrumented,
    # --slow all eight; all of them under ASan cost CI about 3 of its 10 minutes.
    fuzz=tests/cpu/test_fuzz_programs.py::test_generated_programs_match_the_reference
    set -- tests/onnx/test_ort_op.py tests/onnx/test_every_size.py tests/onnx/test_malicious.py \
        tests/cpu/test_outer_product.py "$fuzz[0]"
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
LD_PRELOAD="$asan $ubsan" exec python -m pytest -n 2 -q --sanitize "$@"
