"""Architecture registry: keys, aliases, gencodes."""

from __future__ import annotations

import pytest

from ptxcore.arch import UnknownArchitectureError, get_architecture


@pytest.mark.parametrize("alias", ["hopper", "H100", "h200", "h800", "sm_90a"])
def test_hopper_aliases(alias):
    a = get_architecture(alias)
    assert a.key == "hopper" and a.gencode == "arch=compute_90a,code=sm_90a"
    assert [f.name for f in a.target_families] == ["gmma", "tma"]


@pytest.mark.parametrize("alias", ["blackwell", "B200", "sm_100a"])
def test_blackwell_aliases(alias):
    a = get_architecture(alias)
    assert a.key == "blackwell" and a.gencode == "arch=compute_100a,code=sm_100a"
    assert [f.name for f in a.target_families] == ["tcgen05"]


def test_unknown_architecture_names_the_input():
    with pytest.raises(UnknownArchitectureError, match="ampere"):
        get_architecture("ampere")
