"""The filter stage: each default rule (and what it must not catch), rule order and overlaps,
secret masking, rules-file validation, strict's include/override, and the stage end to end."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.filter.apply import apply_rules, reference_decide
from pipeline.filter.rules import RULES_DIR, RulesError, check_pattern, load_rules
from pipeline.filter.stage import KEPT_SCHEMA, REJECTED_SCHEMA
from pipeline.parts import num_rows
from pipeline.runs import StageRun, write_parquet
from pipeline.schema import ITEM_SCHEMA, item_id
from pipeline.secrets.rules import TOKEN_FORMATS
from tests.conftest import shared, toml_config

DEFAULT = load_rules(RULES_DIR / "default.yaml")
STRICT = load_rules(RULES_DIR / "strict.yaml")
GH_TOKEN = "ghp_" + "a1B2c3D4e5" * 4  # 40 chars after the prefix
PEM_BODY = "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun"  # one 64-char line


def item(**kw) -> dict:
    """A clean, kept-by-default item; keyword arguments override fields."""
    row = dict(
        source="t",
        source_ref="row 1",
        repo="o/r",
        change="c1",
        path="src/app.py",
        language="python",
        before="total = compute(x)",
        after="total = compute(x, cache=True)",
        context="",
        comment="cache the result here",
        author="alice",
        author_is_bot=False,
        lines_removed=1,
        lines_added=1,
        created_at=None,
    )
    row.update(kw)
    row["id"] = row.get("id") or item_id(
        row["repo"], row["change"], row["path"], row["before"], row["after"], row["comment"]
    )
    return row


def frame(rows: list[dict]) -> pl.DataFrame:
    return pl.from_arrow(pa.Table.from_pylist(rows, schema=ITEM_SCHEMA))


def decide(rules=DEFAULT, **kw) -> tuple[str | None, str | None, list[str]]:
    """(rule, reason, flags) for one item."""
    res = apply_rules(frame([item(**kw)]), rules)
    if res.rejected.height:
        r = res.rejected.row(0, named=True)
        return r["rule"], r["reason"], r["flags"]
    return None, None, res.kept.row(0, named=True)["flags"]


CAUGHT = [
    # (fields, rule, words the reason must contain)
    (dict(after=f"token = '{GH_TOKEN}'"), "secret", "github_token in after"),
    (
        dict(context=f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}\n-----END RSA PRIVATE KEY-----"),
        "secret",
        "private_key in context",
    ),
    (dict(before="key_id = 'AKIAIOSFODNN7EXAMPLE'"), "secret", "aws_access_key_id in before"),
    (dict(comment="use xoxb-123456789012-abcdefghijkl here"), "secret", "slack_token in comment"),
    (
        dict(after='DB = "postgres://admin:hunter2@db.internal/app"'),
        "secret",
        "password_in_url in after",
    ),
    (dict(before="a\x00b"), "binary", "before matches 'nul_byte'"),
    (dict(after="caf\ufffd"), "binary", "after matches 'replacement_char'"),
    (dict(after="print('\x1b[0m')"), "control_chars", "after matches 'control_char'"),
    (dict(path="uv.lock"), "lock_file", "'*.lock'"),
    (dict(path="poetry.lock"), "lock_file", "'*.lock'"),
    (dict(path="web/package-lock.json"), "lock_file", "'package-lock.json'"),
    (dict(path="api/v1/service_pb2.py"), "generated_file", "'*_pb2.py'"),
    (dict(path="docs/_build/html/index.html"), "generated_file", "'_build/'"),
    (dict(path="vendor/github.com/x/y.go"), "vendored_file", "'vendor/'"),
    (dict(path="web/node_modules/react/index.js"), "vendored_file", "'node_modules/'"),
    (dict(path="static/app.min.js"), "generated_file", "'*.min.js'"),
    (dict(author="dependabot[bot]", author_is_bot=True), "bot_author", "(author_is_bot)"),
    (dict(author="docs-bot"), "bot_author", "matches '-bot$'"),
    (dict(comment="[pre-commit.ci] pre-commit autoupdate"), "bot_comment", "pre_commit_ci"),
    (
        dict(comment="build(deps): bump actions/checkout from 4 to 5 (#2109)"),
        "bot_comment",
        "dependabot_bump",
    ),
    (dict(comment="Bump lodash from 4.17.20 to 4.17.21"), "bot_comment", "dependabot_bump"),
    (dict(before="x = 1", after="x = 1"), "noop", "before == after"),
    (dict(before="", after="", lines_removed=0, lines_added=0), "noop", "before == after"),
    (dict(comment=""), "contentless_comment", "no_content"),
    (dict(comment="LGTM"), "contentless_comment", "no_content"),
    (dict(comment="lgtm!"), "contentless_comment", "no_content"),
    (dict(comment="+1"), "contentless_comment", "no_content"),
    (dict(comment="👍🎉"), "contentless_comment", "no_content"),
    (dict(comment="Done."), "contentless_comment", "no_content"),
    (dict(comment="nit"), "contentless_comment", "no_content"),
    (dict(before="x" * 16001), "before_chars", "before: 16001 chars > max 16000"),
    (dict(after="a\n" * 401), "after_lines", "after: 401 lines > max 400"),
    (dict(comment="ab"), "comment_chars", "comment: 2 chars < min 3"),
    (dict(comment="why\n" * 61), "comment_lines", "comment: 61 lines > max 60"),
    (dict(before="()" * 4200), "item_tokens", "tokens > max 8192"),
    (dict(after="x" * 1200), "long_line", "1200 chars in its longest line > max 1000"),
]


@pytest.mark.parametrize(("fields", "rule", "why"), CAUGHT, ids=lambda v: str(v)[:40])
def test_each_default_rule_catches_its_case_with_a_reason(fields, rule, why):
    got, reason, _ = decide(**fields)
    assert got == rule
    assert why in reason


NOT_CAUGHT = [
    dict(author="Talbot"),  # ends in "bot" but is a person
    dict(author="Abbot Cabot"),
    dict(before="    rev: v1.20.2", after="    rev: v2.0.0", comment="Bump hooks"),  # bump
    dict(comment="nit: rename to total_count"),
    dict(comment="done refactoring the parser"),
    dict(path="src/locker.py"),
    dict(path="src/vendors.py"),
    dict(path="tools/minify.js"),
    dict(path="tools/lockfile.py"),
    dict(before="key = 'AKIASDFASDF'"),  # too short for an AWS key id
    dict(after="URL = 'https://user@example.com/x'"),  # no password
    dict(after="URL = 'https://${USER}:${TOKEN}@github.com/x'"),  # placeholders
    dict(after="url = 'http://localhost:8080/x'"),
    dict(after="remote = 'git@github.com:org/repo.git'"),
    dict(after="HEADERS = [b'BEGIN RSA PRIVATE KEY']"),  # a mention, not a key
    dict(before="a\tb\r\n\fc"),  # tab, CR, form feed are text
    dict(before="", after="x = 1", lines_removed=0),  # pure addition
]


@pytest.mark.parametrize("fields", NOT_CAUGHT, ids=lambda v: str(v)[:40])
def test_default_rules_keep_what_they_must_not_catch(fields):
    assert decide(**fields) == (None, None, [])


def test_a_blank_line_removal_is_not_a_noop_but_a_blank_edit():
    for removed, added in ((1, 0), (0, 1)):
        got = decide(before="", after="", lines_removed=removed, lines_added=added)
        assert got == (
            "blank_edit",
            "before and after are blank (empty or whitespace only)",
            [],  # whitespace_only matched too: a drop rule now, so in `rules`, not `flags`
        )


def test_whitespace_only_edits_are_dropped_by_default():
    """Kept, flagged, with `whitespace_only: {action: flag}`: tests/test_filter_code_defaults.py"""
    assert decide(
        before="if x:\n  y()", after="if x:\n    y()", lines_removed=2, lines_added=2
    ) == ("whitespace_only", "before and after differ only in whitespace", [])


def test_first_rule_in_order_is_recorded_and_every_hit_counted():
    rows = [
        item(path="uv.lock", author="dependabot[bot]", author_is_bot=True, source_ref="row 1"),
        item(
            author="dependabot[bot]",
            author_is_bot=True,
            source_ref="row 2",
            comment="Bump x from 1 to 2",
        ),
        item(source_ref="row 3"),
    ]
    res = apply_rules(frame(rows), DEFAULT)
    rej = res.rejected.select("source_ref", "rule", "rules").rows()
    assert rej == [
        ("row 1", "lock_file", ["lock_file", "bot_author"]),
        ("row 2", "bot_author", ["bot_author", "bot_comment"]),
    ]
    assert res.kept["source_ref"].to_list() == ["row 3"]
    assert (res.dropped["lock_file"], res.dropped["bot_author"], res.dropped["bot_comment"]) == (
        1,
        1,
        0,
    )
    assert (res.hits["bot_author"], res.hits["bot_comment"]) == (2, 1)
    assert res.overlaps == {("lock_file", "bot_author"): 1, ("bot_author", "bot_comment"): 1}


def _strings(df: pl.DataFrame) -> str:
    return "\n".join(
        str(v) for c in df.columns for v in df[c].to_list() if isinstance(v, (str, list))
    )


def test_secrets_are_masked_in_every_output_and_never_in_a_reason(tmp_path):
    rows = [
        item(after=f"t = '{GH_TOKEN}'", comment=f"rotate {GH_TOKEN}", source_ref="r1"),
        item(path="uv.lock", before="k = 'AKIAIOSFODNN7EXAMPLE'", source_ref="r2"),
    ]
    res = apply_rules(frame(rows), DEFAULT)
    assert GH_TOKEN not in _strings(res.rejected)
    assert "AKIAIOSFODNN7EXAMPLE" not in _strings(res.rejected)
    assert res.rejected.row(0, named=True)["after"] == "t = '[REDACTED:github_token]'"
    assert res.rejected["reason"].to_list() == [
        "github_token in after",
        "aws_access_key_id in before",
    ]
    assert res.masked == 2
    # secrets only flagged: r1 is kept and r2 rejected under lock_file, both masked
    p = tmp_path / "flag.yaml"
    p.write_text(f"include: {RULES_DIR / 'default.yaml'}\noverride:\n  secret: {{action: flag}}\n")
    res = apply_rules(frame(rows), load_rules(p))
    assert res.kept.row(0, named=True)["flags"] == ["secret"]
    assert res.kept.row(0, named=True)["comment"] == "rotate [REDACTED:github_token]"
    assert res.rejected.select("rule", "flags").row(0) == ("lock_file", ["secret"])
    assert "AKIAIOSFODNN7EXAMPLE" not in _strings(res.rejected)
    assert GH_TOKEN not in _strings(res.kept)


def test_a_secret_pattern_names_a_token_format_the_masker_spells():
    """`github_pat: {format: github_token}`: the masker's regex, written once, under the rule
    file's label (its reason and its mask say github_pat, as when the file spelled it)."""
    secret = next(r for r in DEFAULT.rules if r.name == "secret")
    patterns = dict(secret.params["patterns"])
    assert patterns["github_pat"] == TOKEN_FORMATS["github_token"]
    assert patterns["google_api_key"] == TOKEN_FORMATS["google_api_key"]
    assert patterns["huggingface_token"] == TOKEN_FORMATS["huggingface_token"]
    pat = "github_pat_11ALKOmxg0JTeKdNnFRIBXu_DxtpYlSXpfKtHF4vUCsMehGAkWvj7FAc9QeWJKY40uvSwMFL"
    res = apply_rules(frame([item(after=f"t = '{pat}'")]), DEFAULT)
    assert res.rejected.select("rule", "reason", "after").row(0) == (
        "secret",
        "github_pat in after",
        "t = '[REDACTED:github_pat]'",
    )


