"""The shapes pass: normalisers, grouping at three scopes, cap / spread, the stage end to end."""

from __future__ import annotations

import re

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import ConfigError, ShapesConfig, load_config
from pipeline.parts import num_rows
from pipeline.runs import StageRun, write_parquet
from pipeline.shapes import (
    HEX,
    NUM,
    REF,
    edit_key_expr,
    edit_shape,
    find_shapes,
    group_shapes,
    nearest_context_line,
    normalise_line,
    normalise_text,
    spread_order,
)
from pipeline.verify import verify_run
from tests.conftest import make_item_table, shared

KEEPER = ["-comment_len", "created_at", "id"]
PCC = ".pre-commit-config.yaml"
CTX_A = "repos:\n-   repo: https://github.com/pre-commit/pre-commit-hooks\n...\n    hooks:"
CTX_B = "    -   id: flake8\n-   repo: https://github.com/asottile/pyupgrade\n...\n    hooks:"
FOUNDING = [
    dict(
        path=PCC,
        before=" rev: v4.5.0",
        after=" rev: v5.0.0",
        comment="fyi, there's a v5.0.0 of this out now",
        context=CTX_A,
    ),
    dict(
        path=PCC,
        before=" rev: 6.1.0",
        after=" rev: 7.0.0",
        comment="and 7.0.0 of this",
        context=CTX_B,
    ),
]
ADD_HOOK = dict(
    path=PCC,
    before="",
    after="    -   id: check-yaml",
    comment="add check-yaml",
    context=CTX_A,
    lines_removed=0,
)


def items(rows: list[dict]) -> pl.DataFrame:
    return pl.from_arrow(make_item_table(rows))


def groups(shapes: pl.DataFrame, scope: str) -> dict[int, set[str]]:
    out: dict[int, set[str]] = {}
    for r in shapes.filter(pl.col("scope") == scope).iter_rows(named=True):
        out.setdefault(r["group_id"], set()).add(r["id"])
    return out


# ------------------------------------------------------------------------ normalisers


@pytest.mark.parametrize(
    "line, want",
    [
        ("    rev: v4.5.0", f"rev: {NUM}"),
        ("rev: 6.1.0", f"rev: {NUM}"),
        ("pkg==1.2.3rc1", f"pkg{NUM}"),  # a version carries its operator
        ('version = "v0.16.2"', f'version = "{NUM}"'),
        ("v2.0.0-beta.2 and 1.0a1", f"{NUM} and {NUM}"),
        (
            "uses: actions/checkout@b4ffde65f46336ab88eb53be808477a3936bae11 # v4.1.1",
            f"uses: actions/checkout@{HEX} # {NUM}",
        ),
        ("sha: 645838c", f"sha: {HEX}"),
        ("x  =\t  defaced + cafe", "x = defaced + cafe"),  # hex words with no digit stay
        ("python3.6.1+ sha256 dev1", f"python{NUM}+ sha{NUM} dev{NUM}"),
        ("x = 3.14 + 0x1f", f"x = {NUM} + {NUM}x{NUM}f"),
    ],
)
def test_normalise_line_examples(line: str, want: str) -> None:
    assert normalise_line(line) == want


# Text without the version affix letters (v r l p h t o s, G of GA, M of M1), without "." (a
# comparison folds only before a dotted version) and without ~ ^ (range operators), so that
# any two strings the normaliser merges may differ only in digits, hex letters and whitespace.
ALPHABET = "0123456789abcdefABCDEFgijkmnquwxyzIJKNQUWXYZ _:/@#=+-()[]{},;'\"\t"
text = st.text(alphabet=ALPHABET, max_size=40)
any_text = st.text(max_size=40).filter(lambda s: "⟨" not in s and "⟩" not in s)


def skeleton(s: str) -> str:
    return re.sub(r"[\s0-9a-fA-F]", "", s)


@settings(max_examples=300, deadline=None)
@given(any_text)
def test_normalise_is_idempotent(s: str) -> None:
    once = normalise_line(s)
    assert normalise_line(once) == once


@settings(max_examples=300, deadline=None)
@given(text, text)
def test_normalise_never_merges_strings_differing_elsewhere(a: str, b: str) -> None:
    if normalise_line(a) == normalise_line(b):
        assert skeleton(a) == skeleton(b)


