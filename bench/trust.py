"""Trust measures of a finished run, per corpus (`source`) and in total, read from its outputs.

The bench judges the pipeline, so it never calls the pipeline: every rule below is its own code
(no import from `pipeline`), and it reads only the Parquet files a run writes.

The six measures (n / of, and the share):

1. near: dedup/removed.parquet rows with kind == "near" whose removed side or added side differs
   from its keeper's: char 5-gram (set) Jaccard of `before` vs the keeper's `before` < 0.5, OR of
   `after` vs the keeper's `after` < 0.5, each side on its own (both sides empty: 1.0, one
   empty: 0.0, a side shorter than 5 characters is one gram). The keeper's text is its
   dedup/kept row (or its removed row, for a keeper that was itself removed later). Of: near
   removals.
2. leak: validation + test items whose change (repo, change; change != "") also has items in
   train. Of: validation + test items with a change.
3. ws-only: exported items (all three splits) whose before and after are equal once ALL
   whitespace is removed, and that are not both blank (those are the blank figure below). Of:
   exported items.
4. built: exported items whose path is a built or rendered file (first kind that applies):
   - coverage: a coverage tool's output: a path component `coverage`, `htmlcov` or
     `lcov-report`, or the file `lcov.info`, `clover.xml`, `coverage-final.json`,
     `coverage-summary.json`;
   - bundle: a .js/.mjs/.cjs/.css file under a path component (folder) `dist`, `build` or
     `_build` (`dist/axios.js` yes, `src/dist.ts` no);
   - minified: `*.min.js`, `*.min.css`;
   - sourcemap: `*.map`;
   - html: a .html/.htm file under a docs folder (a component `docs`, `doc`, `site`, `_site`,
     `gh-pages`), or with a docs source of the same stem beside it in the same folder of the
     same repository (`guide.md` / `.rst` / `.adoc` / a template such as `.hbs` `.ejs` `.njk`
     `.pug` `.j2` `.tmpl` beside `guide.html`), among every path the run ingested for that
     repository. A hand-written page with no source (`examples/get/index.html`) is not counted;
   - man: a man page, `*.1` .. `*.9` (optionally with a one-letter section suffix, `foo.3p`), or
     a file under a `man` / `man1`..`man9` folder that is not itself a docs source, whose
     source sits beside it (`fd.1.md`, `fd.ronn`, `fd.1.adoc` in the same folder): a
     hand-written roff page (fd's `doc/fd.1`) is code a reviewer edits, not output.
   Of: exported items. `built by kind` below the table splits the total (the issue's own
   figure counted bundles, man pages and docs HTML, not coverage output).
   Extra column `vendored`: exported items under a vendored folder (a component `vendor`,
   `vendored`, `_vendor`, `third_party`, `third-party`, `thirdparty`, `node_modules`,
   `bower_components`, `Godeps`), or whose before or after is nothing but `Subproject commit
   <40 hex>` lines (a submodule pointer bump).
5. secret: filter/rejected.parquet rows whose `rules` list holds a secret rule (a rule named
   `secret*`: today `secret` and `secret_masked`). Of: items the filter saw (kept + rejected).
   Extra column `redacted`: exported items whose before or after holds `[REDACTED:` (code the
   masking damaged), of exported items (filter/kept.parquet when the run has no export).
6. vbump: version-bump classes split over several repo-scope shape groups. A version-bump item
   is a shapes-kept item (shapes/kept.parquet, or the export when that file is missing) whose
   before and after differ (whitespace-collapsed) but are equal once every version token is
   folded whole to one placeholder (see `fold_versions`) and whitespace is collapsed. Its
   class is (repo, file name (basename of path), folded before, folded after). Among classes
   of >= 2 items, n counts those whose items fall in more than one repo-scope shape group
   (shapes/shapes.parquet rows with scope == "repo", joined on id). Of: classes of >= 2 items.

The earlier trust figures stay, per corpus and in total:

- dedup removals (every kind) sharing < half their field-tagged character 5-grams with their
  keeper;
- near removals whose changed words (a difflib word diff) share none with their keeper's;
- normalised edits (whole before and after; SHAs, versions and digit runs folded, whitespace
  collapsed; the bench's own normaliser) that appear in two splits: leakage. Per corpus: the
  distinct edits of that corpus's items; the total counts each edit once;
- exported items whose before and after are both blank.

    python bench/trust.py [RUN_DIR ...] [--sources a,b]   (default: data/runs/shared)

With several RUN_DIRs (a "before" and an "after" run, say) each run's tables come first, then
the six measures side by side, run1 -> run2 -> ..., in total and per corpus.
"""

