"""Unicode twins (issue 28, item 4): the same edit in NFC and NFD is one edit for every key and
similarity (dedup's content hash and shingles, shapes' group keys, export's group keys), while
the items keep their text, byte for byte, as read."""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
from typer.testing import CliRunner

from pipeline.cli import app
from pipeline.config import DedupConfig, ExportConfig, ShapesConfig
from pipeline.dedup.change import change_elements, change_sets
from pipeline.dedup.scan import scan_batch, scan_context
from pipeline.dedup.shingles import item_shingles, shingle_hash, shingle_sets
from pipeline.export import assign_splits
from pipeline.shapes.columns import key_frame
from pipeline.stage import SPLITS

CAFE = "caf\u00e9"  # NFC: é is one code point
CAFE_NFD = "cafe\u0301"  # NFD: e + COMBINING ACUTE ACCENT
assert unicodedata.normalize("NFD", CAFE) == CAFE_NFD and CAFE != CAFE_NFD


def _twin(text: str) -> str:
    return text.replace(CAFE, CAFE_NFD)


BEFORE = f'def order():\n    return "{CAFE} au lait"  # {CAFE}\n'
AFTER = f'def order():\n    return "{CAFE} noir"  # {CAFE}\n'


def test_nfc_leaves_ascii_as_it_is_and_composes_the_rest():
    from pipeline.nfc import nfc_array, nfc_series, nfc_text

    a = pa.array(["plain", None, "x"], pa.large_string())
    assert nfc_array(a) is a
    b = pa.array([CAFE_NFD, None, "Å", CAFE], pa.large_string())
    assert nfc_array(b).to_pylist() == [CAFE, None, "\u00c5", CAFE]
    assert nfc_text(CAFE_NFD) == CAFE and nfc_text("ascii") == "ascii"
    s = pl.Series("c", [CAFE_NFD, "y"])
    assert nfc_series(s).to_list() == [CAFE, "y"] and nfc_series(s).name == "c"


@pytest.mark.parametrize("mode", ["tokens", "chars"])
def test_twins_share_every_shingle_and_change_element(mode):
    cols = [pa.array([BEFORE, _twin(BEFORE)]), pa.array([AFTER, _twin(AFTER)])]
    offs, vals = shingle_sets(cols, ["before", "after"], 3, mode)
    assert np.array_equal(vals[offs[0] : offs[1]], vals[offs[1] : offs[2]])
    # the readable reference says the same
    ref = {
        shingle_hash(f, s)
        for f, s in item_shingles(
            {"before": _twin(BEFORE), "after": _twin(AFTER)}, ["before", "after"], 3, mode
        )
    }
    assert ref == set(vals[offs[0] : offs[1]].tolist())
    offs, vals = change_sets(*cols, 3)
    assert np.array_equal(vals[offs[0] : offs[1]], vals[offs[1] : offs[2]])
    assert change_elements(_twin(BEFORE), _twin(AFTER), 3) == set(vals[offs[0] : offs[1]].tolist())


def test_twins_have_one_content_hash():
    d = DedupConfig()
    batch = pa.table(
        {
            "id": ["a", "b"],
            "before": [BEFORE, _twin(BEFORE)],
            "after": [AFTER, _twin(AFTER)],
            "comment": ["c", "c"],
            "created_at": pa.array([None, None], pa.timestamp("us", "UTC")),
            "path": ["p", "p"],
            "lines_removed": [1, 1],
            "lines_added": [1, 1],
            "bot": [False, False],
        }
    )
    rows = scan_batch(batch, scan_context(d))[0]["rows"]
    assert rows["_h0"][0] == rows["_h0"][1] and rows["_h1"][0] == rows["_h1"][1]


def _items(n: int = 2) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": ["a", "b"][:n],
            "source": ["s", "s"][:n],
            "source_ref": ["1", "2"][:n],
            "repo": [f"o/{CAFE}", f"o/{CAFE_NFD}"][:n],
            "change": [f"pr {CAFE}", f"pr {CAFE_NFD}"][:n],
            "path": [f"{CAFE}.py", f"{CAFE_NFD}.py"][:n],
            "before": [BEFORE, _twin(BEFORE)][:n],
            "after": [AFTER, _twin(AFTER)][:n],
            "context": [CAFE, CAFE_NFD][:n],
            "comment": ["c", "c"][:n],
        }
    )


