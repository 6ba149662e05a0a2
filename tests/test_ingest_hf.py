import datasets
import pytest

from pipeline.ingest.base import Record, SourceUnreadable
from pipeline.ingest.sources import hf
from tests.conftest import read_source

MAP = {"before": "old", "after": "new", "comment": "msg"}


def test_saved_dataset_dict_reads_all_splits_in_order(tmp_path):
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict(
                {"old": ["a", "b"], "new": ["A", "B"], "msg": ["up", "up"]}
            ),
            "test": datasets.Dataset.from_dict({"old": ["c"], "new": ["C"], "msg": ["up"]}),
        }
    )
    dd.save_to_disk(str(tmp_path / "ds"))
    recs = read_source(hf, tmp_path / "ds", kind="hf", format="disk", fields=MAP)
    assert [r.ref for r in recs] == ["test row 1", "train row 1", "train row 2"]
    assert [r.items[0].after for r in recs] == ["C", "A", "B"]
    one = read_source(hf, tmp_path / "ds", kind="hf", format="disk", fields=MAP, split="train")
    assert len(one) == 2


def test_local_files_through_load_dataset(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"old": "x", "new": "y", "msg": "m"}\n')
    recs = read_source(hf, tmp_path / "d.jsonl", kind="hf", format="json", fields=MAP)
    assert isinstance(recs[0], Record) and recs[0].items[0].before == "x"


def test_not_a_saved_dataset_is_unreadable(tmp_path):
    (tmp_path / "x").mkdir()
    with pytest.raises(SourceUnreadable, match="save_to_disk"):
        read_source(hf, tmp_path / "x", kind="hf", format="disk", fields=MAP)