@settings(max_examples=200, deadline=None)
@given(text, st.sampled_from("gijkmnquwxyz:/@#=+()[],;"))
def test_normalise_keeps_a_changed_identifier_or_punctuation(s: str, c: str) -> None:
    # Appending a letter or punctuation mark outside digits/hex always changes the result.
    assert normalise_line(s) != normalise_line(s + " " + c)


_LOOKAHEAD_HEX = re.compile(r"\b(?=[a-fA-F]*[0-9])[0-9a-fA-F]{7,}\b")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdefgABCDEFG _-.", max_size=30))
def test_hex_without_lookahead_matches_the_lookahead_definition(s: str) -> None:
    """polars' regex has no look-ahead: the spelled-out HEX_RX must match the same runs."""
    from pipeline.shapes.normalise import _HEX

    assert _HEX.sub("#", s) == _LOOKAHEAD_HEX.sub("#", s)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ALPHABET + "v.\nrc\u00e9~^<>!*MGSNAPHOTal", max_size=60))
def test_edit_key_in_polars_equals_the_python_reference(s: str) -> None:
    got = pl.DataFrame({"t": [s]}).select(edit_key_expr("t")).item()
    assert got == normalise_text(s)


def test_edit_shape_and_digit_only() -> None:
    assert edit_shape(" rev: v4.5.0", " rev: v5.0.0") == (f"-rev: {NUM}\n+rev: {NUM}", True)
    # unchanged lines around the edit are not part of the shape; no line numbers
    shape, digit = edit_shape("a = 1\nb = 2\nc = 3", "a = 1\nb = 20\nc = 3")
    assert (shape, digit) == (f"-b = {NUM}\n+b = {NUM}", True)
    # a real code change with numbers in it is not digit-only
    shape, digit = edit_shape("x = compute(3, 4)", "x = compute_fast(3, 4)")
    assert not digit and shape == f"-x = compute({NUM}, {NUM})\n+x = compute_fast({NUM}, {NUM})"
    assert edit_shape("  x = 1", "    x = 1") == ("-x = 1\n+x = 1".replace("1", NUM), False)
    assert edit_shape("", "    -   id: check-yaml") == ("+- id: check-yaml", False)
    # one blank line added: after is "" but the item counts an added line
    assert edit_shape("x = 1", "x = 1\n") == ("+", False)
    assert edit_shape("", "", 0, 1) == ("+", False)
    assert edit_shape("", "", 0, 0) == ("", False)


def test_nearest_context_line() -> None:
    assert nearest_context_line(CTX_A) == "- repo: https://github.com/pre-commit/pre-commit-hooks"
    assert nearest_context_line("a = 1\n\n") == f"a = {NUM}"
    assert nearest_context_line("") == ""


# ------------------------------------------------------------------------ grouping


def test_founding_pair_is_one_group_at_every_scope() -> None:
    df = items([*FOUNDING, ADD_HOOK, {**FOUNDING[0], "repo": "other/r", "change": "9"}])
    shapes = group_shapes(df, ShapesConfig())
    a, b, hook, elsewhere = df["id"].to_list()
    for scope, want in (
        ("change", {a, b}),
        ("repo", {a, b}),
        ("corpus", {a, b, elsewhere}),  # same file name in another repo
    ):
        g = groups(shapes, scope)
        assert want in g.values(), scope
        assert {hook} in g.values(), scope
    founding = shapes.filter(pl.col("id").is_in([a, b]))
    assert founding["digit_only"].all() and founding.height == 8
    assert founding["shape_text"].unique().to_list() == [f"-rev: {NUM}\n+rev: {NUM}"]
    assert shapes.filter(pl.col("id") == hook)["digit_only"].to_list() == [False] * 4


