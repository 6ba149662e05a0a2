import datasketch
import numpy as np
import pyarrow as pa
import pytest

from pipeline.dedup.minhash import permutations, signatures
from pipeline.dedup.shingles import item_shingles, shingle_hash, shingle_sets

FIELDS = ["path", "before", "after", "comment"]
ITEMS = [
    {
        "path": ".pre-commit-config.yaml",
        "before": " rev: v4.5.0",
        "after": " rev: v5.0.0",
        "comment": "fyi, there's a v5.0.0 of this out now",
    },
    {
        "path": "src/app.py",
        "before": "def f(x):\n    return x + 1",
        "after": "def f(x: int) -> int:\n    return x + 1",
        "comment": "add type hints (PEP 484)",
    },
    {"path": "", "before": "", "after": "", "comment": ""},
]


@pytest.mark.parametrize("num_perm,seed", [(256, 1), (128, 7)])
def test_signatures_equal_datasketch_given_our_shingle_hash(num_perm, seed):
    cols = [pa.array([it[f] for it in ITEMS]) for f in FIELDS]
    offs, vals = shingle_sets(cols, FIELDS, 5)
    sig = signatures(offs, vals, *permutations(num_perm, seed))
    for i, it in enumerate(ITEMS):
        m = datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=lambda s: shingle_hash(*s))
        for sh in item_shingles(it, FIELDS, 5):
            m.update(sh)
        assert sig[i].dtype == np.uint32
        assert np.array_equal(sig[i], m.hashvalues), i


def test_permutations_are_datasketchs():
    a, b = permutations(64, 3)
    ref = datasketch.MinHash(num_perm=64, seed=3).permutations
    assert np.array_equal(a, ref[0]) and np.array_equal(b, ref[1])
