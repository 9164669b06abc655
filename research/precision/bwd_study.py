"""CPU study: how often the causal attention backward breaks PTXBench's rule under each dS rounding.

    python -m research.precision.bwd_study [--heads 8192] [--seq 64] [--rows 64] [--full-heads 4]

Many random causal heads of a short length `seq`: the first rows of a causal head see the same keys
at any length (dQ row i depends on keys 0..i only), so dQ rows [0, seq) are exactly those of the
S = 4096 workload; dK rows additionally collect queries past `seq`, whose dS entries are small.
Each variant is compared with two references: bf16(float64) (an exact reference) and bf16_scaled
(a reference that rounds dS once itself, independently). Counts are scaled to one judgement
(3 trials x 4 x 48 heads). The kernels' own kDsSplitMin is the threshold of the adaptive variants.
Then a few full-length heads give the share of tiles that issue the lo product.
"""

from __future__ import annotations

import argparse

import torch

from research.kernel_models.kernel_source import kernel_constants, solution_path

from .bwd_model import (
    COLS,
    Variant,
    bf16,
    exact_first_rows,
    first_rows,
    kernel_ds,
    make_heads,
    product,
    rule_mismatch,
    tile_flags,
)

JUDGED_HEADS = 3 * 4 * 48  # heads of one judgement: 3 trials x B x H
REFERENCES = ("exact", "bf16_scaled")


def kernel_variants() -> dict[str, Variant]:
    """The old scheme and the new one as each kernel file applies it (its kDsSplitMin, its tile)."""
    fa2 = kernel_constants(solution_path("mha_bwd_d128_causal", "fa2_mma.cu"))
    wg = kernel_constants(solution_path("mha_bwd_d128_causal", "wgmma_tma_ws.cu"))
    return {
        "old: bf16(dS)": Variant("bf16"),
        "new: hi/lo always": Variant("hilo"),
        "new: fa2_mma.cu": Variant("hilo", 16, fa2["kDsSplitMin"]),
        "new: wgmma_tma_ws.cu": Variant("hilo", wg["SMALL"], wg["kDsSplitMin"]),
    }


def first_rows_study(variants: dict[str, Variant], n_heads: int, seq: int, rows: int, seed: int = 1) -> dict:
    """Rule mismatches of each variant against each reference over dQ and dK rows [0, rows), the rows
    of the mismatches (vs exact), and |computed - float64| before the output rounding."""
    gen = torch.Generator().manual_seed(seed)
    counts = {(v, r): 0 for v in variants for r in REFERENCES}
    bad_rows: dict[str, set[int]] = {v: set() for v in variants}
    errors: dict[str, list[torch.Tensor]] = {v: [] for v in variants}
    batch = 32
    for _ in range(n_heads // batch):
        h = make_heads(batch, seq, gen)
        exact = exact_first_rows(h, rows)
        refs = {
            "exact": [bf16(e.float()) for e in exact],
            "bf16_scaled": first_rows(h, rows, Variant("bf16_scaled")),
        }
        for name, v in variants.items():
            raw = first_rows(h, rows, v, out_bf16=False)
            errors[name].append(
                torch.stack([(r.double() - e).abs().float() for r, e in zip(raw, exact, strict=True)])
            )
            for ref_name, ref in refs.items():
                for got, want in zip(raw, ref, strict=True):
                    bad = rule_mismatch(bf16(got), want)
                    counts[(name, ref_name)] += int(bad.sum())
                    if ref_name == "exact":
                        bad_rows[name].update(bad.nonzero()[:, 1].tolist())
    return {
        "heads": n_heads - n_heads % batch,
        "counts": counts,
        "bad_rows": bad_rows,
        "errors": {v: torch.cat(e, 1) for v, e in errors.items()},  # [dQ / dK, head, row, column]
    }


def full_length_study(v: Variant, n_heads: int, seq: int, seed: int = 2) -> dict:
    """Full-length heads: share of live tiles that issue the lo product, and the largest change that the
    skipped lo products make to any dQ / dK element (fp32, before output rounding) against always."""
    gen = torch.Generator().manual_seed(seed)
    triggered, tiles, worst = 0, 0, 0.0
    always = Variant("hilo")
    for _ in range(n_heads):
        h = make_heads(1, seq, gen)
        ds = kernel_ds(h)
        for a, b in ((ds, h.K), (ds.transpose(1, 2).contiguous(), h.Q)):
            shape = (1, seq // v.tile_rows, v.tile_rows, seq // COLS, COLS)
            live = a.abs().reshape(shape).amax((2, 4)) > 0
            flags = tile_flags(a, v.tile_rows, v.tau)[:, :: v.tile_rows, ::COLS]
            triggered += int((flags & live).sum())
            tiles += int(live.sum())
            worst = max(worst, float((product(a, b, v, False) - product(a, b, always, False)).abs().max()))
    return {"tiles": tiles, "triggered": triggered, "worst_skip_error": worst}


def quantiles(x: torch.Tensor) -> str:
    x = x.flatten()
    sample = x[torch.randperm(x.numel(), generator=torch.Generator().manual_seed(0))[: 1 << 24]]
    q = torch.quantile(sample, torch.tensor([0.5, 0.99, 0.9999]))
    over = int((x > 5e-3).sum())
    return f"median {q[0]:.1e}  p99 {q[1]:.1e}  p99.99 {q[2]:.1e}  max {x.max():.1e}  > 5e-3: {over}"


def report(res: dict, variants: dict[str, Variant], seq: int, rows: int) -> None:
    n = res["heads"]
    print(f"{n} causal heads, S = {seq}; dQ and dK rows 0..{rows - 1}: {n * rows * 128 * 2} elements")
    for name in variants:
        print(f"  {name}  {variants[name]}")
        err = res["errors"][name]
        print(f"    |computed - float64| before output rounding, rows 0..15: {quantiles(err[:, :, :16])}")
        print(f"    |computed - float64| before output rounding, all rows:   {quantiles(err)}")
        for ref in REFERENCES:
            c = res["counts"][(name, ref)]
            print(
                f"    rule mismatches vs {ref:11s}: {c:5d} = {c / n:.5f} per head = "
                f"{c / n * JUDGED_HEADS:6.2f} per judgement ({JUDGED_HEADS} heads)"
            )
        if res["bad_rows"][name]:
            print(f"    rows of the mismatches vs exact: {sorted(res['bad_rows'][name])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", type=int, default=8192)
    ap.add_argument("--seq", type=int, default=64, help="causal length of the many-heads study")
    ap.add_argument("--rows", type=int, default=64, help="first rows of dQ / dK counted (multiple of 64)")
    ap.add_argument("--full-heads", type=int, default=4, help="S = 4096 heads for the tile study (0: skip)")
    args = ap.parse_args(argv)
    variants = kernel_variants()
    report(first_rows_study(variants, args.heads, args.seq, args.rows), variants, args.seq, args.rows)
    for name in ("new: fa2_mma.cu", "new: wgmma_tma_ws.cu"):
        if args.full_heads:
            v = variants[name]
            st = full_length_study(v, args.full_heads, 4096)
            print(
                f"S = 4096, {args.full_heads} heads, {name} ({v.tile_rows} x 64 tiles, tau = {v.tau:g}): lo "
                f"product on {st['triggered']} of {st['tiles']} live tiles ({st['triggered'] / st['tiles']:.2%}); "
                f"largest effect of the skipped lo products on any element: {st['worst_skip_error']:.2e}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