def test_the_same_edit_in_two_files_of_one_commit_is_one_group() -> None:
    """One commit made `attr()` -> `attr.ib()` in two test files: one group, not two."""
    common = dict(repo="python-attrs/attrs", change="c0ffee1", comment="Use attr.ib")
    df = items(
        [
            dict(
                common,
                path="tests/test_make.py",
                before="    x = attr()",
                after="    x = attr.ib()",
            ),
            dict(common, path="tests/test_dark.py", before="  x = attr()", after="  x = attr.ib()"),
            dict(common, path="tests/test_make.py", before="    y = attr()", after="    y = 2"),
        ]
    )
    a, b, other = df["id"].to_list()
    for scope in ("change", "repo", "corpus", "edit"):
        assert {a, b} in groups(group_shapes(df, ShapesConfig()), scope).values(), scope
    per_file = groups(group_shapes(df, ShapesConfig(path_in_key=True)), "change")
    assert {a} in per_file.values() and {b} in per_file.values()


def test_items_with_no_change_are_not_one_change() -> None:
    """change "" is no known change: such items group at repo scope, never as one change."""
    df = items([{**FOUNDING[0], "change": ""}, {**FOUNDING[1], "change": ""}, *FOUNDING])
    shapes = group_shapes(df, ShapesConfig())
    a, b, c, d = df["id"].to_list()
    per_change = groups(shapes, "change")
    assert {a} in per_change.values() and {b} in per_change.values()
    assert {c, d} in per_change.values()
    assert {a, b, c, d} in groups(shapes, "repo").values()


def test_uses_tag_bumps_group_like_rev_bumps() -> None:
    """`uses: x@v3 -> @v4` in two workflow files, and a bump of another action: one group."""
    df = items(
        [
            dict(
                path=".github/workflows/ci.yml",
                change="1",
                before="      - uses: actions/checkout@v3",
                after="      - uses: actions/checkout@v4",
            ),
            dict(
                path=".github/workflows/release.yml",
                change="2",
                before="      - uses: actions/checkout@v3",
                after="      - uses: actions/checkout@v4",
            ),
            dict(
                path=".github/workflows/ci.yml",
                change="3",
                before="      - uses: actions/setup-python@v4.7.0",
                after="      - uses: actions/setup-python@v5",
            ),
        ]
    )
    shapes = group_shapes(df, ShapesConfig())
    a, b, c = df["id"].to_list()
    assert {a, b, c} in groups(shapes, "repo").values()
    assert shapes.filter(pl.col("scope") == "repo")["digit_only"].all()
    # context_key keeps what is bumped apart, as it keeps `rev:` hooks apart
    ctx = groups(group_shapes(df, ShapesConfig(context_key=True)), "repo")
    assert {a, b} in ctx.values() and {c} in ctx.values()


def test_sha_pinned_action_bumps_group_across_changes() -> None:
    def uses(sha: str, v: str) -> str:
        return f"      - uses: actions/checkout@{sha} # {v}"

    wf = ".github/workflows/ci.yml"
    df = items(
        [
            dict(
                path=wf,
                change="1",
                before=uses("b4ffde6" * 5 + "abcde", "v4.1.1"),
                after=uses("11bd719" * 5 + "12345", "v4.2.2"),
            ),
            dict(
                path=wf,
                change="2",
                before=uses("11bd719" * 5 + "12345", "v4.2.2"),
                after=uses("08eba0b" * 5 + "27e4f", "v4.3.0"),
            ),
            dict(
                path=wf,
                change="3",
                before=uses("08eba0b" * 5 + "27e4f", "v4.3.0"),
                after=uses("08eba0b" * 5 + "27e4f", "v4.3.0") + "\n        with: {depth: 1}",
            ),
        ]
    )
    shapes = group_shapes(df, ShapesConfig())
    a, b, c = df["id"].to_list()
    assert {a, b} in groups(shapes, "repo").values()
    assert {c} in groups(shapes, "corpus").values()
    rows = shapes.filter((pl.col("scope") == "repo") & pl.col("id").is_in([a, b]))
    assert rows["digit_only"].all()
    # a digit-only bump names what it bumps by REF, as a `rev:` bump never names its hook
    assert rows["shape_text"][0] == f"-- uses: {REF}@{HEX} # {NUM}\n+- uses: {REF}@{HEX} # {NUM}"


def test_context_key_tells_hooks_apart() -> None:
    df = items(FOUNDING)
    shapes = group_shapes(df, ShapesConfig(context_key=True))
    where = shapes.filter(pl.col("scope") != "edit")
    assert where["group_size"].to_list() == [1] * 6
    # the same normalised edit stays one edit group: export keeps it in one split
    assert shapes.filter(pl.col("scope") == "edit")["group_size"].to_list() == [2, 2]


