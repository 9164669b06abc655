"""What the sandbox's memory watch costs the judge's host: CPU time of one poll, and of one second of polling.

    python benchmarks/sandbox_watch_cost.py [--polls 200]

Starts one sandbox (real bubblewrap) holding a sleeping command, then times, side by side on this host, the
two parts of a poll of ptxcore.sandbox.memory.MemoryWatch: finding the sandbox's members (a pass over every
process of the host) and reading their resident sizes. The watch reads sizes every 50 ms and finds members
every 500 ms; the last row is the CPU share of one core that this costs per running stage.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ptxcore.sandbox import Limits, Sandbox, SandboxPolicy, presets  # noqa: E402
from ptxcore.sandbox.memory import resident_bytes  # noqa: E402
from ptxcore.sandbox.process import all_pids  # noqa: E402


def per_call(fn: Callable[[], object], n: int) -> float:
    t = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t) / n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=200)
    args = ap.parse_args()
    policy = SandboxPolicy(name="watch-cost", mounts=presets.system_mounts(), env={"PATH": "/usr/bin:/bin"},
                           limits=Limits(resident_bytes=1 << 40))
    with Sandbox(policy) as box:
        proc = box.spawn(["/bin/sh", "-c", "sleep 60"])
        time.sleep(0.3)
        members = proc.member_pids(drain=False)
        find = per_call(lambda: proc.member_pids(drain=False), args.polls)
        read = per_call(lambda: sum(resident_bytes(p) for p in members), args.polls)
        box.kill(proc)
    every_poll = 20 * (find + read)
    watch = 20 * read + 2 * find
    print(f"host processes: {len(all_pids())}; sandbox members: {len(members)}")
    print("| step | CPU ms per call |")
    print("|---|---|")
    print(f"| find the members (every process of the host) | {find * 1e3:.3f} |")
    print(f"| read their resident sizes | {read * 1e3:.3f} |")
    print(f"| one core, finding members at every 50 ms poll | {every_poll * 100:.2f} % |")
    print(f"| one core, the watch (sizes every 50 ms, members every 500 ms) | {watch * 100:.2f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
