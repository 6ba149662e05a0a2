"""The shapes kernels against their per-item references (difflib, Python `re`, hashlib), and
the stage's streaming (batches, spread buckets, shapes parts) against the in-memory result."""

from __future__ import annotations

import difflib
import hashlib

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.config import ShapesConfig
from pipeline.parts import Parts, num_rows
from pipeline.shapes import find_shapes, group_shapes, shape_columns
from pipeline.shapes import kernels as K
from pipeline.shapes.normalise import (
    collapse_ws,
    edit_shape_refs,
    nearest_context_line,
    normalise_line,
    normalise_text,
)
from pipeline.shapes.scan import normalise_lines
from pipeline.shapes.sha import hex16, sha256_128
from tests.conftest import make_item_table
from tests.test_shapes import FOUNDING, KEEPER, PCC, _fake_input

# What the normaliser's scans must get right: digits and dots, hex letters, `v`, operators,
# wildcards and the pre-release words, word characters and boundaries, ASCII whitespace; then
# characters where Python's regex differs from polars' (\x1c is whitespace to Python, é and a
# combining mark are word characters to one or both), which must take the Python reference.
ASCII = "0123456789abcdefABCDEFvrclphtosgxz_.-+@/ \t\x0b\x0c\r=:#~^<>!*XM"
WORDS = ["rc", "alpha", "beta", "dev", "pre", "post", "v1", "1.2.3", "deadbeef1", "b4ffde6", "..."]
WORDS += ["abc12f", "abc12fe", "123456", "1234567", "fedcba9", "2.0.0-beta.2", "1.0a1", "3rc1"]
WORDS += ["SNAPSHOT", "Final", "GA", "RC", "next", "preview", "build", "incompatible", "M1"]
WORDS += [">=", "~=", "==", "!=", "1.10.x", "2.*", "-dev.20211023", "+build.5", "1.0.0-"]
ODD = ["é", "\x1c", "\u00a0", "\u0301", "⟨N⟩", "\x00", "日本"]
chunk = st.one_of(st.text(alphabet=ASCII, max_size=6), st.sampled_from(WORDS + ODD))
line = st.lists(chunk, max_size=8).map("".join)
ascii_line = st.lists(st.one_of(st.text(alphabet=ASCII, max_size=6), st.sampled_from(WORDS)))
uses = st.sampled_from(["uses: actions/checkout@v3", "- a.b/c-d@1.2", "x@deadbeef12"])
text = st.lists(st.one_of(line, uses), max_size=5).map("\n".join)


def _lines(texts: list[str]) -> tuple[np.ndarray, ...]:
    """The texts' buffer and lines ("" is one blank line)."""
    data, offsets = K.buffers(pa.array(texts, pa.large_string()))
    return (data, *K.split_lines(data, offsets, np.ones(len(texts), np.bool_)))


def _strings(data: np.ndarray, offsets: np.ndarray) -> list[str]:
    return K.from_buffers(data, offsets).to_pylist()


@settings(max_examples=400, deadline=None)
@given(st.lists(line, max_size=6))
def test_line_normaliser_matches_python_or_flags_the_line(lines: list[str]) -> None:
    data, starts, ends, _ = _lines(["\n".join(lines)] if lines else [])
    cdata, coff, ndata, noff, odd = normalise_lines(data, starts, ends)
    got = zip(_strings(cdata, coff), _strings(ndata, noff), odd, strict=True)
    for raw, (collapsed, norm, flagged) in zip(lines, got, strict=True):
        assert flagged == any(
            not (c.isascii() and (c.isprintable() or c in "\t\x0b\x0c\r")) for c in raw
        )
        if not flagged:
            assert (collapsed, norm) == (collapse_ws(raw), normalise_line(raw)), raw


@settings(max_examples=300, deadline=None)
@given(st.lists(ascii_line.map("".join), max_size=6))
def test_ascii_lines_are_never_flagged(lines: list[str]) -> None:
    data, starts, ends, _ = _lines(["\n".join(lines)] if lines else [])
    assert not normalise_lines(data, starts, ends)[4].any()


def _difflib_changed(a: list[str], b: list[str]) -> tuple[list[bool], list[bool]]:
    ca, cb = [True] * len(a), [True] * len(b)
    for m in difflib.SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks():
        ca[m.a : m.a + m.size] = [False] * m.size
        cb[m.b : m.b + m.size] = [False] * m.size
    return ca, cb


