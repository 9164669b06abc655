"""Sandbox tests run real bubblewrap (CI installs it: .ci/run); without it they fail, on purpose."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ptxcore.sandbox import Limits, SandboxPolicy, presets


@pytest.fixture
def policy() -> SandboxPolicy:
    """The OS read-only, nothing else; a small process budget."""
    return SandboxPolicy(name="test", mounts=presets.system_mounts(), env={"PATH": "/usr/bin:/bin"},
                         limits=Limits(processes=64))


def processes_matching(marker: str) -> list[int]:
    """PIDs whose command line contains `marker` (every process of the machine)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                continue
    return out
