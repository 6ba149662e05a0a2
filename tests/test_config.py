from pathlib import Path

import pytest

from pipeline.config import ConfigError, load_config

BASIC = """
[run]
name = "t"
root = "runs"

[ingest]
batch_size = 100

[[ingest.sources]]
kind = "table"
path = "a.jsonl"
[ingest.sources.fields]
before = "old"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.toml"
    p.write_text(text)
    return p


def test_loads_typed_values_and_resolves_paths_against_the_config_folder(tmp_path):
    cfg = load_config(write(tmp_path, BASIC))
    assert cfg.ingest.batch_size == 100
    src = cfg.ingest.sources[0]
    assert src.fields == {"before": "old"} and src.required == ["before", "after"]
    assert src.display_name() == "a.jsonl"
    assert cfg.run_dir == tmp_path / "runs" / "t"
    assert cfg.resolve(src.path) == tmp_path / "a.jsonl"


def test_overrides_parse_toml_values_and_index_lists(tmp_path):
    cfg = load_config(
        write(tmp_path, BASIC),
        [
            "ingest.batch_size=7",
            "run.name=other",
            "ingest.sources.0.path=b.csv",
            "ingest.sources.0.fields.after=new",
        ],
    )
    assert cfg.ingest.batch_size == 7
    assert cfg.run.name == "other"
    assert cfg.ingest.sources[0].path == "b.csv"
    assert cfg.ingest.sources[0].fields == {"before": "old", "after": "new"}


def test_fingerprint_is_stable_and_follows_the_content(tmp_path):
    a = load_config(write(tmp_path, BASIC))
    b = load_config(write(tmp_path, BASIC))
    assert a.fingerprint() == b.fingerprint() and a.fingerprint("ingest") == b.fingerprint("ingest")
    c = load_config(write(tmp_path, BASIC), ["ingest.batch_size=101"])
    assert c.fingerprint("ingest") != a.fingerprint("ingest")
    # the run name is not part of the ingest section
    d = load_config(write(tmp_path, BASIC), ["run.name=x"])
    assert d.fingerprint("ingest") == a.fingerprint("ingest")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("[ingest]\nbatch_sise = 3\n", "unknown key 'ingest.batch_sise'"),
        ("[ingest]\nbatch_size = 'x'\n", "ingest.batch_size must be an integer"),
        ("[[ingest.sources]]\nkind = 'svn'\npath = 'x'\n", "kind = 'svn' is not a source kind"),
        ("[[ingest.sources]]\nkind = 'table'\n", "needs 'path'"),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\n[ingest.sources.fields]\nbefor='a'\n",
            "fields.befor: not an item field",
        ),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\n[[ingest.sources]]\nkind='table'\n"
            "path='x'\n",
            "both named 'x'",
        ),
        ("[ingest\n", "invalid TOML"),
    ],
)
def test_bad_config_names_the_file_and_the_key(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert expected in str(e.value) and str(p) in str(e.value)


def test_missing_config_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_bad_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(write(tmp_path, BASIC), ["ingest.batch_size"])
