"""The compile cache checks every entry on read: corrupt, tampered or stale entries are misses, never
tracebacks and never wrong verdicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.compile.cache import ARTIFACT_FILE, DEPS_FILE, MANIFEST_FILE, RESULT_FILE
from ptxcore.compile.includes import Dependency, _sha256_file
from ptxcore.schema import CompileResult, CompileStatus, SassReport, StaticTarget

HOPPER = BuildOptions(arch=get_architecture("hopper"))
KEY = "ab" + "0" * 62


def publish(cache: CompileCache, header: Path) -> Path:
    staging = cache.staging()
    (staging / ARTIFACT_FILE).write_bytes(b"\x7fELF fake shared object")
    result = CompileResult(status=CompileStatus.COMPILED, source_sha256="s" * 64, arch="hopper")
    deps = [Dependency("pack:test", header.name, str(header), _sha256_file(str(header)))]
    sass = SassReport(arch="hopper", target_static=StaticTarget.ABSENT)
    return cache.publish(KEY, staging, result, deps, sass)


@pytest.fixture
def entry(tmp_path) -> tuple[CompileCache, Path, Path]:
    header = tmp_path / "helper.cuh"
    header.write_text("#pragma once\n")
    cache = CompileCache(tmp_path / "cache")
    return cache, publish(cache, header), header


def test_a_published_entry_reads_back(entry):
    cache, path, _ = entry
    hit = cache.lookup(KEY)
    assert hit is not None and hit.result.status is CompileStatus.COMPILED
    assert hit.artifact == path / ARTIFACT_FILE and hit.sass.target_static is StaticTarget.ABSENT


def _garbage_result(p: Path, header: Path) -> None:
    (p / RESULT_FILE).write_text("{not json")


def _flipped_status(p: Path, header: Path) -> None:
    raw = json.loads((p / RESULT_FILE).read_text())
    (p / RESULT_FILE).write_text(json.dumps({**raw, "status": "REJECTED"}))


def _truncated_artifact(p: Path, header: Path) -> None:
    (p / ARTIFACT_FILE).write_bytes(b"\x7fELF")


def _no_manifest(p: Path, header: Path) -> None:
    (p / MANIFEST_FILE).unlink()


def _artifact_symlink(p: Path, header: Path) -> None:
    (p / ARTIFACT_FILE).unlink()
    (p / ARTIFACT_FILE).symlink_to("/etc/hostname")


def _header_changed(p: Path, header: Path) -> None:
    header.write_text("#pragma once\n#define CHANGED 1\n")


def _deps_garbage(p: Path, header: Path) -> None:
    (p / DEPS_FILE).write_text("[{}]")


@pytest.mark.parametrize("tamper", [_garbage_result, _flipped_status, _truncated_artifact, _no_manifest,
                                    _artifact_symlink, _header_changed, _deps_garbage])
def test_a_bad_entry_is_a_logged_miss_and_is_removed(entry, tamper, caplog):
    cache, path, header = entry
    tamper(path, header)
    assert cache.lookup(KEY) is None, "served a tampered entry"
    assert path.exists(), "without the lock nothing is removed"
    assert cache.lookup(KEY, remove_bad=True) is None and not path.exists()
    assert any("unusable" in r.message for r in caplog.records)


def test_an_entry_moved_under_another_key_is_refused(entry):
    cache, path, _ = entry
    other = "cd" + "1" * 62
    cache.entry(other).parent.mkdir(parents=True, exist_ok=True)
    path.rename(cache.entry(other))
    assert cache.lookup(other) is None


# ---- end to end with nvcc ------------------------------------------------------------------------------


@pytest.mark.slow  # three nvcc builds; the tampering cases above run by default without nvcc
def test_tampered_entries_are_rebuilt_with_the_right_verdict(fixtures_dir, tmp_path):
    cache = CompileCache(tmp_path)
    source = (fixtures_dir / "kernels" / "dummy_gmma_sm90.cu").read_text() + "\n// tamper test\n"
    first = compile_candidate(source, HOPPER, cache)
    assert first.result.status is CompileStatus.COMPILED and not first.result.cache_hit
    entry = first.artifact.parent
    (entry / RESULT_FILE).write_text('{"status": "PASSED", "truncated')  # the JSONDecodeError of issue 14
    second = compile_candidate(source, HOPPER, cache)
    assert second.result.status is CompileStatus.COMPILED and not second.result.cache_hit
    assert second.result.cubin_sha256 == first.result.cubin_sha256 and second.sass == first.sass
    raw = json.loads((entry / RESULT_FILE).read_text())
    (entry / RESULT_FILE).write_text(json.dumps({**raw, "status": "COMPILE_ERROR", "log": "forged"}))
    third = compile_candidate(source, HOPPER, cache)
    assert third.result.status is CompileStatus.COMPILED and not third.result.cache_hit
    assert "forged" not in third.result.log
    fourth = compile_candidate(source, HOPPER, cache)
    assert fourth.result.cache_hit and fourth.result.cache_key == first.result.cache_key


def test_a_changed_header_is_a_new_build(vendor_root, tmp_path):
    cache = CompileCache(tmp_path)
    source = ('#include <cuda_runtime.h>\n#include "helper.cuh"\n'
              "__global__ void k(float* x) { x[threadIdx.x] = twice(x[threadIdx.x]); }\n")
    first = compile_candidate(source, HOPPER, cache)
    assert first.result.status is CompileStatus.COMPILED, first.result.log
    assert compile_candidate(source, HOPPER, cache).result.cache_hit
    (vendor_root / "helper.cuh").write_text(
        "#pragma once\n__device__ inline float twice(float x) { return x + x; }\n")
    changed = compile_candidate(source, HOPPER, cache)
    assert changed.result.status is CompileStatus.COMPILED and not changed.result.cache_hit
    assert changed.result.cache_key != first.result.cache_key
