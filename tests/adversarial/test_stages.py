"""Hostile inputs past ingest: huge and odd fields through dedup, shapes and export, corpora
that end empty or tiny, export ratios, hostile rules files, markup in every field. Each case
asserts the exit code, the one error line where one is expected, that verify accounts for
every item, and that no planted secret reaches an output."""

from __future__ import annotations

import json

import polars as pl
import pyarrow.parquet as pq
import pytest

from pipeline.parts import num_rows, read_schema
from tests.adversarial.corpus import (
    GOOD,
    KEEP_ALL,
    SPLITS,
    SRC,
    copy_run,
    exported,
    finished,
    parquet_digests,
    row,
    run,
)
from tests.adversarial.hostile import (
    MARKUP,
    RICH,
    assert_sound_run,
    cli,
    one_error_line,
    write_config,
)

__all__ = ["finished"]  # a fixture
pytestmark = pytest.mark.usefixtures("quick_plots")  # conftest: plots are not what is tested


# ------------------------------------------------------------------ huge and odd fields


def test_a_2mb_before_goes_through_every_stage(tmp_path):
    huge = "x = [" + ", ".join(str(i) for i in range(300_000)) + "]"
    assert len(huge) > 2_000_000
    rows = [*GOOD, row(99, before=huge, after=huge.replace("x = [", "y = ["))]
    res, run_dir = run(tmp_path, rows, rules=KEEP_ALL)
    assert_sound_run(res, run_dir)
    ex = pl.concat(exported(run_dir).values())
    assert ex.height == 7 and ex["before"].str.len_chars().max() == len(huge)
    # the report clips the item, never pastes 2 MB into a page
    assert (run_dir / "report" / "report.html").stat().st_size < 2_000_000


def test_a_2mb_before_is_dropped_by_the_default_size_rule_and_shown_clipped(tmp_path):
    huge = "z" * 2_100_000
    res, run_dir = run(tmp_path, [*GOOD, row(99, before=huge)])
    assert_sound_run(res, run_dir)
    rej = pl.read_parquet(run_dir / "filter" / "rejected.parquet")
    assert rej.height == 1 and rej["rule"][0] in ("before_chars", "long_line", "item_tokens")
    assert (run_dir / "report" / "report.md").stat().st_size < 500_000


def test_a_10k_line_item_goes_through_every_stage(tmp_path):
    lines = "\n".join(f"line_{i} = {i}" for i in range(10_000))
    item = row(99, before=lines, after=lines.replace("line_5000 = 5000", "line_5000 = 0"))
    res, run_dir = run(tmp_path, [*GOOD, item], rules=KEEP_ALL)
    assert_sound_run(res, run_dir)
    shapes = pl.read_parquet(run_dir / "shapes" / "shapes.parquet")
    assert shapes.filter(pl.col("id") == shapes["id"][0]).height == 4  # one row per scope


def test_items_identical_but_for_a_secret(tmp_path):
    """Masked, they are one item: dedup removes the copies; no key reaches an output."""
    keys = ["AKIAZ7QX3M4N5P6R7S8T", "AKIAQ2W3E4R5T6Y7U8I9", "AKIAP0O9I8U7Y6T5R4E3"]
    rows = [row(1, context=f"aws_access_key_id = {k}") for k in keys] + GOOD[2:]
    res, run_dir = run(tmp_path, rows)
    assert_sound_run(res, run_dir, secrets=keys)
    removed = pl.read_parquet(run_dir / "dedup" / "removed.parquet")
    assert removed.height == 2 and set(removed["kind"]) <= {"same_id", "same_content"}


def test_extreme_numbers_and_times_through_every_stage(tmp_path):
    odd = [
        {"lines_added": 2**31, "created_at": "9999-12-31T23:59:59Z"},
        {"lines_added": -(2**40), "created_at": "0001-01-01T00:00:00Z"},
        {"lines_added": 1e308, "created_at": 1e30},
        {"lines_added": "NaN", "created_at": -1e18},
        {"lines_removed": 2**63, "created_at": "yesterday"},
        {"lines_removed": None, "created_at": "2024-02-30T00:00:00Z"},
    ]
    rows = [{**row(k), **o} for k, o in enumerate(odd)]
    res, run_dir = run(tmp_path, rows, '[export]\nsplit_by = "time"\nafter = "2020-01-01"\n')
    assert_sound_run(res, run_dir)
    items = pl.read_parquet(run_dir / "ingest" / "items.parquet")
    assert items.height == 6
    assert items["lines_added"].min() >= 0 and items["lines_added"].max() < 2**31


UNICODE = {
    "rtl": "x = 1  # \u202egnp.exe\u202c",
    "zwj": "na\u200dme = \u200b1\u200c",
    "combining": "cafe\u0301 = 1\u0336\u0336",
    "bom": "\ufeffx = 1",
    "digits": "x = \u0663\u0664 + \uff11\uff12",  # Arabic-Indic and full-width digits
    "astral": "s = '\U0001f600\U0001f4a9' * 3",
}


