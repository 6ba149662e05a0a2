"""The Stage 1 recommendation: which shape policy and cap to train with, and why.

The rule: the smallest intervention that leaves no batch (one optimizer step) holding two
items of one shape group, and that keeps apart every non-finite set smoke-train found. From
smallest to largest: no shape dedup (nothing changes), spread (every item kept, only the order
changes), then cap k = 4, 2, 1 (items dropped: each group keeps its k lowest ids). The figures
are the sampling section's (the same seeded order, the same batch), so the recommendation can be
checked against the table above it; the command to apply it is given as `--set` lines.

A non-finite set is kept apart by a policy when the policy cannot put all of its items in one
batch: cap k drops one of them, or spread separates them because they share one shape group.
A set that no shape policy keeps apart (items of different groups, or one item alone) is named
with its ids: it is the data, not the batching.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from pipeline.report.sampling import CAPS, Shapes

NO_CHANGE = "no shape dedup"
SPREAD = "spread"


CAP = "cap k="  # the sampling table's name of a cap: "cap k=2"


def _cap(k: int) -> str:
    return f"{CAP}{k}"


def _cap_k(policy: str) -> int | None:
    """k of a cap policy's name; None for any other policy."""
    return int(policy.removeprefix(CAP)) if policy.startswith(CAP) else None


def _settings(policy: str, scope: str, window: int) -> list[str]:
    if policy == NO_CHANGE:  # annotate: the groups are columns, every item kept in order
        return ["shapes.policy=annotate"]
    if policy == SPREAD:
        return ["shapes.policy=spread", f"shapes.scope={scope}", f"shapes.window={window}"]
    k = _cap_k(policy)
    return [
        "shapes.policy=cap",
        f"shapes.scope={scope}",
        f"shapes.cap_other={k}",
        f"shapes.cap_digit_only={k}",
    ]


def _kept_apart(policy: str, ids: list[str], group: dict[str, str], rank: dict[str, int]) -> bool:
    """Whether `policy` can never batch every item of the non-finite set `ids` together."""
    k = _cap_k(policy)
    if k is not None:  # a cap drops one of them
        return any(rank.get(i, 0) >= k for i in ids)
    # spread parts the items of one group; one item alone fails in any batch
    return policy == SPREAD and len(ids) > 1 and len({group.get(i, i) for i in ids}) == 1


def _groups_of(ids: set[str], s: pl.LazyFrame) -> tuple[dict[str, str], dict[str, int]]:
    """({id: group}, {id: its rank in its group by id}) of `ids` (the non-finite sets'), from
    `s` (id, group_id as text): only their groups are read and ranked, not the corpus."""
    if not ids:
        return {}, {}
    mine = s.filter(pl.col("id").is_in(list(ids))).select("group_id").unique().collect()
    members = s.filter(pl.col("group_id").is_in(mine["group_id"].implode())).collect()
    members = members.unique("id").sort("id")
    members = members.with_columns(rank=pl.int_range(pl.len()).over("group_id"))
    members = members.filter(pl.col("id").is_in(list(ids)))
    group = dict(zip(members["id"].to_list(), members["group_id"].to_list(), strict=True))
    rank = dict(zip(members["id"].to_list(), members["rank"].to_list(), strict=True))
    return group, rank


