"""How long the compile stage takes to build a new candidate, phase by phase, for the current build against others.

    python benchmarks/build_time.py [--variants 3] [--kernel K ...] [--base main] [--flags NAME=FLAGS ...]
    python benchmarks/build_time.py --check-sass [--base main]

Every build is cold: each variant is the library kernel plus a distinct comment and unused device variable (new
device code: no SASS dump of it is remembered, ptxcore.compile.devicecode), built by `compile_candidate`
into a fresh cache, in a fresh process that has first built a small kernel untimed (the toolchain found, nvcc's
dry run and the device link's SASS dump remembered, as in a warm service; --cold-process: not).
Configurations, each a source tree and extra nvcc flags:
  new          this working tree (what the checkout builds)
  base         the tree of git ref --base (default main), extracted with `git archive` (the build before a change),
               or --base DIR: a folder holding such a tree (`git archive main ptxcore knowledge_packs | tar -x -C DIR`)
  NAME=FLAGS   --flags: this tree with FLAGS added to the build, e.g. 'O1=-O1' (the host code at -O1: nvcc's -O
               is the host compiler's only; a later -O wins) or 'threads=--threads 2'
  base:NAME=FLAGS  the same on the base tree
Builds run in A B B A order (the configurations in order, then reversed, per variant), so a drifting machine
drifts all alike. The table: per configuration, mean and median of the stage's wall and of its phases
(nvcc in the sandbox, the include/directive gate, the SASS extraction, the rest), and each configuration's
median against the first one's. --nvcc-phases adds nvcc's own `--time` split (one direct, unsandboxed build).

--fail host|device appends an error to every variant (a host-side or a device-side undefined name) and times the
failed builds instead (what a failing candidate's build costs).

--check-sass builds every kernel of solutions/ and tests/fixtures/controls/ once per configuration and
compares status, reason, the device-code hash (`cuobjdump -xelf`), the `cuobjdump --dump-sass` text and the
static SASS report, each with the module id taken out of anonymous-namespace names (`without_module_id`: nvcc and
the two-chain build name it differently); it exits 1 when any differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KERNELS = ("solutions/gemm_n7168_k5120/wgmma_tma_ws.cu", "solutions/mha_with_lse_d128/fa3_wgmma_tma.cu")
PHASES = ("nvcc", "gate", "sass", "other")
FAILURES = {
    "host": "\n#ifndef __CUDA_ARCH__\nstatic int build_time_failure() { return undefined_host_name; }\n#endif\n",
    "device": "\n#ifdef __CUDA_ARCH__\n__device__ int build_time_failure() { return undefined_device_name; }\n#endif\n",
}
WARM_UP = "__global__ void build_time_warm_up(float* x) { x[threadIdx.x] = 1.0f; }\n"
"""What each worker builds first, untimed, unless --cold-process: a warm service has built a candidate before."""
WRAPPED = (  # (module, attribute, phase): whichever of them a tree has
    ("ptxcore.sandbox.runner", "Sandbox.run", "nvcc"),
    ("ptxcore.compile.build", "_gate", "gate"),
    ("ptxcore.compile.stage", "inspect_binary", "sass"),
    ("ptxcore.compile.stage", "device_code_sha256", "sass"),
    ("ptxcore.compile.stage", "_static_sass", "sass"),
)


# ---- the worker: one build in a fresh process, ptxcore imported from the configuration's tree ----

def _wrap(phases: dict[str, float]) -> None:
    import importlib

    for module, attr, phase in WRAPPED:
        owner = importlib.import_module(module)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        fn = getattr(owner, name, None) if owner is not None else None
        if fn is None:
            continue

        def timed(*a, _fn=fn, _phase=phase, **kw):
            started = time.monotonic()
            try:
                return _fn(*a, **kw)
            finally:
                phases[_phase] += time.monotonic() - started

        setattr(owner, name, timed)


def _nvcc_phases(source: str, flags: list[str]) -> dict[str, float]:
    """nvcc's own `--time` split of one direct build (seconds per phase name, summed; and its wall)."""
    from ptxcore.arch import get_architecture
    from ptxcore.compile.nvcc import BuildOptions, nvcc_command
    from ptxcore.compile.toolchain import toolchain

    options = BuildOptions(arch=get_architecture("hopper"), extra_flags=tuple(flags))
    with tempfile.TemporaryDirectory(prefix="build-time-") as tmp:
        src = Path(tmp) / "kernel.cu"
        src.write_text(source)
        (Path(tmp) / "keep").mkdir()
        cmd = nvcc_command(str(src), f"{tmp}/kernel.so", f"{tmp}/keep", options, toolchain("hopper"))
        started = time.monotonic()
        subprocess.run([*cmd, "--time", f"{tmp}/time.csv"], capture_output=True, cwd=tmp, check=True)
        out: dict[str, float] = {"nvcc wall": time.monotonic() - started}
        for line in Path(f"{tmp}/time.csv").read_text().splitlines()[1:]:
            cells = [c.strip() for c in line.split(",")]
            if len(cells) >= 7 and cells[1] != "nvcc (driver)":
                out[cells[1]] = out.get(cells[1], 0.0) + float(cells[6]) / 1000
        return out


