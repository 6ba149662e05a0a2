"""Bounded time per record, by construction (issue 28, item 1).

Inputs that made Python's backtracking `re` run for minutes each finish in well under a second:
every regex that reads data runs on RE2 (pipeline/linear.py), a config's patterns are checked
when it loads, and ingest bounds an item's secret scan by its counted work
(`ingest.record_scan_budget`), an item over it making its record an error record.

The slow inputs run in a child process with a timeout, so the code they once hung fails the
test instead of hanging it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from pipeline import linear
from pipeline.config import ConfigError, load_config
from pipeline.filter.regex import check_pattern
from pipeline.ingest.base import Batcher, IngestContext, RawItem, Record
from pipeline.secrets.finding import MATCH_COST, Budget, OverBudget, find
from pipeline.secrets.masking import mask, mask_batch, mask_columns
from tests.conftest import ROOT

HEADER = "-----BEGIN RSA PRIVATE KEY-----"
KEY_BODY = "MIIEpAIBAAKCAQEA7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5g"
AKIA = "AKIAIOSFODNN7EXAMPLQ"  # an AWS access key id's shape: masked wherever it is
LIMIT = 1.0  # seconds: each input below took minutes before


def _timed(setup: str, call: str, timeout: float = 30) -> float:
    """Seconds `call` takes in a fresh interpreter on this checkout, after `setup` (imports
    and a warm-up: the rules compile once); a failure when it does not finish in `timeout`."""
    code = f"import time\n{setup}\nt = time.perf_counter()\n{call}\nprint(time.perf_counter() - t)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{call!r} did not finish in {timeout} s")
    assert out.returncode == 0, out.stderr[-2000:]
    return float(out.stdout.split()[-1])


_MASK_AN_ITEM = (
    "import pyarrow as pa\n"
    "from pipeline.secrets.masking import mask_columns\n"
    "mask_columns(pa.RecordBatch.from_pydict({'after': ['x = 1']}), ('after',))\n"
    "batch = pa.RecordBatch.from_pydict({'after': [TEXT], 'path': ['src/a.py']})"
)


@pytest.mark.parametrize(
    "text",
    [
        "HEADER + '\\\\n' + 'a:\\\\n' * 400",  # 1.6 KB, newlines escaped as in a JSON line
        "HEADER + '\\n' + 'a:\\n' * 530",  # the same with real newlines
        "HEADER + ' ' * 4000",  # spaces after a header: > 150 s before
    ],
    ids=["escaped-lines", "real-lines", "4000-spaces"],
)
def test_a_hostile_item_is_masked_in_well_under_a_second(text):
    setup = f"HEADER = {HEADER!r}\n" + _MASK_AN_ITEM.replace("TEXT", text)
    assert _timed(setup, "mask_columns(batch, ('after', 'path'))") < LIMIT


@pytest.mark.parametrize(
    "text",
    [
        "HEADER + ' ' * 4000",
        "'\\\\' * 200_000 + 'x'",  # a run of backslashes (the quote-unescaping regex)
        "'password = \"' + 'x' * 199 + \"'\" + '\\\\' * 50_000",
    ],
    ids=["4000-spaces", "backslashes", "quote-then-backslashes"],
)
def test_a_hostile_error_record_raw_is_masked_in_well_under_a_second(text):
    """An error record's raw is masked over its first 20k characters (mask_head)."""
    setup = (
        f"HEADER = {HEADER!r}\nfrom pipeline.ingest.base import masked_raw\n"
        f"masked_raw('x = 1')\ntext = {text}"
    )
    assert _timed(setup, "masked_raw(text)") < LIMIT


