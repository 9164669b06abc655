"""Table 10: SFT recipes with their record counts and drop reasons, read from the data engine's manifests.

Input (documented here so this table does not depend on the data engine's internals): one manifest JSON
file per built recipe. Only these fields are read; every other field is ignored.

```json
{
  "recipe": "s3",                      # recipe id (required)
  "rows": 406,                         # rows written to the Parquet (required, >= 0)
  "dropped": [                         # rows left out, each with its reason (default: none)
    {"id": "…", "reason": "over token budget"},
    {"reason": "no closed code fence", "count": 3}
  ],
  "kind": "fixit",                     # optional: fixit | kernelgen (or any label)
  "scope": "8ops-Extended",            # optional: problem scope label
  "synthesizer": "GLM-5.2",            # optional: reasoning synthesizer
  "balance": "post",                   # optional: pre | post | none
  "tokenizer": {"name": "…", "fallback": false},   # optional: what counted the token budget
  "reproduces": "Table 10 s4 …",       # optional: the paper configuration the recipe reproduces
  "our_inference": ["…"]               # optional: rules of the recipe that are our inference
}
```
A drop entry may name `counted_by` (the counter that decided an over-budget drop); Table 10 shows it.
`dropped` may also be an object {reason: count}. The data engine's own manifests
(`<build>.parquet.manifest.json`, written by ptxcore.adapt.export) are read as they are: there `rows` is
`counts.rows`, the kind is `template`, the scope `config_label`, the balance `selection.balance`, and a
`synthesizer` object contributes its `label` (else its `model`). Manifests are untrusted files:
size-limited, parsed as JSON, validated; every problem is one line naming the file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ptxcore.schema.files import InputFileError, read_text

from .tables import NO_TURN, Table

MAX_MANIFEST_BYTES = 64 * 1024 * 1024
"""Largest manifest read."""

PAPER_RECIPE_ROWS: dict[str, int] = {"s0": 494, "s1": 158, "s2": 259, "s3": 406, "s4": 170, "s5": 258, "s6": 258}
"""Rows per recipe in the paper's Table 10 (s0 8ops-Extended KernelGen GLM; s1 4ops Fixit GLM; s2 4ops-Extended
Fixit GLM; s3 8ops-Extended Fixit GLM; s4 8ops-Post-balanced Fixit GLM; s5 8ops-Pre-balanced Fixit GLM;
s6 8ops-Pre-balanced Fixit Qwen)."""


class ManifestError(ValueError):
    """A manifest that cannot be read (one line naming the file)."""


def _drops(v: object) -> object:
    if isinstance(v, dict):
        return [{"reason": str(k), "count": c} for k, c in v.items()]
    return v


class DropEntry(BaseModel):
    """Rows dropped for one reason."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    reason: str = Field(min_length=1, max_length=500)
    """Why (one line)."""
    count: int = Field(default=1, ge=1)
    """How many rows this entry stands for."""
    id: str = ""
    """The dropped row's id, when the entry is one row."""
    counted_by: str = Field(default="", max_length=500)
    """For a budget drop: the counter (vocabulary + template) that decided it."""