_ANON = re.compile(rb"(\d+)(?:_GLOBAL__N__|_INTERNAL_)")


def without_module_id(data: bytes) -> bytes:
    """`data` with every anonymous namespace's or internal name's mangled identifier (`<length>_GLOBAL__N__<module
    id>`, `<length>_INTERNAL_<module id>`, read by its
    length prefix) replaced by as many `N`s (lengths, so offsets in the ELF's string tables, are kept): the one part of the device code that carries the build's module id, which
    nvcc derives from what cudafe++ parses and the two-chain build (ptxcore.compile.plan) from the path."""
    out, pos = [], 0
    while (m := _ANON.search(data, pos)) is not None:
        end = m.start(1) + len(m.group(1)) + int(m.group(1))
        out += [data[pos:m.start()], m.group(1), b"N" * int(m.group(1))]
        pos = end
    return b"".join(out) + data[pos:]


def _sass_identity(artifact: Path | None) -> dict:
    import hashlib

    from ptxcore.sass import dump_sass
    from ptxcore.sass.tools import find_tool

    if artifact is None:
        return {}
    text = dump_sass(artifact)
    with tempfile.TemporaryDirectory(prefix="xelf-") as tmp:
        subprocess.run([find_tool("cuobjdump"), "-xelf", "all", str(artifact.resolve())], cwd=tmp, check=True,
                       capture_output=True, timeout=120)
        elf = hashlib.sha256(b"".join(without_module_id(f.read_bytes()) for f in sorted(Path(tmp).iterdir())))
    return {"sass_text_sha256": hashlib.sha256(without_module_id(text.encode())).hexdigest(),
            "device_elf_sha256": elf.hexdigest()}


def worker(job: dict) -> dict:
    import ptxcore
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.compile.toolchain import toolchain

    toolchain("hopper")
    options = BuildOptions(arch=get_architecture("hopper"), extra_flags=tuple(job["flags"]))
    if job.get("warm", True):  # as a warm service: it has built before (nvcc's dry run, the device link's dump)
        compile_candidate(WARM_UP + job["suffix"], options, CompileCache(Path(job["cache"] + "-warm")))
    phases = dict.fromkeys(PHASES, 0.0)
    _wrap(phases)
    source = Path(job["kernel"]).read_text() + job["suffix"]
    started = time.monotonic()
    built = compile_candidate(source, options, CompileCache(Path(job["cache"])))
    wall = time.monotonic() - started
    phases["other"] = wall - sum(phases.values())
    out = {"wall": wall, "phases": phases, "status": built.result.status.value, "reason": built.result.reason,
           "cubin_sha256": built.result.cubin_sha256, "tree": str(Path(ptxcore.__file__).parents[1]),
           "sass_report": (json.loads(without_module_id(json.dumps(built.sass.model_dump(mode="json")).encode()))
                           if built.sass is not None else None)}
    if job.get("identity"):
        out.update(_sass_identity(built.artifact))
    if job.get("nvcc_phases"):
        out["nvcc_phases"] = _nvcc_phases(source, job["flags"])
    return out


# ---- the driver ----

def base_tree(ref: str, into: Path) -> Path:
    """The tree of git `ref` (its ptxcore and knowledge packs), extracted under `into`; `ref` may instead be a
    folder that holds such a tree (where the checkout has no git history, e.g. a copy on a GPU host)."""
    if (Path(ref) / "ptxcore").is_dir():
        return Path(ref).resolve()
    tree = into / f"base-{ref.replace('/', '_')}"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref, "ptxcore", "knowledge_packs"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree


def configurations(args, scratch: Path) -> list[tuple[str, Path, list[str]]]:
    base = base_tree(args.base, scratch)
    configs = [("base", base, []), ("new", REPO, [])]
    for spec in args.flags:
        name, _, flags = spec.partition("=")
        tree = base if name.startswith("base:") else REPO
        configs.append((name, tree, flags.split()))
    return configs