def assert_vectorised_is_the_reference(rows: list[dict], *rule_sets, found=None) -> None:
    """Each row's (rule, flags) under every rule set: apply_rules as reference_decide says."""
    for rules in rule_sets:
        res = apply_rules(frame(rows), rules, found)
        got = {r["source_ref"]: (r["rule"], r["flags"]) for r in res.rejected.iter_rows(named=True)}
        got |= {r["source_ref"]: (None, r["flags"]) for r in res.kept.iter_rows(named=True)}
        assert len(got) == len(rows)
        for row in rows:
            assert got[row["source_ref"]] == reference_decide(rules, row, found), row["source_ref"]


def test_vectorised_rules_agree_with_the_per_row_reference():
    rows = [item(**f, source_ref=f"c{i}") for i, (f, _, _) in enumerate(CAUGHT)]
    rows += [item(**f, source_ref=f"n{i}") for i, f in enumerate(NOT_CAUGHT)]
    rows.append(item(before="", after="", lines_removed=1, lines_added=0, source_ref="b"))
    assert_vectorised_is_the_reference(rows, DEFAULT, STRICT)


def test_strict_includes_default_and_overrides_its_thresholds():
    by = {r.name: r for r in STRICT.rules}
    assert [r.name for r in STRICT.rules][: len(DEFAULT.rules)] == [r.name for r in DEFAULT.rules]
    assert by["before_chars"].params["max"] == 4000
    assert by["whitespace_only"].action == "drop"
    assert {r.name: r for r in DEFAULT.rules}["before_chars"].params["max"] == 16000
    assert decide(STRICT, before="x" * 5000)[0] == "before_chars"
    assert decide(DEFAULT, comment="v1.2.3-rc1")[0] == "contentless_comment"  # a version only
    assert decide(STRICT, path="docs/guide.md")[0] == "prose_file"
    assert decide(STRICT, before="a  b", after="a b")[0] == "whitespace_only"
    assert DEFAULT.fingerprint != STRICT.fingerprint


