"""The candidate's GPU processes inside the OS sandbox (issue 14): the child session, memcheck and ncu runs.

Each of these processes runs a model's native code, so each gets a bubblewrap sandbox (ptxcore.sandbox) with
the GPU (device nodes, driver libraries), this Python and its package folders, the CUDA toolkit and the
profiling tools read-only, a private scratch directory as its home and working directory, and nothing of the
judge: not the compile cache, the reference latencies, the evidence and memcheck caches, the service's task
store, the warehouse, MLflow or the user's home. What a stage needs of the candidate comes in explicitly:

- a TVM-FFI build: COPIED into the scratch directory (the compile cache entry it came from stays unseen);
- a Triton candidate: its kernel.py read-only and its private Triton cache writable, at the same paths, since
  the session, memcheck and ncu of one judgement share that cache (ptxcore.gpu.harness.triton).

The judge's trusted baseline session does not run in here (it is our code; FlashInfer's JIT cache and torch
need the judge's environment).

    with StageSandbox("memcheck", candidate, env={...}) as stage:
        outcome = stage.run(memcheck_argv(stage.candidate), timeout_s)
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

from ptxcore.gpu.harness.triton import TritonFiles
from ptxcore.sandbox import Limits, Mount, MountKind, Sandbox, SandboxOutcome, SandboxPolicy, presets, ro, rw
from ptxcore.sandbox.process import Redirect, SandboxProcess
from ptxcore.sass.tools import ToolNotFoundError, find_tool

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[3]
PACKAGE = REPO / "ptxcore"
LIBRARY_NAME = "kernel.so"
PASSED_ENV = (
    "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_DEVICE_ORDER", "NVIDIA_DRIVER_CAPABILITIES", "LANG",
    "NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS", "PTXBENCH_TRITON_SANITIZER",
)
"""Host variables a GPU stage keeps (none is a secret); CUDA_VISIBLE_DEVICES & co. pass through the policy."""
OUTPUT_LIMIT_BYTES = 64 << 20
"""Per stream: ncu's SASS source page of a large kernel runs to megabytes."""
STAGE_MEMORY_CAP_BYTES = 32 << 30
"""Resident memory a GPU stage may hold at most (all its processes together): a child session, memcheck
or ncu of a primary problem needs a few GiB; on a small host the cap is half its physical memory."""


def stage_memory_bytes() -> int:
    """The resident-memory limit of one GPU stage here: 32 GiB, or half the host's memory if less."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return STAGE_MEMORY_CAP_BYTES
    return min(STAGE_MEMORY_CAP_BYTES, physical // 2)


STAGE_CPU_SECONDS = 1800
"""CPU time one process of a GPU stage may use (RLIMIT_CPU): three times the longest stage deadline (memcheck and ncu,
600 s each by default), so it only ends a process that spins on the CPU past every wall-clock deadline."""

LIMITS = Limits(address_space_bytes=None, processes=512, file_size_bytes=8 << 30, open_files=65536,
                resident_bytes=stage_memory_bytes(), cpu_time_s=STAGE_CPU_SECONDS)


def toolkit_root() -> str | None:
    """The CUDA toolkit whose tools (compute-sanitizer, CUPTI, nvdisasm) the stages use, when there is one."""
    from ptxcore.compile.toolchain import toolkit_root_of

    try:
        return toolkit_root_of(find_tool("nvcc"))
    except (ToolNotFoundError, OSError, RuntimeError, subprocess.SubprocessError):
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env) and Path(os.environ[env]).is_dir():
            return str(Path(os.environ[env]).resolve())
    return None


VENDOR_TOOL_ROOTS = ("/opt/nvidia",)
"""Where NVIDIA installs Nsight Compute outside the toolkit. The toolkit's bin/ncu is a script that looks for
its nsight-compute folder beside the toolkit or here (on the H200 host: /opt/nvidia/nsight-compute/<version>)."""


def tool_dirs() -> list[Path]:
    """Install folders of compute-sanitizer and Nsight Compute (ncu's launcher loads its libraries and
    sections from beside itself), and the vendor root the toolkit's ncu script searches."""
    out = []
    for name in ("compute-sanitizer", "ncu"):
        try:
            out.append(presets.tool_install_dir(find_tool(name)))
        except ToolNotFoundError:
            continue
    out += [Path(p) for p in VENDOR_TOOL_ROOTS if Path(p).is_dir()]
    return list(dict.fromkeys(out))


