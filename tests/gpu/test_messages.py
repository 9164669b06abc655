"""The judge <-> child protocol: a reply must answer the judge's request (nonce and sequence number)."""

from __future__ import annotations

import json
import os

import pytest

from ptxcore.gpu.messages import Channel, ChildOp, ChildReply, ChildRequest, ProtocolViolation, new_nonce


def _channel_with(*lines: bytes) -> Channel:
    r, w = os.pipe()
    for line in lines:
        os.write(w, line)
    os.close(w)
    return Channel(r, os.open(os.devnull, os.O_WRONLY))


def test_an_honest_reply_is_accepted():
    nonce = new_nonce()
    chan = _channel_with((json.dumps(ChildReply(True, 4, nonce, {"wall_ns": 812}).to_wire()) + "\n").encode())
    reply = ChildReply.from_wire(chan.recv(1.0), seq=4, nonce=nonce)
    assert reply.ok and reply.data["wall_ns"] == 812


@pytest.mark.parametrize("forged", [
    b'{"ok":true,"wall_ns":1,"l2_reset":false}\n',                       # no nonce, no sequence number
    b'{"ok":true,"wall_ns":1,"seq":4,"nonce":""}\n',                       # a guessed sequence number
    b'{"ok":true,"seq":3,"nonce":"%s"}\n',                                 # the right nonce, an old request
    b'not json at all\n',
    b'[1, 2, 3]\n',
])
def test_a_forged_or_stale_reply_is_a_protocol_violation(forged):
    nonce = new_nonce()
    line = forged.replace(b"%s", nonce.encode()) if b"%s" in forged else forged
    chan = _channel_with(line)
    with pytest.raises(ProtocolViolation):
        ChildReply.from_wire(chan.recv(1.0), seq=4, nonce=nonce)


def test_requests_round_trip():
    req = ChildRequest(ChildOp.CALL, 7, {"slot": 1, "tag": 12})
    assert ChildRequest.from_wire(req.to_wire()) == req
