"""Builds queued CUDA candidates ahead of their GPU (issue 27): the service's CPU cores run nvcc for the
candidates waiting in the queue while the GPU judges the one in front of them, so a worker that picks a task
finds its build in the compile cache it shares with the service.

Nothing here decides anything: the worker's judge looks the build up by the same content-addressed key and
verifies the entry as for any cache hit (a missing, failed or half-written prebuild is a miss and is built
again, under the key's lock, by the worker). The compile stage runs nvcc in its own sandbox, as everywhere.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate

log = logging.getLogger(__name__)


class Prebuilder:
    """A pool of `workers` build threads over the compile cache under `cache_root` (the workers' own)."""

    def __init__(self, cache_root: Path, workers: int, build_timeout_s: float) -> None:
        if workers < 1:
            raise ValueError(f"a prebuilder needs at least one worker, got {workers}")
        self.cache = CompileCache(Path(cache_root) / "compile")
        self.build_timeout_s = build_timeout_s
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="prebuild")
        self._stopped = False

    def submit(self, source: str, arch: str) -> Future[None] | None:
        """Queue the build of a CUDA candidate for `arch` (None once stopped)."""
        if self._stopped:
            return None
        return self._pool.submit(self._build, source, arch)

    def _build(self, source: str, arch: str) -> None:
        try:
            built = compile_candidate(source, BuildOptions(get_architecture(arch), timeout_s=self.build_timeout_s),
                                      self.cache)
            log.debug("prebuilt %s: %s", built.result.source_sha256[:12], built.result.status.value)
        except Exception as exc:  # a prebuild that cannot run leaves the build to the worker, as without one
            log.warning("prebuild failed (the worker builds it): %s", exc)

    def stop(self) -> None:
        """Drop the queued builds; a build under way finishes in its thread."""
        self._stopped = True
        self._pool.shutdown(wait=False, cancel_futures=True)


JUDGE_RUNNER = "ptxcore.gpu.service.judge_runner:JudgeRunner"


def prebuilder_for(runner: str, runner_args: dict[str, object], workers: int) -> Prebuilder | None:
    """The service's prebuilder: None when disabled (`workers` 0) or the workers run another runner (a fake, a
    test double), whose cache is not the judge's."""
    if workers == 0 or runner != JUDGE_RUNNER:
        return None
    from ptxcore.gpu.config import JudgeConfig

    judge_config = runner_args.get("judge_config") or {}
    if not isinstance(judge_config, dict):
        raise ValueError("runner_args.judge_config must be an object")
    config = JudgeConfig(**judge_config)
    return Prebuilder(config.cache_root(), workers, config.build_timeout_s)
