"""benchmarks/device/run.sh and preamble.sh on a CPU machine: the driver, not the GPU stages.

The GPU tools are replaced by stubs on PATH (a `nvidia-smi` that is "not found" or hangs); the stages that
run for real here are `env` (fails without a GPU) and `table` (tools/solutions_table.py on an empty folder).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEVICE = REPO / "benchmarks" / "device"
RUN = DEVICE / "run.sh"
SCRIPTS = sorted(DEVICE.glob("*.sh")) + [REPO / "tools" / "run_solutions.sh"]


def _stub(bindir: Path, name: str, body: str) -> None:
    path = bindir / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)


@pytest.fixture
def box(tmp_path: Path) -> dict:
    """An environment whose every path is under tmp_path; `nvidia-smi` is missing (a stub saying so)."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    _stub(stubs, "nvidia-smi", 'echo "nvidia-smi: not found" >&2; exit 127')
    env = {
        **os.environ,
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "OUT": str(tmp_path / "out"),
        "PTXBENCH_SITE": str(tmp_path / "site"),
        "PTXBENCH_BIN": str(tmp_path / "bin"),
        "PTXBENCH_CACHE_DIR": str(tmp_path / "cache"),
        "SOL_DIR": str(tmp_path / "sol"),
        "JUDGE_WHEELS": "",
        "WHEELS": "",
        "PYTHON": sys.executable,
    }
    (tmp_path / "sol").mkdir()
    return {"env": env, "out": tmp_path / "out", "tmp": tmp_path, "stubs": stubs}


def _run(box: dict, *stages: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(RUN), *stages], env={**box["env"], **env}, capture_output=True, text=True,
                          timeout=timeout, cwd=box["tmp"])


def _summary(out: Path) -> dict[str, str]:
    """stage -> its summary line, from summary.txt."""
    lines = (out / "summary.txt").read_text().splitlines()
    assert lines[0].startswith("# bash benchmarks/device/run.sh")
    return {line.split()[0]: line for line in lines[1:]}


