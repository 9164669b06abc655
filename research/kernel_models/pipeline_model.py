"""A randomized interleaving model of the mbarrier producer/consumer protocols in our TMA kernels.

mbarrier semantics (PTX ISA): a barrier has an expected arrival count and a transaction count; a phase
completes when both pending arrivals and pending transaction bytes reach zero, and the next phase
starts with the full arrival count. `try_wait.parity P` succeeds once the phase with parity P has
completed, i.e. when the current phase's parity differs from P (so parity 1 on a fresh barrier passes
at once). TMA loads complete their bytes asynchronously, at any later point of the schedule.

Agents are Python generators that yield `Wait(barrier, parity)` to block or `None` to let others run.
Buffers carry a version number; a consumer checks that the data it reads is the version it expects for
as long as the (asynchronous) read may last, which catches a producer overwriting a stage too early.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Generator
from dataclasses import dataclass, field


class Hazard(AssertionError):
    """A consumer saw the wrong data version, or the schedule deadlocked."""


@dataclass
class Barrier:
    count: int
    pending: int = 0
    tx: int = 0
    completed: int = 0

    def __post_init__(self) -> None:
        self.pending = self.count

    def _maybe_complete(self) -> None:
        if self.pending == 0 and self.tx == 0:
            self.completed += 1
            self.pending = self.count

    def arrive(self) -> None:
        if self.pending <= 0:
            raise Hazard("arrival on a barrier with no pending arrivals")
        self.pending -= 1
        self._maybe_complete()

    def arrive_expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes
        self.arrive()

    def complete_tx(self, nbytes: int) -> None:
        self.tx -= nbytes
        if self.tx < 0:
            raise Hazard("more transaction bytes completed than expected")
        self._maybe_complete()

    def ready(self, parity: int) -> bool:
        return (self.completed & 1) != parity


@dataclass(frozen=True)
class Wait:
    barrier: Barrier
    parity: int


Agent = Generator["Wait | None", None, None]


@dataclass
class World:
    """Buffers with versions plus the asynchronous copies still in flight."""

    versions: dict[str, int] = field(default_factory=dict)
    agents: list[Agent] = field(default_factory=list)

    def tma(self, buffer: str, version: int, barrier: Barrier, nbytes: int) -> None:
        """Start an asynchronous copy: it lands (writes, then completes its bytes) at a random later time."""

        def copy() -> Agent:
            yield None
            self.versions[buffer] = version
            barrier.complete_tx(nbytes)

        self.agents.append(copy())

    def expect(self, buffer: str, version: int) -> None:
        got = self.versions.get(buffer)
        if got != version:
            raise Hazard(f"{buffer}: read version {got}, expected {version}")


def run_schedule(world: World, agents: list[Agent], seed: int, max_steps: int = 1_000_000) -> None:
    """Run the agents (and the copies they start) under a random interleaving until all finish."""
    rng = random.Random(seed)
    world.agents.extend(agents)
    blocked: dict[int, Wait] = {}
    live = list(world.agents)
    for _ in range(max_steps):
        live = [a for a in world.agents if a is not None]
        if not live:
            return
        runnable = [
            i
            for i, a in enumerate(world.agents)
            if a is not None and (i not in blocked or blocked[i].barrier.ready(blocked[i].parity))
        ]
        if not runnable:
            raise Hazard("deadlock: every agent waits on a barrier phase that never completes")
        i = rng.choice(runnable)
        blocked.pop(i, None)
        try:
            req = next(world.agents[i])
        except StopIteration:
            world.agents[i] = None
            continue
        if isinstance(req, Wait):
            blocked[i] = req
    raise Hazard("schedule did not finish")


def many_schedules(build: Callable[[World], list[Agent]], seeds: int = 200) -> None:
    for seed in range(seeds):
        world = World()
        run_schedule(world, build(world), seed)
