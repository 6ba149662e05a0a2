"""Moved code: a hunk that only deletes lines another hunk of the same commit adds again is
half of a move, and the default rules drop it; the addition half stays.

Cases in five languages. What only looks like a move stays: dead code deleted for good, code
added back in another commit, a commit that says it moves code, a deletion of lone brackets.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from pipeline.filter.apply import apply_rules
from pipeline.filter.moves import find_moves
from pipeline.filter.rules import RULES_DIR, load_rules
from tests.conftest import toml_config
from tests.test_filter import _fake_ingest, assert_vectorised_is_the_reference, frame, item

DEFAULT = load_rules(RULES_DIR / "default.yaml")

GO_FUNC = """func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	np := path.Clean(p)
	return np
}"""


def _params() -> dict:
    return next(r.params for r in DEFAULT.rules if r.name == "moved_code")


def _moved(rows: list[dict]) -> dict[str, str]:
    """{source_ref of a moved deletion: the path that adds it again}"""
    by_id = {r["id"]: r["source_ref"] for r in rows}
    return {by_id[i]: p for i, p in find_moves(frame(rows).lazy(), _params())}


def _go_move(change: str = "c1", comment: str = "Fix trailing slash redirect") -> list[dict]:
    """cleanPath leaves mux.go for path.go (re-indented nowhere, one line edited in passing),
    in a commit about something else; mux.go's own fix is another hunk."""
    kw = dict(repo="gorilla/mux", change=change, language="go", comment=comment)
    return [
        item(source_ref="go-del", path="mux.go", before=GO_FUNC, after="", **kw),
        item(
            source_ref="go-add",
            path="path.go",
            before="",
            after=GO_FUNC.replace("np := path.Clean(p)", "np := path.Clean(p) // keep"),
            **kw,
        ),
        item(
            source_ref="go-fix",
            path="mux.go",
            before='\tif !strings.HasSuffix(p, "/") {',
            after='\tif p != "/" && !strings.HasSuffix(p, "/") {',
            **kw,
        ),
    ]


def test_the_deletion_half_of_a_move_is_found_and_dropped_the_addition_kept():
    rows = _go_move()
    assert _moved(rows) == {"go-del": "path.go"}
    res = apply_rules(
        frame(rows), DEFAULT, {"moved_code": find_moves(frame(rows).lazy(), _params())}
    )
    (rej,) = res.rejected.to_dicts()
    assert rej["source_ref"] == "go-del" and rej["rule"] == "moved_code"
    assert rej["reason"] == (
        "it only deletes lines the same change adds again in path.go: half of a move"
    )
    assert res.kept["source_ref"].to_list() == ["go-add", "go-fix"]


def test_imports_moved_up_the_same_file_and_a_class_moved_to_its_own_file():
    py = "    import numpy as np\n    from torch import nn"
    java = (
        "  final class Builder {\n    private final String name;\n"
        "    Builder(String name) { this.name = name; }\n  }"
    )
    rows = [
        # Python: function-level imports taken to the top of the file, in another hunk
        item(
            source_ref="py-del",
            path="tests/test_lora.py",
            before=py,
            after="",
            change="p1",
            comment="Add LoRA merge test",
        ),
        item(
            source_ref="py-add",
            path="tests/test_lora.py",
            before="",
            after="import numpy as np\nfrom torch import nn",
            change="p1",
            comment="Add LoRA merge test",
        ),
        # Java: a nested class moved to its own file (lone braces are no evidence either way)
        item(
            source_ref="java-del",
            path="src/main/java/a/TypeSpec.java",
            language="java",
            before=java + "\n}",
            after="}",
            change="j1",
            comment="Builders are top level",
        ),
        item(
            source_ref="java-add",
            path="src/main/java/a/Builder.java",
            language="java",
            before="",
            after=java.replace("  ", "", 1),
            change="j1",
            comment="Builders are top level",
        ),
    ]
    assert _moved(rows) == {
        "py-del": "tests/test_lora.py",
        "java-del": "src/main/java/a/Builder.java",
    }


def test_what_only_looks_like_a_move_stays():
    ts_dead = "export function legacyParse(input: string) {\n  return JSON.parse(input);\n}"
    rows = [
        # TypeScript: dead code deleted for good (nothing adds it back)
        item(
            source_ref="ts-dead",
            path="src/parse.ts",
            language="typescript",
            before=ts_dead,
            after="",
            change="t1",
            comment="Remove legacyParse",
        ),
        item(
            source_ref="ts-other",
            path="src/index.ts",
            language="typescript",
            before="export * from './parse';",
            after="export { parse } from './parse';",
            change="t1",
            comment="Remove legacyParse",
        ),
        # Go: code deleted in one commit and added back in another: not a move
        item(
            source_ref="go-gone",
            path="mux.go",
            language="go",
            before=GO_FUNC,
            after="",
            change="g1",
            comment="Drop cleanPath",
        ),
        item(
            source_ref="go-later",
            path="path.go",
            language="go",
            before="",
            after=GO_FUNC,
            change="g2",
            comment="Add cleanPath helper",
        ),
        # Rust: a commit that says it moves code describes its deletion too
        item(
            source_ref="rs-del",
            path="src/app.rs",
            language="rust",
            before='fn build_app() -> App {\n    App::new("fd")\n}',
            after="",
            change="r1",
            comment="Move clap setup to cli.rs",
        ),
        item(
            source_ref="rs-add",
            path="src/cli.rs",
            language="rust",
            before="",
            after='fn build_app() -> App {\n    App::new("fd")\n}',
            change="r1",
            comment="Move clap setup to cli.rs",
        ),
        # JavaScript: only lone brackets deleted, added back elsewhere: no evidence
        item(
            source_ref="js-brackets",
            path="lib/axios.js",
            language="javascript",
            before="  });\n}",
            after="",
            change="a1",
            comment="Fix cancel token",
        ),
        item(
            source_ref="js-other",
            path="lib/core.js",
            language="javascript",
            before="",
            after="  });\n}",
            change="a1",
            comment="Fix cancel token",
        ),
    ]
    assert _moved(rows) == {}


def test_a_share_of_the_lines_added_again_below_min_share_is_not_a_move():
    rows = _go_move()
    rows[1] = item(**{**rows[1], "id": None, "after": "func cleanPath(p string) string {\n}"})
    assert _moved(rows) == {}


def test_an_exact_duplicate_row_gets_one_verdict(tmp_path, cli):
    """Two rows share an id (dedup removes the copy): the rule's reason map must not fail."""
    rows = _go_move()
    rows.append(dict(rows[0], source_ref="go-del-copy"))
    assert find_moves(frame(rows).lazy(), _params()) == ((rows[0]["id"], "path.go"),)
    assert_vectorised_is_the_reference(
        rows, DEFAULT, found={"moved_code": find_moves(frame(rows).lazy(), _params())}
    )


def test_the_stage_finds_moves_across_batches(tmp_path, cli):
    """The two halves fall in different batches: found over the whole input all the same."""
    cfg = toml_config(tmp_path, "[filter]\nbatch_size = 1\n")
    rows = _go_move()
    run = tmp_path / "runs" / "t"
    _fake_ingest(run, rows)
    assert cli("filter", "--config", cfg).exit_code == 0
    rej = pq.read_table(run / "filter" / "rejected.parquet").to_pylist()
    assert [(r["source_ref"], r["rule"]) for r in rej] == [("go-del", "moved_code")]
    assert cli("verify", run).exit_code == 0