def _load(tmp_path: Path, text: str, name: str = "bad.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return load_rules(p)


RULE = "rules:\n  - name: r1\n"
BAD = [
    (RULE + "    type: sparkle\n", "rule 'r1': unknown rule type 'sparkle'"),
    (
        RULE + "    type: length\n    feild: before\n    unit: chars\n    max: 3\n",
        "rule 'r1': unknown key 'feild' for a length rule",
    ),
    (
        RULE + "    type: length\n    field: befor\n    unit: chars\n    max: 3\n",
        "rule 'r1': field 'befor' is not a text field",
    ),
    (RULE + "    type: length\n    field: before\n    unit: chars\n", "needs `min`, `max` or both"),
    (
        RULE + "    type: length\n    field: before\n    unit: chars\n    min: 5\n    max: 3\n",
        "min 5 > max 3",
    ),
    (RULE + "    type: noop\n    action: delete\n", "action 'delete' must be drop or flag"),
    (RULE + "    type: regex\n    field: comment\n    patterns: ['(']\n", "invalid regex '('"),
    (
        RULE + "    type: regex\n    field: comment\n    patterns: ['(a+)+$']\n",
        "can backtrack catastrophically",
    ),
    (
        RULE + "    type: regex\n    field: comment\n    patterns: ['^(a|aa)+$']\n",
        "branches overlap",
    ),
    (
        RULE + "    type: regex\n    field: comment\n    patterns: ['foo(?=bar)']\n",
        "not supported by polars",
    ),
    (
        RULE + "    type: regex\n    field: comment\n    patterns: ['(a)\\1']\n",
        "backreferences are not supported",
    ),
    (RULE + "    type: regex\n    field: comment\n", "a regex rule needs `patterns`"),
    (
        RULE + "    type: secret\n    patterns: {gh: {format: no_such_token}}\n",
        "`patterns`: {'format': 'no_such_token'} must be {format: <name>}, a name of github_token",
    ),
    (  # only a secret rule's kind names formats
        RULE + "    type: regex\n    field: comment\n    patterns: {gh: {format: github_token}}\n",
        "`patterns` must be a non-empty list of regexs or a mapping",
    ),
    (RULE + "    type: noop\n  - name: r1\n    type: noop\n", "rule 'r1': already defined"),
    ("rulez: []\n", "unknown top-level key 'rulez'"),
    ("rules: [\n", "invalid YAML"),
    ("!!python/object/apply:os.system ['echo pwned']\n", "invalid YAML"),
    ("include: nowhere\n", "include 'nowhere'"),
    ("include: default\noverride:\n  no_such: {max: 1}\n", "override 'no_such': no such rule"),
    ("include: default\noverride:\n  noop: {type: regex}\n", "cannot change `type`"),
    (
        "include: default\noverride:\n  before_chars: {max: -1}\n",
        "rule 'before_chars': `max` must be a non-negative integer",
    ),
]


@pytest.mark.parametrize(("text", "problem"), BAD, ids=[p for _, p in BAD])
def test_a_bad_rules_file_fails_at_load_naming_file_rule_and_problem(tmp_path, text, problem):
    (tmp_path / "default.yaml").write_text((RULES_DIR / "default.yaml").read_text())
    with pytest.raises(RulesError) as e:
        _load(tmp_path, text)
    msg = str(e.value)
    assert problem in msg
    assert "bad.yaml" in msg


def test_an_include_cycle_is_reported(tmp_path):
    (tmp_path / "a.yaml").write_text("include: b\n")
    (tmp_path / "b.yaml").write_text("include: a\n")
    with pytest.raises(RulesError, match="include cycle"):
        load_rules(tmp_path / "a.yaml")


@pytest.mark.parametrize(
    "pattern",
    [
        r"\w+|[^\w\s]",
        r"(?:ab)+",
        r"a{2,5}",
        r"^[\W_]*(?:lgtm|done)?[\W_]*$",
        r"(?:\w+\.){1,3}",
        r"(?:foo|bar)+",
        r"[0-9][0-9.]*",
    ],
)
def test_safe_patterns_are_accepted(pattern):
    assert check_pattern(pattern) is None


@pytest.mark.parametrize(
    "pattern", [r"(a+)+", r"(a*)*", r"(\w+\s?)+$", r"(?:a|a)*", r"(a|aa)+", r"x(?:y|yz)*"]
)
def test_nested_or_ambiguous_repeats_are_rejected(pattern):
    assert "catastrophically" in check_pattern(pattern)


# ---------------------------------------------------------------- the stage


def _fake_ingest(run_dir: Path, rows: list[dict]) -> None:
    """An ingest stage folder as the ingest stage leaves it, without depending on a reader."""
    sr = StageRun(run_dir, "ingest", "fp", "cfg", {"x": "sha256:0"})
    sr.begin()
    write_parquet(pa.Table.from_pylist(rows, schema=ITEM_SCHEMA), sr.dir / "items.parquet", sr.meta)
    sr.record_output("items.parquet", "items")
    sr.finish({})


def test_stage_writes_kept_and_rejected_that_verify_conserves(tmp_path, cli):
    cfg = toml_config(tmp_path, '[filter]\nrules = "my.yaml"\nbatch_size = 2\n')
    (tmp_path / "my.yaml").write_text("include: " + str(RULES_DIR / "default.yaml") + "\n")
    rows = [
        item(source_ref="r1"),
        item(source_ref="r2", path="uv.lock"),
        item(source_ref="r2dup", path="uv.lock"),  # an exact duplicate: same id twice
        item(source_ref="r3", path="docs/usage.md"),  # prose_file: flagged
        item(source_ref="r4", after=f"t = '{GH_TOKEN}'"),
    ]
    rows[2]["id"] = rows[1]["id"]
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, rows)
    out = cli("filter", "--config", cfg).output
    assert "lock_file" in out and "share of input" in out
    kept = pq.read_table(run / "filter" / "kept.parquet")
    rej = pq.read_table(run / "filter" / "rejected.parquet")
    assert kept.schema.remove_metadata() == KEPT_SCHEMA
    assert rej.schema.remove_metadata() == REJECTED_SCHEMA
    assert kept.select(ITEM_SCHEMA.names).schema.remove_metadata() == ITEM_SCHEMA  # dedup reads it
    assert kept.column("source_ref").to_pylist() == ["r1", "r3"]
    assert kept.column("flags").to_pylist() == [[], ["prose_file"]]
    assert rej.column("rule").to_pylist() == ["lock_file", "lock_file", "secret"]
    assert GH_TOKEN not in str(rej.column("after").to_pylist())
    m = json.loads((run / "filter" / "manifest.json").read_text())
    assert m["counts"] == {
        "items_in": 5,
        "kept": 2,
        "rejected": 3,
        "flagged": 1,
        "secrets_masked": 1,
    }
    assert cli("verify", run).exit_code == 0
    # unchanged: skipped; a changed rules file: re-run
    assert "skipped" in cli("filter", "--config", cfg).output
    (tmp_path / "my.yaml").write_text(
        "include: " + str(RULES_DIR / "default.yaml") + "\noverride:\n  lock_file: {action: flag}\n"
    )
    out = cli("filter", "--config", cfg).output
    assert "skipped" not in out
    assert num_rows(run / "filter" / "rejected.parquet") == 1


