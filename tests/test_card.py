"""The export's dataset card: license metadata for the Hub, the Fields table (every column
that can reach the export described)."""

from __future__ import annotations

import json

import pytest
import yaml

from pipeline.config import SHAPE_SCOPES, ConfigError, load_config
from pipeline.export.card import fields, front_matter, license_lines
from pipeline.schema import COLUMN_DOCS, ITEM_SCHEMA, column_doc


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
