"""The judge <-> child channel and how a child's end is described."""

from __future__ import annotations

import os
import signal

import pytest

from ptxcore.gpu.harness.isolation import child_env, describe_exit
from ptxcore.gpu.messages import Channel, ChannelClosed, ChannelTimeout


def _pair() -> tuple[Channel, Channel]:
    a_r, b_w = os.pipe()
    b_r, a_w = os.pipe()
    return Channel(a_r, a_w), Channel(b_r, b_w)


def test_round_trip_and_timeout():
    a, b = _pair()
    a.send({"op": "call", "tag": 3})
    assert b.recv(1.0) == {"op": "call", "tag": 3}
    with pytest.raises(ChannelTimeout):
        b.recv(0.05)
    a.close()
    with pytest.raises(ChannelClosed):
        b.recv(1.0)
    b.close()


def test_exit_descriptions():
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV"


def test_child_environment_drops_secrets(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    monkeypatch.setenv("PATH", "/usr/bin")
    env = child_env()
    assert "OPENAI_API_KEY" not in env and env["PATH"] == "/usr/bin" and "PYTHONPATH" in env
