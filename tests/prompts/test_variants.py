from __future__ import annotations

import pytest

from ptxcore.prompts import (
    LevelError,
    PackComponent,
    PackError,
    UnknownVariantError,
    all_variants,
    default_variants,
    list_variants,
    load_variant,
    parse_level,
)
from ptxcore.schema import Language


def test_parse_level_puts_components_in_canonical_order_and_keeps_patterns():
    level = parse_level("contract+pattern:b+params+templates+pattern:a")
    assert level.components == (PackComponent.PARAMS, PackComponent.TEMPLATES, PackComponent.CONTRACT)
    assert level.patterns == ("b", "a")
    assert level.text == "params+templates+contract+pattern:b+pattern:a"
    assert parse_level("none").components == () and parse_level("none").text == "none"


@pytest.mark.parametrize("bad", ["params+bogus", "params+params", "pattern:", "pattern:x+pattern:x"])
def test_parse_level_rejects_malformed(bad):
    with pytest.raises(LevelError):
        parse_level(bad)


@pytest.mark.parametrize("arch", ["hopper", "blackwell"])
@pytest.mark.parametrize("language", ["cuda", "triton"])
def test_three_defaults_per_arch_and_language(arch, language):
    names = default_variants(arch, language)
    assert len(names) == 3 and len(set(names)) == 3
    for name in names:
        v = load_variant(name)
        assert v.default and v.arch == arch and v.language is Language(language)


def test_cuda_defaults_carry_the_full_pack():
    for arch in ("hopper", "blackwell"):
        for name in default_variants(arch, "cuda"):
            comps = load_variant(name).level.components
            assert comps[:3] == (PackComponent.PARAMS, PackComponent.TEMPLATES, PackComponent.CONTRACT)


def test_list_filters_and_unknown_name():
    assert {v.arch for v in list_variants("blackwell")} == {"blackwell"}
    assert {v.language for v in list_variants(language="triton")} == {Language.TRITON}
    assert len(list_variants()) == len(all_variants())
    with pytest.raises(UnknownVariantError, match="no-such"):
        load_variant("no-such")


def test_variant_with_unknown_pattern_is_rejected(pack_copy):
    path = pack_copy / "variants" / "hopper_cuda.yaml"
    path.write_text(path.read_text() + "- {name: broken, arch: hopper, level: params+pattern:nope}\n")
    with pytest.raises(PackError, match="pattern 'nope'"):
        all_variants(pack_copy)


def test_duplicate_variant_names_are_rejected(pack_copy):
    path = pack_copy / "variants" / "hopper_cuda.yaml"
    path.write_text(path.read_text() + "- {name: hopper-pack, arch: hopper, level: params}\n")
    with pytest.raises(PackError, match="defined twice"):
        all_variants(pack_copy)


def test_level_asking_for_an_empty_component_is_rejected(pack_copy):
    path = pack_copy / "variants" / "hopper_triton.yaml"
    path.write_text(
        path.read_text() + "- {name: t-bad, arch: hopper, language: triton, level: params+templates}\n"
    )
    with pytest.raises(PackError, match="has no templates"):
        all_variants(pack_copy)