def python_paths() -> tuple[list[str], list[str]]:
    """(folders to mount, PYTHONPATH) for this interpreter's packages: every sys.path folder but the
    repository root, whose ptxcore package alone is mounted (its runs, caches and campaigns stay out)."""
    mounts, path = [], []
    for entry in sys.path:
        if not entry or not Path(entry).is_dir():
            continue
        if Path(entry).resolve() == REPO:
            path.append(str(REPO))
            continue
        mounts.append(entry)
        path.append(entry)
    if str(REPO) not in path:
        path.append(str(REPO))
    return [*mounts, str(PACKAGE)], path


HIDDEN_ROOT = Path("/usr/local")
"""Hidden by an empty tmpfs in every sandbox (presets.system_mounts): links there are recreated one by one."""


def hidden_links(paths: list[str]) -> tuple[Mount, ...]:
    """Symbolic links under /usr/local on the way to `paths` (/usr/local/cuda -> [/etc/alternatives/cuda ->]
    /usr/local/cuda-13.0), recreated inside pointing at their final target so
    that a path the judge found (find_tool's /usr/local/cuda/bin/ncu, LD_LIBRARY_PATH, CUDA_HOME) means the
    same file there. Only under /usr/local: elsewhere the link is already visible through a read-only bind."""
    out: dict[str, Mount] = {}
    for raw in paths:
        path = Path(raw).absolute()
        for depth in range(len(HIDDEN_ROOT.parts) + 1, len(path.parts) + 1):
            prefix = Path(*path.parts[:depth])
            if prefix.is_symlink():  # the rest of the way is inside the link's (bound) target
                out.setdefault(str(prefix), Mount(kind=MountKind.SYMLINK, target=str(prefix),  # resolved:
                                                  source=os.path.realpath(prefix)))  # /etc/alternatives is unseen
                break
    return tuple(m for t, m in out.items() if Path(t).is_relative_to(HIDDEN_ROOT))


def tool_paths() -> list[str]:
    """The paths the judge starts its tools by, and the toolkit's usual names."""
    found = []
    for name in ("compute-sanitizer", "ncu", "nvcc"):
        try:
            found.append(find_tool(name))
        except ToolNotFoundError:
            continue
    return [*found, "/usr/local/cuda", *(os.environ[e] for e in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(e))]


def library_dirs() -> list[str]:
    """The existing folders of LD_LIBRARY_PATH (an operator's CUDA / CUPTI library folders)."""
    return [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d and Path(d).is_dir()]


@functools.lru_cache(maxsize=4)
def _base_mounts() -> tuple[tuple[Mount, ...], str]:
    """The mounts every GPU stage shares (computed once), and its PYTHONPATH."""
    from ptxcore.problems import default_problems_dir

    mounts, path = python_paths()
    root = toolkit_root()
    policy = presets.gpu_stage_policy("gpu-base", python_paths=mounts, toolkit_root=root)
    extra = presets.tree_mounts([*library_dirs(), default_problems_dir()])
    return (*policy.mounts, *extra), ":".join(path)


def stage_policy(stage: str, candidate: Path | TritonFiles | None, env: dict[str, str] | None = None
                 ) -> SandboxPolicy:
    """The policy of one GPU stage of `candidate` (see the module docstring)."""
    from ptxcore.problems import default_problems_dir

    base, pythonpath = _base_mounts()
    tools = [str(d) for d in tool_dirs()]
    mounts = _with_links([*base, *presets.tree_mounts(tools)], hidden_links([*tool_paths(), *library_dirs()]))
    if isinstance(candidate, TritonFiles):
        mounts += [ro(str(candidate.source)), rw(str(candidate.cache))]
    kept = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    root = toolkit_root()
    path = ":".join([*tools, *([f"{root}/bin"] if root else []), "/usr/bin", "/bin"])
    full_env = {**kept, "PATH": path, "HOME": "/scratch", "USER": "ptxbench", "LOGNAME": "ptxbench",
                "TMPDIR": "/tmp", "LC_ALL": "C.UTF-8", "PYTHONPATH": pythonpath, "PYTHONUNBUFFERED": "1",
                "PYTHONDONTWRITEBYTECODE": "1", "PTXBENCH_PROBLEMS_DIR": str(default_problems_dir()),
                **(env or {})}
    return SandboxPolicy(name=f"gpu-{stage}", mounts=tuple(mounts), env=full_env,
                         env_passthrough=presets.GPU_ENV_PASSTHROUGH, limits=LIMITS,
                         output_limit_bytes=OUTPUT_LIMIT_BYTES)


