"""Mirror folders: a folder whose files are copies of another folder's, edited alike in the
same changes (a build script's output checked in beside its source: zod's deno/lib/ of src/,
a versioned copy of docs). Its hunks repeat the source's, or catch the copy up with it in a
"rebuild" commit; a curator keeps the source and drops the copy.

Found over the filter stage's whole input, before its batches (a `mirror` rule's context):

1. Pairs of files with the same name edited in one change (at most MAX_COPIES of them: a name
   edited in more folders at once is a mass edit, not a copy). Their folders are what is left
   of each path once the longest run of trailing path parts they share is taken off
   (src/types.ts and deno/lib/types.ts: src and deno/lib).
2. How alike the two files' edits in that change are: the Jaccard of their sets of changed
   lines (removed and added, stripped), alike at ALIKE or more.
3. A folder is a mirror of a source folder when, over the repository's history, they were
   edited together in min_changes changes or more, that is min_share percent or more of the
   changes that edit the folder, min_alike percent or more of those file pairs were alike,
   across min_files different files or more. The repository root is never a mirror. Of two
   folders that mirror each other, the copy is the one first edited later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

MAX_COPIES = 4  # files of one name edited in one change, at most, to pair them
ALIKE = 0.5  # line-set Jaccard from which two files' edits in a change are alike
_KEY = ["repo", "change"]
# what find reads of the items
FIND_COLUMNS = (
    "repo",
    "change",
    "path",
    "created_at",
    "before",
    "after",
)


@dataclass(frozen=True, order=True)  # ordered: by repo, then folder (unique per repo)
class Mirror:
    repo: str
    folder: str  # the copy, without a trailing slash
    source: str  # the folder it copies ("" for the repository root)
    together: int  # changes that edit both
    changes: int  # changes that edit the folder
    alike: float  # share of the file pairs edited in those changes whose edits were alike
    files: int  # different files seen alike

    def reason(self) -> str:
        source = f"{self.source}/" if self.source else "the repository root"
        return (
            f"{self.folder}/ mirrors {source}: {self.together} of the {self.changes} changes "
            f"that edit it edit the same files there, {round(100 * self.alike)}% of them alike"
        )


def _folders(p: str, q: str) -> tuple[str, str, str]:
    """(folder of p, folder of q, the tail they share) for two paths with one file name."""
    a, b = p.split("/"), q.split("/")
    k = 0
    while k < min(len(a), len(b)) and a[-1 - k] == b[-1 - k]:
        k += 1
    return "/".join(a[: len(a) - k]), "/".join(b[: len(b) - k]), "/".join(a[len(a) - k :])


def _pairs(files: pl.DataFrame) -> pl.DataFrame:
    """Same-named files edited in one change: (repo, change, path, path_src, folder, source,
    tail), both ways round."""
    named = files.with_columns(name=pl.col("path").str.extract(r"([^/]+)$"))
    groups = (
        named.group_by([*_KEY, "name"])
        .agg("path")
        .filter(pl.col("path").list.len().is_between(2, MAX_COPIES))
        .explode("path")
    )
    pairs = groups.join(groups, on=[*_KEY, "name"], suffix="_src").filter(
        pl.col("path") != pl.col("path_src")
    )
    split = {(p, q): _folders(p, q) for p, q in pairs.select("path", "path_src").unique().rows()}
    where = pl.DataFrame(
        [(p, q, *f) for (p, q), f in split.items()],
        schema={c: pl.String for c in ("path", "path_src", "folder", "source", "tail")},
        orient="row",
    )
    return pairs.join(where, on=["path", "path_src"]).drop("name")


def _lines(items: pl.LazyFrame, keys: pl.DataFrame) -> pl.DataFrame:
    """The changed lines of each (repo, change, path) in keys: "-" + removed, "+" + added,
    stripped, without blanks."""
    e = pl.element()

    def side(col: str, mark: str) -> pl.Expr:
        lines = pl.col(col).fill_null("").str.split("\n").list.eval(e.str.strip_chars())
        return lines.list.eval(mark + e.filter(e != ""))

    got = (
        items.join(keys.lazy(), on=[*_KEY, "path"], how="semi")
        .select(*_KEY, "path", side("before", "-").list.concat(side("after", "+")).alias("line"))
        .collect()
    )
    return got.explode("line").drop_nulls("line").unique()


def _alike(pairs: pl.DataFrame, lines: pl.DataFrame) -> pl.DataFrame:
    """pairs + `alike`: the two files' changed-line sets meet the ALIKE Jaccard."""
    size = lines.group_by([*_KEY, "path"]).len("n")
    shared = (
        pairs.select(*_KEY, "path", "path_src")
        .join(lines, on=[*_KEY, "path"])
        .join(lines.rename({"path": "path_src"}), on=[*_KEY, "path_src", "line"])
        .group_by([*_KEY, "path", "path_src"])
        .len("shared")
    )
    out = (
        pairs.join(size, on=[*_KEY, "path"], how="left")
        .join(size.rename({"path": "path_src", "n": "n_src"}), on=[*_KEY, "path_src"], how="left")
        .join(shared, on=[*_KEY, "path", "path_src"], how="left")
        .with_columns(pl.col("n", "n_src", "shared").fill_null(0))
    )
    union = pl.col("n") + pl.col("n_src") - pl.col("shared")
    return out.with_columns(alike=(union > 0) & (pl.col("shared") >= ALIKE * union))


