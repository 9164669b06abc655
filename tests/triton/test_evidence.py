"""Judge-side evidence: cubins from a real Triton cache, verified by hash; SASS families; ncu filter; cache key."""

from __future__ import annotations

import hashlib
import os

import pytest

from ptxcore.arch import get_architecture
from ptxcore.schema import StaticTarget
from ptxcore.triton.evidence import (
    EvidenceError,
    binaries_from_launches,
    cache_kernels,
    combined_cubin_sha256,
    evidence_key,
    foreign_kernels,
    kernel_name_regex,
    static_evidence,
    with_kernel_filter,
)

HOPPER = get_architecture("hopper")


def _rows(cache, names=None):
    rows = []
    for b in cache_kernels(cache):
        if names is None or b.name in names:
            rows.append({"name": b.name, "cubin_sha256": b.sha256, "cubin": str(b.path.relative_to(cache.resolve())),
                         "stream": 0})
    return rows


def test_cache_listing_finds_each_compiled_kernel_by_name(triton_cache):
    names = sorted(b.name for b in cache_kernels(triton_cache))
    assert names == ["plain_copy", "tma_dot"]


def test_static_sass_per_kernel_uses_the_repository_families(triton_cache):
    static = static_evidence(cache_kernels(triton_cache), HOPPER)
    assert static.per_kernel == {"tma_dot": StaticTarget.PRESENT, "plain_copy": StaticTarget.ABSENT}
    assert static.report.target_static is StaticTarget.PRESENT
    assert static.report.family_counts["gmma"] > 0 and static.report.family_counts["tma"] > 0
    assert {"tma_dot", "plain_copy"} <= set(static.report.functions)
    only_copy = [b for b in cache_kernels(triton_cache) if b.name == "plain_copy"]
    assert static_evidence(only_copy, HOPPER).report.target_static is StaticTarget.ABSENT


def test_launch_report_selects_and_verifies_the_launched_cubins(triton_cache):
    rows = _rows(triton_cache, {"tma_dot"})
    binaries = binaries_from_launches(rows + rows, triton_cache)  # duplicates collapse
    assert [b.name for b in binaries] == ["tma_dot"]
    assert binaries[0].sha256 == hashlib.sha256(binaries[0].path.read_bytes()).hexdigest()


@pytest.mark.parametrize("tamper", ["sha", "escape", "absolute", "missing", "name", "empty"])
def test_a_forged_launch_report_is_refused(triton_cache, tamper):
    row = dict(_rows(triton_cache, {"tma_dot"})[0])
    if tamper == "sha":
        row["cubin_sha256"] = "0" * 64
    elif tamper == "escape":
        row["cubin"] = "../../../../etc/passwd"
    elif tamper == "absolute":
        row["cubin"] = "/etc/passwd"
    elif tamper == "missing":
        row["cubin"] = "nohash/none.cubin"
    elif tamper == "name":
        row["name"] = "x; rm -rf /"
    else:
        row["cubin_sha256"] = ""
    with pytest.raises(EvidenceError):
        binaries_from_launches([row], triton_cache)


def test_a_symlinked_cubin_is_refused(triton_cache, tmp_path):
    real = next(b for b in cache_kernels(triton_cache) if b.name == "tma_dot")
    fake_dir = triton_cache / "FAKEHASH"
    fake_dir.mkdir(exist_ok=True)
    link = fake_dir / "evil.cubin"
    if not link.exists():
        os.symlink(real.path, link)
    try:
        with pytest.raises(EvidenceError, match="not a plain file"):
            binaries_from_launches([{"name": "evil", "cubin_sha256": real.sha256, "cubin": "FAKEHASH/evil.cubin"}],
                                   triton_cache)
        with pytest.raises(EvidenceError):
            cache_kernels(triton_cache)
    finally:
        link.unlink()
        fake_dir.rmdir()


def test_cache_key_is_source_plus_an_order_free_cubin_hash(triton_cache):
    binaries = cache_kernels(triton_cache)
    src, combined = evidence_key("a" * 64, binaries)
    assert src == "a" * 64
    assert combined == combined_cubin_sha256([b.sha256 for b in reversed(binaries)])
    assert combined != combined_cubin_sha256([binaries[0].sha256])


def test_ncu_kernel_filter_goes_right_after_the_executable():
    cmd = ["/opt/ncu", "--replay-mode", "application", "python3", "-m", "child"]
    out = with_kernel_filter(cmd, {"gemm_nt_tma_persistent", "attn_fwd_lse"})
    assert out[:3] == ["/opt/ncu", "--kernel-name", "regex:^(attn_fwd_lse|gemm_nt_tma_persistent)$"]
    assert out[3:] == cmd[1:]
    with pytest.raises(EvidenceError):
        kernel_name_regex({"a|.*"})


def test_foreign_kernels_are_the_non_triton_ones():
    seen = ["gemm_nt_tma_persistent", "void at::native::vectorized_elementwise_kernel<4, ...>",
            "nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NTN"]
    assert foreign_kernels(seen, {"gemm_nt_tma_persistent"}) == sorted(seen[1:])
    assert foreign_kernels(["gemm_nt_tma_persistent"], {"gemm_nt_tma_persistent"}) == []