def test_the_private_key_rule_still_masks_a_key_around_the_hostile_shapes():
    for text in (
        f"{HEADER}\\n{KEY_BODY}\\n-----END RSA PRIVATE KEY-----",
        f"{HEADER}\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES\n\n{KEY_BODY}\n-----END RSA PRIVATE KEY",
        f"{HEADER}    {KEY_BODY}",
        f'k = "{KEY_BODY}\\n{KEY_BODY}\\n-----END PRIVATE KEY-----\\n"',  # its header cut off
    ):
        batch = pa.RecordBatch.from_pydict({"after": [text]})
        out = mask_columns(batch, ("after",))[0].column(0)[0].as_py()
        assert KEY_BODY not in out and "[REDACTED:private_key]" in out, out
    assert find(HEADER + " " * 4000) == []  # a header alone is a mention


def test_a_quadratic_shape_reference_runs_in_linear_time():
    setup = (
        "from pipeline.shapes.normalise import ref_sub, ref_names\nline = '+\"' + '1.0-rc' * 4000"
    )
    assert _timed(setup, "ref_sub(line); ref_names(line)") < LIMIT  # 20 s in Python's re


# ------------------------------------------------------------------------ bot patterns


def _jsonl(tmp_path: Path, rows: list[dict]) -> Path:
    p = tmp_path / "x.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return p


def _config(tmp_path: Path, name: str, ingest: str = "") -> Path:
    p = tmp_path / f"{name}.toml"
    p.write_text(
        f"[run]\nname = '{name}'\nroot = 'runs'\n\n[ingest]\n{ingest}\n"
        "[[ingest.sources]]\nkind = 'table'\npath = 'x.jsonl'\n"
    )
    return p


def test_a_backtracking_bot_pattern_and_a_crafted_author_ingest_in_well_under_a_second(tmp_path):
    _jsonl(tmp_path, [{"before": "a", "after": "b", "author": "a" * 30 + "!"}])
    warm = _config(tmp_path, "warm")  # the imports and the rules' compiling, not timed
    cfg = _config(tmp_path, "t", "bot_patterns = ['(a+)+$']")  # minutes in Python's re
    setup = (
        "from typer.testing import CliRunner\nfrom pipeline.cli import app\nr = CliRunner()\n"
        f"assert r.invoke(app, ['ingest', '--config', {str(warm)!r}]).exit_code == 0"
    )
    call = f"res = r.invoke(app, ['ingest', '--config', {str(cfg)!r}])"
    assert _timed(setup, call + "\nassert res.exit_code == 0, res.output") < LIMIT
    items = pl.read_parquet(tmp_path / "runs" / "t" / "ingest" / "items.parquet")
    assert items["author_is_bot"].to_list() == [False]  # "!" ends the name: no match


def test_a_bot_pattern_re2_cannot_run_is_a_config_error_naming_the_key(tmp_path, cli):
    _jsonl(tmp_path, [{"before": "a", "after": "b", "author": "x"}])
    for pattern, why in (
        ("(?<=x)bot", "look-behind"),
        ("(bot)\\1", "backreference"),
        ("^(?!human)", "negative look-ahead"),
    ):
        cfg = _config(tmp_path, "t", f"bot_patterns = ['-bot$', {json.dumps(pattern)}]")
        with pytest.raises(ConfigError) as e:
            load_config(cfg)
        msg = str(e.value)
        assert msg.startswith(f"{cfg}: ingest.bot_patterns.1: ") and why in msg, msg
        res = cli("ingest", "--config", cfg, ok=False)
        assert res.exit_code == 2 and "ingest.bot_patterns.1" in res.output, res.output
    assert load_config(_config(tmp_path, "t", "bot_patterns = ['(a+)+$']"))  # RE2 runs it


def test_bot_patterns_match_as_before():
    ctx = IngestContext()
    bots = ["dependabot[bot]", "Renovate-Bot", "github-actions", "snyk-bot", "my-bot", "web-flow"]
    assert all(ctx.is_bot(a) for a in bots)
    assert not any(ctx.is_bot(a) for a in ["alice", "botany", "web-flowers", "", None])


# ------------------------------------------------------------------------ filter rules


