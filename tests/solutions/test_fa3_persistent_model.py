"""CPU check of the persistent ping-pong attention forward (solutions/templates/mha_fwd_fa3_wgmma_tma_persistent.cu.in;
research/kernels/mha_with_lse/check_persistent.py, quick form): its Q / K / V barrier and named-barrier protocol
holds under random interleavings over several work tiles per CTA, the causal work list covers every tile once, and
the two broken variants are caught."""

from __future__ import annotations

from pathlib import Path

from tests.scripts import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "research" / "kernels" / "mha_with_lse" / "check_persistent.py"
CHECK = load_script(SCRIPT, "fa3_persistent_check")


def test_the_model_has_the_templates_ring_depth():
    text = CHECK.TEMPLATE.read_text()
    assert f"constexpr int STAGES = {CHECK.STAGES};" in text and "constexpr int kConsumerWarps = 8;" in text


def test_the_protocol_holds_and_the_causal_work_list_covers_every_tile_once():
    CHECK.check_protocol(4)
    CHECK.check_work_list()


def test_the_broken_variants_are_caught():
    assert CHECK.check_broken(30) == ["no_qempty", "always_arrive"]
