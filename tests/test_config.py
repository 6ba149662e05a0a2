import hashlib
import json
from pathlib import Path

import polars as pl
import pytest
from pydantic import ValidationError

from pipeline.config import (
    ITEM_FIELDS,
    RANK_KEY_NAMES,
    SHINGLE_MODES,
    TRANSFORM_NAMES,
    ConfigError,
    DedupConfig,
    canonical_text,
    config_toml,
    load_config,
)
from pipeline.dedup import clusters, shingles
from pipeline.ingest import mapping

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


def test_ingest_root_moves_every_relative_source_and_no_absolute_one(tmp_path):
    from pipeline.ingest.stage import source_path

    two = BASIC + '\n[[ingest.sources]]\nkind = "table"\npath = "/abs/b.jsonl"\n'
    cfg = load_config(write(tmp_path, two), ["ingest.root=corpora"])
    a, b = cfg.ingest.sources
    assert source_path(cfg, a) == tmp_path / "corpora" / "a.jsonl"  # root: from the config
    assert source_path(cfg, b) == Path("/abs/b.jsonl")
    cfg = load_config(write(tmp_path, two), ["ingest.root=/data/shared"])
    assert source_path(cfg, cfg.ingest.sources[0]) == Path("/data/shared/a.jsonl")
    cfg = load_config(write(tmp_path, two))  # unset: the config's folder
    assert source_path(cfg, cfg.ingest.sources[0]) == tmp_path / "a.jsonl"


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
        (
            "[ingest]\nbatch_sise = 3\n",
            "unknown key 'ingest.batch_sise' (did you mean 'batch_size'?)",
        ),
        ("[dedupe]\nthreshold = 0.7\n", "unknown key 'dedupe' (did you mean 'dedup'?)"),
        ("[ingest]\nbatch_size = 'x'\n", "ingest.batch_size: must be an integer, got 'x'"),
        ("[ingest]\nbatch_size = 0\n", "ingest.batch_size: must be >= 1, got 0"),
        ("[shapes]\npath_in_key = 1\n", "shapes.path_in_key: must be true or false, got 1"),
        ("[run]\nname = 3\n", "run.name: must be a string, got 3"),
        ("[run]\nname = '../x'\n", "run.name: '../x': must be a plain folder name"),
        ("dedup = 3\n", "dedup: must be a table, got 3"),
        (
            "[[ingest.sources]]\nkind = 'svn'\npath = 'x'\n",
            "ingest.sources.0.kind: 'svn' is not one of 'table', 'github'",
        ),
        ("[[ingest.sources]]\nkind = 'table'\n", "ingest.sources.0: needs 'path'"),
        (
            "[ingest.sources]\nkind = 'table'\npath = 'x'\n",
            "ingest.sources: must be an array of tables ([[ingest.sources]])",
        ),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\n[ingest.sources.fields]\nbefor='a'\n",
            "ingest.sources.0.fields.befor: not an item field",
        ),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\n[ingest.sources.transforms]\n"
            "comment='upper'\n",
            "ingest.sources.0.transforms.comment: 'upper' is not a transform",
        ),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\nformat='xml'\n",
            "ingest.sources.0.format: 'xml' is not a table format",
        ),
        (
            "[[ingest.sources]]\nkind='git'\npath='x'\ncontext_lines=-1\n",
            "ingest.sources.0.context_lines: must be >= 0, got -1",
        ),
        (
            "[[ingest.sources]]\nkind='table'\npath='x'\n[[ingest.sources]]\nkind='table'\n"
            "path='x'\n",
            "ingest.sources.1.name: two sources are both named 'x'",
        ),
        ("[ingest]\nbot_patterns = ['(']\n", "ingest.bot_patterns.0: '(' is not a regular"),
        ("[filter]\nbatch_size = 0\n", "filter.batch_size: must be >= 1, got 0"),
        ("[dedup]\nthreshold = 1.5\n", "dedup.threshold: must be <= 1.0, got 1.5"),
        ("[dedup]\nedge_floor = 0\n", "dedup.edge_floor: must be > 0.0, got 0"),
        (
            "[dedup]\nbands = 32\nrows = 16\n",
            "dedup.bands: bands x rows = 32 x 16 = 512 must fit in num_perm (256)",
        ),
        ("[dedup]\nmax_bucket = 10\n", "dedup.max_bucket: must be >= bucket_cap (64), got 10"),
        ("[dedup]\nkeeper = ['size']\n", "dedup.keeper.0: 'size' is not a rank key"),
        ("[dedup]\nfields = ['id']\n", "dedup.fields.0: 'id' is not a text field"),
        ("[dedup]\nshingle = 'words'\n", "dedup.shingle: 'words' is not one of"),
        ("[shapes]\npolicy = 'drop'\n", "shapes.policy: 'drop' is not one of"),
        ("[export]\nratios = [0.5, 0.2]\n", "export.ratios: three shares"),
        ("[export]\nsplit_by = 'time'\n", "export.after: '': time splits need an ISO date"),
        ("[smoke]\nlr = 0.0\n", "smoke.lr: must be > 0.0, got 0.0"),
        ("[smoke]\nlr = nan\n", "smoke.lr: must be a finite number"),
        ("[smoke]\ndevice = 'tpu'\n", "smoke.device: 'tpu' is not one of"),
        (
            "[dedup]\nthreshold = 2\nngram = 0\n",
            "dedup.threshold: must be <= 1.0, got 2 (and 1 more)",
        ),
        ("[ingest\n", "invalid TOML"),
        # bounds: each of these ended in an overflow or "Too many open files" (exit 1 or 3)
        (
            f"[ingest]\nmax_record_bytes = {2**63 - 1}\n",
            f"ingest.max_record_bytes: must be <= 1073741824, got {2**63 - 1} (a longer",
        ),
        (
            f"[shapes]\nwindow = {2**63 - 1}\n",
            f"shapes.window: must be <= 1048576, got {2**63 - 1} (items per training window",
        ),
        (
            "[dedup]\nnum_perm = 4194304\nbands = 4194304\nrows = 1\n",
            "dedup.num_perm: must be <= 4096, got 4194304 (each item's signature",
        ),
        (
            "[dedup]\nnum_perm = 4096\nbands = 4096\nrows = 1\n",
            "dedup.bands: must be <= 512, got 4096 (each band is a working file",
        ),
    ],
)
def test_bad_config_names_the_file_and_the_key(tmp_path, text, expected):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert expected in msg and msg.startswith(f"{p}: ") and "\n" not in msg


