"""Largest-remainder allocation and the per-problem cap: hand-computed cases, ties, determinism, seeds."""

from __future__ import annotations

import pytest

from ptxcore.adapt.balance import allocate, balance
from ptxcore.adapt.errors import AdaptError


def test_allocate_floors_then_largest_remainders():
    # shares 2.5, 1.5, 1.0 -> floors 2, 1, 1; one seat left: a and b tie at .5, a is larger
    assert allocate({"a": 5, "b": 3, "c": 2}, 5) == {"a": 3, "b": 1, "c": 1}
    # 33 of 100 over 50/30/20: 16.5/9.9/6.6 -> 16, 9, 6 (31); remainders .9 (b), .6 (c), .5 (a)
    assert allocate({"a": 50, "b": 30, "c": 20}, 33) == {"a": 16, "b": 10, "c": 7}
    assert sum(allocate({"x": 7, "y": 11, "z": 1}, 9).values()) == 9


def test_allocate_ties_go_to_the_smaller_key_and_never_past_a_stratum():
    assert allocate({("B", 1): 1, ("A", 0): 1, ("C", 2): 1}, 2) == {("A", 0): 1, ("B", 1): 1, ("C", 2): 0}
    assert allocate({"a": 2, "b": 1}, 10) == {"a": 2, "b": 1}  # cap above the total keeps everything
    assert allocate({}, 3) == {}


Item = tuple[str, str, int]  # (problem, error type, index)


def _items(problem: str, spec: dict[str, int]) -> list[Item]:
    return [(problem, err, i) for err, n in spec.items() for i in range(n)]


def _run(items: list[Item], cap: int, seed: int | None = None, allow: bool = False, problems=("p",)):
    return balance(items, problem=lambda it: it[0], stratum=lambda it: (it[1],), key=lambda it: f"{it[1]}/{it[2]:03d}",
                   cap=cap, seed=seed, allow_underfilled=allow, problems=problems, what="failures")


def test_balance_keeps_the_proportional_mix_deterministically():
    items = _items("p", {"COMPILE_ERROR": 20, "RUNTIME_ERROR": 6, "TIMEOUT": 4})
    kept, summary = _run(items, 10)
    errs = [k.split("/")[0] for k in kept]
    assert (errs.count("COMPILE_ERROR"), errs.count("RUNTIME_ERROR"), errs.count("TIMEOUT")) == (7, 2, 1)
    assert sorted(kept) == ["COMPILE_ERROR/000", "COMPILE_ERROR/001", "COMPILE_ERROR/002", "COMPILE_ERROR/003",
                            "COMPILE_ERROR/004", "COMPILE_ERROR/005", "COMPILE_ERROR/006", "RUNTIME_ERROR/000",
                            "RUNTIME_ERROR/001", "TIMEOUT/000"]  # key order inside a stratum
    assert summary[0].available == 30 and summary[0].kept == 10 and not summary[0].underfilled
    assert _run(list(reversed(items)), 10)[0] == kept  # input order does not matter


def test_a_seed_reorders_inside_strata_but_keeps_the_counts():
    items = _items("p", {"COMPILE_ERROR": 20, "RUNTIME_ERROR": 6})
    plain, seeded, other = _run(items, 8)[0], _run(items, 8, seed=1)[0], _run(items, 8, seed=2)[0]
    assert seeded == _run(items, 8, seed=1)[0] and set(seeded) != set(plain) and set(seeded) != set(other)
    count = lambda kept, e: sum(k.startswith(e) for k in kept)  # noqa: E731
    assert count(plain, "COMPILE") == count(seeded, "COMPILE") == count(other, "COMPILE") == 6


def test_underfilled_problems_fail_unless_allowed():
    items = _items("p", {"COMPILE_ERROR": 3})
    with pytest.raises(AdaptError, match="p has 3 failures, fewer than per_problem_cap 5"):
        _run(items, 5)
    with pytest.raises(AdaptError, match="q has 0 failures"):
        _run(items, 3, problems=("p", "q"))
    kept, summary = _run(items, 5, allow=True, problems=("p", "q"))
    assert len(kept) == 3 and [(s.problem, s.kept, s.underfilled) for s in summary] == [("p", 3, True), ("q", 0, True)]
