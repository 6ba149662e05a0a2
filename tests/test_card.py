"""The export's dataset card: license metadata for the Hub, the Fields table (every exported
column described, for the format and policy the run used), the full curation funnel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import SHAPE_SCOPES, ConfigError, load_config
from pipeline.export.card import ROWS, fields, front_matter, funnel, license_lines
from pipeline.parts import read_schema
from pipeline.schema import COLUMN_DOCS, ITEM_SCHEMA, column_doc
from pipeline.stage import NAMES, SPLITS
from tests.adversarial.hostile import assert_md_safe


def _meta(*overrides: str) -> dict:
    text = front_matter(load_config(None, list(overrides)), 10)
    assert text.startswith("---\n") and text.endswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


# ------------------------------------------------------------------------ license


def test_license_other_names_the_license_and_links_it_in_the_front_matter():
    meta = _meta('export.license_name="edits-1.0"', 'export.license_link="LICENSE"')
    assert meta["license"] == "other"
    assert (meta["license_name"], meta["license_link"]) == ("edits-1.0", "LICENSE")
    keys = list(meta)  # next to license, as the Hub's spec lists them
    assert keys.index("license_name") == keys.index("license") + 1
    url = "https://example.org/licenses/edits?v=1"
    assert _meta(f'export.license_link="{url}"')["license_link"] == url


def test_license_other_unnamed_is_unknown_and_the_card_says_what_to_set():
    meta = _meta()  # the default: other, no name, no link
    assert meta["license"] == "other" and meta["license_name"] == "unknown"
    assert "license_link" not in meta  # no link rather than a made-up one
    text = " ".join(license_lines(load_config(None)))
    assert "`export.license_name`" in text and "`export.license_link`" in text
    assert "own" in text and "repository's license" in text


@pytest.mark.parametrize("license", ["mit", "apache-2.0", "cc-by-4.0"])
def test_a_listed_license_writes_no_license_name_or_link(license):
    meta = _meta(
        f'export.license="{license}"',
        'export.license_name="edits-1.0"',
        'export.license_link="https://example.org/l"',
    )
    assert meta["license"] == license
    assert "license_name" not in meta and "license_link" not in meta
    cfg = load_config(None, [f'export.license="{license}"'])
    assert license_lines(cfg) == [f"License: `{license}` (export.license)."]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("license_link", "ftp://example.org/LICENSE", "the scheme ftp:// is not http(s)"),
        ("license_link", "https://", "a URL without a host"),
        ("license_link", "/etc/LICENSE", "a path outside the dataset repository"),
        ("license_link", "../LICENSE", "a path outside the dataset repository"),
        ("license_link", "my license.txt", "has a space or a backslash"),
        ("license_link", "javascript:alert(1)", "a ':' in a path"),
        ("license_name", "My License", "must be a short id of lowercase letters"),
    ],
)
def test_a_bad_license_key_is_a_config_error_naming_the_key(tmp_path, key, value, expected):
    p = tmp_path / "c.toml"
    p.write_text(f"[export]\n{key} = {json.dumps(value)}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: export.{key}: {value!r}: ") and expected in msg
    assert "\n" not in msg
    if key == "license_link":
        assert "give an http(s) URL or a path in the dataset repository" in msg


@pytest.mark.parametrize("link", ["LICENSE", "LICENSE.md", "licenses/code.md", "http://x.org/l"])
def test_a_good_license_link_loads(link):
    assert load_config(None, [f'export.license_link="{link}"']).export.license_link == link


# ------------------------------------------------------------------------ fields


def test_every_column_that_can_reach_the_export_is_described():
    """The item's columns and those the stages add (filter's flags, shapes' annotate and
    spread columns, export's group and sft columns): each has its one line."""
    from pipeline.filter.stage import KEPT_SCHEMA

    added = [
        *KEPT_SCHEMA.names,
        *(f"shape_{what}_{scope}" for scope in SHAPE_SCOPES for what in ("group", "size")),
        "shape_digit_only",
        "batch_order",
        "export_group",
        "prompt",
        "completion",
    ]
    for name in [*ITEM_SCHEMA.names, *added]:
        assert column_doc(name), f"column {name!r} has no description in schema.COLUMN_DOCS"
    assert column_doc("shape_size_repo").endswith("scope repo (1: no other item has its shape)")
    assert column_doc("no_such_column") == "" and column_doc("shape_group_") == ""
    assert list(COLUMN_DOCS)[: len(ITEM_SCHEMA)] == ITEM_SCHEMA.names  # written beside it


def test_the_fields_table_escapes_and_says_when_a_column_has_no_description():
    import pyarrow as pa

    rows = fields(pa.schema([("id", pa.string()), ("a|b*", pa.list_(pa.string()))]))
    assert rows[2].startswith("| `id` | `string` | content id")
    assert rows[3] == "| `a\\|b*` | `list<item: string>` | (no description) |"


# ------------------------------------------------------------------------ funnel


def _manifest(d: Path, counts: dict, **extra) -> None:
    d.mkdir(parents=True)
    (d / "manifest.json").write_text(json.dumps({"counts": counts, "outputs": {}, **extra}))


