"""Shared by benchmarks/service_throughput.py and benchmarks/rollout_concurrency.py: the candidate mix,
starting the profiling service (real judge, or FakeRunner with --fake), priming the compile cache,
and printing tables."""

from __future__ import annotations

import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import httpx  # noqa: E402

FAKE_BANNER = ("FAKE worker (FakeRunner: simulated sleeps, no judge, no GPU): these numbers exercise the "
               "service's plumbing only; they are NOT GPU measurements")
PRIMARY = ["gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128",
           "mha_bwd_d128_causal"]


def candidate_mix(paths: list[str] | None, per_problem: int) -> list[tuple[str, str, str]]:
    """(problem, label, source): given files, `FILE` (problem = parent folder name) or `FILE@problem`, else up
    to `per_problem` kernels of solutions/<problem>/ for each primary problem."""
    if not paths:
        files = [(f, f.parent.name) for prob in PRIMARY
                 for f in sorted((REPO / "solutions" / prob).glob("*.cu"))[:per_problem]]
    else:
        files = []
        for spec in paths:
            name, _, problem = spec.partition("@")
            files.append((Path(name), problem or Path(name).parent.name))
    if not files:
        raise SystemExit("no candidate kernels found (pass --candidates)")
    missing = [str(f) for f, _ in files if not f.is_file()]
    if missing:
        raise SystemExit(f"candidate file not found: {missing[0]}")
    return [(problem, f"{problem}/{f.name}", f.read_text()) for f, problem in files]


class ServiceProcess:
    """`python -m ptxcore.gpu.service` in its own process (as in production: clients elsewhere), on a free
    loopback port; `.url`; `.stop()` sends SIGINT and waits."""

    def __init__(self, work_dir: Path, gpus: list[int], fake: bool, runner_args: dict, timeout_s: float,
                 extra: tuple[str, ...] = ()) -> None:
        argv = [sys.executable, "-m", "ptxcore.gpu.service", "--gpus", ",".join(map(str, gpus)), "--port", "0",
                "--work-dir", str(work_dir), "--runner-args", json.dumps(runner_args), "--timeout-s", str(timeout_s),
                "--max-attempts", "2", "--log-level", "warning", *extra] + (["--fake"] if fake else [])
        self.log = open(work_dir.parent / f"{work_dir.name}.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, cwd=REPO, stdout=self.log, stderr=subprocess.STDOUT)
        info = work_dir / "server.json"
        deadline = time.monotonic() + 300
        while not info.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"service did not start; see {self.log.name}")
            time.sleep(0.1)
        self.url = json.loads(info.read_text())["url"]
        while True:
            try:
                if httpx.get(f"{self.url}/health", timeout=5).json()["status"] == "ok":
                    break
            except (httpx.HTTPError, ValueError):
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"service did not become ready; see {self.log.name}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


def start(work_dir: Path, gpus: list[int], fake: bool, runner_args: dict, timeout_s: float = 900.0,
          extra: tuple[str, ...] = ()) -> ServiceProcess:
    """`extra`: more command-line options of the service (e.g. --prebuild-workers 0)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    return ServiceProcess(work_dir, gpus, fake, runner_args, timeout_s, extra)


def prime_compile_cache(mix: list[tuple[str, str, str]], arch: str = "hopper", jobs: int = 8) -> float:
    """Build every distinct candidate once, in parallel, into the judge's compile cache (the judge's own
    build options), so that neither benchmark arm pays nvcc. Returns seconds spent."""
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.gpu.config import JudgeConfig

    cfg = JudgeConfig()
    cache = CompileCache(cfg.cache_root() / "compile")
    architecture = get_architecture(arch)
    sources = {src for _, _, src in mix}
    t0 = time.monotonic()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda s: compile_candidate(
            s, BuildOptions(architecture, timeout_s=cfg.build_timeout_s), cache), sources))
    return time.monotonic() - t0


def tmp_work_dir(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def table(headers: list[str], rows: list[list[object]]) -> str:
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(headers)]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False)))  # noqa: E731
    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in cells)])


def write_json(path: str | None, payload: dict) -> None:
    if path:
        Path(path).write_text(json.dumps(payload, indent=1, default=str))