from __future__ import annotations

import argparse
import difflib
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

SPLITS = ("train", "validation", "test")
TOTAL = "TOTAL"

# ---------------------------------------------------------------------------------------------
# text helpers


def side_grams(text: str | None) -> set[str]:
    """A side's character 5-grams; a non-empty side shorter than 5 characters is one gram."""
    t = text or ""
    if not t:
        return set()
    if len(t) < 5:
        return {t}
    return {t[i : i + 5] for i in range(len(t) - 4)}


def side_jaccard(x: str | None, y: str | None) -> float:
    gx, gy = side_grams(x), side_grams(y)
    if not gx and not gy:
        return 1.0
    if not gx or not gy:
        return 0.0
    return len(gx & gy) / len(gx | gy)


def tagged_grams(before: str | None, after: str | None) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for tag, t in (("b", before or ""), ("a", after or "")):
        if 0 < len(t) < 5:
            out.add((tag, t))
        out.update((tag, t[i : i + 5]) for i in range(len(t) - 4))
    return out


def jaccard(x: set, y: set) -> float:
    return 1.0 if not x and not y else len(x & y) / len(x | y)


def changed_words(before: str | None, after: str | None) -> set[tuple[str, str]]:
    """("-", word) / ("+", word) for each word a word-level diff removes or adds."""
    a, b = re.findall(r"\w+", before or ""), re.findall(r"\w+", after or "")
    out: set[tuple[str, str]] = set()
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            out.update(("-", w) for w in a[i1:i2])
            out.update(("+", w) for w in b[j1:j2])
    return out


# A version token, folded whole: an optional range operator, an optional leading v, dotted
# numbers (parts may be wildcards: 1.10.x, 1.x, 2.*), pre-release / build suffixes (beta2,
# -rc.1, .Final, -SNAPSHOT, +build.5); or a bare v-number (v4), ^2 / ~2; or a quoted "*".
# 7+ hex characters holding a digit (a SHA) fold to the same placeholder. Not versions: a plain
# integer (`timeout = 5`), a dotted number followed by `%` (coverage figures), a number glued to
# a word (`python3.8`), an unquoted `*`. An operator `>`/`<` next to a number is folded with it
# even where it is a tag bracket (`<v>1.2</v>` -> `<v⟨V⟩</v>`): both sides fold alike.
VERSION_PLACEHOLDER = "\u27e8V\u27e9"
_OP = r"(?:(?:~=|==|!=|>=|<=|>|<)\s*|[~^=])"
_SUFFIX = (
    r"(?:[-._]?(?:alpha|beta|rc|dev|pre|post|preview|snapshot|final|release|ga|canary|next"
    r"|nightly|a|b)\.?\d*)"
)
_BUILD = r"(?:\+[0-9A-Za-z][0-9A-Za-z.-]*)"
VERSION_RX = re.compile(
    r"\b(?=[0-9a-f]*[0-9])[0-9a-f]{7,}\b"  # a SHA
    r"|" + _OP + r"?(?<![\w.])v?\d+(?:\.(?:\d+|[xX*]))+" + _SUFFIX + r"*" + _BUILD + r"?(?![\w%])"
    r"|" + _OP + r"?(?<![\w.])v\d+" + _SUFFIX + r"*" + _BUILD + r"?(?!\w)"
    r"|[~^]\d+" + _SUFFIX + r"*(?!\w)"
    r"|(?<=[\"'])\*(?=[\"'])",
    re.IGNORECASE,
)
_WS = re.compile(r"\s+")
_DIGITS = re.compile(r"\d+")