def run_job(tree: Path, job: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p).resolve() != REPO]]), "PTXBENCH_KNOWLEDGE_PACKS_DIR": str(tree / "knowledge_packs")}
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(job)], capture_output=True,
                          text=True, env=env, cwd=str(tree))
    if proc.returncode != 0:
        raise SystemExit(f"worker failed in {tree}: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if Path(result["tree"]).resolve() != tree.resolve():
        raise SystemExit(f"worker imported ptxcore from {result['tree']}, not {tree}")
    return result


def abba(configs: list, variants: int) -> list[tuple[int, int]]:
    """(variant, configuration index) in A B B A order."""
    order = []
    for v in range(variants):
        idx = list(range(len(configs)))
        order += [(v, i) for i in (idx if v % 2 == 0 else idx[::-1])]
    return order


def timing(args, configs, scratch: Path) -> dict:
    results: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    stamp = time.time_ns()
    for kernel in args.kernel:
        for v, i in abba(configs, args.variants):
            name, tree, flags = configs[i]
            suffix = (FAILURES.get(args.fail, "") + f"\n// build_time {stamp} {kernel} {v} {name}\n"
                      f"__device__ int build_time_{stamp}_{v}_{i} = {v};\n")
            job = {"kernel": str(REPO / kernel), "suffix": suffix,
                   "flags": flags, "cache": str(scratch / f"cache-{name}-{v}-{Path(kernel).stem}"),
                   "nvcc_phases": args.nvcc_phases and v < 2 and not args.fail, "warm": not args.cold_process}
            r = run_job(tree, job)
            if r["status"] != ("COMPILE_ERROR" if args.fail else "COMPILED"):
                raise SystemExit(f"{kernel} under {name}: {r['status']} ({r['reason']})")
            r["kernel"] = kernel
            results[name].append(r)
            print(f"{Path(kernel).parent.name}/{Path(kernel).name} v{v} {name:>8}: {r['wall']:.2f} s",
                  file=sys.stderr, flush=True)
    return results


def table(results: dict[str, list[dict]]) -> str:
    names = list(results)
    first = statistics.median(r["wall"] for r in results[names[0]])
    lines = [f"{'configuration':<14}{'n':>3}{'mean':>8}{'median':>8}" + "".join(f"{p:>8}" for p in PHASES)
             + f"{'ratio':>8}", "-" * (33 + 8 * len(PHASES) + 8)]
    for name in names:
        walls = [r["wall"] for r in results[name]]
        med = statistics.median(walls)
        cells = "".join(f"{statistics.median(r['phases'][p] for r in results[name]):>8.2f}" for p in PHASES)
        lines.append(f"{name:<14}{len(walls):>3}{statistics.mean(walls):>8.2f}{med:>8.2f}{cells}"
                     f"{med / first:>8.2f}")
    lines.append("(seconds, wall; phases are medians; ratio: median wall against the first configuration's)")
    for name in names:
        split = [r["nvcc_phases"] for r in results[name] if r.get("nvcc_phases")]
        if split:
            keys = list(split[0])
            lines.append(f"nvcc --time, {name} (median of {len(split)}): "
                         + ", ".join(f"{k} {statistics.median(s.get(k, 0.0) for s in split):.2f}" for k in keys))
    return "\n".join(lines)


def library_kernels() -> list[Path]:
    return sorted((REPO / "solutions").glob("*/*.cu")) + sorted((REPO / "tests/fixtures/controls").glob("*.cu"))


def check_sass(configs, scratch: Path) -> int:
    """Every library and control kernel under each configuration: the same verdict and the same device code."""
    keys = ("status", "reason", "device_elf_sha256", "sass_text_sha256", "sass_report")
    differing = 0
    for kernel in library_kernels():
        seen = []
        for name, tree, flags in configs:
            job = {"kernel": str(kernel), "suffix": "", "flags": flags, "identity": True,
                   "cache": str(scratch / f"check-{name}")}
            seen.append((name, run_job(tree, job)))
        first_name, first = seen[0]
        diff = [f"{k} ({name})" for name, r in seen[1:] for k in keys if r.get(k) != first.get(k)]
        differing += bool(diff)
        rel = kernel.relative_to(REPO)
        print(f"{'DIFFERS' if diff else 'same   '} {first['status']:<13} {rel}" + (f": {diff}" if diff else ""),
              flush=True)
    print(f"{len(library_kernels())} kernels, {differing} differ between {', '.join(c[0] for c in configs)}")
    return 1 if differing else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--kernel", action="append", help=f"a .cu under the repository (default {', '.join(KERNELS)})")
    ap.add_argument("--variants", type=int, default=3, help="distinct variants per kernel and configuration")
    ap.add_argument("--cold-process", action="store_true",
                    help="no untimed warm-up build in each worker (a fresh process's first build)")
    ap.add_argument("--base", default="main", help="git ref (or folder) of the base configuration")
    ap.add_argument("--flags", action="append", default=[], help="NAME=FLAGS: this tree with FLAGS added (base:NAME=FLAGS: the base tree)")
    ap.add_argument("--nvcc-phases", action="store_true", help="add nvcc's --time split (one direct build)")
    ap.add_argument("--fail", choices=sorted(FAILURES), help="time failing variants (an error appended)")
    ap.add_argument("--check-sass", action="store_true", help="compare every library kernel's device code")
    ap.add_argument("--json", type=Path, help="write the raw results here")
    args = ap.parse_args()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    args.kernel = args.kernel or list(KERNELS)
    with tempfile.TemporaryDirectory(prefix="build-time-") as tmp:
        os.chmod(tmp, 0o755)
        configs = configurations(args, Path(tmp))
        if args.check_sass:
            return check_sass(configs, Path(tmp))
        results = timing(args, configs, Path(tmp))
    what = f"failing ({args.fail}-side error) " if args.fail else ""
    print(f"\ncold builds of new {what}candidates, {os.cpu_count()} cores, A B B A order")
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
