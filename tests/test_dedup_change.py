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
    assert r.counts["removed_near"] == 1 and r.edges["change_j"][0] > 0.9  # the text differs


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
    and in a function, or trailing spaces cut, are one change; the undoing is another. (Their
    text, indentation included, differs: the text elements, bit 1, tell them apart.)"""

    def changed(before: str, after: str) -> set[int]:
        return {v for v in change_elements(before, after, 5) if not v & 2}

    w8 = ("    result = compute(\n        alpha, beta, gamma, delta\n    )",
          "    result = compute(alpha, beta, gamma, delta)")  # fmt: skip
    w12 = tuple(x.replace("\n", "\n    ").replace("    result", "        result", 1) for x in w8)
    assert changed(*w8) == changed(*w12) and changed(*w8) != changed(w8[1], w8[0])
    assert changed("x = f(a)  \ny = 2", "x = f(a)\ny = 2") == changed(
        "x = f(a) \ny = 2", "x = f(a)\ny = 2"
    )


def test_the_compiled_side_by_side_jaccard_is_the_reference():
    import numpy as np

    from pipeline.dedup.change import change_jaccard
    from pipeline.dedup.clusters import exact_jaccard

    before, after = _pairs(600, seed=11)
    sets = [change_elements(b, a, 5) for b, a in zip(before, after, strict=True)]
    offsets, values = change_sets(pa.array(before), pa.array(after), 5)
    rng = random.Random(3)
    a = np.array([rng.randrange(600) for _ in range(3000)])
    b = np.array([rng.randrange(600) if k % 3 else (x + 1) % 600 for k, x in enumerate(a)])
    got = exact_jaccard(offsets, values, a, b, True)
    want = [change_jaccard(sets[x], sets[y]) for x, y in zip(a, b, strict=True)]
    assert got.tolist() == pytest.approx(want)
    assert change_jaccard(set(), set()) == 1.0  # two edits that change nothing: one change


# Real-looking pairs from five languages whose text dedup's shingles call near-duplicates
# (J >= 0.8) although one side of the edit differs, or the edit runs the other way.
HTML_DOCS = "\n".join(  # a generated API page's block, deleted by two different commits
    f'<tr><td><code>view.{k}</code></td><td class="desc">Registers {k} on the view.</td></tr>'
    for k in ("register", "unregister", "setting", "render", "update", "destroy", "mount")
)


def test_a_shared_removed_block_does_not_carry_two_different_additions():
    """JS docs: the same generated block removed, a different line put in its place."""
    one = _row(HTML_DOCS, "<h2>See view.register.</h2>", path="docs/api.html", change="1")
    two = _row(HTML_DOCS, "<p>Assign <code>setting</code></p>", path="docs/api.html", change="2")
    assert jaccard(one, two) >= 0.8
    r = dedup([one, two])
    assert r.counts["removed"] == 0 and r.counts["near_other_change"] == 1
    assert dedup([one, two], change_threshold=0).counts["removed_near"] == 1


def test_a_reindent_and_its_reverse_run_opposite_ways():
    """Go: gofmt turns spaces into tabs; the reverse commit turns them back."""
    body = [
        "func (r *Router) Match(req *http.Request, match *RouteMatch) bool {",
        "for _, route := range r.routes {",
        "if route.Match(req, match) {",
        "return true",
        "}",
        "}",
        "return false",
        "}",
    ]
    depth = [0, 1, 2, 3, 2, 1, 1, 0]
    tabs = "\n".join("\t" * d + x for d, x in zip(depth, body, strict=True))
    spaces = "\n".join("    " * d + x for d, x in zip(depth, body, strict=True))
    rows = [_row(spaces, tabs, path="mux.go", change="1"), _row(tabs, spaces, "mux.go", "c", "2")]
    assert jaccard(*rows) == 1.0  # the same tokens on both sides
    assert dedup(rows).counts["removed"] == 0
    again = _row(spaces, tabs, path="route.go", change="3")  # the same re-indent elsewhere
    assert dedup([rows[0], again]).counts["removed"] == 1


def test_an_edit_and_its_reverse_are_not_twins():
    """Java: a refactor and the commit that reverts it."""
    ctx = "\n".join(
        f'    builder.addStatement("$T.{k}($N)", ClassName.get(Util.class), param);'
        for k in ("checkNotNull", "checkArgument", "checkState", "emitLine")
    )
    old = ctx + "\n    return builder.addModifiers(Modifier.PUBLIC, Modifier.FINAL).build();"
    new = ctx + "\n    return builder.addModifiers(Modifier.PUBLIC, Modifier.STATIC).build();"
    rows = [_row(old, new, path="TypeSpec.java", change="1"), _row(new, old, "TypeSpec.java")]
    rows[1]["change"] = "2"
    assert jaccard(*rows) >= 0.8
    r = dedup(rows)
    assert r.counts["removed"] == 0 and r.edges["change_j"].to_list() == [0.0]


def test_a_new_dependency_is_not_a_bump_of_an_existing_one():
    """Rust and TypeScript manifests: adding a line is another edit than changing one."""
    deps = '[dependencies]\nclap = "4.4"\nregex = "1.10"\nignore = "0.4.21"\nnu-ansi-term = "0.49"'
    bump = _row(deps, deps.replace('"0.49"', '"0.50"'), path="Cargo.toml", change="1")
    add = _row(deps, deps + '\nnormpath = "1.1"', path="Cargo.toml", change="2")
    assert dedup([bump, add]).counts["removed"] == 0
    pkg = '  "devDependencies": {\n    "typescript": "^5.3.3",\n    "vitest": "^1.2.1",'
    one = _row("", pkg + '\n    "tsx": "^4.7.0",', path="package.json", change="3")
    two = _row(pkg, pkg + '\n    "tsx": "^4.7.0",', path="package.json", change="4")
    assert dedup([one, two]).counts["removed"] == 0


def test_the_same_addition_from_other_text_is_another_edit():
    """JS: a hunk that re-adds `}` with the comment and one that adds the comment alone make
    the same change, from different text: what they remove differs."""
    note = "// eslint-disable-next-line consistent-return"
    brace = _row("    }", f"    }} {note}\n", path="lib/core/mergeConfig.js", change="1")
    alone = _row("", f"  {note}", path="lib/core/mergeConfig.js", change="2")
    assert jaccard(brace, alone) >= 0.8
    assert change_elements("    }", f"    }} {note}\n", 5) != change_elements("", f"  {note}", 5)
    assert dedup([brace, alone]).counts["removed"] == 0
    again = _row("    }", f"    }} {note}\n", path="lib/core/Axios.js", change="3")
    again["comment"] = "lint: allow the early return"
    assert dedup([brace, again]).counts["removed"] == 1  # the same edit in another file
    deeper = dict(again, before="  " + again["before"], after="  " + again["after"])
    assert dedup([brace, deeper]).counts["removed"] == 0  # another text: its indentation


def test_of_one_edit_copied_in_one_commit_the_shallowest_path_is_kept():
    """TypeScript: a build script copies src/ to deno/lib/ in the same commit; keeping the copy
    (it was the id that decided) left 1,853 of zod's deno/lib hunks in the corpus."""
    rows = []
    for k in range(6):  # six commits: the id alone would keep the copy in about half of them
        edit = dict(before=f"  return ctx.addIssue(issue{k});", after=f"  ctx.addIssue(issue{k});")
        rows += [_row(**edit, path="deno/lib/types.ts", change=str(k))]
        rows += [_row(**edit, path="src/types.ts", change=str(k))]
    r = dedup(rows)
    assert r.counts["removed"] == 6
    assert sorted(r.kept_rows.tolist()) == [1, 3, 5, 7, 9, 11]  # every src/types.ts
