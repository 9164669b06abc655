"""Tool runs started before their candidate (ptxcore.gpu.harness.prestart), on a CPU host with the real bubblewrap:
the request the child waits for, a run that serves one candidate and leaves nothing, a deadline that counts from
the request, a run that died while waiting never used, and the memcheck gate reaching its verdict on one.
Commands stand in for compute-sanitizer and ncu (none here): they wait with the child's own await_request."""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from ptxcore.gpu.child.main import main as child_main
from ptxcore.gpu.child.standalone import RequestError, await_request
from ptxcore.gpu.harness import prestart
from ptxcore.gpu.harness.prestart import PrestartedTools, PrestartLost, WaitingRun
from ptxcore.sandbox import SandboxStatus, find_bwrap
from tests.waiting import wait_for

try:
    find_bwrap()
except Exception:  # noqa: BLE001 - the sandbox's own tests say why
    pytest.skip("bubblewrap is not installed here", allow_module_level=True)

REQUEST = {"problem": "gemm_n7168_k5120", "workload": "w0", "seed": 1042, "device": 0, "calls": 3}
ECHO = ("import json, sys; from pathlib import Path\n"
        "from ptxcore.gpu.child.standalone import await_request\n"
        "print('waiting', flush=True)\n"
        "r = await_request(Path(sys.argv[1]))\n"
        "print(json.dumps(r)); print(open(r['library'], 'rb').read().decode())\n"
        "{after}\n")


PREPARED_ECHO = ECHO.replace("r = await_request(Path(sys.argv[1]))",
                             "r = await_request(Path(sys.argv[1]), on_prepare=lambda f: print('prepared ' + "
                             "json.dumps(f), flush=True))")


def _echo(after: str = "", prepared: bool = False):
    text = (PREPARED_ECHO if prepared else ECHO).format(after=after)
    return lambda request: [sys.executable, "-c", text, request]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ---- the child's request ------------------------------------------------------------------------------

def test_the_request_is_read_once_its_file_appears(tmp_path):
    path = tmp_path / "request.json"
    path.write_text(json.dumps({**REQUEST, "library": "/scratch/kernel.so"}))
    assert await_request(path) == {**REQUEST, "library": "/scratch/kernel.so"}


@pytest.mark.parametrize("text, why", [
    ("not json", "not JSON"),
    (json.dumps({**REQUEST}), "exactly the fields"),
    (json.dumps({**REQUEST, "library": "/k.so", "extra": 1}), "exactly the fields"),
    (json.dumps({**REQUEST, "library": "/k.so", "calls": "3"}), "calls must be int"),
    (json.dumps({**REQUEST, "library": "/k.so", "seed": True}), "seed must be int"),
    (json.dumps({**REQUEST, "library": "/k.so", "calls": 0}), "out of range"),
    (json.dumps([1, 2]), "exactly the fields"),
])
def test_a_request_that_is_not_the_judges_is_refused(tmp_path, text, why):
    path = tmp_path / "request.json"
    path.write_text(text)
    with pytest.raises(RequestError, match=why):
        await_request(path)


