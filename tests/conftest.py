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