@pytest.mark.parametrize("name", list(UNICODE))
def test_unicode_edge_cases_through_dedup_and_shapes(tmp_path, name):
    text = UNICODE[name]
    rows = [
        row(1, before=text, after=text + "\n# done", comment=f"{text} fix"),
        row(2, before=text + " ", after=text + "\n# done", comment=f"{text} fix"),
        *GOOD[2:],
    ]
    res, run_dir = run(tmp_path, rows, rules=KEEP_ALL)
    assert_sound_run(res, run_dir)
    ex = pl.concat(exported(run_dir).values())
    assert any(text in b for b in ex["before"].to_list())  # kept as written


def test_lone_surrogates_escaped_in_json(tmp_path):
    """\\ud800 alone is no character: that record is an error, the others go on."""
    lines = [json.dumps(r) for r in GOOD]
    lines.append('{"before": "x = \\ud800", "after": "x = \\udfff", "comment": "lone"}')
    lines.append('{"before": "y = \\ud83d\\ude00", "after": "y = 1", "comment": "a pair is fine"}')
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    res = cli("run", "--config", write_config(tmp_path, SRC))
    run_dir = tmp_path / "runs" / "t"
    assert_sound_run(res, run_dir)
    items = pl.read_parquet(run_dir / "ingest" / "items.parquet")
    errors = pl.read_parquet(run_dir / "ingest" / "errors.parquet")
    assert items.height + errors.height == 8
    assert "y = \U0001f600" in items["before"].to_list()


# ------------------------------------------------------------------ corpora that end small


def test_every_item_rejected_gives_empty_schema_correct_outputs(tmp_path):
    import datasets

    rows = [row(k, after=row(k)["before"]) for k in range(4)]  # no-ops: all dropped
    res, run_dir = run(tmp_path, rows)
    assert_sound_run(res, run_dir)
    kept = read_schema(run_dir / "filter" / "kept.parquet")
    for s in SPLITS:
        t = pq.read_table(run_dir / "export" / f"{s}.parquet")
        assert t.num_rows == 0 and set(kept.names) - {"flags"} <= set(t.schema.names)
    dd = datasets.load_from_disk(str(run_dir / "export" / "hf"))
    assert sorted(dd) == sorted(SPLITS) and all(len(dd[s]) == 0 for s in SPLITS)
    md = (run_dir / "report" / "report.md").read_text()
    assert "The curated corpus is empty: filter removed every item" in md
    assert "noop" in md


def test_every_item_a_duplicate_of_one(tmp_path):
    res, run_dir = run(tmp_path, [GOOD[0]] * 5 + [{**GOOD[0], "comment": "other words"}])
    assert_sound_run(res, run_dir)
    assert sum(t.height for t in exported(run_dir).values()) == 1
    assert pl.read_parquet(run_dir / "dedup" / "removed.parquet").height == 5


@pytest.mark.parametrize("n", [1, 2])
def test_a_corpus_of_one_or_two_items(tmp_path, n):
    res, run_dir = run(tmp_path, GOOD[:n])
    assert_sound_run(res, run_dir)
    assert sum(t.height for t in exported(run_dir).values()) == n


@pytest.mark.parametrize("ratios", ["[1.0, 0.0, 0.0]", "[0.0, 0.0, 1.0]", "[0.5, 0.5, 0.0]"])
def test_ratios_that_leave_a_split_empty(finished, tmp_path, ratios):
    w = copy_run(finished, tmp_path)
    res = cli("run", "--config", w / "editcurate.toml", "--set", f"export.ratios={ratios}")
    run_dir = w / "runs" / "t"
    assert_sound_run(res, run_dir)
    got = {s: t.height for s, t in exported(run_dir).items()}
    assert sum(got.values()) == num_rows(run_dir / "shapes" / "kept.parquet")
    for s, r in zip(SPLITS, json.loads(ratios), strict=True):
        assert (got[s] == 0) == (r == 0), got


@pytest.mark.parametrize("ratios", ["[0.5, 0.5]", "[-1.0, 1.0, 1.0]", "[0.0, 0.0, 0.0]"])
def test_ratios_that_cannot_split_are_a_config_error(finished, tmp_path, ratios):
    w = copy_run(finished, tmp_path)
    res = cli("run", "--config", w / "editcurate.toml", "--set", f"export.ratios={ratios}")
    assert res.exit_code == 2 and "ratios" in one_error_line(res)
    assert parquet_digests(w / "runs" / "t") == finished[1]


# ------------------------------------------------------------------ rules files


