"""Test hosts in Linux network namespaces: each host is a netns with its own loopback and one end of a veth
pair on a private /24 that exists only between the namespaces this module makes (nothing is routed to or
from the machine's own network). The filesystem is shared by all hosts, as an NFS mount would be.

Every namespace is created by `HostPair` and deleted by it (after SIGKILL of every process inside) even when
the test fails; names carry the test process id so that parallel runs on one machine do not collide.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.231.7"
"""The veth network between the test hosts (private, reachable only inside their namespaces)."""


def netns_unavailable() -> str | None:
    """Why network namespaces cannot be made here (None when they can)."""
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"ptxprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {out.stderr.strip()}")


@dataclass
class Host:
    """One test host: a network namespace, its veth address, and a private directory."""

    role: str
    netns: str
    address: str
    root: Path
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    def popen(self, name: str, args: Sequence[str], env: dict[str, str], cwd: Path,
              split: bool = False) -> subprocess.Popen:
        """Start `args` on this host; stderr (and stdout unless `split`: then `<name>.out`) go to `<root>/<name>.log`,
        appended across restarts."""
        log = (self.root / f"{name}.log").open("a")
        log.write(f"--- start {time.strftime('%H:%M:%S')} {' '.join(args)}\n")
        log.flush()
        out = (self.root / f"{name}.out").open("w") if split else log
        proc = subprocess.Popen(["ip", "netns", "exec", self.netns, *args], cwd=cwd, env=env, stdout=out,
                                stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        out.close()
        self.procs[name] = proc
        return proc

    def run(self, args: Sequence[str], env: dict[str, str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess:
        """Run `args` on this host and wait (stdout/stderr captured)."""
        return subprocess.run(["ip", "netns", "exec", self.netns, *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def pids(self) -> list[int]:
        out = subprocess.run(["ip", "netns", "pids", self.netns], capture_output=True, text=True, timeout=30)
        return [int(p) for p in out.stdout.split()]

    def crash(self, timeout_s: float = 30) -> list[int]:
        """SIGKILL every process in this host's namespace (a host that lost power); returns their pids."""
        killed: list[int] = []
        deadline = time.monotonic() + timeout_s
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
            for proc in self.procs.values():  # reap our own children so they leave the namespace
                try:
                    proc.wait(0.2)
                except subprocess.TimeoutExpired:
                    pass
        for proc in self.procs.values():
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        self.procs.clear()
        return sorted(set(killed))


class HostPair:
    """Two hosts joined by a veth pair: `a` at SUBNET.1, `b` at SUBNET.2 (both with loopback up)."""

    def __init__(self, base: Path, roles: tuple[str, str] = ("a", "b")) -> None:
        tag = f"{os.getpid()}{uuid.uuid4().hex[:4]}"
        self.hosts = [Host(role, f"ptx{role[:4]}{tag}", f"{SUBNET}.{i + 1}", base / role)
                      for i, role in enumerate(roles)]

    def __enter__(self) -> HostPair:
        try:
            for h in self.hosts:
                h.root.mkdir(parents=True, exist_ok=True)
                _ip("netns", "add", h.netns)
                _ip("-n", h.netns, "link", "set", "lo", "up")
            a, b = self.hosts
            _ip("link", "add", "eth0", "netns", a.netns, "type", "veth", "peer", "name", "eth0", "netns", b.netns)
            for h in self.hosts:
                _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", "eth0")
                _ip("-n", h.netns, "link", "set", "eth0", "up")
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for h in self.hosts:
            if Path(f"/run/netns/{h.netns}").exists():
                h.crash()
                subprocess.run(["ip", "netns", "del", h.netns], capture_output=True, timeout=30)


@contextmanager
def host_pair(base: Path, roles: tuple[str, str]) -> Iterator[tuple[Host, Host]]:
    with HostPair(base, roles) as pair:
        yield pair.hosts[0], pair.hosts[1]


def clean_env(**overrides: str) -> dict[str, str]:
    """This process's environment without Prefect/PTXBench settings (each host sets its own), plus overrides."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "PTXBENCH_", "MLFLOW_"))}
    env.update(overrides)
    return env
