"""Adapt credits the work by default (issue 25): KernelGen selection and Fixit pairs keep a correct turn only when
its target path carried the work; `target_credit: executed` (recipe option) restores the paper's indicator."""

from __future__ import annotations

import pytest

from ptxcore.adapt import AdaptError, parse_recipe
from ptxcore.adapt.models import PairStatus, SelectionOutcome
from ptxcore.adapt.pairs import _status
from ptxcore.adapt.recipe import PairSpec
from ptxcore.adapt.select import first_failed_rule
from ptxcore.adapt.spec import SelectionSpec, TargetCredit, Template
from ptxcore.schema import EvaluationStatus as S
from ptxcore.schema import TargetInstruction, TargetWork

from .conftest import turn
from .test_recipe import BASE

MHA = "mha_with_lse_d128"


def _dummy_hack(work: TargetWork = TargetWork.DOES_NOT_CARRY):
    """A correct turn whose target instruction executed (the paper credits it) but did not carry the work."""
    return turn("gem", "t", 1, MHA, S.PASSED, model="gemini", speedup=0.6, target=TargetInstruction.EXECUTED, work=work)


def test_kernelgen_selection_keeps_only_turns_that_carried_the_work():
    strict = SelectionSpec(source_campaigns=["gem"], problems=[MHA], prompt_variants=None)
    assert strict.target_credit is TargetCredit.WORK
    assert first_failed_rule(_dummy_hack(), strict, Template.KERNELGEN, None) is SelectionOutcome.TARGET_NOT_CARRIED
    assert first_failed_rule(_dummy_hack(TargetWork.UNKNOWN), strict, Template.KERNELGEN, None) is \
        SelectionOutcome.TARGET_NOT_CARRIED  # unknown is not credit
    assert first_failed_rule(_dummy_hack(TargetWork.CARRIES), strict, Template.KERNELGEN, None) is None
    paper = strict.model_copy(update={"target_credit": TargetCredit.EXECUTED})
    assert first_failed_rule(_dummy_hack(), paper, Template.KERNELGEN, None) is None


def test_fixit_pairs_keep_only_versions_that_carried_the_work():
    assert PairSpec().target_credit is TargetCredit.WORK
    assert _status(_dummy_hack(), PairSpec()) is PairStatus.TARGET_NOT_CARRIED
    assert _status(_dummy_hack(TargetWork.CARRIES), PairSpec()) is PairStatus.KEPT
    assert _status(_dummy_hack(), PairSpec(target_credit=TargetCredit.EXECUTED)) is PairStatus.KEPT
    assert _status(_dummy_hack(), PairSpec(require_target_executed=False)) is PairStatus.KEPT


def test_the_recipe_option_and_a_bad_value():
    paper = parse_recipe(BASE + "pairs:\n  target_credit: executed\n")
    assert paper.pairs.target_credit is TargetCredit.EXECUTED
    kg = BASE.replace("  source_campaigns: [c]\n", "  source_campaigns: [c]\n  target_credit: executed\n")
    assert parse_recipe(kg).selection.target_credit is TargetCredit.EXECUTED
    with pytest.raises(AdaptError, match=r"pairs\.target_credit: Input should be 'work' or 'executed'") as info:
        parse_recipe(BASE + "pairs:\n  target_credit: vibes\n")
    assert "\n" not in str(info.value)
