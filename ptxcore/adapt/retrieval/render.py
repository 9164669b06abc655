"""Retrieved groups -> the text appended to a failing turn's feedback, and the record of what was shown.

Notes mode: for each retrieved wrong kernel (best first), its fixes' summaries and instruction notes,
de-duplicated across groups (`InstructionNote.key`), at most `max_notes` in all. Notes+fixed mode (ORACLE):
for each retrieved wrong kernel, its best verified fix (highest speedup) in full, then that fix's notes,
again at most `max_notes` notes in all.
"""

from __future__ import annotations

from collections.abc import Sequence

from ptxcore.schema import ItemKind, RetrievedItem

from .index import Hit
from .models import InstructionNote, NoteRecord

NOTES_HEADING = "## Repair notes from similar earlier wrong kernels"
FIXED_HEADING = "## Verified fixes and repair notes from similar earlier wrong kernels"
FIXED_INTRO = ("Each block shows a kernel that was wrong in a similar way and a verified correct fix of it; "
               "use them as examples of the instruction contracts, not as a template to copy blindly.")


def _field(lines: list[str], label: str, value: str | list[str]) -> None:
    if isinstance(value, list):
        if value:
            lines.append(f"   {label}:")
            lines.extend(f"     - {v}" for v in value if v)
    elif value:
        lines.append(f"   {label}: {value}")


def note_lines(note: InstructionNote, number: int) -> list[str]:
    """One note as numbered Markdown lines."""
    lines = [f"{number}. {note.instruction}"]
    _field(lines, "Shape/context", note.shape_context)
    _field(lines, "Operand contract", note.operand_contract)
    _field(lines, "Required sequence", note.required_sequence)
    _field(lines, "Diagnostics", note.diagnostics)
    _field(lines, "Do not", note.do_not_do)
    for label, code in (("Correct example", note.correct_example), ("Wrong example", note.wrong_example)):
        if code:
            lines += [f"   {label}:", "```cpp", code, "```"]
    return lines


class _Budget:
    """Notes already shown (by key) and how many more may be."""

    def __init__(self, max_notes: int) -> None:
        self.left, self.seen, self.items = max_notes, set[str](), list[RetrievedItem]()

    def take(self, record: NoteRecord, hit: Hit) -> list[InstructionNote]:
        out = []
        for note in record.instruction_notes:
            if self.left == 0:
                break
            if note.key in self.seen:
                continue
            self.seen.add(note.key)
            self.left -= 1
            out.append(note)
            self.items.append(RetrievedItem(kind=ItemKind.NOTE, ref=note.key, rank=hit.rank, problem=record.problem,
                                            pair_id=record.pair_id))
        return out


def _group_header(hit: Hit, what: str) -> tuple[str, RetrievedItem]:
    g = hit.group
    head = (f"### Similar wrong kernel {hit.rank}: bm25 {hit.score:.3f}, problem {g.problem}, "
            f"{len(g.records)} verified fix{'es' if len(g.records) != 1 else ''}{what}")
    return head, RetrievedItem(kind=ItemKind.GROUP, ref=g.wrong_sha256, rank=hit.rank, score=hit.score,
                               problem=g.problem)


def render_notes(hits: Sequence[Hit], max_notes: int) -> tuple[str, list[RetrievedItem]]:
    """Notes mode: (text, items); empty text when no note was left to show."""
    budget, lines, items = _Budget(max_notes), [NOTES_HEADING, ""], []
    for hit in hits:
        if budget.left == 0:
            break
        head, group_item = _group_header(hit, "")
        first, block = len(budget.items), [head]
        for record in hit.group.records:
            start = len(budget.items)
            notes = budget.take(record, hit)
            if notes:
                block += [f"Summary: {record.summary}"] if record.summary else []
                block += [line for i, n in enumerate(notes) for line in note_lines(n, start + i + 1)]
        if len(budget.items) > first:  # a group whose notes were all shown already adds nothing
            items += [group_item, *budget.items[first:]]
            lines += [*block, ""]
    if not items:
        return "", []
    return "\n".join(lines).rstrip(), items


def render_fixed(hits: Sequence[Hit], max_notes: int) -> tuple[str, list[RetrievedItem]]:
    """Notes+fixed mode (ORACLE): (text, items); each group shows its best verified fix in full."""
    budget, lines, items = _Budget(max_notes), [FIXED_HEADING, "", FIXED_INTRO, ""], []
    for hit in hits:
        best = hit.group.best_fixed
        speed = "unmeasured" if best.fixed_speedup is None else f"{best.fixed_speedup:.3f}x"
        head, item = _group_header(hit, f"; best fix speedup {speed}")
        items.append(item)
        items.append(RetrievedItem(kind=ItemKind.FIXED_KERNEL, ref=best.fixed_sha256, rank=hit.rank,
                                   problem=best.problem, pair_id=best.pair_id))
        lines += [head] + ([f"Summary: {best.summary}"] if best.summary else [])
        lines += ["Verified fixed kernel:", "```cpp", best.fixed_kernel.rstrip(), "```"]
        first = len(budget.items)
        notes = budget.take(best, hit)
        lines += [line for i, n in enumerate(notes) for line in note_lines(n, first + i + 1)] + [""]
        items += budget.items[first:]
    if not hits:
        return "", []
    return "\n".join(lines).rstrip(), items