def test_an_empty_input_gives_empty_outputs_that_verify(tmp_path, cli):
    cfg = toml_config(tmp_path, "")
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, [])
    cli("filter", "--config", cfg)
    assert pq.read_table(run / "filter" / "kept.parquet").schema.remove_metadata() == KEPT_SCHEMA
    assert num_rows(run / "filter" / "rejected.parquet") == 0
    assert cli("verify", run).exit_code == 0


def test_verify_fails_when_an_item_goes_missing(tmp_path, cli):
    cfg = toml_config(tmp_path, "")
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, [item(source_ref="r1"), item(source_ref="r2", path="uv.lock")])
    cli("filter", "--config", cfg)
    m = json.loads((run / "filter" / "manifest.json").read_text())
    m["conservation"]["outputs"] = ["kept.parquet"]  # as if rejected.parquet were not written
    (run / "filter" / "manifest.json").write_text(json.dumps(m))
    res = cli("verify", run, ok=False)
    assert res.exit_code == 1 and "1 ids lost" in res.output


def test_stage_errors_are_one_line_with_exit_2(tmp_path, cli):
    cfg = toml_config(tmp_path, "")
    res = cli("filter", "--config", cfg, ok=False)
    assert res.exit_code == 2 and "run `editcurate ingest " in res.output
    _fake_ingest(tmp_path / "runs" / "t", [item()])
    (tmp_path / "bad.yaml").write_text("rules:\n  - name: r1\n    type: sparkle\n")
    res = cli("filter", "--config", cfg, "--set", "filter.rules=bad.yaml", ok=False)
    assert res.exit_code == 2 and "unknown rule type 'sparkle'" in res.output
    res = cli("filter", "--config", cfg, "--set", "filter.rules=nope", ok=False)
    assert res.exit_code == 2 and "available: default, strict" in res.output