def recommend(
    samp: dict[str, Any], shp: Shapes | None, smoke: dict[str, Any], window: int
) -> dict[str, Any]:
    """{present, policy, settings, reason, considered: [{policy, twins, items, share, verdict}],
    culprit_sets: [{ids, groups, kept_apart_by}], language_kept, repo_kept} or {present: False}."""
    if not samp.get("present") or shp is None:
        return {"present": False, "note": "shapes stage not run: no shape groups to judge"}
    scope = samp["scope"]
    # read where used: only the culprits' groups, and a count per group
    s = shp.lazy().filter(pl.col("scope") == scope)
    sets = [c["ids"] for c in smoke.get("culprits", []) if c.get("ids")] if smoke else []
    group, rank = _groups_of(
        {i for ids in sets for i in ids}, s.select("id", pl.col("group_id").cast(pl.String))
    )
    rows = {r["policy"]: r for r in samp["policies"]}
    total = rows[NO_CHANGE]["items"]
    windows = -(-total // window) if total else 0
    largest = s.group_by("group_id").len().select(pl.col("len").max()).collect().item() or 0

    ladder = [NO_CHANGE, SPREAD, *(_cap(k) for k in sorted(CAPS, reverse=True))]
    # the sets some policy can keep apart decide; the others are the data, named below
    must = [
        ids
        for ids in sets
        if len(ids) > 1 and any(_kept_apart(p, ids, group, rank) for p in ladder if p in rows)
    ]
    considered = []
    chosen: str | None = None
    for name in ladder:
        r = rows.get(name)
        if r is None:
            continue
        twins = r.get("batches_with_shape_twins")
        apart = all(_kept_apart(name, ids, group, rank) for ids in must)
        if name == SPREAD and twins is None:
            ok = largest <= windows and apart
            verdict = f"not run (largest group {largest} items, {windows} windows of {window}: " + (
                "it can be spread)" if largest <= windows else "it cannot be spread)"
            )
        else:
            ok = twins == 0 and apart
            verdict = (
                "no batch holds two items of one group"
                if twins == 0
                else f"{twins} batches hold two items of one group"
            )
            if twins == 0 and not apart:
                verdict += "; a non-finite set smoke-train found could still meet in a batch"
        considered.append(
            {
                "policy": name,
                "twins": twins,
                "items": r["items"],
                "share": r["share_of_corpus"],
                "verdict": verdict,
            }
        )
        if ok and chosen is None:
            chosen = name
    chosen = chosen or _cap(min(CAPS))
    row = rows[chosen]
    culprit_sets = [
        {
            "ids": ids,
            "groups": sorted({group.get(i, "(none)") for i in ids}),
            "kept_apart_by": [
                c["policy"] for c in considered if _kept_apart(c["policy"], ids, group, rank)
            ],
        }
        for ids in sets
    ]
    return {
        "present": True,
        "scope": scope,
        "batch": samp["batch"],
        "policy": chosen,
        # False: spread was judged feasible, not run; the shapes stage must run it to confirm
        "verified": next(c["twins"] for c in considered if c["policy"] == chosen) is not None,
        "settings": _settings(chosen, scope, window),
        "reason": _reason(chosen, considered, culprit_sets, row),
        "considered": considered,
        "culprit_sets": culprit_sets,
        "items": row["items"],
        "share": row["share_of_corpus"],
        "language_kept": row.get("language_kept", {}),
        "repo_kept": row.get("repo_kept", {}),
    }


def _reason(
    chosen: str, considered: list[dict[str, Any]], sets: list[dict[str, Any]], row: dict
) -> str:
    names = [c["policy"] for c in considered]
    shorter = [f"{c['policy']}: {c['verdict']}" for c in considered[: names.index(chosen)]]
    stuck = [s for s in sets if not s["kept_apart_by"]]
    apart = [s for s in sets if s["kept_apart_by"]]
    if chosen == NO_CHANGE:
        text = "No shape policy is needed: in the seeded order no batch holds two items of one"
        text += " shape group" + (
            ", and no non-finite set smoke-train found is one that batching brings together."
            if sets
            else "."
        )
    else:
        also = " and keeps apart the non-finite sets smoke-train found" if apart else ""
        text = (
            f"{chosen} is the smallest intervention that keeps every batch free of two items of "
            f"one shape group{also}; it keeps {row['items']} items ({row['share_of_corpus']}% "
            "of the corpus)."
        )
    if shorter:
        text += " Smaller steps fall short (" + "; ".join(shorter) + ")."
    if stuck:
        text += (
            f" {len(stuck)} non-finite set(s) from smoke-train cannot be kept apart by a shape "
            "policy (their items are in different groups, or one item fails alone): it is the "
            "data, not the batching; read each with editcurate why and drop it by a filter rule."
        )
    return text
