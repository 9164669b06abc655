"""Post-hoc invalidation: turns or kernels found invalid after the fact (a reward hack spotted later).

History is kept: `invalidations` is an append-only event log (who, when, why; `invalidate` or `revoke`),
nothing in `turns` or any other table is changed or deleted. A target's state is its latest event.
A kernel invalidation covers every turn whose kernel has that sha256 (in any campaign).

What the metric views see: `v_turn_outcomes` (and so every view built on it, the reports and the turn-metrics
JSON) leaves invalidated turns out, exactly as if the turn had not been played — the trajectory keeps its
turn budget in the denominators, so the invalid turn simply never counts as correct or as a speedup.
`v_invalid_turns` lists the turns that are currently invalid, with the reason.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import Enum

from pydantic import Field, model_validator

from ptxcore.schema import FrozenModel

INVALIDATIONS_DDL = """
        CREATE TABLE IF NOT EXISTS invalidations (
            event_id VARCHAR PRIMARY KEY,
            seq BIGINT NOT NULL,
            action VARCHAR NOT NULL,
            target VARCHAR NOT NULL,
            campaign_id VARCHAR,
            trajectory_id VARCHAR,
            turn INTEGER,
            kernel_sha256 VARCHAR,
            reason VARCHAR NOT NULL,
            actor VARCHAR NOT NULL,
            event_at VARCHAR NOT NULL
        )"""
"""Append-only: one row per invalidate/revoke event, in `seq` order."""

V_CURRENT_INVALIDATIONS = """
CREATE OR REPLACE VIEW v_current_invalidations AS
SELECT * FROM invalidations
QUALIFY row_number() OVER (PARTITION BY target, campaign_id, trajectory_id, turn, kernel_sha256
                           ORDER BY seq DESC) = 1 AND action = 'invalidate'
"""

V_INVALID_TURNS = """
CREATE OR REPLACE VIEW v_invalid_turns AS
SELECT t.campaign_id, t.trajectory_id, t.turn, i.target, i.kernel_sha256, i.reason, i.actor, i.event_at, i.event_id
FROM turns t JOIN v_current_invalidations i
  ON (i.target = 'turn' AND i.campaign_id = t.campaign_id AND i.trajectory_id = t.trajectory_id AND i.turn = t.turn)
  OR (i.target = 'kernel' AND (i.kernel_sha256 = t.kernel_sha256 OR i.kernel_sha256 = t.kernel_key))
"""

VALID_TURN_FILTER = """NOT EXISTS (SELECT 1 FROM v_invalid_turns iv WHERE iv.campaign_id = t.campaign_id
                              AND iv.trajectory_id = t.trajectory_id AND iv.turn = t.turn)"""
"""WHERE condition on a `turns t` alias: the turn is not currently invalidated."""

MAX_REASON_CHARS = 2000
_SHA256 = re.compile(r"[0-9a-f]{64}")


class InvalidationError(ValueError):
    """A bad invalidation request (unknown target, already invalid, not invalid, bad reason); one line."""


class InvalidationAction(str, Enum):
    INVALIDATE = "invalidate"
    REVOKE = "revoke"


class TargetKind(str, Enum):
    TURN = "turn"
    KERNEL = "kernel"


class InvalidationTarget(FrozenModel):
    """One turn (campaign, trajectory, turn) or one kernel (sha256)."""

    kind: TargetKind
    """What is invalidated."""
    campaign_id: str | None = None
    """Turn target: its campaign."""
    trajectory_id: str | None = None
    """Turn target: its trajectory."""
    turn: int | None = Field(default=None, ge=0)
    """Turn target: its 0-based index."""
    kernel_sha256: str | None = None
    """Kernel target: the kernel text's sha256 (lower-case hex)."""

    @model_validator(mode="after")
    def _shape(self) -> InvalidationTarget:
        turn_fields = (self.campaign_id, self.trajectory_id, self.turn)
        if self.kind is TargetKind.TURN and (None in turn_fields or self.kernel_sha256 is not None):
            raise ValueError("a turn target needs campaign_id, trajectory_id and turn only")
        if self.kind is TargetKind.KERNEL and (self.kernel_sha256 is None or turn_fields != (None, None, None)):
            raise ValueError("a kernel target needs kernel_sha256 only")
        if self.kernel_sha256 is not None and not _SHA256.fullmatch(self.kernel_sha256):
            raise ValueError("kernel_sha256 must be 64 lower-case hex digits")
        return self

    @classmethod
    def parse_turn(cls, text: str) -> InvalidationTarget:
        """`CAMPAIGN/TRAJECTORY/TURN`; trajectory ids contain slashes, campaign ids never do."""
        campaign, _, rest = text.partition("/")
        trajectory, _, turn = rest.rpartition("/")
        if not campaign or not trajectory or not turn.isdigit():
            raise InvalidationError(f"--turn {text!r}: expected CAMPAIGN/TRAJECTORY/TURN (turn a number)")
        return cls(kind=TargetKind.TURN, campaign_id=campaign, trajectory_id=trajectory, turn=int(turn))

    @classmethod
    def parse_kernel(cls, text: str) -> InvalidationTarget:
        sha = text.strip().lower()
        if not _SHA256.fullmatch(sha):
            raise InvalidationError(f"--kernel {text!r}: expected a sha256 (64 hex digits)")
        return cls(kind=TargetKind.KERNEL, kernel_sha256=sha)

    @property
    def label(self) -> str:
        if self.kind is TargetKind.KERNEL:
            return f"kernel {self.kernel_sha256}"
        return f"turn {self.campaign_id}/{self.trajectory_id}/{self.turn}"

    def key(self) -> tuple:
        return (self.kind.value, self.campaign_id, self.trajectory_id, self.turn, self.kernel_sha256)


