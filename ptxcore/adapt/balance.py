"""Deterministic per-problem caps: proportional allocation over strata by largest remainder.

For one problem with `total` items in strata of sizes n_s and a cap C, stratum s first gets floor(n_s C /
total); the seats left go one each to the strata with the largest remainders (ties: the larger stratum,
then the smaller stratum key), never beyond a stratum's size. Inside a stratum items are taken in a fixed
order: their key order, or the order of sha256(seed:key) when a seed is given. Same input, same output.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

from pydantic import Field

from ptxcore.schema import FrozenModel

from .errors import AdaptError

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class ProblemBalance(FrozenModel):
    """What the cap did to one problem."""

    problem: str
    """Definition name."""
    available: int = Field(ge=0)
    """Items that passed every filter."""
    kept: int = Field(ge=0)
    """Items kept."""
    underfilled: bool
    """Fewer items than the cap were available."""


def allocate(sizes: dict[K, int], cap: int) -> dict[K, int]:
    """Seats per stratum: floor of the proportional share, then largest remainders (see module doc)."""
    total = sum(sizes.values())
    cap = min(cap, total)
    if total == 0:
        return {k: 0 for k in sizes}
    seats: dict[K, int] = {}
    remainders = []
    for key in sorted(sizes):
        exact = sizes[key] * cap / total
        seats[key] = int(exact)
        remainders.append((exact - seats[key], sizes[key], key))
    left = cap - sum(seats.values())
    for _, _, key in sorted(remainders, key=lambda r: (-r[0], -r[1], r[2])):
        if left <= 0:
            break
        if seats[key] < sizes[key]:
            seats[key] += 1
            left -= 1
    if left:
        raise AssertionError(f"largest-remainder allocation left {left} seats")  # cannot happen: cap <= total
    return seats


def order_key(seed: int | None, key: str) -> str:
    """Sort key of an item inside its stratum."""
    return key if seed is None else hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def balance(items: Sequence[T], *, problem: Callable[[T], str], stratum: Callable[[T], tuple],
            key: Callable[[T], str], cap: int, seed: int | None, allow_underfilled: bool,
            problems: Sequence[str], what: str) -> tuple[dict[str, int], list[ProblemBalance]]:
    """Keep at most `cap` items per problem; returns (item key -> rank inside its stratum, for kept items)
    and the per-problem summary. A problem of `problems` with fewer than `cap` items fails the build unless
    `allow_underfilled`."""
    by_problem: dict[str, list[T]] = defaultdict(list)
    for item in items:
        by_problem[problem(item)].append(item)
    kept: dict[str, int] = {}
    summary = []
    for name in sorted(set(problems) | set(by_problem)):
        group = by_problem.get(name, [])
        if len(group) < cap and not allow_underfilled:
            raise AdaptError(f"{name} has {len(group)} {what}, fewer than per_problem_cap {cap} "
                             "(lower the cap or set selection.allow_underfilled: true)")
        strata: dict[tuple, list[T]] = defaultdict(list)
        for item in group:
            strata[stratum(item)].append(item)
        seats = allocate({k: len(v) for k, v in strata.items()}, cap)
        for skey, members in strata.items():
            ordered = sorted(members, key=lambda it: order_key(seed, key(it)))
            for rank, item in enumerate(ordered[: seats[skey]]):
                kept[key(item)] = rank
        summary.append(ProblemBalance(problem=name, available=len(group), kept=min(cap, len(group)),
                                      underfilled=len(group) < cap))
    return kept, summary
