"""Replay sources: scripted trajectories from a library folder, or responses recorded in a warehouse.

Library format (`replay/<library>/`):
    <problem>.yaml            one scripted trajectory
    <problem>.<k>.yaml        further ones (k = 1, 2, ...), served round-robin by trajectory index
  keys: problem, arch, language (cuda|triton), description, turns: [{response, reasoning?}, ...]
Turn t of a trajectory serves the script's turn t; past the end, the last turn repeats.

`WarehouseReplay` re-serves the turns recorded in an earlier campaign, so a campaign can be re-judged on
another GPU or driver with no LLM call. It is built from records (the flow reads the warehouse), so
this module does no I/O beyond reading library files.
"""

from __future__ import annotations

import functools
import os
import re
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field

from ptxcore.schema import FrozenModel, TrajectoryRecord, TurnRecord

from .yamlfile import load_yaml_model

WAREHOUSE_PREFIX = "warehouse:"
_SCRIPT_NAME = re.compile(r"(?P<problem>[A-Za-z0-9_\-]+?)(\.(?P<k>\d+))?\.yaml")


class ReplayError(LookupError):
    """A replay library or source cannot serve the request."""

    def __str__(self) -> str:
        return str(self.args[0])


class ReplayTurn(FrozenModel):
    """One scripted answer."""

    response: str = Field(min_length=1)
    """The answer's content: brief reasoning and one code block."""
    reasoning: str = ""
    """Optional reasoning content (served as the provider's reasoning field)."""


class ReplayScript(FrozenModel):
    """One scripted trajectory for one problem."""

    problem: str
    """Definition name."""
    arch: str
    """Architecture key it was written for."""
    language: Literal["cuda", "triton"] = "cuda"
    """Solution language."""
    description: str = ""
    """What the script demonstrates."""
    turns: list[ReplayTurn] = Field(min_length=1)
    """Answers, in turn order."""

    def turn(self, index: int) -> ReplayTurn:
        return self.turns[min(index, len(self.turns) - 1)]


class ReplaySource(Protocol):
    """Anything that can answer (problem, arch, variant, trajectory index, turn)."""

    def problems(self) -> set[str]: ...

    def response(self, problem: str, arch: str, variant: str, trajectory_index: int, turn: int) -> ReplayTurn: ...


def default_replay_root() -> Path:
    """$PTXBENCH_REPLAY_DIR, else the repository's replay/ folder."""
    env = os.environ.get("PTXBENCH_REPLAY_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "replay"


def _prefer(items: list, predicate) -> list:
    matching = [x for x in items if predicate(x)]
    return matching or items


class ReplayLibrary:
    """The scripts in one library folder."""

    def __init__(self, root: Path) -> None:
        if not root.is_dir():
            raise ReplayError(f"no replay library at {root}")
        self.root = root
        found: dict[str, list[tuple[int, ReplayScript]]] = defaultdict(list)
        for path in sorted(root.glob("*.yaml")):
            m = _SCRIPT_NAME.fullmatch(path.name)
            if m is None:
                raise ReplayError(f"{path}: name must be <problem>.yaml or <problem>.<k>.yaml")
            script = load_yaml_model(path, ReplayScript)
            if script.problem != m.group("problem"):
                raise ReplayError(f"{path}: problem {script.problem!r} does not match the file name")
            found[script.problem].append((int(m.group("k") or 0), script))
        if not found:
            raise ReplayError(f"replay library {root} holds no <problem>.yaml scripts")
        self._scripts = {p: [s for _, s in sorted(v, key=lambda kv: kv[0])] for p, v in found.items()}

    def problems(self) -> set[str]:
        return set(self._scripts)

    def scripts(self, problem: str) -> list[ReplayScript]:
        if problem not in self._scripts:
            raise ReplayError(f"replay library {self.root.name} has no script for {problem}")
        return self._scripts[problem]

    def response(self, problem: str, arch: str, variant: str, trajectory_index: int, turn: int) -> ReplayTurn:
        scripts = _prefer(self.scripts(problem), lambda s: s.arch == arch)
        return scripts[trajectory_index % len(scripts)].turn(turn)


_LIBRARY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,99}")


@functools.lru_cache(maxsize=16)
def load_library(name: str, root: Path | None = None) -> ReplayLibrary:
    """The library folder `<root>/<name>` (name: one folder name, never a path)."""
    if not _LIBRARY_NAME.fullmatch(name):
        raise ReplayError(f"replay library name {name[:80]!r}: one folder name of letters, digits, '_', '-'")
    return ReplayLibrary((root or default_replay_root()) / name)


class WarehouseReplay:
    """Responses recorded in a campaign, served by (problem, variant, arch, trajectory index, turn).

    A request maps onto the recorded trajectories of the same problem (narrowed to the same prompt
    variant, then the same architecture, when such exist), ordered by (model, arch, variant, index);
    trajectory index i serves the i-th of them (round-robin).
    """

    def __init__(self, campaign_id: str, trajectories: Iterable[TrajectoryRecord], turns: Iterable[TurnRecord]):
        self.campaign_id = campaign_id
        by_traj: dict[str, list[TurnRecord]] = defaultdict(list)
        for t in turns:
            by_traj[t.trajectory_id].append(t)
        self._turns = {k: sorted(v, key=lambda r: r.turn) for k, v in by_traj.items()}
        self._trajectories = sorted(
            (t for t in trajectories if self._turns.get(t.trajectory_id)),
            key=lambda t: (t.model, t.arch, t.prompt_variant, t.index, t.trajectory_id),
        )
        if not self._trajectories:
            raise ReplayError(f"campaign {campaign_id!r} has no recorded turns to replay")

    def problems(self) -> set[str]:
        return {t.problem for t in self._trajectories}

    def response(self, problem: str, arch: str, variant: str, trajectory_index: int, turn: int) -> ReplayTurn:
        candidates = [t for t in self._trajectories if t.problem == problem]
        if not candidates:
            raise ReplayError(f"campaign {self.campaign_id!r} recorded no turns for {problem}")
        candidates = _prefer(candidates, lambda t: t.prompt_variant == variant)
        candidates = _prefer(candidates, lambda t: t.arch == arch)
        records = self._turns[candidates[trajectory_index % len(candidates)].trajectory_id]
        record = records[min(turn, len(records) - 1)]
        return ReplayTurn(response=record.response_text or " ", reasoning=record.reasoning_text)


_SOURCES: dict[str, ReplaySource] = {}


def register_source(name: str, source: ReplaySource) -> None:
    """Serve `replay/<name>` from `source` (used for `warehouse:<campaign>` sources)."""
    _SOURCES[name] = source


def resolve_source(name: str) -> ReplaySource:
    """A registered source, else the library folder of that name."""
    if name in _SOURCES:
        return _SOURCES[name]
    if name.startswith(WAREHOUSE_PREFIX):
        raise ReplayError(
            f"replay source {name!r} is not loaded: warehouse replays are loaded by the campaign flow "
            "from its warehouse before the first call"
        )
    return load_library(name)


_NAME = re.compile(r'"name"\s*:\s*"([A-Za-z0-9_.\-]+)"')


def problem_in_prompt(messages: list[dict], known: set[str]) -> str | None:
    """The first definition name of `known` that the prompt's definition JSON names."""
    for message in messages:
        for name in _NAME.findall(str(message.get("content") or "")):
            if name in known:
                return name
    return None