def collapse(text: str | None) -> str:
    return _WS.sub(" ", text or "").strip()


def squeeze(text: str | None) -> str:
    """Every whitespace character removed."""
    return _WS.sub("", text or "")


def fold_versions(text: str | None) -> str:
    """Every version token (and SHA) -> one placeholder, then whitespace collapsed."""
    return collapse(VERSION_RX.sub(VERSION_PLACEHOLDER, text or ""))


def normalise_edit(text: str | None) -> str:
    """The twin figure's normaliser: versions and SHAs folded, then any digit run, whitespace."""
    return _DIGITS.sub("N", fold_versions(text))


# ---------------------------------------------------------------------------------------------
# path classes

BUILD_DIRS = {"dist", "build", "_build"}
BUNDLE_EXT = (".js", ".mjs", ".cjs", ".css")
DOC_DIRS = {"docs", "doc", "site", "_site", "gh-pages"}
COVERAGE_DIRS = {"coverage", "htmlcov", "lcov-report"}
COVERAGE_FILES = {"lcov.info", "clover.xml", "coverage-final.json", "coverage-summary.json"}
DOC_SOURCE_EXT = {
    ".md",
    ".markdown",
    ".mdx",
    ".rst",
    ".adoc",
    ".asciidoc",
    ".txt",
    ".ronn",
    ".scd",
    ".pod",
    ".hbs",
    ".handlebars",
    ".ejs",
    ".njk",
    ".pug",
    ".jade",
    ".mustache",
    ".liquid",
    ".j2",
    ".jinja",
    ".jinja2",
    ".tmpl",
    ".tpl",
    ".erb",
    ".haml",
}
MAN_DIRS = {"man"} | {f"man{i}" for i in range(1, 10)}
MAN_RX = re.compile(r"\.[1-9][a-z]?$")
VENDOR_DIRS = {
    "vendor",
    "vendored",
    "_vendor",
    "third_party",
    "third-party",
    "thirdparty",
    "node_modules",
    "bower_components",
    "Godeps",
}
SUBPROJECT_RX = r"^\s*(?:Subproject commit [0-9a-f]{40}\s*)+$"
BUILT_KINDS = ("coverage", "bundle", "minified", "sourcemap", "html", "man")


def _stem_ext(name: str) -> tuple[str, str]:
    stem, ext = posixpath.splitext(name)
    return stem, ext.lower()


def built_kind(path: str | None, doc_sources: set[tuple[str, str]]) -> str | None:
    """The kind of built / rendered file `path` is, or None. `doc_sources`: (folder, stem) of
    every docs source (markdown, rst, template) the repository has."""
    if not path:
        return None
    parts = path.split("/")
    dirs, name = parts[:-1], parts[-1]
    low = name.lower()
    stem, ext = _stem_ext(name)
    if COVERAGE_DIRS & set(dirs) or low in COVERAGE_FILES:
        return "coverage"
    if BUILD_DIRS & set(dirs) and ext in BUNDLE_EXT:
        return "bundle"
    if low.endswith((".min.js", ".min.css")):
        return "minified"
    if ext == ".map":
        return "sourcemap"
    if ext in (".html", ".htm"):
        if DOC_DIRS & set(dirs) or ("/".join(dirs), stem) in doc_sources:
            return "html"
        return None
    if MAN_RX.search(name) or (MAN_DIRS & set(dirs) and ext not in DOC_SOURCE_EXT):
        # rendered only when its source sits beside it (fd.1.md, fd.ronn): fd's doc/fd.1 is
        # hand-written roff, edited by hand in its own commits
        folder = "/".join(dirs)
        if (folder, name) in doc_sources or (folder, stem) in doc_sources:
            return "man"
    return None


def doc_sources_of(paths: list[str]) -> set[tuple[str, str]]:
    out = set()
    for p in paths:
        if not p:
            continue
        folder, name = posixpath.split(p)
        stem, ext = _stem_ext(name)
        if ext in DOC_SOURCE_EXT:
            out.add((folder, stem))
    return out


