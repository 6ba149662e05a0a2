"""--probe-batch K: would any items blow up if batched together? Probe where that is likely.

Training runs micro-batch 1 by default, so it never puts two items in one forward pass; the
probe asks the question instead, over every curated item of all splits. Items that are likely
to interact share a K-item block: members of one shape group (scopes change, repo, corpus,
edit), of one dedup component, of near-identical token length; every item not yet in a block
then goes into seeded random blocks, so each item is run at least once. A group larger than K
is cut into K-item chunks (pairs across chunks are not covered); a group or chunk whose pairs
all already shared a block is skipped. Each block is one forward+backward with no
optimiser step; a non-finite block is shrunk by ddmin (bisect.py) and its set re-run in the
seed's table. A later block that holds a set already found leaves one of its members out.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from pipeline.config import SHAPE_SCOPES
from pipeline.train.bisect import Passes, split_failing, table
from pipeline.train.data import Example

LENGTH_TOLERANCE = 0.01  # items within 1% (at least 1 token) of a run's shortest: one group


@dataclass
class Block:
    tier: str  # the grouping that put these items together
    items: list[Example]


def suspicion_groups(run_dir: Path, items: pl.DataFrame) -> list[tuple[str, dict[str, int]]]:
    """(tier, id -> group key) for the shape scopes and dedup components, from the run folder:
    shapes/shapes.parquet (else the items' shape_group_<scope> columns), dedup/clusters.parquet.
    Groups of one are left out."""
    ids = set(items["id"].to_list())
    out: list[tuple[str, dict[str, int]]] = []
    shapes = run_dir / "shapes" / "shapes.parquet"
    sh = pl.read_parquet(shapes) if shapes.exists() else None
    for scope in SHAPE_SCOPES:
        if sh is not None:
            rows = sh.filter((pl.col("scope") == scope) & (pl.col("group_size") > 1))
            pairs = rows.select("id", "group_id").iter_rows()
        elif f"shape_group_{scope}" in items.columns:
            pairs = items.select("id", f"shape_group_{scope}").drop_nulls().iter_rows()
        else:
            continue
        out.append((f"shape group ({scope})", _multi({i: int(g) for i, g in pairs if i in ids})))
    clusters = run_dir / "dedup" / "clusters.parquet"
    if clusters.exists():
        c = pl.read_parquet(clusters, columns=["id", "component_id"])
        comp = {i: int(g) for i, g in c.iter_rows() if i in ids}
        out.append(("dedup component", _multi(comp)))
    return out


def _multi(key_of: dict[str, int]) -> dict[str, int]:
    """Only the ids whose group has two or more of them."""
    n: dict[int, int] = {}
    for g in key_of.values():
        n[g] = n.get(g, 0) + 1
    return {i: g for i, g in key_of.items() if n[g] > 1}


def length_groups(examples: list[Example]) -> dict[str, int]:
    """Runs of near-identical token length (within LENGTH_TOLERANCE of the run's first)."""
    order = sorted(examples, key=lambda e: (len(e.input_ids), e.id))
    key_of: dict[str, int] = {}
    g = start = -1
    for e in order:
        n = len(e.input_ids)
        if g < 0 or n - start > max(1, round(LENGTH_TOLERANCE * start)):
            g, start = g + 1, n
        key_of[e.id] = g
    return _multi(key_of)


def _pack(units: list[list[Example]], k: int) -> list[list[Example]]:
    """First-fit decreasing: whole units into as few K-item bins as fit them."""
    bins: list[list[Example]] = []
    for u in sorted(units, key=len, reverse=True):
        home = next((b for b in bins if len(b) + len(u) <= k), None)
        if home is None:
            bins.append(list(u))
        else:
            home.extend(u)
    return bins


def blocks(
    examples: list[Example], k: int, groups: list[tuple[str, dict[str, int]]], seed: int
) -> list[Block]:
    """The probe's blocks, most suspicious grouping first (see the module docstring)."""
    covered: set[tuple[str, str]] = set()
    placed: set[str] = set()
    out: list[Block] = []
    tiers = [*groups, ("near-identical length", length_groups(examples))]
    for tier, key_of in tiers:
        members: dict[int, list[Example]] = {}
        for e in examples:
            if e.id in key_of:
                members.setdefault(key_of[e.id], []).append(e)
        units: list[list[Example]] = []
        for g in sorted(members):
            m = sorted(members[g], key=lambda e: e.id)
            chunks = [m[i : i + k] for i in range(0, len(m), k)]  # a group over K: chunks
            units.extend(c for c in chunks if not all(p in covered for p in _pairs(c)))
        for b in _pack([u for u in units if len(u) > 1], k):
            out.append(Block(tier, b))
            covered.update(_pairs(b))
            placed.update(e.id for e in b)
    rest = sorted((e for e in examples if e.id not in placed), key=lambda e: e.id)
    random.Random(seed).shuffle(rest)
    out.extend(Block("seeded random", rest[i : i + k]) for i in range(0, len(rest), k))
    return out


def _pairs(items: list[Example]) -> list[tuple[str, str]]:
    return [
        (a, b) if a < b else (b, a) for a, b in itertools.combinations([e.id for e in items], 2)
    ]


def probe(
    run: Passes,
    examples: list[Example],
    k: int,
    groups: list[tuple[str, dict[str, int]]],
    seed: int,
    repeats: int = 5,
    known: list[list[str]] | None = None,
    on_blocks: Callable[[int], Callable[[], None]] | None = None,
) -> dict[str, Any]:
    """Run every block; for each non-finite one, the minimal sets, which grouping found them,
    and their tables. `known`: sets already found (in the training windows). `on_blocks(n)`,
    once the n blocks are formed, gives what to call after each block."""
    found: list[list[str]] = [list(s) for s in known or []]
    bs = blocks(examples, k, groups, seed)
    after_block = on_blocks(len(bs)) if on_blocks else None
    culprits: list[dict[str, Any]] = []
    bad_blocks: list[dict[str, Any]] = []
    passed: list[Example] = []
    for i, b in enumerate(bs):
        items = b.items
        for s in found:  # a set already found would only be found again: leave one member out
            if set(s) <= {e.id for e in items}:
                items = [e for e in items if e.id != s[-1]]
        if not items:
            pass
        elif run.fails("screen")(items):
            bad_blocks.append({"block": i, "tier": b.tier, "ids": [e.id for e in items]})
            for members in split_failing(items, run):
                found.append([e.id for e in members])
                culprits.append({"block": i, "found_by": b.tier, "members": members})
        else:
            passed.extend(items)
        if after_block:
            after_block()
    in_sets = {i for s in found for i in s}
    unrelated = next((e for e in passed if e.id not in in_sets), None)
    for c in culprits:
        c["ids"] = [e.id for e in c["members"]]
        c["table"] = table(c.pop("members"), run, unrelated, repeats)
    tiers: dict[str, int] = {}
    for b in bs:
        tiers[b.tier] = tiers.get(b.tier, 0) + 1
    return {
        "k": k,
        "items": len(examples),
        "blocks": len(bs),
        "blocks_by_grouping": tiers,
        "non_finite_blocks": bad_blocks,
        "culprits": culprits,
        "unrelated": unrelated.id if unrelated else None,
    }
