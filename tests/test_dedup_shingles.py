import re

import numba as nb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dedup import shingle_kernels as K
from pipeline.dedup import shingles as S
from pipeline.dedup.minhash import permutations, signatures

FIELDS = ["path", "before", "after", "comment"]


def batch(items, fields=FIELDS, n=5, mode="tokens"):
    cols = [pa.array([it.get(f) for it in items], pa.string()) for f in fields]
    offs, vals = S.shingle_sets(cols, fields, n, mode)
    return [list(vals[offs[i] : offs[i + 1]]) for i in range(len(items))]


def reference(item, fields=FIELDS, n=5, mode="tokens"):
    return sorted({S.shingle_hash(f, s) for f, s in S.item_shingles(item, fields, n, mode)})


def test_murmur3_matches_published_vectors():
    assert S.murmur3_32(b"") == 0
    assert S.murmur3_32(b"", seed=1) == 0x514E28B7
    assert S.murmur3_32(b"hello") == 0x248BFA47
    assert S.murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_tokens_are_code_aware_and_short_fields_give_one_shingle():
    assert S.tokens("foo(bar_1, 2.5)") == ["foo", "(", "bar_1", ",", "2", ".", "5", ")"]
    assert S.field_shingles("before", " rev: v4.5.0", 5) == [
        ("rev", ":", "v4", ".", "5"),
        (":", "v4", ".", "5", "."),
        ("v4", ".", "5", ".", "0"),
    ]
    assert S.field_shingles("comment", "lgtm !", 5) == [("lgtm", "!")]
    assert S.field_shingles("comment", "  \n ", 5) == []


def test_batch_kernel_equals_the_reference_definition():
    items = [
        {
            "path": ".pre-commit-config.yaml",
            "before": " rev: v4.5.0",
            "after": " rev: v5.0.0",
            "comment": "fyi, there's a v5.0.0 of this out now",
        },
        {"path": "", "before": "", "after": "", "comment": ""},
        {"path": None, "before": "x", "after": None, "comment": "a b"},
        {
            "path": "ü.py",
            "before": "naïve = 日本語 — «q» 𝔘𝔫𝔦",
            "after": "tab\there\r\nend",
            "comment": "é_ü 42 ½ ٣",
        },
    ]
    for mode in S.MODES:
        for n in (1, 3, 5):
            assert batch(items, n=n, mode=mode) == [reference(it, n=n, mode=mode) for it in items]


def test_the_same_text_in_another_field_is_another_shingle():
    [a] = batch([{"before": "x = 1"}], fields=["before"])
    [b] = batch([{"after": "x = 1"}], fields=["after"])
    assert a and b and not set(a) & set(b)


def test_char_classes_agree_with_python_re():
    cls = S.char_classes()
    for cp in list(range(0, 0x3000, 7)) + [0x1D518, 0x10FFFD, 0x200B, 0x3000, 0x00A0]:
        c = chr(cp)
        expect = 1 if re.match(r"\w", c) else 0 if re.match(r"\s", c) else 2
        assert cls[cp] == expect, hex(cp)


def test_bad_mode_is_refused():
    with pytest.raises(ValueError, match="shingle mode"):
        S.shingle_sets([pa.array(["a"])], ["before"], 5, "words")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.text(max_size=40), min_size=1, max_size=4),
    st.sampled_from(S.MODES),
    st.integers(1, 6),
)
def test_property_batch_equals_reference_on_any_text(texts, mode, n):
    items = [{"before": t, "comment": t[::-1]} for t in texts]
    f = ["before", "comment"]
    assert batch(items, f, n, mode) == [reference(it, f, n, mode) for it in items]


def test_chunked_sliced_and_null_holding_columns_read_the_same():
    items = [{"before": "a = b + c(d)"}, {"before": None}, {"before": "é = f(g, h) ; i"}]
    texts = [it["before"] for it in items]
    chunked = pa.chunked_array([pa.array(texts[:1]), pa.array(texts[1:])])
    sliced = pa.array(["zzz zz z"] + texts, pa.string()).slice(1)
    expect = [reference(it, ["before"]) for it in items]
    large = pa.array(texts, pa.large_string())
    for col in (chunked, sliced, large):
        offs, vals = S.shingle_sets([col], ["before"], 5)
        assert [list(vals[offs[i] : offs[i + 1]]) for i in range(3)] == expect