def test_missing_config_file_is_one_clear_error(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.toml")


def test_bad_override_syntax(tmp_path):
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(write(tmp_path, BASIC), ["ingest.batch_size"])


@pytest.mark.parametrize(
    "override, expected",
    [
        ("dedup.treshold=0.5", "unknown key 'dedup.treshold' (did you mean 'threshold'?)"),
        ("dedupe.threshold=0.5", "unknown key 'dedupe' (did you mean 'dedup'?)"),
        ("ingest.sources.3.path=x", "'ingest.sources.3': no such entry"),
        ("ingest.sources.0.feilds.before=x", "unknown key 'ingest.sources.0.feilds'"),
        ("dedup.threshold.x=1", "dedup.threshold is a value, it has no key 'x'"),
        ("=1", "is not a key path"),
    ],
)
def test_an_override_with_a_bad_key_path_names_the_override(tmp_path, override, expected):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, BASIC), [override])
    assert str(e.value).startswith(f"override {override!r}: ") and expected in str(e.value)


@pytest.mark.parametrize(
    "value",
    ["[" * 100_000 + "]" * 100_000, "{a = " * 100_000 + "1" + "}" * 100_000],
    ids=["arrays", "inline-tables"],
)
def test_nesting_past_the_bound_is_refused_before_parsing(tmp_path, value):
    """tomllib recurses per level: 100k would be a RecursionError ("internal error")."""
    p = write(tmp_path, f"[dedup]\nfields = {value}\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert str(e.value) == (
        f"{p}: invalid TOML: arrays or inline tables nested more than 32 deep (line 2)"
    )