def test_a_regex_rule_summing_past_the_counted_limit_is_refused():
    why = check_pattern("(?s)a.{0,900}b.{0,900}c.{0,900}d")  # 1.5 s a 200 KB near miss
    assert why is not None and "repeats 2700 times" in why and "add up" in why, why
    assert check_pattern("(?s)a.{0,300}b.{0,300}c.{0,300}d") is None  # 900: accepted
    assert "repeats 1200 times" in (check_pattern("(?:x{3}|y{9}){100}") or "")


# ------------------------------------------------------------------------ the scan budget


def test_an_item_over_the_scan_budget_is_an_error_record_and_the_run_goes_on(tmp_path, cli):
    rows = [
        {"before": "a", "after": "b"},
        {"before": f"key {AKIA} " * 30, "after": "c"},  # 30 matches: over 100,000 units
        {"before": "c", "after": "d"},
    ]
    _jsonl(tmp_path, rows)
    cfg = _config(tmp_path, "t", "record_scan_budget = 100000")
    cli("ingest", "--config", cfg)
    run = tmp_path / "runs" / "t"
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    errors = pl.read_parquet(run / "ingest" / "errors.parquet")
    assert items["source_ref"].to_list() == ["line 1", "line 3"]
    assert errors["source_ref"].to_list() == ["line 2"]
    assert errors["reason"][0].startswith("secret scan over budget: more than 100,000 units")
    assert AKIA not in errors["raw"][0] and "[REDACTED:aws_access_key]" in errors["raw"][0]
    assert "verify passed" in cli("verify", run).output
    # the default budget takes it as an item, masked
    cli("ingest", "--config", _config(tmp_path, "d"))
    items = pl.read_parquet(tmp_path / "runs" / "d" / "ingest" / "items.parquet")
    assert items.height == 3 and AKIA not in items["before"][1]


def test_a_record_with_an_item_over_budget_is_one_error_with_all_its_items(tmp_path):
    b = Batcher("s.jsonl", IngestContext(scan_budget=10 * MATCH_COST))
    b.add(Record("line 1", [RawItem(before="a", after="b")]))
    b.add(Record("line 2", [RawItem(before="x", after="y"), RawItem(after=f"{AKIA} " * 20)]))
    b.add(Record("line 3", [RawItem(before=f"k = {AKIA}", after="z")]))  # under: masked
    items, errors = b.take_items(), b.take_errors()
    assert items is not None and errors is not None
    assert items.column("source_ref").to_pylist() == ["line 1", "line 3"]
    assert AKIA not in str(items.to_pylist())
    assert errors.column("source_ref").to_pylist() == ["line 2"]
    assert (b.records, b.items, b.errors) == (3, 2, 1)
    assert b.secrets == {"aws_access_key": 1 + 20}  # line 3's item, and the error's raw
    assert b.reasons == {"secret scan over budget": 1}


def test_mask_batch_blanks_a_row_over_budget_never_returns_it_unmasked():
    text = f"{AKIA} " * 50
    batch = pa.RecordBatch.from_pydict({"a": [text, f"x {AKIA}"], "b": ["keep", "y"]})
    out = mask_batch(batch, ("a", "b"), 20 * MATCH_COST)
    assert out.over == [0]
    assert out.batch.column(0).to_pylist() == ["", "x [REDACTED:aws_access_key]"]
    assert out.batch.column(1).to_pylist() == ["", "y"]
    assert out.fired == {"aws_access_key": 1}


def test_the_budget_counts_work_not_time():
    text = f"{AKIA} " * 10
    b = Budget(10**9)
    find(text, budget=b)
    spent = b.spent
    b2 = Budget(10**9)
    find(text, budget=b2)
    assert b2.spent == spent > 10 * MATCH_COST  # the same text costs the same, every time
    with pytest.raises(OverBudget):
        find(text, budget=Budget(spent - 1))
    find(text, budget=Budget(spent))  # exactly enough


# ------------------------------------------------------------------------ pipeline.linear


