"""Test configuration: marker handling and shared fixtures.

- `gpu`: needs an NVIDIA GPU; skipped automatically where none is visible.
- `llm`: calls a real LLM API; skipped unless --run-llm is given.
- `slow`: long-running; runs by default, deselect with -m "not slow".
- `netns`: builds test hosts in network namespaces (root, iproute2); skipped unless --run-netns is given.
- `browser`: headless Chromium against the Prefect/MLflow UIs; skipped unless --run-browser is given.
"""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def gpu_available() -> bool:
    """The project's one GPU probe (ptxcore.gpu.probe; PTXBENCH_FORCE_NO_GPU=1 turns it off)."""
    from ptxcore.gpu.probe import gpu_available as probe

    return probe()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-llm", action="store_true", help="run tests that call real LLM APIs")
    parser.addoption("--run-netns", action="store_true", help="run tests that build hosts in network namespaces")
    parser.addoption("--run-browser", action="store_true", help="run tests that drive headless Chromium")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_gpu = gpu_available()
    skip_gpu = pytest.mark.skip(reason="no NVIDIA GPU on this machine")
    skip_llm = pytest.mark.skip(reason="needs --run-llm and API keys")
    for item in items:
        if item.get_closest_marker("gpu") is not None and not has_gpu:  # not `in keywords`: tests/gpu/ matches
            item.add_marker(skip_gpu)
        if "llm" in item.keywords and not config.getoption("--run-llm"):
            item.add_marker(skip_llm)
        for marker in ("netns", "browser"):
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
    """One compile cache for the whole session (kernels compile once)."""
    return tmp_path_factory.mktemp("compile-cache")


@pytest.fixture(scope="session", autouse=True)
def profiler_token_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Per-start profiling-service tokens go to a session folder, never to the user's ~/.ptxbench (services
    started in subprocesses inherit it)."""
    import os

    from ptxcore.gpu.service.tokenfile import TOKEN_DIR_ENV

    path = tmp_path_factory.mktemp("profiler-tokens")
    os.environ[TOKEN_DIR_ENV] = str(path)
    return path
