import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.dedup import shingles as S

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