@pytest.mark.parametrize(
    "pattern, texts",
    [
        (r"password\s*=", ["password\x1f=", "password \u3000=", "password\v="]),
        (r"^[\w.-]+(?:/[\w.-]+)+$", ["élib/github.js", "a/b", "x٣/y", "a\u0301/b"]),
        (r"\d+", ["١٢٣", "12"]),
        (r"x[^\Wv.]+y", ["xaby", "xavy", "xé_9y", "x.y", "xⅷy"]),
        (r"ab\Z", ["ab", "ab\n", "abab"]),
        (r"\S+", ["a\x1fb", "a\u00a0b"]),
        (r"(?i)Token", ["TOKEN", "tOkEn"]),
    ],
)
def test_linear_patterns_mean_what_they_mean_to_python(pattern, texts):
    fast, slow = linear.compile(pattern), re.compile(pattern)
    for t in texts:
        assert [m.span() for m in fast.finditer(t)] == [m.span() for m in slow.finditer(t)], t
        assert fast.findall(t) == slow.findall(t)
        assert bool(fast.fullmatch(t)) == bool(slow.fullmatch(t))


def test_linear_match_objects_answer_as_re_does():
    fast, slow = (c(r"(?P<k>[a-z]+)=(\d+)?") for c in (linear.compile, re.compile))
    for t in ("a=1 b= c=3", "é=1 ä=x b=22"):
        for mf, ms in zip(fast.finditer(t), slow.finditer(t), strict=True):
            assert (mf.group(), mf.group("k"), mf.group(2)) == (
                ms.group(),
                ms.group("k"),
                ms.group(2),
            )
            assert (mf.span("k"), mf.start(2), mf.end()) == (ms.span("k"), ms.start(2), ms.end())
        assert fast.sub(r"<\g<k>:\g<2>>", t) == slow.sub(r"<\g<k>:\g<2>>", t)
    assert linear.compile("[-_/]").split("a-b_c/é") == re.split("[-_/]", "a-b_c/é")
    assert linear.compile("b").match("ab", 1) and not linear.compile("b").match("ab")


def test_what_re2_cannot_run_is_named():
    assert "look-behind" in (linear.problem("(?<=a)b") or "")
    assert "backreference" in (linear.problem("(a)\\1") or "")
    assert "repeat count over 1000" in (linear.problem("(ab){2000}") or "")
    assert linear.problem("[a-z]{50,1024}") is None  # one class: cut in two repeats
    assert linear.problem("(a+)+$") is None
    with pytest.raises(linear.LinearError):
        linear.compile("(?P<q>a)(?P=q)")


def test_every_detect_secrets_pattern_is_a_rule():
    """Its look-arounds are rewritten for RE2 (detectors.re2_pattern): none is left out."""
    import importlib
    import inspect
    import pkgutil

    import detect_secrets.plugins as plugins
    from detect_secrets.plugins.base import RegexBasedDetector

    from pipeline.secrets.detectors import SKIP_DETECTORS, detect_secrets_rules

    n = 0
    for info in pkgutil.iter_modules(plugins.__path__):
        mod = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        for cname, cls in inspect.getmembers(mod, inspect.isclass):
            if (
                cls.__module__ == mod.__name__
                and issubclass(cls, RegexBasedDetector)
                and cls is not RegexBasedDetector
                and cname not in SKIP_DETECTORS
            ):
                n += len(cls.denylist)
    assert len(detect_secrets_rules()) == n


def test_a_lone_surrogate_is_matched_as_python_matches_it():
    """Text read with surrogateescape holds lone surrogates, which UTF-8 (RE2's) cannot."""
    m = linear.compile(r"a(.)b").search("\x00 a\udcffb")
    assert m is not None and m.span() == (2, 5) and m.group(1) == "\udcff"
    token = "ghp_" + "a" * 36
    assert mask(f"x \udcff {token}") == ("x \udcff [REDACTED:github_token]", ["github_token"])