def _with_links(mounts: list[Mount], links: tuple[Mount, ...]) -> list[Mount]:
    """`links` right after the tmpfs that hides /usr/local (before anything is bound under them); a link the
    binds would recreate at or below one of them is dropped (the link is there, its real target bound)."""
    def below_link(m: Mount) -> bool:
        return m.kind is MountKind.SYMLINK and any(m.target == link.target or m.target.startswith(link.target + "/")
                                                   for link in links)

    kept = [m for m in mounts if not below_link(m) and m not in links]
    at = next((i + 1 for i, m in enumerate(kept) if m.kind is MountKind.TMPFS and Path(m.target) == HIDDEN_ROOT),
              0)
    return [*kept[:at], *links, *kept[at:]]


class StageSandbox:
    """One GPU stage's sandbox; `candidate` is the stage's view of the candidate (the copied library's path
    inside, or the TritonFiles themselves)."""

    def __init__(self, stage: str, candidate: Path | TritonFiles | None, env: dict[str, str] | None = None
                 ) -> None:
        self.host_candidate = candidate
        self.box = Sandbox(stage_policy(stage, candidate, env))
        self.candidate: Path | TritonFiles | None = candidate

    def __enter__(self) -> StageSandbox:
        self.box.__enter__()
        try:
            self._hand_in()
        except BaseException:
            self.box.__exit__(None, None, None)
            raise
        return self

    def _hand_in(self) -> None:
        c = self.host_candidate
        if isinstance(c, TritonFiles):
            for path in (c.cache, *c.cache.rglob("*")):  # the session's cubins: the next stage's to read
                if not path.is_symlink() and path.stat().st_uid != self.box.uid:
                    os.chown(path, self.box.uid, self.box.uid)
        elif isinstance(c, Path):
            self.candidate = self.hand_in(c)

    def hand_in(self, library: Path) -> Path:
        """Copy a built library into the scratch directory, read-only; its path as the stage's processes see it.
        Also for a stage opened without its candidate (ptxcore.gpu.harness.prestart), before any of the
        candidate's code runs there: nothing in the scratch directory is the candidate's yet."""
        copy = self.box.scratch / LIBRARY_NAME
        copy.unlink(missing_ok=True)  # never through a name something else put there
        shutil.copyfile(library, copy)
        copy.chmod(0o555)
        return Path(self.box.inside(LIBRARY_NAME))

    def __exit__(self, *exc: object) -> None:
        self.box.__exit__(*exc)

    def spawn(self, argv: list[str], *, stdout: Redirect = subprocess.PIPE, stderr: Redirect = subprocess.PIPE,
              pass_fds: tuple[int, ...] = ()) -> SandboxProcess:
        """Start a long-lived stage process (the child session) with its own pipes; `pass_fds` visible inside."""
        return self.box.spawn(argv, stdout=stdout, stderr=stderr, pass_fds=pass_fds)

    def kill(self, proc: SandboxProcess) -> None:
        self.box.kill(proc)

    def finish(self, proc: SandboxProcess, timeout_s: float) -> SandboxOutcome:
        """A spawned tool's end (Sandbox.finish), its deadline `timeout_s` from now."""
        return self.box.finish(proc, timeout_s)

    def write(self, name: str, text: str) -> None:
        """Put a file in the scratch directory under `name`, whole when it appears (written aside, then renamed),
        owned by the stage's user."""
        aside = self.box.scratch / f".{name}.part"
        aside.unlink(missing_ok=True)
        aside.write_text(text)
        self.box.give(aside)
        os.replace(aside, self.box.scratch / name)

    def run(self, argv: list[str], timeout_s: float) -> SandboxOutcome:
        """Run a tool (compute-sanitizer, ncu) to its end, by its real path (real_tool)."""
        return self.box.run(real_tool(argv), timeout_s)


def real_tool(argv: list[str]) -> list[str]:
    """`argv` with the tool by its real path, which the toolkit's bind shows whatever links led to it on the host
    (an interpreter keeps its own: a venv needs it)."""
    tool = argv[0] if argv[0] == sys.executable else os.path.realpath(argv[0])
    return [tool, *argv[1:]]


def outcome_returncode(outcome: SandboxOutcome) -> int | None:
    """A sandboxed command's end as Popen.returncode reads (negative: a signal; None: it timed out)."""
    if outcome.exit_code is not None:
        return outcome.exit_code
    return -outcome.signal if outcome.signal is not None else None
