"""The filter's compiled kernels (pipeline/filter/kernels.py) give what the regexes they
replace give in polars, on text of every kind: ASCII, Unicode whitespace (no-break space, em
space, NEL, ideographic space), control characters, CRLF lines, characters of two to four
bytes, empty and missing text."""

from __future__ import annotations

import random

import numpy as np
import polars as pl
import pytest

from pipeline.filter import kernels as K
from pipeline.filter.regex import NONBLANK_LINE_RE, WORD_RE
from pipeline.schema import TOKEN_PATTERN

PIECES = [
    *"ab_Z09 \t\n\r\x0b\x0c,;'\"(){}#*/-+=.",
    "\u00a0",
    "\u2003",
    "\u3000",
    "\x85",
    "\u1680",
    "\x1c",
    "\x7f",
    "\x00",
    "é",
    "ß",
    "日本",
    "𝔘",
    "\u200b",  # zero-width space: not White_Space
    "def f(x):\n    return x\n",
    "9abc",
    "abc9",
    "x\r\n",
]


def _texts(seed: int, n: int) -> list[str | None]:
    rng = random.Random(seed)
    out: list[str | None] = ["", " ", "\n", "a", "\u00a0x", "x\u00a0", None, "\n\n \t\n"]
    out += ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 25))) for _ in range(n)]
    return out


def _pairs() -> tuple[pl.Series, pl.Series]:
    a = _texts(1, 3000)
    b = _texts(2, len(a) - 8)
    # pairs equal but for whitespace, and pairs equal but for punctuation
    ws = [None if t is None else t.replace(" ", "\u00a0 ").replace("\n", " \n\t") for t in a]
    punct = [None if t is None else t.replace(",", "").replace("(", "[") for t in a]
    return pl.Series([*a, *a, *a, *a], dtype=pl.String), pl.Series(
        [*b, *ws, *punct, *a], dtype=pl.String
    )


def _bufs(s: pl.Series) -> tuple[np.ndarray, np.ndarray]:
    return K.buffers(s.to_arrow())


def test_ws_equal_is_equality_once_whitespace_is_removed():
    a, b = _pairs()
    want = a.fill_null("").str.replace_all(r"\s+", "") == b.fill_null("").str.replace_all(
        r"\s+", ""
    )
    got = K.ws_equal(*_bufs(a), *_bufs(b))
    assert got.tolist() == want.to_list()
    assert 0 < got.sum() < len(got)


def test_word_bytes_equal_compares_the_ascii_word_characters_in_order():
    a, b = _pairs()
    rx = r"[^A-Za-z0-9_]+"
    want = a.fill_null("").str.replace_all(rx, "") == b.fill_null("").str.replace_all(rx, "")
    got = K.word_bytes_equal(*_bufs(a), *_bufs(b))
    assert got.tolist() == want.to_list()
    assert 0 < got.sum() < len(got)


def test_tokens_count_the_regex_matches_of_ascii_text_and_leave_the_rest_to_it():
    from pipeline.filter.kinds.length import count_tokens

    a, _ = _pairs()
    want = a.fill_null("").str.count_matches(TOKEN_PATTERN).to_numpy()
    count, odd = K.tokens(*_bufs(a))
    assert (count[~odd] == want[~odd]).all()
    assert odd.any() and not odd.all()
    assert count_tokens(a.fill_null("")).to_list() == want.tolist()


@pytest.mark.parametrize("min_lines", [0, 2])
def test_word_sets_count_lines_words_and_shared_words_as_the_regexes_do(min_lines):
    a, b = _pairs()
    a, b = a.fill_null(""), b.fill_null("")
    lines_a, lines_b, na, nb, shared = K.word_sets(*_bufs(a), *_bufs(b), min_lines)
    assert lines_a.tolist() == a.str.count_matches(NONBLANK_LINE_RE).to_list()
    assert lines_b.tolist() == b.str.count_matches(NONBLANK_LINE_RE).to_list()
    wa, wb = (s.str.extract_all(WORD_RE).list.unique() for s in (a, b))
    enough = (lines_a >= min_lines) & (lines_b >= min_lines)
    assert na.tolist() == np.where(enough, wa.list.len().to_numpy(), 0).tolist()
    assert nb.tolist() == np.where(enough, wb.list.len().to_numpy(), 0).tolist()
    both = wa.list.set_intersection(wb).list.len().to_numpy()
    assert shared.tolist() == np.where(enough, both, 0).tolist()
    assert shared.any()


def test_a_word_repeated_and_words_sharing_a_prefix_are_counted_once_each():
    a = pl.Series(["x = foo foo foo\nfoo2 foo_ foo\n", "é x\nyé\n"])
    b = pl.Series(["foo\nfoo2 bar\n", "x\ny\n"])
    _, _, na, nb, shared = K.word_sets(*_bufs(a), *_bufs(b), 1)
    assert na.tolist() == [4, 2] and nb.tolist() == [3, 2] and shared.tolist() == [2, 2]


def test_each_measure_gives_the_same_by_kernel_and_by_regex():
    from pipeline.filter import measures as M

    a, b = (s.fill_null("") for s in _pairs())
    for kernel in (True, False):
        assert (
            M.same_but_whitespace(a, b, kernel).tolist()
            == K.ws_equal(*_bufs(a), *_bufs(b)).tolist()
        )
    assert M.same_word_bytes(a, b, True).tolist() == M.same_word_bytes(a, b, False).tolist()
    assert M.tokens(a, True).tolist() == M.tokens(a, False).tolist()
    for k in (True, False):
        got = [x.tolist() for x in M.word_sets(a, b, 2, k)]
        assert got == [x.tolist() for x in K.word_sets(*_bufs(a), *_bufs(b), 2)]


def test_while_a_warm_up_compiles_the_kernels_the_filter_measures_by_regex(monkeypatch):
    """A first run does not wait for the filter's kernels: its batches are measured by the
    regexes until the kernel cache has them; with no warm-up compiling them (a Ray worker),
    the kernels run (and compile on first use)."""
    from pipeline import jit
    from pipeline.filter import measures as M

    def no_kernel(*args):
        raise AssertionError("a kernel ran while it was compiling elsewhere")

    a, b = (s.fill_null("") for s in _pairs())
    want = M.same_but_whitespace(a, b, True)
    monkeypatch.setattr(M, "_compiled", False)
    monkeypatch.setattr(K, "ready", lambda: False)
    monkeypatch.setattr(jit, "_AHEAD", {"pipeline.filter"})
    monkeypatch.setattr(K, "ws_equal", no_kernel)
    assert M.same_but_whitespace(a, b).tolist() == want.tolist()
    monkeypatch.setattr(jit, "_AHEAD", set())
    with pytest.raises(AssertionError, match="a kernel ran"):
        M.same_but_whitespace(a, b)


def test_the_warm_up_compiles_every_kernel_so_the_filter_uses_them():
    """A kernel (or helper) the warm-up never reaches stays uncompiled, and `ready` with it:
    every run would measure by regex and start a warm-up."""
    from pipeline import jit

    K.warm(None)
    assert jit.uncached_kernels([K.__name__])[0] == []
    assert K.ready()