few_lines = st.lists(st.sampled_from("xyz "), max_size=12)  # one-character lines


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(few_lines, few_lines), max_size=6))
def test_line_diff_matches_difflib(pairs: list[tuple[list[str], list[str]]]) -> None:
    """Few distinct lines, so longest-block ties and repeats are the rule, not the exception."""
    texts = ["\n".join(a) for a, _ in pairs] + ["\n".join(b) for _, b in pairs]
    data, offsets = K.buffers(pa.array(texts, pa.large_string()))
    starts, ends, line_off = K.split_lines(data, offsets, np.zeros(len(texts), np.bool_))
    cdata, coff, ndata, noff, _ = normalise_lines(data, starts, ends)
    empty = offsets[1:] == offsets[:-1]
    changed, _ = K.diff_digit(data, starts, ends, cdata, coff, ndata, noff, line_off, empty)
    n = len(pairs)
    for k, (a, b) in enumerate(pairs):
        ca, cb = _difflib_changed(a, b)
        assert changed[line_off[k] : line_off[k + 1]].tolist() == ca
        assert changed[line_off[n + k] : line_off[n + k + 1]].tolist() == cb


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(text, text, st.booleans(), st.booleans(), text), min_size=1, max_size=6))
def test_shape_columns_match_the_per_item_reference(rows: list[tuple]) -> None:
    df = pl.DataFrame(
        rows,
        schema=["before", "after", "lines_removed", "lines_added", "context"],
        orient="row",
    ).with_columns(pl.col("lines_removed", "lines_added").cast(pl.Int32))
    got = shape_columns(df, context_key=True)
    for r, (b, a, lr, la, ctx) in zip(got.iter_rows(named=True), rows, strict=True):
        shape, digit, names = edit_shape_refs(b, a, int(lr), int(la))
        assert (r["shape_text"], r["digit_only"]) == (shape, digit)
        assert r["_ctx"] == nearest_context_line(ctx) + ("\x1e" + names if names else "")
        # the edit key is polars' regex (edit_key_expr); on ASCII text it is normalise_text
        if (b + a).isascii() and "\x1c" not in b + a and "\x1f" not in b + a:
            assert r["_edit"] == normalise_text(b) + "\x1f" + normalise_text(a)


def test_sha_words_and_hex_match_hashlib() -> None:
    texts = ["", "a" * 55, "a" * 56, "a" * 64, "⟨N⟩\x1f\0x" * 40]
    hi, lo = sha256_128(pl.Series(texts))
    for h, l_, t in zip(hi, lo, texts, strict=True):
        assert f"{h:016x}{l_:016x}" == hashlib.sha256(t.encode()).hexdigest()[:32]
    assert hex16(hi).to_pylist() == [hashlib.sha256(t.encode()).hexdigest()[:16] for t in texts]


# ------------------------------------------------------------------------ streaming


def _corpus() -> list[dict]:
    bumps = [
        dict(
            path=PCC,
            change=str(k % 3),
            before=f" rev: {k}.0",
            after=f" rev: {k}.1",
            comment="c" * k,
        )
        for k in range(9)
    ]
    code = [
        dict(
            path=f"m{k % 4}.py",
            repo=f"o/{k % 2}",
            before=f"x = f({k})\ny = 1",
            after="x = g()\ny = 1",
        )
        for k in range(17)
    ]
    return [*FOUNDING, *bumps, *code, dict(path="é.py", before="naïve = 1", after="naïve = 2")]


@pytest.mark.parametrize("policy", ["annotate", "cap", "spread"])
def test_streamed_stage_equals_the_in_memory_result(tmp_path, cli, monkeypatch, policy) -> None:
    """Batches of 4, spread buckets of 5, shapes parts of 3: the same outputs as one frame."""
    import pipeline.shapes.group as G
    import pipeline.shapes.stage as S

    monkeypatch.setattr(S, "BATCH", 4)
    monkeypatch.setattr(S, "SPREAD_BUCKET", 5)
    monkeypatch.setattr(G, "CHUNK", 3)
    rows = _corpus()
    _fake_input(tmp_path, rows)
    (tmp_path / "c.toml").write_text(
        f'[run]\nname = "t"\nroot = "runs"\n[shapes]\npolicy = "{policy}"\nwindow = 4\n'
    )
    cli("shapes", "--config", tmp_path / "c.toml")
    out = tmp_path / "runs" / "t" / "shapes"
    df = pl.from_arrow(make_item_table(rows))
    s = ShapesConfig(policy=policy, window=4)
    res = find_shapes(df, s, KEEPER)
    want_shapes = group_shapes(df, s).drop("_row")
    assert pl.read_parquet(out / "shapes.parquet").equals(want_shapes)
    assert Parts(out / "shapes.parquet").num_row_groups > 4
    kept = pl.read_parquet(out / "kept.parquet")
    removed = pl.read_parquet(out / "removed.parquet")
    if policy == "spread":
        assert res.batch_order is not None
        want = df.with_columns(batch_order=pl.Series(res.batch_order)).sort("batch_order")
        assert kept.drop("flags").equals(want.drop("flags"))
        assert not list(out.glob(".*.tmp"))  # the buckets are gone
    elif policy == "cap":
        assert removed["id"].to_list() == df["id"].gather(res.removed["_row"]).to_list()
        assert removed["keeper_id"].to_list() == res.removed["keeper_id"].to_list()
        assert kept.height + removed.height == df.height and removed.height > 0
    else:
        notes = res.annotations.drop("_row")
        assert kept.select(notes.columns).equals(notes)


@pytest.mark.parametrize("policy", ["annotate", "cap", "spread"])
def test_an_empty_input_gives_empty_outputs(tmp_path, cli, policy) -> None:
    _fake_input(tmp_path, [])
    (tmp_path / "c.toml").write_text(
        f'[run]\nname = "t"\nroot = "runs"\n[shapes]\npolicy = "{policy}"\n'
    )
    cli("shapes", "--config", tmp_path / "c.toml")
    out = tmp_path / "runs" / "t" / "shapes"
    for name in ("kept", "removed", "shapes"):
        assert num_rows(out / f"{name}.parquet") == 0