def is_vendored(path: str | None) -> bool:
    return bool(path) and bool(VENDOR_DIRS & set(path.split("/")[:-1]))


# ---------------------------------------------------------------------------------------------
# reading a run


class Missing(Exception):
    pass


@dataclass
class Run:
    root: Path
    sources: list[str]
    _cache: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def path(self, rel: str) -> Path:
        return self.root / rel

    def has(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read(self, rel: str, columns: list[str]) -> pl.DataFrame:
        """A run output restricted to the chosen sources; Missing when the run lacks it."""
        key = (rel, tuple(columns), tuple(self.sources))
        if key not in self._cache:
            p = self.path(rel)
            if not p.exists():
                raise Missing(f"{p} missing")
            schema = pl.read_parquet_schema(p) if p.is_file() else None
            if schema is None:
                schema = pl.scan_parquet(str(p / "**" / "*.parquet")).collect_schema()
            cols = list(columns)
            if "source" not in cols and "source" in schema:
                cols.append("source")
            lack = [c for c in cols if c not in schema]
            if lack:
                raise Missing(f"{p} lacks column(s) {', '.join(lack)}")
            df = pl.read_parquet(p, columns=cols)
            if self.sources:
                df = df.filter(pl.col("source").is_in(self.sources))
            self._cache[key] = df
        return self._cache[key]

    def exported(self, columns: list[str]) -> pl.DataFrame:
        return pl.concat(
            [
                self.read(f"export/{s}.parquet", columns).with_columns(split=pl.lit(s))
                for s in SPLITS
            ]
        )


# A measure's result: one row per source plus a TOTAL row, columns source, n, of.
Counts = pl.DataFrame


def tally(df: pl.DataFrame, hit: pl.Expr) -> Counts:
    """Per source and in total: n = rows where `hit`, of = rows."""
    per = (
        df.group_by("source")
        .agg(n=hit.sum().cast(pl.Int64), of=pl.len().cast(pl.Int64))
        .sort("source")
    )
    tot = pl.DataFrame(
        {"source": [TOTAL], "n": [int(per["n"].sum())], "of": [int(per["of"].sum())]}
    ).cast({"n": pl.Int64, "of": pl.Int64})
    return pl.concat([per, tot])


def _texts(run: Run) -> dict[str, tuple[str | None, str | None]]:
    """id -> (before, after) of dedup's kept rows, then of its removed rows."""
    cols = ["id", "before", "after"]
    keep = Run(run.root, [], run._cache)  # keepers may sit in an unselected source
    both = pl.concat([keep.read(f"dedup/{n}.parquet", cols) for n in ("kept", "removed")])
    both = both.select(cols).unique("id", keep="first", maintain_order=True)
    return {i: (b, a) for i, b, a in both.iter_rows()}


# ---------------------------------------------------------------------------------------------
# the six measures


def m_near(run: Run) -> Counts:
    rem = run.read("dedup/removed.parquet", ["id", "before", "after", "keeper_id", "kind"])
    near = rem.filter(pl.col("kind") == "near")
    text = _texts(run)
    hits, ws = [], 0
    for b, a, k in near.select("before", "after", "keeper_id").iter_rows():
        kb, ka = text.get(k, (None, None))
        hit = side_jaccard(b, kb) < 0.5 or side_jaccard(a, ka) < 0.5
        hits.append(hit)
        ws += hit and squeeze(b) == squeeze(kb) and squeeze(a) == squeeze(ka)
    run.notes.append(f"near: {ws:,} of the near hits differ from their keeper only in whitespace")
    return tally(near.with_columns(hit=pl.Series(hits, dtype=pl.Boolean)), pl.col("hit"))


def m_leak(run: Run) -> Counts:
    ch = run.exported(["repo", "change"]).filter(pl.col("change").fill_null("") != "")
    train = ch.filter(pl.col("split") == "train").select("repo", "change").unique()
    held = ch.filter(pl.col("split") != "train")
    held = held.join(train.with_columns(hit=pl.lit(True)), on=["repo", "change"], how="left")
    return tally(held, pl.col("hit").fill_null(False))


def m_ws_only(run: Run) -> Counts:
    ex = run.exported(["before", "after"])
    b = pl.col("before").fill_null("").str.replace_all(r"\s+", "")
    a = pl.col("after").fill_null("").str.replace_all(r"\s+", "")
    return tally(ex, (b == a) & ~((b == "") & (a == "")))


def _built(run: Run) -> pl.DataFrame:
    """Exported items with `kind` (built kind or null) and `vendored`."""
    if ("built", tuple(run.sources)) not in run._cache:
        run._cache[("built", tuple(run.sources))] = _classify(run)
    return run._cache[("built", tuple(run.sources))]


def _classify(run: Run) -> pl.DataFrame:
    ex = run.exported(["repo", "path", "before", "after"])
    try:
        every = Run(run.root, [], run._cache).read("ingest/items.parquet", ["repo", "path"])
    except Missing:
        every = ex
    by_repo: dict[str, list[str]] = {}
    for repo, path in every.select("repo", "path").unique().iter_rows():
        by_repo.setdefault(repo, []).append(path)
    docs = {r: doc_sources_of(ps) for r, ps in by_repo.items()}
    paths = ex.select("repo", "path").unique()
    kinds = [built_kind(p, docs.get(r, set())) for r, p in paths.iter_rows()]
    vend = [is_vendored(p) for _, p in paths.iter_rows()]
    paths = paths.with_columns(
        kind=pl.Series(kinds, dtype=pl.String), vend_path=pl.Series(vend, dtype=pl.Boolean)
    )
    sub = pl.col("before").fill_null("").str.contains(SUBPROJECT_RX) | pl.col("after").fill_null(
        ""
    ).str.contains(SUBPROJECT_RX)
    return ex.join(paths, on=["repo", "path"], how="left", nulls_equal=True).with_columns(
        vendored=pl.col("vend_path").fill_null(False) | sub
    )


def m_built(run: Run) -> Counts:
    return tally(_built(run), pl.col("kind").is_not_null())


def m_vendored(run: Run) -> Counts:
    return tally(_built(run), pl.col("vendored"))


def built_breakdown(run: Run) -> dict[str, int]:
    kinds = _built(run)["kind"].drop_nulls().value_counts()
    got = dict(kinds.iter_rows())
    return {k: got.get(k, 0) for k in BUILT_KINDS}


def m_secret(run: Run) -> Counts:
    rej = run.read("filter/rejected.parquet", ["rules"])
    kept = run.read("filter/kept.parquet", ["id"])
    seen = pl.concat(
        [
            rej.select(
                "source",
                hit=pl.col("rules").list.eval(pl.element().str.starts_with("secret")).list.any(),
            ),
            kept.select("source", hit=pl.lit(False)),
        ]
    )
    return tally(seen, pl.col("hit").fill_null(False))


def m_redacted(run: Run) -> Counts:
    try:
        df = run.exported(["before", "after"])
    except Missing:
        df = run.read("filter/kept.parquet", ["before", "after"])
    red = "[REDACTED:"
    hit = pl.col("before").fill_null("").str.contains(red, literal=True) | pl.col(
        "after"
    ).fill_null("").str.contains(red, literal=True)
    return tally(df, hit)


def version_bumps(df: pl.DataFrame) -> pl.DataFrame:
    """The version-bump items of df (id, source, repo, path, before, after), with `name`,
    `fb`, `fa` (folded before / after)."""
    rows = []
    rx = re.compile(r"[0-9*]")
    for i, s, r, p, b, a in df.select(
        "id", "source", "repo", "path", "before", "after"
    ).iter_rows():
        b, a = b or "", a or ""
        if b == a or not rx.search(b) or not rx.search(a):
            continue
        fb, fa = fold_versions(b), fold_versions(a)
        if fb == fa and collapse(b) != collapse(a):
            rows.append((i, s, r, posixpath.basename(p or ""), fb, fa))
    schema = {c: pl.String for c in ("id", "source", "repo", "name", "fb", "fa")}
    return pl.DataFrame(rows, schema=schema, orient="row")


def m_vbump(run: Run) -> Counts:
    shapes = Run(run.root, [], run._cache).read(
        "shapes/shapes.parquet", ["id", "scope", "group_id"]
    )
    cols = ["id", "repo", "path", "before", "after"]
    try:
        items = run.read("shapes/kept.parquet", cols)
    except Missing:
        items = run.exported(cols)
    groups = shapes.filter(pl.col("scope") == "repo").select("id", "group_id").unique("id")
    vb = version_bumps(items).join(groups, on="id", how="left")
    classes = (
        vb.group_by("repo", "name", "fb", "fa")
        .agg(
            source=pl.col("source").first(),
            items=pl.len(),
            groups=pl.col("group_id").n_unique(),
        )
        .filter(pl.col("items") >= 2)
    )
    return tally(classes, pl.col("groups") > 1)


# ---------------------------------------------------------------------------------------------
# the earlier figures


def e_low5(run: Run) -> Counts:
    rem = run.read("dedup/removed.parquet", ["before", "after", "keeper_id"])
    text = _texts(run)
    hits = [
        jaccard(tagged_grams(b, a), tagged_grams(*text.get(k, (None, None)))) < 0.5
        for b, a, k in rem.select("before", "after", "keeper_id").iter_rows()
    ]
    return tally(rem.with_columns(hit=pl.Series(hits, dtype=pl.Boolean)), pl.col("hit"))


def e_words(run: Run) -> Counts:
    rem = run.read("dedup/removed.parquet", ["before", "after", "keeper_id", "kind"])
    near = rem.filter(pl.col("kind") == "near")
    text = _texts(run)
    hits = []
    for b, a, k in near.select("before", "after", "keeper_id").iter_rows():
        mine, theirs = changed_words(b, a), changed_words(*text.get(k, (None, None)))
        hits.append(bool(mine and theirs and not mine & theirs))
    return tally(near.with_columns(hit=pl.Series(hits, dtype=pl.Boolean)), pl.col("hit"))


def e_twins(run: Run) -> Counts:
    ex = run.exported(["before", "after"])
    edit = [
        normalise_edit(b) + "\x1f" + normalise_edit(a)
        for b, a in ex.select("before", "after").iter_rows()
    ]
    ex = ex.with_columns(edit=pl.Series(edit, dtype=pl.String))
    twin = ex.group_by("edit").agg(twin=pl.col("split").n_unique() > 1)
    per = ex.select("source", "edit").unique().join(twin, on="edit")
    out = tally(per, pl.col("twin"))
    n = int(twin["twin"].sum())
    return out.with_columns(
        n=pl.when(pl.col("source") == TOTAL).then(n).otherwise(pl.col("n")),
        of=pl.when(pl.col("source") == TOTAL).then(twin.height).otherwise(pl.col("of")),
    )


def e_blank(run: Run) -> Counts:
    ex = run.exported(["before", "after"])
    b = pl.col("before").fill_null("").str.strip_chars()
    a = pl.col("after").fill_null("").str.strip_chars()
    return tally(ex, (b == "") & (a == ""))


@dataclass
class Measure:
    key: str
    title: str
    fn: Callable[[Run], Counts]
    main: bool = True  # one of the six


MEASURES = [
    Measure("near", "1 near removals, a side differs from keeper's (5-gram J < .5)", m_near),
    Measure("leak", "2 validation/test items whose change has train items", m_leak),
    Measure("ws-only", "3 exported whitespace-only edits", m_ws_only),
    Measure("built", "4 exported built/rendered files", m_built),
    Measure("vendored", "4b exported vendored paths / Subproject bumps", m_vendored, False),
    Measure("secret", "5 items rejected by a secret rule (of items filtered)", m_secret),
    Measure("redacted", "5b exported items holding [REDACTED:", m_redacted, False),
    Measure("vbump", "6 version-bump classes split over repo shape groups", m_vbump),
]
EARLIER = [
    Measure("low5", "dedup removals sharing < half their 5-grams with the keeper", e_low5),
    Measure("words", "near removals changing no word their keeper changes", e_words),
    Measure("twins", "normalised edits with a twin in another split", e_twins),
    Measure("blank", "exported items with both sides blank", e_blank),
]


def measure_all(run: Run, measures: list[Measure]) -> dict[str, Counts | None]:
    out: dict[str, Counts | None] = {}
    for m in measures:
        try:
            out[m.key] = m.fn(run)
        except Missing as e:
            print(f"skip {m.key} ({m.title}): {e}")
            out[m.key] = None
    return out


# ---------------------------------------------------------------------------------------------
# printing


def cell(n: int, of: int) -> str:
    return f"{n:,}/{of:,} {100 * n / of:.1f}%" if of else f"{n:,}/0"


def table(header: list[str], rows: list[list[str]], total: bool = True) -> str:
    """Aligned columns; the last row (the total) below a rule when `total`."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = zip(r, widths, strict=True)
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(cells))

    rule = "-" * len(line(header))
    if not total:
        return "\n".join([line(header), rule, *map(line, rows), rule])
    return "\n".join([line(header), rule, *map(line, rows[:-1]), rule, line(rows[-1])])


def sources_of(results: list[dict[str, Counts | None]]) -> list[str]:
    names: set[str] = set()
    for res in results:
        for c in res.values():
            if c is not None:
                names.update(c["source"].to_list())
    names.discard(TOTAL)
    return [*sorted(names), TOTAL]


def lookup(c: Counts | None, source: str) -> tuple[int, int] | None:
    if c is None:
        return None
    row = c.filter(pl.col("source") == source)
    return (0, 0) if row.is_empty() else (int(row["n"][0]), int(row["of"][0]))


def run_table(res: dict[str, Counts | None], measures: list[Measure]) -> str:
    ms = [m for m in measures if res.get(m.key) is not None]
    rows = []
    for s in sources_of([res]):
        rows.append([s] + [cell(*lookup(res[m.key], s)) for m in ms])  # type: ignore[misc]
    return table(["source"] + [m.key for m in ms], rows)


def side_by_side(names: list[str], results: list[dict[str, Counts | None]]) -> str:
    ms = [m for m in MEASURES if any(r.get(m.key) is not None for r in results)]
    out = [f"six measures, {' -> '.join(names)}", ""]
    rows = []
    for m in ms:
        got = [lookup(r.get(m.key), TOTAL) for r in results]
        rows.append([m.title] + ["-" if g is None else cell(*g) for g in got])
    out.append(table(["total"] + names, rows, total=False))
    out.append("")
    rows = []
    for s in sources_of(results):
        row = [s]
        for m in ms:
            got = [lookup(r.get(m.key), s) for r in results]
            row.append(" -> ".join("-" if g is None else f"{g[0]:,}" for g in got))
        rows.append(row)
    out.append(table(["source (n)"] + [m.key for m in ms], rows))
    return "\n".join(out)


def report(run: Run) -> dict[str, Counts | None]:
    print(f"== {run.root}" + (f" (sources: {','.join(run.sources)})" if run.sources else ""))
    res = measure_all(run, MEASURES)
    print(run_table(res, MEASURES))
    for m in MEASURES:
        if res.get(m.key) is not None:
            print(f"  {m.key}: {m.title}")
    for note in run.notes:
        print(f"  {note}")
    try:
        kinds = built_breakdown(run)
        print("  built by kind: " + ", ".join(f"{k} {v:,}" for k, v in kinds.items()))
    except Missing:
        pass
    print()
    early = measure_all(run, EARLIER)
    print("earlier trust figures")
    print(run_table(early, EARLIER))
    for m in EARLIER:
        if early.get(m.key) is not None:
            print(f"  {m.key}: {m.title}")
    print()
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", default=["data/runs/shared"], metavar="RUN_DIR")
    ap.add_argument("--sources", default="", help="comma-separated sources (default: all)")
    a = ap.parse_args(argv)
    sources = [s for s in a.sources.split(",") if s]
    results = [report(Run(Path(r), sources)) for r in a.runs]
    if len(results) > 1:
        print(side_by_side([Path(r).name or r for r in a.runs], results))


if __name__ == "__main__":
    main()
