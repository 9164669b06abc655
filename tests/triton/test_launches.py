"""Launch recorder: Triton's real hook chains, driven by hand (no GPU launches on this machine)."""

from __future__ import annotations

import hashlib

import pytest

from ptxcore.triton.launches import LaunchRecorder


class _Lazy:
    """Stands in for Triton's LazyDict: `.data` plus extras that must never run in our hook."""

    def __init__(self, data):
        self.data = data

    def get(self):  # pragma: no cover - the recorder must not call it
        raise AssertionError("LazyDict.get() runs user launch_metadata code")


@pytest.fixture
def knobs():
    pytest.importorskip("triton")
    import triton.knobs as k

    return k


def test_records_only_inside_recording_with_binary_and_stream(knobs, tmp_path):
    cubin = tmp_path / "HASH" / "my_kernel.cubin"
    cubin.parent.mkdir()
    cubin.write_bytes(b"\x7fELF fake cubin")
    rec = LaunchRecorder()
    rec.install()
    try:
        knobs.runtime.kernel_load_end_hook(None, 1234, "my_kernel", {"my_kernel.cubin": str(cubin),
                                                                     "my_kernel.json": "x"}, "HASH")
        knobs.runtime.launch_enter_hook(_Lazy({"name": "my_kernel", "function": 1234, "stream": 0}))
        assert rec.launches == [], "a launch outside recording() was recorded"
        with rec.recording() as calls:
            knobs.runtime.launch_enter_hook(_Lazy({"name": "my_kernel", "function": 1234, "stream": 7}))
            knobs.runtime.launch_enter_hook(_Lazy({"name": "other", "function": 99, "stream": 0}))
        assert rec._launched not in knobs.runtime.launch_enter_hook.calls
        report = rec.report(calls, tmp_path)
    finally:
        rec.remove()
    assert rec._loaded not in knobs.runtime.kernel_load_end_hook.calls
    assert report[0] == {"name": "my_kernel", "stream": 7, "cubin": "HASH/my_kernel.cubin", "cache_hash": "HASH",
                         "cubin_sha256": hashlib.sha256(b"\x7fELF fake cubin").hexdigest()}
    assert report[1]["name"] == "other" and report[1]["cubin_sha256"] == ""  # loaded before install


def test_recording_before_install_is_an_error():
    with pytest.raises(RuntimeError, match="install"):
        with LaunchRecorder().recording():
            pass


def test_an_exception_in_the_call_still_removes_the_launch_hook(knobs):
    rec = LaunchRecorder()
    rec.install()
    try:
        with pytest.raises(ValueError):
            with rec.recording():
                raise ValueError("candidate failed")
        assert rec._launched not in knobs.runtime.launch_enter_hook.calls
    finally:
        rec.remove()
