"""Test configuration: marker handling, parallel workers and shared fixtures (docs/testing.md).

- `gpu`: needs an NVIDIA GPU; skipped automatically where none is visible.
- `llm`: calls a real LLM API; skipped unless --run-llm is given.
- `slow`: long-running (end-to-end runs, every solution built); deselected unless --run-slow is given or the
  run selects by marker (`-m slow` runs only them, `-m gpu` every GPU test). CI runs both sets.
- `netns`: builds test hosts in network namespaces (root, iproute2); skipped unless --run-netns is given.
- `browser`: headless Chromium against the Prefect/MLflow UIs; skipped unless --run-browser is given.
  Those opt-ins are slow tests: asking for them runs them.

`-n auto` (pytest-xdist) runs the tests in worker processes: one more than the CPUs (many tests wait on
servers and subprocesses), none where a GPU is visible (GPU tests stay alone on their GPU). The workers share
one cache root (`compile_cache_dir`), so a kernel is built once per session; each worker that runs a flow test
starts its own Prefect test server (xdist's `--dist loadgroup` does not group under pytest 9.2).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
OPT_INS = ("netns", "browser")
GPU_TEST_TIMEOUT_S = 1800  # a GPU test's default limit, where pytest-timeout is installed (300 s otherwise)


def gpu_available() -> bool:
    """The project's one GPU probe (ptxcore.gpu.probe; PTXBENCH_FORCE_NO_GPU=1 turns it off)."""
    from ptxcore.gpu.probe import gpu_available as probe

    return probe()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", help="run the slow tests too (CI does: -m slow)")
    parser.addoption("--run-llm", action="store_true", help="run tests that call real LLM APIs")
    parser.addoption("--run-netns", action="store_true", help="run tests that build hosts in network namespaces")
    parser.addoption("--run-browser", action="store_true", help="run tests that drive headless Chromium")


def pytest_configure(config: pytest.Config) -> None:
    # A run started in the background of a non-interactive shell inherits SIGINT ignored, and so would every
    # process a test starts; the tests that send SIGINT need the default (what a terminal gives).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for `-n auto`: PYTEST_XDIST_AUTO_NUM_WORKERS, else none with a GPU, else CPUs + 1."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    if gpu_available():
        return 0
    return len(os.sched_getaffinity(0)) + 1


def _deselect_slow(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or config.option.markexpr:
        return

    def wanted(item: pytest.Item) -> bool:
        return item.get_closest_marker("slow") is None or any(
            item.get_closest_marker(m) is not None and config.getoption(f"--run-{m}") for m in OPT_INS)

    dropped = [item for item in items if not wanted(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if wanted(item)]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _deselect_slow(config, items)
    has_gpu = gpu_available()
    skip_gpu = pytest.mark.skip(reason="no NVIDIA GPU on this machine")
    skip_llm = pytest.mark.skip(reason="needs --run-llm and API keys")
    for item in items:
        if item.get_closest_marker("gpu") is not None:  # not `in keywords`: tests/gpu/ matches
            if not has_gpu:
                item.add_marker(skip_gpu)
            elif item.get_closest_marker("timeout") is None:  # the judge's own limits (ncu, memcheck: 600 s)
                item.add_marker(pytest.mark.timeout(GPU_TEST_TIMEOUT_S))
        if "llm" in item.keywords and not config.getoption("--run-llm"):
            item.add_marker(skip_llm)
        for marker in OPT_INS:
            if item.get_closest_marker(marker) is not None and not config.getoption(f"--run-{marker}"):
                item.add_marker(pytest.mark.skip(reason=f"opt-in: needs --run-{marker}"))


_WATCHED = (".", "mlruns", "runs")
"""Folders of the working tree that a test writing outside its temp dirs fills (MLflow's ./mlruns/<id> of a store
without an artifact root, a campaign's runs/<id>, a report or warehouse in the cwd)."""
_RUNNER_FILES = frozenset({".pytest_cache", "__pycache__", ".ruff_cache", ".grimp_cache"})
_BEFORE = pytest.StashKey[set]()


def _tree_entries() -> set[str]:
    return {f"{d}/{p.name}" for d in _WATCHED if (REPO / d).is_dir() for p in (REPO / d).iterdir()
            if p.name not in _RUNNER_FILES}


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_BEFORE] = _tree_entries()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Tests write only under their temp dirs: anything new in the working tree fails the session."""
    before = session.config.stash.get(_BEFORE, None)
    if before is None or session.testscollected == 0:
        return
    added = sorted(_tree_entries() - before)
    if added:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(
            f"tests wrote into the working tree (write under tmp_path instead): {', '.join(added)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return REPO / "tests" / "fixtures"


@pytest.fixture(scope="session")
def compile_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's cache root, as PTXBENCH_CACHE_DIR (compile entries in <root>/compile): $PTXBENCH_CACHE_DIR
    when set (a persistent cache, verified on every read), else one fresh directory that every xdist worker of
    the session shares (the cache's per-key lock makes concurrent builds of one key build once)."""
    if os.environ.get("PTXBENCH_CACHE_DIR"):
        return Path(os.environ["PTXBENCH_CACHE_DIR"])
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # <session>/popen-gwN -> <session>, the same for every worker
    root = base / "cache-root"
    root.mkdir(exist_ok=True)
    return root


@pytest.fixture(scope="session", autouse=True)
def session_cache_root(compile_cache_dir: Path):
    """On a CPU machine every test and every process it starts uses the session's cache root (never
    ~/.cache); a test that needs its own cache sets PTXBENCH_CACHE_DIR itself. Where a GPU is visible the
    environment is left alone: the judge's per-host caches (FlashInfer's JIT, reference latencies) stay."""
    if gpu_available() or os.environ.get("PTXBENCH_CACHE_DIR"):
        yield compile_cache_dir
        return
    os.environ["PTXBENCH_CACHE_DIR"] = str(compile_cache_dir)
    try:
        yield compile_cache_dir
    finally:
        os.environ.pop("PTXBENCH_CACHE_DIR", None)


@pytest.fixture(scope="session", autouse=True)
def profiler_token_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per-start profiling-service tokens go to a session folder, never to the user's ~/.ptxbench (services
    started in subprocesses inherit it)."""
    import os

    from ptxcore.gpu.service.tokenfile import TOKEN_DIR_ENV

    path = tmp_path_factory.mktemp("profiler-tokens")
    os.environ[TOKEN_DIR_ENV] = str(path)
    return path