def test_nesting_is_counted_outside_strings_and_comments_only(tmp_path):
    deep = "[" * 40
    strings = [f'"{deep}"', f"'{deep}1'", f'"""\n{deep}2\\"""\n"""', f"'''{deep}3'''"]
    text = f"[dedup]\nagainst = [{', '.join(strings)}]  # {deep}\nfields = [[[['before']]]]\n"
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, text))
    assert str(e.value).endswith("dedup.fields.0: must be a string, got [[['before']]]")
    nested = "[" * 31 + "'before'" + "]" * 31  # 32 deep with the list around it: read
    with pytest.raises(ConfigError, match="dedup.fields.0: must be a string"):
        load_config(write(tmp_path, f"[dedup]\nfields = [{nested}]\n"))


def test_an_override_nested_too_deeply_names_the_override(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, BASIC), ["dedup.fields=" + "[" * 100_000])
    msg = str(e.value)
    assert msg.startswith("override 'dedup.fields=[[[[") and "nested more than 32 deep" in msg
    assert len(msg) < 200


def test_an_override_with_a_bad_value_names_the_key_and_the_override(tmp_path):
    p = write(tmp_path, BASIC)
    with pytest.raises(ConfigError) as e:
        load_config(p, ["dedup.threshold=1.5"])
    assert str(e.value) == (
        f"{p}: dedup.threshold: must be <= 1.0, got 1.5 (set by --set dedup.threshold=1.5)"
    )
    # a bare word is a string; a TOML value keeps its type
    cfg = load_config(p, ["shapes.policy=cap", "export.ratios=[0.8, 0.1, 0.1]"])
    assert cfg.shapes.policy == "cap" and cfg.export.ratios == [0.8, 0.1, 0.1]


def test_sections_are_frozen_and_validated_when_built_directly():
    d = DedupConfig()
    with pytest.raises(ValidationError):
        d.threshold = 0.5  # type: ignore[misc]
    with pytest.raises(ValidationError):
        DedupConfig(bands=64, rows=8)
    assert DedupConfig(threshold=1).threshold == 1.0  # an int is a fine float


def test_the_fingerprint_is_the_canonical_text_of_the_values(tmp_path):
    a = load_config(write(tmp_path, BASIC))
    b = load_config(write(tmp_path, BASIC.replace("batch_size = 100", "batch_size = 100\n")))
    assert a == b and a.fingerprint("ingest") == b.fingerprint("ingest")
    assert a.fingerprint("dedup") == load_config(None).fingerprint("dedup")
    section = a.section("dedup")
    assert section["threshold"] == 0.8 and section["keeper"] == [
        "-comment_len",
        "created_at",
        "path_depth",
        "id",
    ]
    del section["driver_edges"]  # how the work is cut up, not what it gives: not fingerprinted
    assert (
        a.fingerprint("dedup") == hashlib.sha256(canonical_text(section).encode()).hexdigest()[:16]
    )


def test_keys_that_only_cut_the_work_up_do_not_change_the_fingerprint(tmp_path):
    a = load_config(None)
    b = a.model_copy(update={"ingest": a.ingest.model_copy(update={"shard_bytes": 5})})
    c = a.model_copy(update={"ingest": a.ingest.model_copy(update={"max_record_bytes": 5})})
    assert b.fingerprint("ingest") == a.fingerprint("ingest") != c.fingerprint("ingest")


def test_the_config_vocabulary_matches_the_stages():
    assert set(SHINGLE_MODES) == set(shingles.MODES)
    assert set(RANK_KEY_NAMES) == set(clusters.RANK_KEYS)
    assert set(TRANSFORM_NAMES) == set(mapping.TRANSFORMS)
    assert set(ITEM_FIELDS) == set(mapping.MAPPABLE)