class InvalidationEvent(FrozenModel):
    """One row of `invalidations`."""

    event_id: str
    """Random hex id of the event."""
    seq: int = Field(ge=0)
    """Order of events in this warehouse (the latest per target decides its state)."""
    action: InvalidationAction
    """Invalidate, or revoke an earlier invalidation."""
    target: InvalidationTarget
    """What the event is about."""
    reason: str = Field(min_length=1, max_length=MAX_REASON_CHARS)
    """Why (free text, required)."""
    actor: str = Field(min_length=1, max_length=200)
    """Who (user name or what the caller says)."""
    event_at: str
    """When (ISO 8601, UTC, seconds)."""

    def row(self) -> dict:
        t = self.target
        return {"event_id": self.event_id, "seq": self.seq, "action": self.action.value, "target": t.kind.value,
                "campaign_id": t.campaign_id, "trajectory_id": t.trajectory_id, "turn": t.turn,
                "kernel_sha256": t.kernel_sha256, "reason": self.reason, "actor": self.actor,
                "event_at": self.event_at}


def clean_reason(reason: str) -> str:
    """The reason as stored: stripped, required, bounded, control characters refused."""
    text = (reason or "").strip()
    if not text:
        raise InvalidationError("--reason: a non-empty reason is required")
    if len(text) > MAX_REASON_CHARS:
        raise InvalidationError(f"--reason: at most {MAX_REASON_CHARS} characters ({len(text)} given)")
    if any(ord(c) < 32 and c not in "\t" for c in text):
        raise InvalidationError("--reason: control characters (newlines, escapes) are not allowed")
    return text


def new_event(seq: int, action: InvalidationAction, target: InvalidationTarget, reason: str,
              actor: str) -> InvalidationEvent:
    return InvalidationEvent(event_id=uuid.uuid4().hex, seq=seq, action=action, target=target, reason=reason,
                             actor=actor, event_at=datetime.now(UTC).isoformat(timespec="seconds"))


class InvalidationSummary(FrozenModel):
    """What one invalidate/revoke call did."""

    action: InvalidationAction
    """What was done."""
    targets: list[str]
    """Labels of the targets, in request order."""
    turns_affected: int = Field(ge=0)
    """Turns whose state changed (a kernel target may cover many)."""
    event_ids: list[str]
    """The events appended."""


_SAME_TARGET = ("target = ? AND campaign_id IS NOT DISTINCT FROM ? AND trajectory_id IS NOT DISTINCT FROM ? "
                "AND turn IS NOT DISTINCT FROM ? AND kernel_sha256 IS NOT DISTINCT FROM ?")


def _check_exists(con, target: InvalidationTarget, where: str) -> None:
    if target.kind is TargetKind.TURN:
        found = con.execute("SELECT count(*) FROM turns WHERE campaign_id = ? AND trajectory_id = ? AND turn = ?",
                            [target.campaign_id, target.trajectory_id, target.turn]).fetchone()[0]
    else:
        found = con.execute("SELECT count(*) FROM turns WHERE kernel_sha256 = ? OR kernel_key = ?",
                            [target.kernel_sha256, target.kernel_sha256]).fetchone()[0]
    if not found:
        raise InvalidationError(f"no {target.label} in {where}")


def _check_state(con, target: InvalidationTarget, action: InvalidationAction) -> None:
    row = con.execute(f"SELECT action, actor, event_at, reason FROM invalidations WHERE {_SAME_TARGET} "
                      "ORDER BY seq DESC LIMIT 1", list(target.key())).fetchone()
    invalid = row is not None and row[0] == InvalidationAction.INVALIDATE.value
    if action is InvalidationAction.INVALIDATE and invalid:
        raise InvalidationError(f"{target.label} is already invalidated (by {row[1]} at {row[2]}: {row[3][:80]})")
    if action is InvalidationAction.REVOKE and not invalid:
        raise InvalidationError(f"{target.label} is not invalidated: nothing to revoke")


def _invalid_keys(con) -> set[tuple[str, str, int]]:
    return {(c, t, int(n)) for c, t, n in
            con.execute("SELECT DISTINCT campaign_id, trajectory_id, turn FROM v_invalid_turns").fetchall()}


def apply_events(con, targets: list[InvalidationTarget], action: InvalidationAction, reason: str, actor: str,
                 where: str) -> InvalidationSummary:
    """Check every target, then append one event each; the caller runs this in one transaction (all or nothing)."""
    if not targets:
        raise InvalidationError("give at least one --turn or --kernel")
    unique = list({t.key(): t for t in targets}.values())
    reason, actor = clean_reason(reason), (actor or "").strip() or "unknown"
    for target in unique:
        _check_exists(con, target, where)
        _check_state(con, target, action)
    before = _invalid_keys(con)
    seq = con.execute("SELECT coalesce(max(seq), -1) + 1 FROM invalidations").fetchone()[0]
    events = [new_event(seq + i, action, t, reason, actor) for i, t in enumerate(unique)]
    for event in events:
        row = event.row()
        con.execute(f"INSERT INTO invalidations ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                    list(row.values()))
    return InvalidationSummary(action=action, targets=[t.label for t in unique],
                               turns_affected=len(before ^ _invalid_keys(con)), event_ids=[e.event_id for e in events])
