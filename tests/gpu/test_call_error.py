"""The RUNTIME_ERROR reason of a failed call is the exception's own line, however the child worded its error."""

from __future__ import annotations

from ptxcore.gpu.harness.calls import CallFailed, CallRecord
from ptxcore.gpu.pipeline.session import _call_error

TRACEBACK = ('Traceback (most recent call last):\n  File "/scratch/kernel.cu", line 403, in void run(...)\n'
             "RuntimeError: cuTensorMapEncodeTiled failed with code 1")


def test_a_traceback_from_the_child_becomes_its_exception_line():
    reason = _call_error(CallFailed(CallRecord(1, "correctness", 0, 0), TRACEBACK))
    assert reason == "error while correctness call 0 of trial 0: RuntimeError: cuTensorMapEncodeTiled failed with code 1"


def test_a_one_line_error_is_kept():
    reason = _call_error(CallFailed(CallRecord(None, "load", 0, None), "OSError: libfoo.so: cannot open"))
    assert reason == "error while loading the module: OSError: libfoo.so: cannot open"