def _under(files: pl.DataFrame, folders: list[tuple[str, str]]) -> dict[tuple[str, str], Any]:
    """(repo, folder) -> (the number of changes that edit a file under it, the first time one
    did: None where unknown)."""
    out = {}
    repos = {r for r, _ in folders}
    by_repo = files.filter(pl.col("repo").is_in(list(repos))).partition_by("repo", as_dict=True)
    for repo, folder in folders:
        under = by_repo[(repo,)].filter(pl.col("path").str.starts_with(folder + "/"))
        out[(repo, folder)] = (under["change"].n_unique(), under["created_at"].min())
    return out


def find_mirrors(items: pl.LazyFrame, params: dict[str, Any]) -> tuple[Mirror, ...]:
    """Every mirror folder of `items` (repo, change, path, before, after) under a mirror rule's
    thresholds (min_changes, min_files, min_share, min_alike), sorted by repo and folder."""
    files = (
        items.select(*_KEY, "path", "created_at")
        .drop_nulls([*_KEY, "path"])
        .filter((pl.col("path") != "") & (pl.col("repo") != ""))
        .group_by(*_KEY, "path")
        .agg(pl.col("created_at").min())
        .collect()
    )
    pairs = _pairs(files).filter(pl.col("folder") != "")  # the root is never a copy
    together = pairs.group_by("repo", "folder", "source").agg(pl.col("change").n_unique())
    big = together.filter(pl.col("change") >= params["min_changes"])
    if big.is_empty():
        return ()
    pairs = pairs.join(big.select("repo", "folder", "source"), on=["repo", "folder", "source"])
    keys = pairs.select(*_KEY, "path").vstack(pairs.select(*_KEY, pl.col("path_src").alias("path")))
    pairs = _alike(pairs, _lines(items, keys.unique()))
    stats = pairs.group_by("repo", "folder", "source").agg(
        together=pl.col("change").n_unique(),
        alike=pl.col("alike").mean(),
        files=pl.col("tail").filter(pl.col("alike")).n_unique(),
    )
    sides = stats.select("repo", "folder").vstack(
        stats.select("repo", pl.col("source").alias("folder"))
    )
    under = _under(files, sorted(set(sides.rows())))
    changes = {k: n for k, (n, _) in under.items()}
    found = [
        Mirror(repo, folder, source, together, changes[(repo, folder)], alike, n_files)
        for repo, folder, source, together, alike, n_files in stats.rows()
        if together >= params["min_changes"]
        and n_files >= params["min_files"]
        and 100 * alike >= params["min_alike"]
        and 100 * together >= params["min_share"] * changes[(repo, folder)]
    ]
    by_pair = {(m.repo, m.folder, m.source): m for m in found}

    def copy_side(m: Mirror) -> bool:
        """Of two folders that mirror each other, the copy: the one first edited later (a copy
        is made from its source), else the one whose changes more often edit the other, else
        the deeper one."""
        other = by_pair.get((m.repo, m.source, m.folder))
        if other is None:
            return True
        first, first_src = under[(m.repo, m.folder)][1], under[(m.repo, m.source)][1]
        if first is not None and first_src is not None and first != first_src:
            return bool(first > first_src)
        mine, theirs = m.together / m.changes, other.together / other.changes
        if mine != theirs:
            return mine > theirs
        return (m.folder.count("/"), m.folder) > (other.folder.count("/"), other.folder)

    best: dict[tuple[str, str], Mirror] = {}  # a folder copying two: the one it follows most
    for m in sorted((m for m in found if copy_side(m)), key=lambda m: (-m.together, m.source)):
        best.setdefault((m.repo, m.folder), m)
    return tuple(best[k] for k in sorted(best))