@pytest.mark.parametrize("path_in_key", [False, True])
@pytest.mark.parametrize("context_key", [False, True])
def test_twins_share_every_shape_group(path_in_key, context_key):
    s = ShapesConfig(path_in_key=path_in_key, context_key=context_key)
    keys = key_frame(_items(), s)
    for c in keys.columns:
        if c.startswith(("_k_", "_l_")):
            assert keys[c][0] == keys[c][1], c


@pytest.mark.parametrize("split_by", ["repo", "change"])
def test_twins_by_repo_or_change_never_land_in_different_splits(split_by):
    """Nothing but the NFC and NFD spelling of their repository (or change) binds them."""
    items = pl.DataFrame(
        {
            "id": [f"id{k}" for k in range(40)],
            "source": ["s"] * 40,
            "repo": [f"r{k // 2}-{CAFE if k % 2 else CAFE_NFD}" for k in range(40)],
            "change": [f"c{k // 2}-{CAFE_NFD if k % 2 else CAFE}" for k in range(40)],
            "created_at": pl.Series([None] * 40, dtype=pl.Datetime("us", "UTC")),
        }
    )
    clusters = pl.DataFrame({"id": items["id"], "cluster_id": list(range(40))})
    shapes = pl.DataFrame({"id": items["id"], "scope": ["repo"] * 40, "group_id": list(range(40))})
    for seed in range(5):
        e = ExportConfig(split_by=split_by, seed=seed, ratios=[0.34, 0.33, 0.33])
        a = assign_splits(items, clusters, shapes, e).sort("id")
        pairs = a.with_columns(pair=pl.col("id").str.slice(2).cast(pl.Int64) // 2)
        assert (pairs.group_by("pair").agg(pl.col("split").n_unique())["split"] == 1).all()
        assert a["split"].n_unique() > 1  # not all in one split


def test_a_run_keeps_one_twin_with_its_text_as_read(tmp_path):
    rows = [
        {
            "repo": "o/r",
            "change": "1",
            "path": "a.py",
            "comment": "no milk",
            "before": BEFORE,
            "after": AFTER,
        },
        {
            "repo": "o/r",
            "change": "2",
            "path": "b.py",
            "comment": "no milk",
            "before": _twin(BEFORE),
            "after": _twin(AFTER),
        },
    ]
    for i in range(6):  # unrelated items, so the splits have something to deal
        rows.append(
            {
                "repo": f"o/x{i}",
                "change": str(10 + i),
                "path": f"m{i}.py",
                "comment": f"bump {i}",
                "before": f"def f{i}(a, b):\n    return a + {i} * b\n",
                "after": f"def f{i}(a, b, c):\n    return a - {i * 7} * b + c\n",
            }
        )
    src = tmp_path / "twins.jsonl"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    res = CliRunner().invoke(app, ["run", str(src), "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    run = tmp_path / "run"
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    twins = items.filter(pl.col("comment") == "no milk")
    assert twins.height == 2 and twins["id"].n_unique() == 2
    clusters = pl.read_parquet(run / "dedup" / "clusters.parquet")
    pair = clusters.filter(pl.col("id").is_in(twins["id"].implode()))
    assert pair.height == 2 and pair["cluster_id"].n_unique() == 1
    assert sorted(pair["kind"].to_list()) == ["keeper", "same_content"]
    keeper = pair.filter(pl.col("is_keeper"))["id"][0]
    exported = pl.concat(
        pl.read_parquet(run / "export" / f"{s}.parquet").select("id", "before", "after")
        for s in SPLITS
    )
    kept = exported.filter(pl.col("id").is_in(twins["id"].implode()))
    assert kept["id"].to_list() == [keeper]
    original = next(
        r
        for r in rows
        if r["comment"] == "no milk"
        and items.filter(pl.col("id") == keeper)["path"][0] == r["path"]
    )
    assert kept["before"][0].encode() == original["before"].encode()
    assert kept["after"][0].encode() == original["after"].encode()
