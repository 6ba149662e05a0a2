"""Change sets (pipeline/dedup/change.py): two edits are duplicates only if they change the
same thing, however much text they share."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from pipeline.config import DedupConfig
from pipeline.dedup.change import change_elements, change_sets, change_span
from tests.test_dedup_stage import dedup, jaccard

LINE = "    x = torch.zeros(batch_size, seq_len, n_embd, dtype=torch.{}, device=device)"


def test_the_span_is_what_the_edit_removes_and_puts_in_in_whole_words():
    assert change_span(LINE.format("floar32"), LINE.format("float32")) == ("floar32", "float32")
    assert change_span(" rev: v4.5.0", " rev: v5.0.0") == ("v4.5", "v5.0")
    assert change_span("x = 1;", "x = 12;") == ("1", "12")
    assert change_span("    x", "        x") == ("", "    ")
    assert change_span("", "new line") == ("", "new line")
    assert change_span("héllo wörld", "héllo wòrld") == ("wörld", "wòrld")


def _pairs(n: int, seed: int) -> tuple[list, list]:
    alpha = [*"ab _.(,\n\t", "é", "ö", "中", "𝔘", "1", "2"]
    rng = random.Random(seed)
    before, after = [], []
    for _ in range(n):
        b = [rng.choice(alpha) for _ in range(rng.randint(0, 14))]
        a = list(b)
        for _ in range(rng.randint(0, 3)):
            at = rng.randint(0, len(a))
            a[at : at + rng.randint(0, 2)] = [rng.choice(alpha) for _ in range(rng.randint(0, 3))]
        if rng.random() < 0.1:
            a.reverse()  # the same tokens reordered: the span-shingle fallback
        before.append("".join(b))
        after.append("".join(a))
    return before, after


@pytest.mark.parametrize("n", [5, 2, 1])
def test_the_batch_kernel_makes_the_reference_sets(n):
    before, after = _pairs(4000, seed=n)
    before.append(None)  # null is empty text
    after.append("x")
    offsets, values = change_sets(pa.array(before), pa.array(after), n)
    for i, (b, a) in enumerate(zip(before, after, strict=True)):
        want = sorted(change_elements(b or "", a or "", n))
        assert values[offsets[i] : offsets[i + 1]].tolist() == want, (b, a)


def _row(before: str, after: str, path: str = "a.py", comment: str = "c", change: str = "1"):
    return dict(before=before, after=after, path=path, comment=comment, change=change)


def test_a_typo_and_its_fix_on_one_line_are_two_edits():
    ctx = "\n".join(f"    h_{k} = self.layer_{k}(h_{k - 1}, mask=mask)" for k in range(1, 5))
    made = _row(f"{ctx}\n{LINE.format('bfloat16')}", f"{ctx}\n{LINE.format('floar32')}", change="1")
    fixed = _row(f"{ctx}\n{LINE.format('floar32')}", f"{ctx}\n{LINE.format('float32')}", change="2")
    assert jaccard(made, fixed) >= 0.8  # the line dominates the shingles
    r = dedup([made, fixed])
    assert r.counts["removed"] == 0 and r.counts["near_other_change"] == 1
    assert r.edges["change_j"].to_list() == [0.0]
    assert dedup([made, fixed], change_threshold=0).counts["removed_near"] == 1


def test_the_same_edit_in_another_file_is_still_a_duplicate():
    ctx = "\n".join(f"    total_{k} = compute(a_{k}, b_{k})" for k in range(6))
    one = _row(ctx + "\n    t0 = time.time()", ctx + "\n    t0 = time.perf_counter()")
    other = dict(one, before=one["before"] + "  # start", after=one["after"] + "  # start")
    other.update(path="b.py", change="2")
    r = dedup([one, other])
    assert r.counts["removed_near"] == 1 and r.edges["change_j"].to_list() == [1.0]


def test_a_rewrap_and_its_undoing_and_a_chain_of_edits_are_not_merged():
    flat = "    out = generate(model, encoded, max_new_tokens=50, temperature=0.8, top_k=200)"
    wrapped = (
        "    out = generate(\n        model,\n        encoded,\n        max_new_tokens=50,\n"
        "        temperature=0.8,\n        top_k=200,\n    )"
    )
    rows = [_row(flat, wrapped, change="1"), _row(wrapped, flat, change="2")]
    assert jaccard(*rows) >= 0.8
    assert dedup(rows).counts["removed"] == 0
    deps = '  "torch>=2.1",\n  "numpy>=1.26",\n  "jsonargparse[signatures]>=4.27"'
    chain = [
        _row(deps, deps + ',\n  "pandas"', change="1"),
        _row(deps + ',\n  "pandas"', deps + ',\n  "pandas",\n  "sentencepiece"', change="2"),
    ]
    assert jaccard(*chain) >= 0.8
    assert dedup(chain).counts["removed"] == 0


def test_the_check_needs_both_sides_and_a_threshold_in_range():
    assert DedupConfig().checks_change
    assert not DedupConfig(change_threshold=0).checks_change
    assert not DedupConfig(fields=["after", "comment"]).checks_change
    with pytest.raises(ValueError, match="change_threshold"):
        DedupConfig(change_threshold=1.5)


def test_the_same_rewrap_at_another_depth_is_the_same_change():
    """Whitespace counts by kind (a line break or not), not depth: the same unwrap in a method
    and in a function, or trailing spaces cut, are one change; the undoing is another."""
    w8 = ("    result = compute(\n        alpha, beta, gamma, delta\n    )",
          "    result = compute(alpha, beta, gamma, delta)")  # fmt: skip
    w12 = tuple(x.replace("\n", "\n    ").replace("    result", "        result", 1) for x in w8)
    same = change_elements(*w8, 5) == change_elements(*w12, 5)
    assert same and change_elements(*w8, 5) != change_elements(w8[1], w8[0], 5)
    assert change_elements("x = f(a)  \ny = 2", "x = f(a)\ny = 2", 5) == change_elements(
        "x = f(a) \ny = 2", "x = f(a)\ny = 2", 5
    )
