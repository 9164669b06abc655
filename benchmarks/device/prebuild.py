"""Build kernels for the GPU host (nvcc with -lcuda) in parallel, filling the compile cache.

    PTXBENCH_CACHE_DIR=... python benchmarks/device/prebuild.py [FILE.cu ...]   (default: the controls)
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


def main() -> int:
    from ptxcore.arch import get_architecture
    from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
    from ptxcore.gpu import JudgeConfig

    cache = CompileCache(JudgeConfig().cache_root() / "compile")
    opts = BuildOptions(get_architecture("hopper"))
    files = [Path(a) for a in sys.argv[1:]] or sorted((REPO / "tests" / "fixtures" / "controls").glob("*.cu"))
    t0 = time.monotonic()

    def build(path: Path) -> str:
        r = compile_candidate(path.read_text(), opts, cache).result
        return f"{path.name}: {r.status.value} {r.duration_s:.1f}s {r.reason} {r.log[-300:] if r.status.value == 'COMPILE_ERROR' else ''}"

    with ThreadPoolExecutor(max_workers=16) as pool:
        for line in pool.map(build, files):
            print(line, flush=True)
    print(f"built {len(files)} kernels in {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
