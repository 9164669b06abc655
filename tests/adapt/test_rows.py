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
