"""The isolation machinery on a CPU host: a child that cannot start is reported, not hung on."""

from __future__ import annotations

import pytest

from ptxcore.gpu import gpu_available
from ptxcore.gpu.harness.isolation import ChildDied, ChildProcess
from ptxcore.gpu.messages import SessionMode


@pytest.mark.skipif(gpu_available(), reason="needs a host without a GPU")
def test_child_without_gpu_fails_fast_with_the_reason():
    with pytest.raises(ChildDied) as info:
        ChildProcess.spawn(device=0, mode=SessionMode.FFI, startup_timeout_s=120)
    assert "child failed to start" in str(info.value)