def test_the_funnel_lists_every_stage_that_ran_in_pipeline_order(tmp_path):
    """Manifests written out of order: rows come in PIPELINE order, decontaminate and shapes
    included, a stage with no manifest (filter here) left out, names from data escaped."""
    _manifest(tmp_path / "shapes", {"items_in": 7, "kept": 6, "removed": 1}, policy="cap")
    _manifest(
        tmp_path / "decontaminate",
        {"items_in": 9, "kept": 7, "removed": 2, "removed_same_content": 1, "removed_near": 1},
        benchmarks={"b|*x*.jsonl": {"items": 3, "errors": 0, "removed": 2}},
    )
    _manifest(tmp_path / "dedup", {"items_in": 10, "kept": 9, "removed": 1, "removed_near": 1})
    _manifest(tmp_path / "ingest", {"records_in": 11, "items_out": 10, "errors_out": 1})
    counts = {"items_in": 6, "train": 4, "validation": 1, "test": 1}
    rows = funnel(tmp_path, counts)
    assert [r.split("|")[1].strip() for r in rows[2:]] == [
        "ingest",
        "dedup",
        "decontaminate",
        "shapes",
        "export",
    ]
    assert rows[4].startswith("| decontaminate | 9 | 7 | 2 | `b\\|*x*.jsonl` 2 (same content 1")
    assert rows[5].startswith("| shapes | 7 | 6 | 1 | policy cap")
    assert rows[6] == "| export | 6 | 6 | 0 | train 4, validation 1, test 1 |"
    assert set(ROWS) < set(NAMES)  # a row of its own only for a stage of the pipeline


# ------------------------------------------------------------------------ the card of a run


def _cli(*args: object) -> str:
    res = CliRunner().invoke(app, [str(a) for a in args])
    assert res.exit_code == 0, f"exit {res.exit_code}: {res.output}\n{res.exception!r}"
    return res.output


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """40 items and a benchmark that holds one of them; license other, named and linked."""
    d = tmp_path_factory.mktemp("card")
    rows = [
        {"before": f"x = {k}", "after": f"y = {k}", "comment": f"rename x in f{k}"}
        for k in range(40)
    ]
    (d / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (d / "bench.jsonl").write_text(json.dumps(rows[3]) + "\n")
    (d / "c.toml").write_text(
        '[run]\nname = "card"\nroot = "runs"\n[[ingest.sources]]\nkind = "table"\n'
        'path = "d.jsonl"\n[decontaminate]\nagainst = ["bench.jsonl"]\n'
        '[export]\nlicense_name = "edits-1.0"\nlicense_link = "https://example.org/LICENSE"\n'
    )
    return d


def _card(corpus: Path, *sets: str) -> tuple[str, dict, list[str]]:
    """Runs the pipeline with the overrides (fresh stages are skipped): the card, its front
    matter and the exported files' columns (the same in every split)."""
    _cli("run", "--config", corpus / "c.toml", *(a for s in sets for a in ("--set", s)))
    exp = corpus / "runs" / "card" / "export"
    names = {tuple(read_schema(exp / f"{s}.parquet").names) for s in SPLITS}
    assert len(names) == 1
    text = (exp / "README.md").read_text()
    return text, yaml.safe_load(text.split("---\n")[1]), list(names.pop())


def _section(card: str, title: str) -> list[str]:
    return card.split(f"## {title}\n\n", 1)[1].split("\n\n", 1)[0].splitlines()


def _described(card: str) -> dict[str, str]:
    """column -> description, from the card's Fields table."""
    rows = _section(card, "Fields")[2:]
    return {r.split(" | ")[0].strip("| `"): r.split(" | ")[2].rstrip(" |") for r in rows}


def test_the_card_of_a_run(corpus):
    card, meta, columns = _card(corpus)
    assert meta["license"] == "other" and meta["license_name"] == "edits-1.0"
    assert meta["license_link"] == "https://example.org/LICENSE"
    assert "License: `edits-1.0`, `https://example.org/LICENSE`" in card
    # every exported column, in the files' order, with its description
    described = _described(card)
    assert list(described) == columns
    assert "prompt" not in columns and "shape_group_repo" in columns  # plain, annotate
    for c in columns:
        assert described[c] and "no description" not in described[c], c
    # the funnel: every stage that ran, in pipeline order, decontaminate removing the twin
    rows = _section(card, "Curation funnel")[2:]
    assert [r.split("|")[1].strip() for r in rows] == list(NAMES)
    dec = next(r for r in rows if r.startswith("| decontaminate "))
    assert dec.startswith("| decontaminate | 40 | 39 | 1 | `bench.jsonl` 1 ")
    assert re.search(r"^\| shapes \| 39 \| 39 \| 0 \| policy annotate", "\n".join(rows), re.M)
    assert "(ingest, filter, dedup, decontaminate, shapes)" in card
    assert_md_safe(card, ("Splits", "Fields", "Curation funnel", "Sources", "License"))


def test_the_fields_follow_the_format_and_the_policy_and_the_card_is_deterministic(corpus):
    plain = _card(corpus)[0]
    card, _, columns = _card(corpus, "export.format=sft", "shapes.policy=spread")
    described = _described(card)
    assert list(described) == columns
    assert {"prompt", "completion", "batch_order"} <= set(columns)
    assert not any(c.startswith("shape_group_") for c in columns)
    assert all(d and "no description" not in d for d in described.values())
    assert described["completion"].startswith("the SFT target")
    assert "| shapes | 39 | 39 | 0 | policy spread" in card
    # back to the defaults: the same card, byte for byte
    assert _card(corpus)[0] == plain


def test_the_exported_files_hold_no_column_the_schema_does_not_describe(corpus):
    _card(corpus, "shapes.policy=cap")
    exp = corpus / "runs" / "card" / "export"
    for s in SPLITS:
        for f in pq.read_schema(next((exp / f"{s}.parquet").glob("*.parquet"))):
            assert column_doc(f.name), f"exported column {f.name!r} has no description"
