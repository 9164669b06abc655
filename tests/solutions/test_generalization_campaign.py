"""campaigns/generalization.yaml: validates, plans the eleven Figure 6 problems, and the replay library it
names serves each of them the generated kernels of solutions/ (through the real ReplayLibrary loader)."""

from __future__ import annotations

import re

from ptxcore.agent import load_campaign, plan_campaign
from ptxcore.agent.replay import ReplayLibrary
from ptxcore.problems import load_catalog
from research.kernel_models.kernel_source import SOLUTIONS

CAMPAIGN = SOLUTIONS.parent / "campaigns" / "generalization.yaml"


def test_campaign_plans_every_generalization_problem_once():
    config, _ = load_campaign(CAMPAIGN)
    plans = plan_campaign(config)
    generalization = {n for n, p in load_catalog().items() if not p.extension.primary}
    assert len(generalization) == 11
    assert [m.model for m in config.models] == ["replay/generalization"]
    assert sorted(p.problem for p in plans) == sorted(generalization)
    assert config.architectures == ["hopper"] and config.turns == 2


def test_replay_library_serves_the_generated_kernels():
    library = ReplayLibrary(SOLUTIONS.parent / "replay" / "generalization")
    assert library.problems() == {n for n, p in load_catalog().items() if not p.extension.primary}
    for problem in library.problems():
        last = library.response(problem, "hopper", "hopper-pack", 0, 1).response
        (code,) = re.findall(r"```cpp\n(.*?)```", last, re.DOTALL)
        kernels = {p.read_text() for p in (SOLUTIONS / problem).glob("*wgmma*.cu")}
        assert code in kernels, f"{problem}: the last turn is a library wgmma kernel verbatim"