def test_shared_pre_commit_hooks_bot_autoupdates_are_caught(tmp_path, cli):
    src = shared("pre-commit-hooks.jsonl.gz")
    cfg = toml_config(
        tmp_path,
        f'[[ingest.sources]]\nname = "pch"\nkind = "table"\n'
        f'path = "{src}"\n[ingest.sources.fields]\nchange = "commit"\n',
    )
    cli("ingest", "--config", cfg)
    cli("filter", "--config", cfg)
    assert cli("verify", tmp_path / "runs" / "t").exit_code == 0
    d = tmp_path / "runs" / "t" / "filter"
    rej = pl.read_parquet(d / "rejected.parquet")
    kept = pl.read_parquet(d / "kept.parquet")
    assert kept.filter(pl.col("author") == "pre-commit-ci[bot]").height == 0
    assert kept.filter(pl.col("comment").str.starts_with("[pre-commit.ci]")).height == 0
    assert rej.filter(pl.col("rule") == "bot_author").height == 214
    blank = (pl.col("before") == "") & (pl.col("after") == "")
    assert kept.filter(blank).height == 0  # blank-line additions/removals: not no-ops, but blank
    assert rej.filter(blank & (pl.col("rule") == "blank_edit")).height == 44
    noop = rej.filter(pl.col("rules").list.contains("noop"))
    assert noop.height == 7
    assert noop.filter(pl.col("rule") == "noop").height == 7  # secrets in their context only
    counts = dict(rej.group_by("rule").len().iter_rows())
    # release entries added whole to CHANGELOG(.md) (55), and edits of its text (41)
    assert counts["changelog_entry"] == 96
    assert counts["formatter_commit"] == 73  # add-trailing-comma / pyupgrade runs, fixups
    # AWS-shaped test fixtures (AKIA... key ids), masked at ingest; 4 more held them in their
    # context only (kept, the context masked); PEM header mentions are not keys. Was 8: the
    # eighth, tests/detect_aws_credentials_test.py, held only `aws_secret_Access_key=` and 22
    # characters, a guess with no format in a test file: kept, unmasked
    assert counts["secret_masked"] == 7 and "secret" not in counts
    assert "revert_commit" not in counts


def test_an_empty_rules_file_and_an_empty_matching_secret_pattern_are_refused(tmp_path):
    """An empty file is likely the wrong one (`rules: []` keeps every item on purpose); a
    secret pattern matching "" would put a mask between every two letters."""
    from pipeline.filter.rules import RulesError, load_rules

    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    with pytest.raises(RulesError, match="rules file is empty"):
        load_rules(empty)
    none = tmp_path / "none.yaml"
    none.write_text("rules: []\n")
    assert load_rules(none).rules == ()
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - {name: s, type: secret, action: drop, patterns: {k: 'a*'}}\n")
    with pytest.raises(RulesError, match="must not match the empty string"):
        load_rules(bad)