def test_a_request_that_never_comes_ends_the_wait(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(RequestError, match="no request"):
        await_request(tmp_path / "request.json", poll_s=0.01, max_wait_s=0.2)
    assert time.monotonic() - t0 < 5


def test_the_child_takes_one_way_to_its_candidate_and_a_bad_request_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        child_main(["sanitize", "--library", "/k.so", "--request", str(tmp_path / "r.json")])
    assert exc.value.code == 2
    (tmp_path / "r.json").write_text("{}")
    assert child_main(["profile", "--request", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("ptxbench child: request") and "exactly the fields" in err[-1]


def test_the_child_process_ends_at_once_with_mains_code_and_its_streams_flushed(tmp_path):
    """`python -m ptxcore.gpu.child` ends by os._exit after main: the code main returned, every line written before
    it on both streams, and no atexit handler run (one registered at import by a sitecustomize stand-in prints)."""
    import subprocess
    import sys

    (tmp_path / "r.json").write_text("{}")
    (tmp_path / "sitecustomize.py").write_text(
        "import atexit, sys\natexit.register(lambda: print('teardown ran', file=sys.stderr, flush=True))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run([sys.executable, "-m", "ptxcore.gpu.child", "profile", "--request", str(tmp_path / "r.json")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 2, out.stderr
    assert "exactly the fields" in out.stderr.strip().splitlines()[-1]
    assert "teardown ran" not in out.stderr
    check = subprocess.run([sys.executable, "-c", "pass"], capture_output=True, text=True, timeout=60, env=env)
    assert "teardown ran" in check.stderr, "the stand-in runs its handler in a normal interpreter exit"


def test_a_preparation_comes_before_its_request_and_the_request_must_carry_its_arguments(tmp_path):
    path = tmp_path / "request.json"
    (tmp_path / "prepare.json").write_text(json.dumps(REQUEST))
    seen = []

    def prepare(fields):  # the judge writes the request once the candidate passed correctness
        seen.append(fields)
        path.write_text(json.dumps({**REQUEST, "library": "/scratch/kernel.so"}))

    assert await_request(path, poll_s=0.01, on_prepare=prepare) == {**REQUEST, "library": "/scratch/kernel.so"}
    assert seen == [REQUEST]
    other = tmp_path / "other"
    other.mkdir()
    (other / "prepare.json").write_text(json.dumps(REQUEST))
    with pytest.raises(RequestError, match="does not carry the arguments of its preparation"):
        await_request(other / "request.json", poll_s=0.01, on_prepare=lambda f: (other / "request.json").write_text(
            json.dumps({**REQUEST, "seed": 7, "library": "/scratch/kernel.so"})))


@pytest.mark.parametrize("text, why", [
    ("[]", "preparation .* must have exactly the fields"),
    (json.dumps({**REQUEST, "library": "/k.so"}), "must have exactly the fields"),
    (json.dumps({**REQUEST, "device": -1}), "out of range"),
])
def test_a_preparation_that_is_not_the_judges_is_refused(tmp_path, text, why):
    (tmp_path / "prepare.json").write_text(text)
    with pytest.raises(RequestError, match=why):
        await_request(tmp_path / "request.json", poll_s=0.01, max_wait_s=5, on_prepare=lambda f: pytest.fail("used"))


def test_a_child_that_takes_no_preparation_ignores_one(tmp_path):
    (tmp_path / "prepare.json").write_text("not json")
    (tmp_path / "request.json").write_text(json.dumps({**REQUEST, "library": "/k.so"}))
    assert await_request(tmp_path / "request.json")["library"] == "/k.so"


def test_the_child_runs_on_the_inputs_it_prepared_before_its_request(tmp_path, monkeypatch):
    """`--request` mode: the preparation made once, before the request is read, and handed to the run."""
    from ptxcore.gpu.child import standalone

    order: list[str] = []

    def prepare_run(fields):
        order.append("prepared")
        assert fields == REQUEST  # the preparation's arguments, before any request existed
        (tmp_path / "request.json").write_text(json.dumps({**REQUEST, "library": "/scratch/kernel.so"}))
        return standalone.PreparedRun("spec", {"x": 1})

    def run_standalone(args, profile, prepared=None):
        order.append("run")
        assert profile and args.library == "/scratch/kernel.so" and args.seed == REQUEST["seed"]
        assert prepared is not None and prepared.spec == "spec" and prepared.values == {"x": 1}
        return 0

    monkeypatch.setattr(standalone, "import_for_run", lambda: None)
    monkeypatch.setattr(standalone, "prepare_run", prepare_run)
    monkeypatch.setattr(standalone, "run_standalone", run_standalone)
    (tmp_path / "prepare.json").write_text(json.dumps(REQUEST))
    assert child_main(["profile", "--request", str(tmp_path / "request.json")]) == 0
    assert order == ["prepared", "run"]


# ---- one waiting run ------------------------------------------------------------------------------------

def test_a_waiting_run_serves_its_candidate_then_leaves_nothing(tmp_path):
    lib = tmp_path / "kernel.so"
    lib.write_text("candidate library bytes")
    run = WaitingRun("memcheck", _echo(), env={})
    scratch = run.sandbox.box.scratch
    assert run.ready() and not (scratch / "kernel.so").exists()  # nothing of a candidate before its request
    monitor = run.proc.popen.pid
    out = run.go(lib, REQUEST, 60)
    assert out.status is SandboxStatus.EXITED and out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "waiting"
    got = json.loads(lines[1])
    assert got == {**REQUEST, "library": "/scratch/kernel.so"}  # the copy inside, not the host's path
    assert lines[2] == "candidate library bytes"
    assert not run.alive() and not scratch.exists() and not _alive(monitor)
    with pytest.raises(PrestartLost):  # used once
        run.go(lib, REQUEST, 60)


def test_a_prepared_run_makes_its_part_first_and_takes_only_its_own_request(tmp_path):
    lib = tmp_path / "kernel.so"
    lib.write_text("candidate library bytes")
    run = WaitingRun("ncu", _echo(prepared=True), env={})
    run.prepare(REQUEST)
    with pytest.raises(ValueError, match="already prepared"):
        run.prepare(REQUEST)
    assert [p.name for p in run.sandbox.box.scratch.iterdir()] == ["prepare.json"]  # no candidate in it yet
    out = run.go(lib, REQUEST, 60)
    assert out.status is SandboxStatus.EXITED and out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["waiting", "prepared " + json.dumps(REQUEST)]
    assert json.loads(lines[2]) == {**REQUEST, "library": "/scratch/kernel.so"} and lines[3] == "candidate library bytes"
    other = WaitingRun("ncu", _echo(prepared=True), env={})
    other.prepare(REQUEST)
    scratch = other.sandbox.box.scratch
    with pytest.raises(ValueError, match="prepared for another request"):
        other.go(lib, {**REQUEST, "seed": 1}, 60)
    assert not other.alive() and not scratch.exists()  # closed, the candidate never handed in


def _echo_stages(tmp_path, monkeypatch, after: str = "", sass=None, **config):
    """ToolStages whose waiting runs are the prepared echo child, prestarted, and a stand-in build of a library."""
    from types import SimpleNamespace

    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.gpu.pipeline.tools import ToolStages

    monkeypatch.setattr(prestart, "child_command", lambda stage, request: [
        sys.executable, "-c", PREPARED_ECHO.format(after=after), request])
    tools = ToolStages(tmp_path, JudgeConfig(cache_dir=tmp_path, **config))
    tools.prestart()
    lib = tmp_path / "kernel.so"
    lib.write_text("the candidate")
    compiled = SimpleNamespace(artifact=lib, sass=sass,
                               result=SimpleNamespace(source_sha256="a" * 64, cubin_sha256="b" * 64))
    return tools, lib, compiled


def test_the_tool_stage_takes_the_run_prepared_for_it_and_the_rest_are_closed(tmp_path, monkeypatch):
    """ToolStages.prepare takes a waiting memcheck run and prepares it with the gate's own request; the gate then
    runs on it (its output shows the preparation); a preparation no stage took is closed by release_prepared."""
    from types import SimpleNamespace

    from ptxcore.gpu.pipeline.result import ResultBuilder
    from ptxcore.problems import get_problem

    tools, lib, compiled = _echo_stages(tmp_path, monkeypatch, "print('========= ERROR SUMMARY: 0 errors')", ncu=False)
    problem = get_problem("gemm_n7168_k5120")
    r = ResultBuilder(problem.name, problem.workload(None).uuid, "hopper")
    try:
        assert tools.prepare(compiled, problem, r.workload) == ["memcheck"]  # no SASS target: no ncu run
        assert tools.prestarted.waiting() == ["memcheck"]  # the prepared one is out of the pool
        assert tools.memcheck(compiled, problem, r.workload, r) is None
        assert r.sanitizer.ran == 1 and r.sanitizer.errors == 0
        assert tools.prepare(compiled, problem, r.workload) == []  # the clean verdict is cached: nothing to prepare
        other = SimpleNamespace(artifact=lib, sass=None,
                                result=SimpleNamespace(source_sha256="c" * 64, cubin_sha256="d" * 64))
        tools.prestart()
        assert tools.prepare(other, problem, r.workload) == ["memcheck"]
        prepared = tools._prepared["memcheck"]
        scratch = prepared.sandbox.box.scratch
        assert prepared.alive() and (scratch / "prepare.json").exists()
        tools.release_prepared()
        assert not prepared.alive() and not scratch.exists()
        assert tools._prepared == {}
    finally:
        tools.release_prepared()
        tools.prestarted.close()


def test_the_deadline_counts_from_the_request_and_a_hang_is_killed(tmp_path):
    lib = tmp_path / "kernel.so"
    lib.write_text("x")
    run = WaitingRun("ncu", _echo("import time; time.sleep(600)"), env={})
    time.sleep(1.5)  # waiting longer than the deadline is not charged to the candidate
    members = run.proc.member_pids()
    t0 = time.monotonic()
    out = run.go(lib, REQUEST, 1.0)
    assert out.status is SandboxStatus.TIMED_OUT and time.monotonic() - t0 < 15
    wait_for(lambda: not any(_alive(p) for p in members), 10, "no process of the run left")


def test_a_run_that_died_while_waiting_is_never_used(tmp_path):
    lib = tmp_path / "kernel.so"
    lib.write_text("x")
    run = WaitingRun("memcheck", lambda _r: [sys.executable, "-c", "raise SystemExit(7)"], env={})
    wait_for(lambda: not run.alive(), 30, "the run to end")
    with pytest.raises(PrestartLost, match="ended while waiting"):
        run.go(lib, REQUEST, 60)


# ---- the pool -----------------------------------------------------------------------------------------

def test_the_pool_keeps_one_run_per_stage_and_replaces_a_dead_one(tmp_path, monkeypatch):
    made: list[WaitingRun] = []

    def factory(stage: str) -> WaitingRun:
        first_ncu = stage == "ncu" and not any(r.stage == "ncu" for r in made)
        code = "raise SystemExit(3)" if first_ncu else "import time; time.sleep(600)"
        made.append(WaitingRun(stage, lambda _r: [sys.executable, "-c", code], env={}))
        return made[-1]

    pool = PrestartedTools(factory=factory)
    try:
        pool.fill()
        assert [r.stage for r in made] == ["memcheck", "ncu"]
        wait_for(lambda: not made[1].alive(), 30, "the first ncu run to end")
        assert pool.waiting() == ["memcheck"]
        pids = pool.pids()
        assert made[0].proc.popen.pid in pids and len(pids) >= 2
        assert pool.take("ncu") is None  # dead: closed, not handed out
        pool.fill()
        assert [r.stage for r in made] == ["memcheck", "ncu", "ncu"]  # the live memcheck run kept
        taken = pool.take("memcheck")
        assert taken is made[0] and pool.take("memcheck") is None
        taken.close()
    finally:
        pool.close()
    assert not any(r.alive() for r in made)


def test_a_disabled_pool_starts_nothing():
    pool = PrestartedTools(enabled=False, factory=lambda stage: pytest.fail("started a run"))
    pool.fill()
    assert pool.waiting() == [] and pool.take("memcheck") is None


def test_the_memcheck_gate_reaches_its_verdict_on_a_prestarted_run(tmp_path, monkeypatch):
    """The gate's verdict from the waiting run's output, with no fresh run (no compute-sanitizer here: a fresh
    run would fail to find it); the candidate's library is the one handed in."""
    from ptxcore.gpu.config import JudgeConfig
    from ptxcore.gpu.pipeline.result import ResultBuilder
    from ptxcore.gpu.pipeline.tools import ToolStages
    from ptxcore.problems import get_problem

    summary = "print('========= ERROR SUMMARY: 2 errors'); raise SystemExit(86)"
    monkeypatch.setattr(prestart, "child_command", lambda stage, request: [
        sys.executable, "-c", ECHO.format(after=summary), request])
    config = JudgeConfig(cache_dir=tmp_path, ncu=False)
    tools = ToolStages(tmp_path, config)
    tools.prestart()
    assert config.prestart_depth == 2 and tools.prestarted.waiting() == ["memcheck"] * 2  # the default depth
    lib = tmp_path / "kernel.so"
    lib.write_text("the candidate")
    problem = get_problem("gemm_n7168_k5120")
    r = ResultBuilder(problem.name, problem.workload(None).uuid, "hopper")
    verdict = tools.memcheck_run("key-1", lib, problem, r.workload, r)
    assert verdict is not None and "2 memory error" in verdict.reason
    assert r.sanitizer.ran == 1 and r.sanitizer.errors == 2
    assert tools.prestarted.waiting() == ["memcheck"]  # the oldest used: the next candidate gets the other
    tools.prestarted.close()


def test_a_deeper_pool_hands_out_its_oldest_run_first_and_refills_to_its_depth():
    made: list[WaitingRun] = []

    def factory(stage: str) -> WaitingRun:
        made.append(WaitingRun(stage, lambda _r: [sys.executable, "-c", "import time; time.sleep(600)"], env={}))
        return made[-1]

    with pytest.raises(ValueError, match="at least 1"):
        PrestartedTools(depth=0)
    pool = PrestartedTools(factory=factory, depth=2)
    try:
        pool.fill(["ncu"])
        assert pool.waiting() == ["ncu", "ncu"] and len(made) == 2
        first = pool.take("ncu")
        assert first is made[0]  # the one that has imported longest
        first.close()
        pool.fill(["ncu"])
        assert len(made) == 3 and pool.waiting() == ["ncu", "ncu"]
        made[1].close()  # ended while waiting: skipped, the next ready one handed out
        second = pool.take("ncu")
        assert second is made[2]
        second.close()
        assert pool.take("ncu") is None
    finally:
        pool.close()
    assert not any(r.alive() for r in made)


HOSTILE = ("import json, os, sys; from pathlib import Path\n"
           "from ptxcore.gpu.child.standalone import await_request\n"
           "r = await_request(Path(sys.argv[1]))\n"
           "seen = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n"
           "wrote = []\n"
           "for target in (sys.argv[2] + '/request.json', sys.argv[2] + '/prepare.json', sys.argv[2] + '/kernel.so',\n"
           "               '/scratch/../' + 'x'):\n"
           "    try:\n"
           "        Path(target).write_text('{\"library\": \"/etc/passwd\"}'); wrote.append(target)\n"
           "    except OSError:\n"
           "        pass\n"
           "print(json.dumps({'pids': seen, 'wrote': wrote, 'cmdlines': [open(f'/proc/{p}/cmdline', 'rb').read()"
           ".decode(errors='replace') for p in seen if os.path.exists(f'/proc/{p}/cmdline')]}))\n")


@pytest.mark.parametrize("prepared", [False, True], ids=["waiting", "prepared"])
def test_a_candidate_cannot_reach_the_run_that_waits_beside_it(tmp_path, prepared):
    """At depth 2 the next candidate's run waits while this one runs: the running candidate sees none of its
    processes and cannot write its request or its library, even knowing the waiting run's host path."""
    lib = tmp_path / "kernel.so"
    lib.write_text("x")
    waiting = WaitingRun("memcheck", _echo(prepared=prepared), env={})
    if prepared:  # its CUDA context and inputs made while the candidate beside it runs its correctness
        waiting.prepare(REQUEST)
    victim = waiting.sandbox.box.scratch
    waiting_pids = {waiting.proc.popen.pid, *waiting.proc.member_pids(drain=False)}
    attacker = WaitingRun("memcheck", lambda r: [sys.executable, "-c", HOSTILE, r, str(victim)], env={})
    try:
        out = attacker.go(lib, REQUEST, 60)
        assert out.status is SandboxStatus.EXITED and out.exit_code == 0, out.stderr
        seen = json.loads(out.stdout.splitlines()[-1])
        assert seen["wrote"] == [], seen["wrote"]  # neither the waiting run's request nor its library
        # every process it sees is its own (the sandbox's init and itself), none of the waiting run's
        assert seen["cmdlines"] and all("os.listdir('/proc')" in c for c in seen["cmdlines"]), seen["cmdlines"]
        assert "print('waiting'" not in "".join(seen["cmdlines"]) and waiting_pids
        assert waiting.ready() and sorted(p.name for p in victim.iterdir()) == (["prepare.json"] if prepared else [])
        if prepared:
            assert json.loads((victim / "prepare.json").read_text()) == REQUEST
        served = waiting.go(lib, REQUEST, 60)  # and it still serves its own candidate, as if nothing had run
        lines = served.stdout.splitlines()
        assert served.exit_code == 0 and json.loads(lines[-2])["library"] == "/scratch/kernel.so"
        assert (lines[1] == "prepared " + json.dumps(REQUEST)) is prepared
    finally:
        attacker.close()
        waiting.close()


def test_the_counting_run_keeps_the_call_count_drawn_when_it_was_prepared(tmp_path, monkeypatch):
    """ncu's number of calls is drawn afresh for each run (ncu.drawn_calls): the count drawn when the run was
    prepared is the one its request carries, so the prepared run is the one used (a second draw would not match)."""
    from types import SimpleNamespace

    from ptxcore.gpu.pipeline import tools as tools_module
    from ptxcore.problems import get_problem
    from ptxcore.schema import StaticTarget, TargetInstruction, TargetInstructionEvidence

    draws = iter([3, 7, 11])
    monkeypatch.setattr(tools_module, "drawn_calls", lambda: next(draws))
    seen = {}

    def profile_target(library, problem, workload, seed, device, arch, timeout_s, raw_log, prestarted=None):
        out = prestarted(60)
        seen["lines"] = out.stdout.splitlines()
        return TargetInstructionEvidence(status=TargetInstruction.UNKNOWN, reason="stand-in")

    monkeypatch.setattr(tools_module, "profile_target", profile_target)
    tools, _, compiled = _echo_stages(tmp_path, monkeypatch, sass=SimpleNamespace(target_static=StaticTarget.PRESENT),
                                      sanitizer=False)
    problem = get_problem("gemm_n7168_k5120")
    workload = problem.workload(None).uuid
    try:
        assert tools.prepare(compiled, problem, workload) == ["ncu"]
        tools._evidence(compiled, problem, workload, None)
        prepared, request = seen["lines"][1], json.loads(seen["lines"][2])
        assert prepared.startswith("prepared ") and json.loads(prepared[len("prepared "):])["calls"] == 3
        assert request["calls"] == 3 and tools._prepared == {}  # the prepared run served it, with its draw
        assert tools.prestarted.waiting() == ["ncu"]  # the other waiting run is still there for the next one
    finally:
        tools.release_prepared()
        tools.prestarted.close()


def test_runs_prepared_before_the_build_are_kept_for_their_stages_and_the_rest_closed(tmp_path, monkeypatch):
    """prepare_ahead prepares a run of each enabled tool before the build (the problem and workload are known);
    once built, prepare keeps the ones whose stage will run (the same run object: not prepared again) and closes
    the others: ncu's for a build with no target in its SASS, memcheck's once its verdict is cached."""
    from ptxcore.gpu.pipeline import tools as tools_module
    from ptxcore.problems import get_problem

    monkeypatch.setattr(tools_module, "drawn_calls", lambda: 5)
    tools, _, compiled = _echo_stages(tmp_path, monkeypatch)
    problem = get_problem("gemm_n7168_k5120")
    workload = problem.workload(None).uuid
    try:
        assert tools.prepare_ahead(problem, workload) == ["memcheck", "ncu"]
        memcheck, ncu = tools._prepared["memcheck"], tools._prepared["ncu"]
        assert memcheck.prepared["workload"] == workload and ncu.prepared["calls"] == 5
        assert tools.prepare(compiled, problem, workload) == ["memcheck"]  # no SASS target: no ncu stage
        assert tools._prepared == {"memcheck": memcheck} and memcheck.alive()
        assert not ncu.alive()
        tools.memcheck_cache.put(tools._memcheck_key(compiled, problem, workload), {"outcome": "clean"})
        assert tools.prepare(compiled, problem, workload) == []  # its verdict is cached: the run is closed
        assert tools._prepared == {} and not memcheck.alive()
    finally:
        tools.release_prepared()
        tools.prestarted.close()
