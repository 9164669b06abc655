"""Length statistics of the written rows (the reference builder's layout plus reasoning length), gathered row by
row while the export streams, so no row is kept for them."""

from __future__ import annotations

import statistics
from typing import Any

from .models import SftRow


def summarize_ints(values: list[int]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)
    pick = lambda q: v[round((len(v) - 1) * q)]  # noqa: E731
    return {"min": v[0], "p50": pick(0.5), "p90": pick(0.9), "p95": pick(0.95), "p99": pick(0.99), "max": v[-1],
            "mean": round(statistics.fmean(v), 3)}


class LengthStats:
    """Per-row sizes (a few integers per row) and their summary."""

    def __init__(self) -> None:
        self._rows: list[tuple[str, int, int, int, int, int]] = []

    def add(self, row: SftRow, total_tokens: int) -> None:
        self._rows.append((row.id, sum(len(m.content) for m in row.messages[:-1]), len(row.messages[-1].content),
                           int(row.metadata["reasoning_chars"] or 0), len(row.messages), total_tokens))

    def summary(self) -> dict[str, Any]:
        col = lambda i: [r[i] for r in self._rows]  # noqa: E731
        longest = sorted(self._rows, key=lambda r: (-r[5], r[0]))[:10]
        return {
            "num_rows": len(self._rows), "prompt_chars": summarize_ints(col(1)), "target_chars": summarize_ints(col(2)),
            "reasoning_chars": summarize_ints(col(3)), "messages": summarize_ints(col(4)),
            "total_tokens": summarize_ints(col(5)),
            "top_10_longest": [{"id": r[0], "total_tokens": r[5], "target_chars": r[2]} for r in longest],
        }
