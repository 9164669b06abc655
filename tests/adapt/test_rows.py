"""SFT row layout rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from ptxcore.adapt.models import SftMessage, SftRow
from ptxcore.adapt.rows import final_fixit, final_kernelgen
from ptxcore.adapt.spec import Template


def _msgs(roles, masks):
    return [SftMessage(role=r, content="x", step_loss_mask=m) for r, m in zip(roles, masks, strict=True)]


def test_layouts_and_loss_masks_are_enforced():
    five = ["system", "user", "assistant", "user", "assistant"]
    SftRow(id="a", template=Template.FIXIT, messages=_msgs(five, [0, 0, 0, 0, 1]), metadata={})
    SftRow(id="b", template=Template.KERNELGEN, messages=_msgs(five[:3], [0, 0, 1]), metadata={})
    with pytest.raises(ValidationError, match="loss only on the last"):
        SftRow(id="c", template=Template.FIXIT, messages=_msgs(five, [0, 0, 1, 0, 1]), metadata={})
    with pytest.raises(ValidationError, match="fixit rows have roles"):
        SftRow(id="d", template=Template.FIXIT, messages=_msgs(five[:3], [0, 0, 1]), metadata={})
    with pytest.raises(ValidationError):
        SftMessage(role="tool", content="x", step_loss_mask=0)


def test_final_messages():
    assert final_fixit("  why  ", "\nk();\n") == "<think>\nwhy\n</think>\n\n```cpp\nk();\n```"
    assert final_kernelgen("why", "Plan.\n```cpp\nk();\n```\n") == "<think>\nwhy\n</think>\nPlan.\n```cpp\nk();\n```"


def test_rows_carry_no_build_machine_path():
    """`*_recorded_from` holds a repository-relative path (or an id), never the absolute path of the machine."""
    from ptxcore.adapt.rows import REPO_ROOT, portable_source

    assert portable_source(str(REPO_ROOT / "campaigns" / "recorded" / "h200")) == "campaigns/recorded/h200"
    assert portable_source("campaigns/recorded/h200") == "campaigns/recorded/h200"
    assert portable_source("/srv/elsewhere/verdicts/h200-night") == "recorded-set:h200-night"
    assert portable_source(None) is None and portable_source("") is None


def test_the_feedback_a_model_sees_is_its_message_not_our_stack():
    """A RUNTIME_ERROR reaches the model (and the SFT row) as its message and the candidate's own frames only."""
    from ptxcore.agent.feedback import clean_log, trim

    log = ("Traceback (most recent call last):\n"
           '  File "/work/main/ptxcore/gpu/child/session.py", line 203, in run_session\n'
           "    chan.send(ChildReply(...))\n              ^^^^^^^^\n"
           '  File "<unknown>", line 0, in __tvm_ffi_run\n'
           '  File "/scratch/kernel.cu", line 241, in make_kmajor_map(const void*)\n'
           "RuntimeError: cuTensorMapEncodeTiled failed with code 1\n"
           "nvcc: /usr/local/cuda-13.0/include/cuda.h(12): note: see declaration")
    out = clean_log(log)
    assert out.splitlines() == ["  at kernel.cu line 241, in make_kmajor_map(const void*)",
                                "RuntimeError: cuTensorMapEncodeTiled failed with code 1",
                                "nvcc: cuda.h(12): note: see declaration"]
    assert clean_log(out) == out and "/work" not in trim(log) and "Traceback" not in trim(log)
    assert clean_log("max_abs_error=1/2 of 3") == "max_abs_error=1/2 of 3"  # a ratio is no path