# ------------------------------------------------------------------------ the command line

LAST_SECTION_BAD = """
[run]
name = "t"
root = "runs"

[[ingest.sources]]
kind = "table"
path = "d.jsonl"

[export]
ratios = [0.5, 0.2]
"""


def test_a_bad_value_in_the_last_section_fails_before_any_stage_runs(tmp_path, cli):
    (tmp_path / "d.jsonl").write_text('{"before": "a", "after": "b"}\n')
    p = write(tmp_path, LAST_SECTION_BAD)
    res = cli("run", "--config", p, ok=False)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"error: {p}: export.ratios: three shares (train, validation, test) >= 0 "
        "summing to 1, got [0.5, 0.2]"
    ]
    assert not (tmp_path / "runs").exists()


def test_a_typo_on_the_command_line_is_exit_2_with_a_suggestion(tmp_path, cli):
    p = write(tmp_path, BASIC)
    res = cli("ingest", "--config", p, "--set", "ingest.bacth_size=5", ok=False)
    assert res.exit_code == 2 and "did you mean 'batch_size'?" in res.output
    assert "Traceback" not in res.output and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("command", ["run", "ingest", "filter", "dedup", "shapes", "export"])
def test_print_config_round_trips_and_runs_nothing(tmp_path, cli, command):
    p = write(tmp_path, BASIC)
    res = cli(command, "--config", p, "--set", "dedup.threshold=0.7", "--print-config")
    assert res.exit_code == 0 and not (tmp_path / "runs").exists()
    text = res.stdout
    assert "[smoke]" in text and "max_bucket = 20000" in text  # every default is there
    again = tmp_path / "printed.toml"
    again.write_text(text)
    printed = load_config(again)
    effective = load_config(p, ["dedup.threshold=0.7"])
    assert printed == effective and printed.canonical() == effective.canonical()
    assert printed.fingerprint() == effective.fingerprint()
    assert printed.run_dir == effective.run_dir


def test_print_config_writes_strings_that_need_escapes(tmp_path):
    text = BASIC + '[ingest.sources.defaults]\ncomment = "tab\\there \\"q\\" \\\\ \\u007f é"\n'
    cfg = load_config(write(tmp_path, text))
    again = tmp_path / "printed.toml"
    again.write_text(config_toml(cfg))
    assert load_config(again) == cfg


# ------------------------------------------------------------------------ mapped input fields


def _source(tmp_path, fields: str, rows: list[dict]) -> Path:
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return write(
        tmp_path,
        '[run]\nname = "t"\nroot = "runs"\n\n[[ingest.sources]]\nname = "edits"\n'
        f'kind = "table"\npath = "d.jsonl"\n[ingest.sources.fields]\n{fields}',
    )


def test_a_mapped_field_no_record_has_is_a_config_error(tmp_path, cli):
    rows = [{"old": "a", "new": f"b{i}", "ts": 1} for i in range(3)]
    p = _source(tmp_path, 'before = "old"\nafter = "new"\ncreated_at = "timestamp"\n', rows)
    res = cli("ingest", "--config", p, ok=False)
    assert res.exit_code == 2
    assert (
        "source 'edits': ingest.sources.0.fields.created_at = 'timestamp': no record has a "
        "field 'timestamp' (fields seen: old, new, ts)"
    ) in " ".join(res.output.split())


def test_a_mapped_field_some_records_lack_follows_required(tmp_path, cli):
    rows = [{"old": "a", "new": "b", "ts": 1}, {"old": "c", "new": "d"}, {"old": "e"}]
    p = _source(tmp_path, 'before = "old"\nafter = "new"\ncreated_at = "ts"\n', rows)
    cli("ingest", "--config", p)
    errors = pl.read_parquet(tmp_path / "runs" / "t" / "ingest" / "errors.parquet")
    assert errors["reason"].to_list() == ["missing field: after (input field 'new')"]
