"""MinHash signatures for a whole batch, bit-identical to datasketch 2.0's default scheme.

datasketch's "affine32" scheme: for seed s, `RandomState(s)` draws `a` (odd) and `b` per
permutation; a shingle hash h is pre-mixed once with the MurmurHash3 finalizer and permuted
as `a * fmix32(h) + b mod 2^32`; a signature slot is the minimum over the item's shingles
(2^32 - 1 for an item with no shingles, as an empty datasketch MinHash). One compiled pass per
item: no per-item Python object, no (shingles x permutations) temporary (the kernels are in
shingle_kernels.py, whose shingling kernel signs each item as soon as its set is made).
"""

from __future__ import annotations

import numpy as np

from pipeline.dedup.shingle_kernels import signatures_kernel


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) as uint32, drawn exactly as datasketch.MinHash._init_permutations (affine32)."""
    gen = np.random.RandomState(seed)
    a = gen.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    b = gen.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    return a, b


def signatures(offsets: np.ndarray, values: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """uint32[N, num_perm] signatures of the CSR shingle sets (see shingles.shingle_sets)."""
    sig = np.empty((len(offsets) - 1, len(a)), dtype=np.uint32)
    if len(sig):
        signatures_kernel(offsets, values, a, b, sig)
    return sig