class RecipeManifest(BaseModel):
    """What Table 10 reads of a recipe's manifest."""

    model_config = ConfigDict(frozen=True, extra="ignore", use_attribute_docstrings=True)

    recipe: str = Field(min_length=1, max_length=200)
    """Recipe id (s0 ... s6 for the paper's)."""
    rows: int = Field(ge=0)
    """Rows written."""
    dropped: Annotated[list[DropEntry], BeforeValidator(_drops)] = Field(default_factory=list)
    """Rows left out, with reasons."""
    kind: str = ""
    """Data kind (fixit / kernelgen)."""
    scope: str = ""
    """Problem-scope label."""
    synthesizer: str = ""
    """Reasoning synthesizer."""
    balance: str = ""
    """Balancing point."""
    tokenizer: str = Field(default="", max_length=500)
    """What counted the token budget."""
    tokenizer_fallback: bool = False
    """The budget was counted with the fallback estimate (tiktoken), not the model's vocabulary."""
    reproduces: str = Field(default="", max_length=1000)
    """The paper configuration the recipe reproduces."""
    our_inference: list[Annotated[str, Field(max_length=500)]] = Field(default_factory=list, max_length=32)
    """Rules of the recipe that are our inference."""

    @model_validator(mode="before")
    @classmethod
    def _engine_layout(cls, data: Any) -> Any:
        """Map the data engine's manifest layout onto these fields (explicit fields win)."""
        if not isinstance(data, dict):
            return data
        out = dict(data)
        counts, selection, synth = data.get("counts"), data.get("selection"), data.get("synthesizer")
        if "rows" not in out and isinstance(counts, dict) and "rows" in counts:
            out["rows"] = counts["rows"]
        out.setdefault("kind", data.get("template", ""))
        out.setdefault("scope", data.get("config_label", ""))
        if "balance" not in out and isinstance(selection, dict):
            out["balance"] = selection.get("balance") or ""
        tok = data.get("tokenizer")
        if isinstance(tok, dict):
            out["tokenizer"], out["tokenizer_fallback"] = str(tok.get("name") or ""), bool(tok.get("fallback"))
        if isinstance(synth, dict):
            model = synth.get("model")
            out["synthesizer"] = synth.get("label") or (model.get("label") or model.get("model")
                                                        if isinstance(model, dict) else model) or ""
        return out

    def drop_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for d in self.dropped:
            counts[f"{d.reason} [{d.counted_by}]" if d.counted_by else d.reason] += d.count
        return counts


def load_manifest(path: str | Path) -> RecipeManifest:
    """One manifest file, validated."""
    path = Path(path)
    if not path.exists():
        raise ManifestError(f"no such manifest: {path}")
    try:
        data: Any = json.loads(read_text(path, MAX_MANIFEST_BYTES))
    except InputFileError as exc:
        raise ManifestError(str(exc)) from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    except ValueError:  # a number of more than 4300 digits
        raise ManifestError(f"{path}: invalid JSON: a number too long to convert") from None
    try:
        return RecipeManifest.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ManifestError(f"{path}: {key}: {first['msg']}") from None


def recipe_table(manifests: Sequence[RecipeManifest]) -> Table:
    """Table 10: one row per recipe (sorted by id); drop reasons most frequent first."""
    seen: dict[str, RecipeManifest] = {}
    for m in manifests:
        if m.recipe in seen:
            raise ManifestError(f"two manifests for recipe {m.recipe}")
        seen[m.recipe] = m
    rows = []
    for recipe in sorted(seen):
        m = seen[recipe]
        drops = m.drop_counts()
        reasons = "; ".join(f"{r}: {n}" for r, n in sorted(drops.items(), key=lambda kv: (-kv[1], kv[0])))
        paper = PAPER_RECIPE_ROWS.get(recipe)
        counter = (m.tokenizer + (" (fallback estimate)" if m.tokenizer_fallback else "")) or NO_TURN
        inferred = f"{len(m.our_inference)} (see notes)" if m.our_inference else NO_TURN
        rows.append([recipe, m.kind or NO_TURN, m.scope or NO_TURN, m.synthesizer or NO_TURN, m.balance or NO_TURN, str(m.rows),
                     str(paper) if paper is not None else NO_TURN, str(sum(drops.values())), reasons or NO_TURN,
                     counter, inferred])
    return Table(title="Table 10: SFT recipes, rows written and rows dropped (with reasons)",
                 header=["recipe", "data", "scope", "synthesizer", "balance", "rows", "paper rows", "dropped",
                         "drop reasons", "token counter", "our inference"], rows=rows, key="table10")


def inference_notes(manifests: Sequence[RecipeManifest]) -> list[str]:
    """One note per recipe: what it reproduces and which of its rules are our inference."""
    out = []
    for m in sorted(manifests, key=lambda m: m.recipe):
        parts = [f"reproduces {m.reproduces}"] if m.reproduces else []
        parts += [f"our inference: {rule}" for rule in m.our_inference]
        if parts:
            out.append(f"{m.recipe}: " + "; ".join(parts) + ".")
    return out