def test_grouping_ignores_input_order() -> None:
    df = items([*FOUNDING, ADD_HOOK, dict(path="b.py", before="x = 1", after="y = 1")])
    one = group_shapes(df, ShapesConfig()).drop("_row")
    two = group_shapes(df.reverse(), ShapesConfig()).drop("_row")
    assert one.equals(two)


def test_cap_keeps_best_ranked_per_group() -> None:
    extra = dict(path=PCC, before=" rev: 1.0", after=" rev: 1.1", comment="bump")
    df = items([*FOUNDING, extra, ADD_HOOK])
    res = find_shapes(df, ShapesConfig(policy="cap", scope="repo"), KEEPER)
    ids = df["id"].to_list()
    # digit-only group of three, cap 1: the longest comment stays (dedup's keeper rank)
    assert sorted(res.removed["_row"].to_list()) == [1, 2]
    assert res.removed["keeper_id"].to_list() == [ids[0], ids[0]]
    assert res.counts["kept"] == 2
    res2 = find_shapes(df, ShapesConfig(policy="cap", cap_digit_only=2), KEEPER)
    assert res2.removed["_row"].to_list() == [2]


def test_spread_never_puts_a_group_in_one_window() -> None:
    bumps = [
        dict(path=PCC, before=f" rev: {k}.0", after=f" rev: {k}.1", comment=f"c{k}")
        for k in range(5)
    ]
    other = [dict(path="f.py", before="a" * (k + 1), after="b" * (k + 1)) for k in range(35)]
    df = items(bumps + other)
    res = find_shapes(df, ShapesConfig(policy="spread", window=16, seed=3), KEEPER)
    order = res.batch_order
    assert sorted(order.tolist()) == list(range(40))
    windows = [int(order[r]) // 16 for r in range(5)]
    assert len(set(windows)) == 3 and res.counts["spread_conflicts"] == 2  # 5 in 3 windows
    small = find_shapes(df.slice(2), ShapesConfig(policy="spread", seed=3), KEEPER)
    assert small.counts["spread_conflicts"] == 0  # 3 members, 3 windows
    # deterministic with the seed, and the seed matters
    shapes = res.shapes
    again, _ = spread_order(df, shapes, "repo", 16, 3)
    other_seed, _ = spread_order(df, shapes, "repo", 16, 4)
    assert again.tolist() == order.tolist() and other_seed.tolist() != order.tolist()


def test_bad_shapes_config_fails_at_load() -> None:
    with pytest.raises(ConfigError, match="shapes.policy: 'drop' is not one of"):
        load_config(None, ["shapes.policy=drop"])
    with pytest.raises(ConfigError, match="shapes.scope: 'file' is not one of"):
        load_config(None, ["shapes.scope=file"])
    with pytest.raises(ConfigError, match="shapes.window: must be >= 1, got 0"):
        load_config(None, ["shapes.window=0"])


# ------------------------------------------------------------------------ the stage


def _fake_input(tmp_path, rows: list[dict]) -> None:
    sr = StageRun(tmp_path / "runs" / "t", "decontaminate", "x", "x", {})  # shapes' input
    sr.begin()
    write_parquet(make_item_table(rows), sr.dir / "kept.parquet", sr.meta)
    sr.record_output("kept.parquet", "items")
    sr.finish({})


@pytest.mark.parametrize("policy", ["annotate", "cap", "spread"])
def test_stage_end_to_end(tmp_path, cli, policy: str) -> None:
    (tmp_path / "c.toml").write_text(
        f'[run]\nname = "t"\nroot = "runs"\n[shapes]\npolicy = "{policy}"\n'
    )
    res = cli("shapes", "--config", tmp_path / "c.toml", ok=False)
    assert res.exit_code == 2 and "run `editcurate decontaminate " in res.output
    _fake_input(tmp_path, [*FOUNDING, ADD_HOOK])
    res = cli("shapes", "--config", tmp_path / "c.toml")
    assert "ten largest groups" in res.output and "2 digit-only" in res.output
    out = tmp_path / "runs" / "t" / "shapes"
    kept = pl.read_parquet(out / "kept.parquet")
    removed = pl.read_parquet(out / "removed.parquet")
    shapes = pl.read_parquet(out / "shapes.parquet")
    assert shapes.height == 12 and shapes.columns == [
        "id",
        "scope",
        "shape_key",
        "shape_text",
        "digit_only",
        "group_id",
        "group_size",
    ]
    if policy == "annotate":
        assert kept["shape_group_repo"].to_list()[:2] == [kept["shape_group_repo"][0]] * 2
        assert kept["shape_digit_only"].to_list() == [True, True, False]
    if policy == "cap":
        assert removed["reason"].to_list() == ["edit_shape"]
        assert removed["comment"].to_list() == ["and 7.0.0 of this"]
        assert kept.height == 2
    if policy == "spread":
        assert kept["batch_order"].to_list() == sorted(kept["batch_order"].to_list())
    problems, _ = verify_run(tmp_path / "runs" / "t")
    assert problems == []
    assert num_rows(out / "kept.parquet") + removed.height == 3


def test_config_loads_shapes_section(tmp_path) -> None:
    p = tmp_path / "c.toml"
    p.write_text('[shapes]\npolicy = "cap"\ncap_other = 3\n')
    cfg = load_config(p, ["shapes.window=8"])
    assert (cfg.shapes.policy, cfg.shapes.cap_other, cfg.shapes.window) == ("cap", 3, 8)


# ------------------------------------------------------------------------ real history


def _jsonl_items(name: str) -> pl.DataFrame:
    df = pl.read_ndjson(shared(name), infer_schema_length=None)
    return df.select(
        "id",
        pl.lit(name).alias("source"),
        pl.col("id").alias("source_ref"),
        "repo",
        pl.col("commit").alias("change"),
        "path",
        "before",
        "after",
        pl.col("context").fill_null(""),
        "comment",
    )


def test_real_pre_commit_rev_bumps_group_together() -> None:
    df = _jsonl_items("pre-commit-hooks.jsonl.gz")
    bump = r"^\s*rev: v?[0-9][0-9.]*$"
    df = df.filter(
        (pl.col("path") == PCC) & pl.col("before").str.contains(bump)
        | pl.col("path").str.ends_with(".py")
    ).with_columns(_bump=pl.col("before").str.contains(bump) & pl.col("after").str.contains(bump))
    shapes = group_shapes(df, ShapesConfig())
    rows = shapes.filter(pl.col("scope") == "repo").sort("_row")
    bumps = rows.filter(pl.Series(df["_bump"]))
    assert bumps.height > 100  # many years of `rev:` bumps in one file
    assert bumps["digit_only"].all() and bumps["group_id"].n_unique() == 1
    assert bumps["group_size"][0] == bumps.height


def test_real_sha_pinned_bumps_group_and_code_is_not_digit_only() -> None:
    df = _jsonl_items("litgpt.jsonl.gz")
    sha_bump = r"lightning@[0-9a-f]{40}"
    pins = df.filter(
        pl.col("before").str.contains(sha_bump)
        & pl.col("after").str.contains(sha_bump)
        & (pl.col("path") == "setup.py")
    )
    code = df.filter(
        pl.col("path").str.ends_with(".py")
        & pl.col("before").str.contains("[0-9]")
        & pl.col("after").str.contains("[0-9]")
    ).head(3000)
    sample = pl.concat([pins, code]).unique("id", keep="first", maintain_order=True)
    shapes = group_shapes(sample, ShapesConfig()).filter(pl.col("scope") == "repo").sort("_row")
    pinned = shapes.head(pins.height).filter(pl.col("digit_only"))
    assert pinned.height >= 5 and pinned["group_id"].n_unique() == 1  # `@<sha>` -> `@<sha>`
    assert pinned["shape_text"][0].count(HEX) == 2
    # a real code change with numbers in it is not digit-only: text beyond digits, hex
    # letters, dots and whitespace differs (an identifier or operator changed)
    changed = shapes.join(
        sample.with_row_index("_row").with_columns(pl.col("_row").cast(pl.Int64)), on="_row"
    ).filter(
        pl.col("before").str.replace_all(r"[0-9a-fA-F.\s]", "")
        != pl.col("after").str.replace_all(r"[0-9a-fA-F.\s]", "")
    )
    assert changed.height > 100 and not changed["digit_only"].any()
