"""Arrow column types a Parquet file or a saved `datasets` dataset can hold beyond strings and
numbers: every one is sized for ingest.max_record_bytes without raising, an all-null column
(pandas' None, `datasets` Value("null")) included."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline.ingest.rowsize import _sizes, oversized
from tests.adversarial.conftest import EXIT_OK, GOOD

BIG = "a" * 100


def test_a_null_typed_column_is_read(ingest, tmp_path):
    """Was: rc 2, 'source 'd.parquet' (table): Non-fixed width type' (pyarrow's bit_width
    raised on the null type), nothing written."""
    n = len(GOOD)
    table = pa.table(
        {
            "before": [r["before"] for r in GOOD],
            "after": [r["after"] for r in GOOD],
            "comment": [r["comment"] for r in GOOD],
            "context": pa.array([None] * n, pa.null()),
        }
    )
    pq.write_table(table, tmp_path / "d.parquet")
    r = ingest("d.parquet", None)
    assert r.code == EXIT_OK, r.res.output
    assert r.items.height == n and r.errors.height == 0
    assert r.items["context"].to_list() == [""] * n
    r.verify_passes()


ARRAYS = {
    "null": (pa.array([None, None]), [0, 0]),
    "string_view": (pa.array([BIG, None], pa.string_view()), [100, 0]),
    "binary_view": (pa.array([BIG.encode(), b"b"], pa.binary_view()), [100, 1]),
    "list_view": (
        pa.ListViewArray.from_arrays(
            pa.array([0, 1], pa.int32()), pa.array([1, 1], pa.int32()), pa.array([BIG, "b"])
        ),
        [100, 1],
    ),
    "run_end_encoded": (pc.run_end_encode(pa.array([BIG, BIG, "b"])), [100, 100, 1]),
    "run_end_encoded_slice": (pc.run_end_encode(pa.array([BIG, BIG, "b"])).slice(1), [100, 1]),
    "dense_union": (
        pa.UnionArray.from_dense(
            pa.array([0, 1, 0], pa.int8()),
            pa.array([0, 0, 1], pa.int32()),
            [pa.array([BIG, "x"]), pa.array([1])],
        ),
        [100, 8, 1],
    ),
    "sparse_union": (
        pa.UnionArray.from_sparse(
            pa.array([0, 1], pa.int8()), [pa.array([BIG, "x"]), pa.array([1, 2])]
        ),
        [100, 8],
    ),
    "bool": (pa.array([True, False]), [1, 1]),
    "fixed_binary": (pa.array([BIG.encode()], pa.binary(100)), [100]),
}


@pytest.mark.parametrize("kind", sorted(ARRAYS))
def test_every_arrow_type_is_sized(kind):
    arr, want = ARRAYS[kind]
    assert _sizes(arr).tolist() == want


def test_a_long_run_is_over_the_limit_without_being_decoded():
    """A run-end-encoded column of one 1 KB value over 1M rows is 1 GB decoded: sized per run,
    each row is over a 512-byte limit, and nothing is expanded."""
    values = pa.array(["x" * 1000])
    ree = pa.RunEndEncodedArray.from_arrays(pa.array([1_000_000], pa.int32()), values)
    batch = pa.RecordBatch.from_arrays([ree], names=["comment"])
    big = oversized(batch, 512)
    assert len(big) == 1_000_000
    assert "field 'comment': 1000 bytes" in big[0][0]