@pytest.mark.parametrize(
    "yaml_text",
    [
        "name: x\nrules:\n  - !!python/object/apply:os.system ['touch PWNED']\n",
        "name: !!python/name:os.system x\nrules: []\n",
        "!!python/object/new:os.system ['touch PWNED']\n",
        "name: x\nrules:\n  - name: r\n    type: regex\n    field: comment\n"
        "    patterns: [!!python/object/apply:subprocess.getoutput ['touch PWNED']]\n",
    ],
    ids=["apply", "name", "new", "in_pattern"],
)
def test_python_tags_in_rules_are_refused_and_nothing_runs(tmp_path, monkeypatch, yaml_text):
    monkeypatch.chdir(tmp_path)
    res, run_dir = run(tmp_path, GOOD, rules=yaml_text)
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert "rules.yaml" in line and "only plain data" in line
    assert not (tmp_path / "PWNED").exists() and not (run_dir / "filter").exists()


def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path):
    levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, cur in zip("abcdefgh", "bcdefghi", strict=True):
        levels.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 9) + "]")
    text = "name: bomb\ndescription:\n  " + "\n  ".join(levels)
    text += "\nrules:\n  - name: r\n    type: noop\n    enabled: *i\n"
    res, _ = run(tmp_path, GOOD, rules=text)
    assert res.exit_code == 2 and "aliases" in one_error_line(res)


def _regex_rules(pattern: str) -> str:
    return (
        "name: x\nrules:\n  - name: evil_rule\n    type: regex\n    field: comment\n"
        f"    patterns: [{json.dumps(pattern)}]\n"
    )


@pytest.mark.parametrize(
    "pattern, problem",
    [
        ("(a+)+$", "backtrack catastrophically"),
        ("([a-z]*)*$", "backtrack catastrophically"),
        ("[", "invalid regex"),
        ("(?<=a)b", "not supported by polars"),
        ("(a)\\1", "not supported by polars"),
        ("a{99999}", "repeats 99999 times"),
        ("(?:a{50}){60}", "repeats 3000 times"),
    ],
)
def test_a_hostile_regex_in_rules_is_refused_naming_the_rule(tmp_path, pattern, problem):
    res, run_dir = run(tmp_path, GOOD, rules=_regex_rules(pattern))
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert "evil_rule" in line and problem in line and pattern in line.replace("\\\\", "\\")
    assert not (run_dir / "filter").exists()


@pytest.mark.parametrize("pattern", ["(x|x?)*y", "(x*)(x*)(x*)(x*)z", "a{1000}b"])
def test_a_regex_hostile_only_to_backtracking_runs_in_linear_time(tmp_path, pattern):
    """Rules run in polars (Rust regex, no backtracking): a pattern that would hang Python's
    re on 40 x's is just slow-looking text here."""
    import time

    rows = [*GOOD, row(9, comment="x" * 40 + "!"), row(10, comment="a" * 99999)]
    t = time.time()
    res, run_dir = run(tmp_path, rows, rules=_regex_rules(pattern))
    assert_sound_run(res, run_dir)
    assert time.time() - t < 30


@pytest.mark.parametrize(
    "text",
    ["- a\n- b\n", "just words\n", "\x00\x01\xff", "rules: {a: 1}\n", f"name: {RICH}\n"],
    ids=["list", "scalar", "binary", "rules_mapping", "markup_name"],
)
def test_a_rules_file_that_is_not_a_rule_set(tmp_path, text):
    res, run_dir = run(tmp_path, GOOD, rules=text)
    if res.exit_code == 0:  # a rule set with no rules (only a name): everything kept
        assert RICH in res.output  # the name printed as written
        assert_sound_run(res, run_dir)
        return
    assert res.exit_code == 2 and "rules.yaml" in one_error_line(res)


def test_rule_names_and_patterns_with_markup_print_as_written(tmp_path):
    rules = (
        "name: x\nrules:\n  - name: drop_markup\n    type: regex\n    field: comment\n"
        "    description: '[bold]d[/]'\n    patterns: {'[red]lbl[/red]': 'x\\[/\\]'}\n"
    )
    rows = [*GOOD, row(9, comment="has x[/] in it")]
    res, run_dir = run(tmp_path, rows, rules=rules)
    assert_sound_run(res, run_dir)
    rej = pl.read_parquet(run_dir / "filter" / "rejected.parquet")
    assert rej["rule"].to_list() == ["drop_markup"] and "[red]lbl[/red]" in rej["reason"][0]


# ------------------------------------------------------------------ markup in data, terminal


def test_markup_in_every_field_is_printed_literally_and_escaped_in_reports(tmp_path):
    rows = [
        row(k, **{f: f"{MARKUP} {k}" for f in ("repo", "path", "comment", "author", "change")})
        for k in range(4)
    ]
    rows += [row(9, before="v = 1", after="v = 2", comment=f"{RICH} bump")] * 2
    res, run_dir = run(tmp_path, rows)
    assert_sound_run(res, run_dir)
    ids = pl.read_parquet(run_dir / "ingest" / "items.parquet")["id"].to_list()
    res = cli("why", run_dir, *ids[:4])
    assert res.exit_code == 0 and res.output.count("[bold]x[/]") >= 4