def _members(out: Path) -> dict[str, bytes]:
    with tarfile.open(out / "outputs.tgz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_scripts_parse(script: Path):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_shellcheck_clean():
    proc = subprocess.run(["shellcheck", "-x", str(RUN), str(DEVICE / "preamble.sh")], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout


def test_a_failed_stage_does_not_stop_the_run(box):
    proc = _run(box, "env", "table")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # one stage failed
    assert proc.stdout.index("=== env ") < proc.stdout.index("=== table ") < proc.stdout.index("=== summary")
    summary = _summary(box["out"])
    assert list(summary) == ["preamble", "env", "table", "outputs"]
    assert "rc=0 " in summary["preamble"] and "rc=0 " in summary["table"] and "rc=0 " in summary["outputs"]
    assert "rc=1 " in summary["env"]
    # what comes back from the device: the summary and ONE tarball, nothing else
    assert sorted(p.name for p in box["out"].iterdir()) == ["outputs.tgz", "summary.txt"]
    files = _members(box["out"])
    assert {"outputs/env.log", "outputs/table.log", "outputs/table.md", "outputs/pip.log"} <= set(files)
    assert b"nvidia-smi: not found" in files["outputs/env.log"]
    assert b"| gemm_n7168_k5120 |" in files["outputs/table.md"] and b"no result" in files["outputs/table.md"]
    shim = Path(box["env"]["PTXBENCH_BIN"]) / "ptxbench"
    assert os.access(shim, os.X_OK) and "flows.cli.main" in shim.read_text()


def test_a_stage_past_its_timeout_is_stopped_and_the_next_runs(box):
    pidfile = box["tmp"] / "smi.pid"
    _stub(box["stubs"], "nvidia-smi", f'echo $$ > {pidfile}; exec sleep 60')
    t0 = time.monotonic()
    proc = _run(box, "env", "table", ENV_TIMEOUT="2")
    assert time.monotonic() - t0 < 30
    summary = _summary(box["out"])
    assert "rc=124 " in summary["env"] and "timed out" in summary["env"]
    assert "rc=0 " in summary["table"]
    assert proc.returncode == 1
    _assert_dead(int(pidfile.read_text()))


def test_the_call_budget_skips_what_no_longer_fits(box):
    proc = _run(box, "env", "table", BUDGET_S="0")
    summary = _summary(box["out"])
    assert "rc=skip" in summary["env"] and "rc=skip" in summary["table"]
    assert "rc=0 " in summary["outputs"] and (box["out"] / "outputs.tgz").is_file()
    assert proc.returncode == 1


def test_a_term_signal_keeps_the_summary_and_the_tarball(box):
    pidfile = box["tmp"] / "smi.pid"
    _stub(box["stubs"], "nvidia-smi", f'echo $$ > {pidfile}; exec sleep 60')
    proc = subprocess.Popen(["bash", str(RUN), "env", "table"], env=box["env"], cwd=box["tmp"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pidfile.exists(), "the env stage never started"
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out
    summary = _summary(box["out"])
    assert "rc=143 " in summary["env"] and "interrupted" in summary["env"]
    assert "table" not in summary and "rc=0 " in summary["outputs"]
    assert "outputs/env.log" in _members(box["out"])
    _assert_dead(int(pidfile.read_text()))


def test_a_large_tarball_comes_back_in_parts(box):
    _run(box, "env", OUTPUTS_PART_BYTES="300")
    parts = sorted(box["out"].glob("outputs.tgz.part-*"))
    assert len(parts) >= 2 and not (box["out"] / "outputs.tgz").exists()
    assert all(p.stat().st_size <= 300 for p in parts)
    joined = box["tmp"] / "joined.tgz"
    joined.write_bytes(b"".join(p.read_bytes() for p in parts))
    with tarfile.open(joined) as tar:
        assert "outputs/env.log" in tar.getnames()
    assert "split: cat outputs.tgz.part-*" in _summary(box["out"])["outputs"]


def test_the_preamble_installs_the_wheels_given(box):
    wheels = box["tmp"] / "wheels"
    wheels.mkdir()
    _wheel(wheels / "ptxtoy-1.0-py3-none-any.whl")
    proc = _run(box, "table", WHEELS=str(wheels))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (Path(box["env"]["PTXBENCH_SITE"]) / "ptxtoy.py").read_text() == "VALUE = 7\n"


def test_a_broken_wheel_stops_before_any_stage(box):
    wheels = box["tmp"] / "wheels"
    wheels.mkdir()
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"not a zip file")
    proc = _run(box, "env", WHEELS=str(wheels))
    assert proc.returncode == 3
    assert "installing the wheels of" in proc.stderr and "failed" in proc.stderr
    summary = _summary(box["out"])
    assert "rc=1 " in summary["preamble"] and "env" not in summary
    assert "outputs/pip.log" in _members(box["out"])


@pytest.mark.parametrize("args", [["nosuch"], ["env", "nosuch"], []])
def test_a_bad_command_line_is_one_line_and_writes_nothing(box, args):
    proc = _run(box, *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "run.sh:" in proc.stderr
    if args:
        assert "'nosuch'" in proc.stderr
    assert not box["out"].exists()


def test_help_lists_every_stage_function(box):
    proc = _run(box, "--list")
    stages = proc.stdout.split()
    required = ["env", "prebuild", "pytest", "service-pytest", "controls-jsonl", "overhead", "stages", "refs",
                "solutions", "table", "packs", "throughput", "rollout", "campaign", "bwd-precision"]
    assert set(required) <= set(stages)
    text = RUN.read_text()
    for stage in stages:
        assert f"stage_{stage.replace('-', '_')}() " in text
    help_ = _run(box, "--help")
    assert help_.returncode == 0 and "Stages (default timeout in seconds):" in help_.stdout
    assert all(f"\n  {stage} " in help_.stdout for stage in stages)


def test_the_preamble_refuses_to_run_as_a_script(box):
    proc = subprocess.run(["bash", str(DEVICE / "preamble.sh")], capture_output=True, text=True, env=box["env"])
    assert proc.returncode == 2 and "sourced" in proc.stderr


def _wheel(path: Path) -> None:
    """A minimal pure-Python wheel (one module), built by hand so that the test needs no network."""
    dist = "ptxtoy-1.0.dist-info"
    files = {
        "ptxtoy.py": "VALUE = 7\n",
        f"{dist}/METADATA": "Metadata-Version: 2.1\nName: ptxtoy\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{dist}/RECORD", "".join(f"{n},,\n" for n in files) + f"{dist}/RECORD,,\n")


def _assert_dead(pid: int) -> None:
    """The stage's process was ended (no stray process left behind)."""
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    pytest.fail(f"process {pid} of the stage is still running")


def test_a_pytest_k_expression_reaches_pytest_as_one_argument(box):
    """Seen on the H200: PYTEST_ARGS='-k "env_hostile and h17"' is split at its spaces (pytest: "file or
    directory not found: and"); PYTEST_K carries one expression whole."""
    log = box["tmp"] / "argv.log"
    shim = box["stubs"] / "python-shim"
    shim.write_text(f'#!/bin/sh\nif [ "$1 $2" = "-m pytest" ]; then printf "%s\\n" "$@" > {log}; exit 0; fi\n'
                    f'exec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    r = _run(box, "pytest", PYTHON=str(shim), PYTEST_K="env_hostile and h17", PYTEST_ARGS="--maxfail 1")
    assert _summary(box["out"])["pytest"].split()[1] == "rc=0", r.stdout + r.stderr
    argv = log.read_text().splitlines()
    assert argv[argv.index("-k") + 1] == "env_hostile and h17" and "--maxfail" in argv