def test_char_classes_agree_with_python_re_at_every_code_point():
    every = "".join(map(chr, range(0x110000)))  # the slow way: one str per code point
    expect = np.full(0x110000, 2, dtype=np.uint8)
    for m in re.finditer(r"\w+", every):
        expect[m.start() : m.end()] = 1
    for m in re.finditer(r"\s+", every):
        expect[m.start() : m.end()] = 0
    assert np.array_equal(S.char_classes(), expect)


def test_sort_unique_sorts_repeats_and_values_on_the_same_top_bits():
    rng = np.random.default_rng(2)
    cnt = np.empty((1 << 16) + 1, np.int64)
    spread = rng.integers(0, 1 << 32, 3000, dtype=np.uint64).astype(np.uint32)
    clash = rng.integers(0, 1 << 12, 3000).astype(np.uint32)  # one bucket: the fallback
    for raw in (spread, rng.choice(spread[:30], 3000), clash, spread[:1], spread[:0]):
        out = np.zeros(len(raw) + 5, np.uint32)
        u = K._sort_unique(raw, len(raw), out, 5, cnt)
        assert np.array_equal(out[5 : 5 + u], np.unique(raw))


def test_sort_keeps_repeats_and_heapsort_orders_by_both_arrays():
    """The change sets' multisets are sorted with their repeats (_sort); the fallback heap sort
    orders by (a, b) when b is given, as lsh.sorted_keys' stable order needs."""
    rng = np.random.default_rng(5)
    cnt = np.empty((1 << 16) + 1, np.int64)
    for raw in (
        rng.choice(rng.integers(0, 1 << 32, 40, dtype=np.uint64), 2000).astype(np.uint32),
        rng.integers(0, 1 << 10, 2000).astype(np.uint32),  # one bucket: the heap sort
        np.array([7], np.uint32),
    ):
        out = np.zeros(len(raw) + 3, np.uint32)
        K._sort(raw, len(raw), out, 3, cnt)
        assert np.array_equal(out[3:], np.sort(raw))
    a = rng.integers(0, 30, 3000).astype(np.uint64)
    b = rng.permutation(3000).astype(np.int64)
    want = np.lexsort((b, a))
    a2, b2 = a.copy(), b.copy()
    K.heapsort(a2, 0, 3000, b2)
    assert np.array_equal(a2, a[want]) and np.array_equal(b2, b[want])
    c = a.copy()
    K.heapsort(c, 100, 2000, c[:0])
    assert np.array_equal(c[100:2000], np.sort(a[100:2000]))
    assert np.array_equal(c[:100], a[:100]) and np.array_equal(c[2000:], a[2000:])


@pytest.mark.parametrize("threads", [1, 2])
def test_signed_sets_are_shingle_sets_and_signatures_in_one_pass(threads):
    if threads > nb.config.NUMBA_NUM_THREADS:
        pytest.skip("numba has fewer threads")
    texts = [f"x{i} = f(y{i % 7}, {i})\nreturn x{i} + {i % 3}" * (i % 4) for i in range(300)]
    cols = [pa.array(texts), pa.array(texts[::-1])]
    a, b = permutations(64, 1)
    was = nb.get_num_threads()
    nb.set_num_threads(threads)  # one thread: one chunk, its sets in place; two: 16 chunks
    try:
        offs, vals, sig = S.signed_sets(cols, ["before", "after"], 5, "tokens", a, b)
    finally:
        nb.set_num_threads(was)
    o2, v2 = S.shingle_sets(cols, ["before", "after"], 5)
    assert np.array_equal(offs, o2) and np.array_equal(vals, v2)
    assert np.array_equal(sig, signatures(o2, v2, a, b))
