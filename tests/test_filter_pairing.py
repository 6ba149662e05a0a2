"""Hunks a curator of git history drops though no path or subject gives them away.

`unrelated_sides`: the diff paired a block with one it has nothing to do with (a method moved
or replaced in a package move, a rewritten file, a paragraph swapped for another), so before
and after share almost no words. `commented_code`: the edit only adds commented-out code, or
edits code that is already commented out, or mostly comments code out under a message that
does not say it disables anything, or only takes commented-out code away. Each is shown on
real-looking hunks in Rust, JavaScript, TypeScript, Go and Java (and Python for `#` comments),
beside what only looks like them: a rewrite that keeps its names, prose in another script, a
table of numbers, code switched off by a commit that says so, one old line kept beside its
replacement, a comment in words, a doc comment's example, a note.
"""

from __future__ import annotations

import pytest

from pipeline.filter.rules import RulesError
from tests.test_filter import DEFAULT, STRICT, assert_vectorised_is_the_reference, decide, item
from tests.test_filter_code_defaults import GO, JAVA, JS, RUST, TS, _load

PY = dict(repo="acme/trainer", language="python")
ADDED = dict(before="", lines_removed=0)

# ---------------------------------------------------------------- unrelated sides: dropped

UNRELATED = {
    "java: a method replaced whole in a package move": dict(
        path="src/main/java/com/acme/codepoet/JavaWriter.java",
        comment="Rename package from dagger.internal.codegen.writer.",
        before=(
            "  /** Try to compress a fully-qualified class name to only the class name. */\n"
            "  public String compressType(String type) {\n"
            "    Matcher trailer = TYPE_TRAILER.matcher(type);\n"
            "    if (trailer.matches()) {\n"
            "      type = trailer.group(1);\n"
            "    }"
        ),
        after=(
            "  public Appendable write(Appendable appendable) throws IOException {\n"
            "    appendable.append(\"package \").append(packageName).append(';');"
        ),
        **JAVA,
    ),
    "rust: a pipe check paired with a new function": dict(
        path="src/output.rs",
        comment="Split up print_entry in colorized and uncolorized helper functions.",
        before=(
            "        if r.is_err() {\n"
            "            // Probably a broken pipe. Exit gracefully.\n"
            "            process::exit(0);\n"
            "        }\n"
            "    }"
        ),
        after=(
            "#[cfg(unix)]\n"
            "fn is_executable(md: &fs::Metadata) -> bool {\n"
            "    md.permissions().mode() & 0o111 != 0\n"
            "}"
        ),
        **RUST,
    ),
    "js: a response object paired with url parsing": dict(
        path="lib/adapters/http.js",
        comment="Changing adapter signature to receive config and return promises",
        before=(
            "    var response = {\n"
            "      status: res.statusCode,\n"
            "      statusText: res.statusMessage,\n"
            "      headers: res.headers,"
        ),
        after=(
            "    // Parse url\n"
            "    var parsed = url.parse(config.url);\n"
            "    if (!auth && parsed.auth) {\n"
            "      var urlAuth = parsed.auth.split(':');"
        ),
        **JS,
    ),
    "ts: a clone method paired with a merge helper": dict(
        path="src/helpers/parseUtil.ts",
        comment="Rewrite parsing engine to support ternary reporting",
        before="  clone() {\n    return new ParseContext({\n      ...this.def,\n    });\n  }",
        after=(
            "  static mergeObjectSync(\n"
            "    status: ParseStatus,\n"
            "    pairs: { key: SyncParseReturnType<any>; value: SyncParseReturnType<any> }[]\n"
            "  ): SyncParseReturnType {"
        ),
        **TS,
    ),
    "go: a walk callback paired with middleware docs": dict(
        path="mux.go",
        comment="Add middleware support",
        before=("\terr := walkFn(t, path, ancestors)\n\tif err == SkipRouter {\n\t\tcontinue\n\t}"),
        after=(
            "// MiddlewareFunc is a function which receives an http.Handler and returns\n"
            "// another http.Handler. Typically, the returned handler is a closure which\n"
            "// does something with the http.ResponseWriter and http.Request passed to it."
        ),
        **GO,
    ),
    "markdown: one example paragraph swapped for another": dict(
        path="README.md",
        language="markdown",
        comment="Added v2 announcement message",
        before="const spot: Dog = {\n  name: 'Spot',\n  neutered: true,\n};",
        after="person.parse({\n  extraKey: 61,\n});\n// => { bob dylan }",
        **{k: v for k, v in TS.items() if k != "language"},
    ),
}

# ---------------------------------------------------------------- unrelated sides: kept

RELATED = {
    "go: a loop rewritten with its names kept": dict(
        path="stats.go",
        before="\tfor i := 0; i < len(xs); i++ {\n\t\ttotal += xs[i]\n\t}",
        after="\tfor _, x := range xs {\n\t\ttotal += x\n\t}",
        **GO,
    ),
    "java: a body rewritten against the same fields": dict(
        path="src/main/java/com/acme/codepoet/TypeName.java",
        before=(
            "    String result = cachedString;\n"
            "    if (result == null) {\n"
            "      result = emit(new StringBuilder()).toString();"
        ),
        after=(
            "    if (cachedString == null) {\n"
            "      cachedString = emitToString();\n"
            "    }\n"
            "    return cachedString;"
        ),
        **JAVA,
    ),
    "rust: a one-line rename (a side of one line)": dict(
        path="src/walk.rs", before="let walker = build();", after="let entries = make();", **RUST
    ),
    "ts: a paragraph of Chinese prose reworded": dict(
        path="README_ZH.md",
        language="markdown",
        before=(
            "Zod 是一个以 TypeScript 为首的模式声明和验证库。\n"
            "我们使用术语“模式”来广义地指任何数据类型。"
        ),
        after="Zod 是一个 TypeScript 优先的模式声明和验证库。\n“模式”一词泛指任何数据类型。",
        **{k: v for k, v in TS.items() if k != "language"},
    ),
    "js: a table of numbers changed": dict(
        path="test/fixtures/sizes.js",
        before="  [1024, 2048, 4096],\n  [8192, 16384, 32768],",
        after="  [1000, 2000, 4000],\n  [8000, 16000, 32000],",
        **JS,
    ),
    "ts: a block with few words on one side": dict(
        path="src/index.ts", before="}\n\n", after="export {\n  ZodError,\n};", **TS
    ),
}

# ---------------------------------------------------------------- commented-out code: dropped

COMMENTED = {
    "ts: commented-out code taken away in a commit about something else": dict(
        path="src/types.ts",
        comment="Added or method",
        before="      // check: data => data.length <= maxLength,\n      // t: ZodTypes.record,",
        after="",
        lines_added=0,
        **TS,
    ),
    "python: a commented-out block deleted, a comment left": dict(
        path="litgpt/lora.py",
        comment="Support bias in LoRA layers",
        before="    # out = out + self.bias\n    # out = self.dropout(out)\n    # return out",
        after="    # bias is handled by the base layer",
        **PY,
    ),
    "ts: a debug log added commented out": dict(
        path="src/types.ts",
        comment="Fixed several bugs with seen and recursive parsing",
        after="        // console.log(result);",
        **ADDED,
        **TS,
    ),
    "go: a log line added commented out": dict(
        path="route.go",
        after='\t// log.Printf("route %s matched %s", r.name, req.URL.Path)',
        **ADDED,
        **GO,
    ),
    "python: a print added commented out": dict(
        path="litgpt/model.py", after="        # print(batch.shape)", **ADDED, **PY
    ),
    "java: a println added commented out": dict(
        path="src/main/java/com/acme/codepoet/TypeSpec.java",
        after="    // System.out.println(spec);",
        **ADDED,
        **JAVA,
    ),
    "rust: a dbg! added commented out": dict(
        path="src/walk.rs", after="            // dbg!(&entry);", **ADDED, **RUST
    ),
    "js: code already commented out, edited": dict(
        path="lib/core/Axios.js",
        before="  // var chain = [dispatchRequest, undefined];",
        after="  // var chain = [dispatchRequest, undefined, interceptors];",
        **JS,
    ),
    "ts: imports commented out under a message about something else": dict(
        path="src/transform.ts",
        comment="Re-wrote errorMap and toZod to achieve compatibility with TS 3.5 and later",
        before="import * as z from './types/base';\nimport { ZodError } from './ZodError';",
        after="// import * as z from './types/base';\n// import { ZodError } from './ZodError';",
        **TS,
    ),
    "ts: a live export beside a larger commented-out draft": dict(
        path="src/index.ts",
        after=(
            "export const lazy = {\n  object: ZodObject.lazycreate,\n};\n\n"
            "// const lazy:lazy = lazyType as any;\n// lazy.object = ZodObject.lazycreate;\n"
            "// lazy.create = create;\n// lazy.tuple = tuple;\n// export default lazy;"
        ),
        **ADDED,
        **TS,
    ),
    "go: a return switched off": dict(
        path="mux.go",
        comment="Refactor the matcher",
        before="\t\treturn r.Match(req, match)",
        after="\t\t// return r.Match(req, match)",
        **GO,
    ),
    "ts: a commented-out test added with a note": dict(
        path="src/__tests__/tuple.test.ts",
        after=(
            "// TODO: optional tuple elements\n"
            "// test('tuple with optional elements', () => {\n"
            "//   const result = z.tuple([z.string(), z.number().optional()]).safeParse(['a']);\n"
            "//   expect(result).toEqual(['a']);\n"
            "// });"
        ),
        **ADDED,
        **TS,
    ),
}

# ---------------------------------------------------------------- commented-out code: kept

NOT_COMMENTED = {
    "go: commented-out code removed by a commit that says so": dict(
        path="mux.go",
        comment="Remove dead code",
        before="\t// r.strictSlash = true\n\t// return r.buildVars(m)",
        after="",
        lines_added=0,
        **GO,
    ),
    "java: commented-out code replaced by live code": dict(
        path="src/main/java/com/acme/codepoet/CodeWriter.java",
        before='    // emit("}");\n    // unindent();',
        after='    unindent();\n    emit("}");',
        **JAVA,
    ),
    "go: commenting out a line, where the commit says so": dict(
        path="route.go",
        comment="Disable the matcher's debug logs for now",
        before='\tlog.Printf("skipping %s", r.name)',
        after='\t// log.Printf("Skipping %s", r.name)',
        **GO,
    ),
    "js: disabling a launcher with a note": dict(
        path="karma.conf.js",
        before="      customLaunchers.SL_IE9 = createCustomLauncher('internet explorer', 9);",
        after=(
            "      // TODO: Fix the issue with disconnected tests\n"
            "      // customLaunchers.SL_IE9 = createCustomLauncher('internet explorer', 9);"
        ),
        **JS,
    ),
    "ts: a comment in words": dict(
        path="src/types.ts", after="  // Parse the input before the checks run", **ADDED, **TS
    ),
    "rust: a doc comment's example": dict(
        path="src/walk.rs",
        after='/// let walker = Walker::new(".");\n/// walker.run();',
        **ADDED,
        **RUST,
    ),
    "java: a note naming a call": dict(
        path="src/main/java/com/acme/codepoet/CodeWriter.java",
        after="    // TODO(jw): drop this once emit() handles unicode",
        **ADDED,
        **JAVA,
    ),
    "rust: an attribute is code, not a # comment": dict(
        path="src/app.rs", after="#[derive(Debug, Clone)]", **ADDED, **RUST
    ),
    "python: a shebang": dict(path="scripts/run.py", after="#!/usr/bin/env python3", **ADDED, **PY),
    "markdown: a heading that reads like a call": dict(
        path="docs/api.md",
        language="markdown",
        after="## parse()\n\n## safeParse()",
        **ADDED,
        **{k: v for k, v in TS.items() if k != "language"},
    ),
    "ts: one old line kept commented beside its replacement": dict(
        path="src/parser.ts",
        before="      return obj;",
        after="      // return obj;\n      return { ...obj, status };",
        **TS,
    ),
    "python: a line switched off in a commit that says so": dict(
        path="litgpt/generate.py",
        comment="Temporarily skip the compile step on MPS",
        before="    model = torch.compile(model)",
        after="    # model = torch.compile(model)",
        **PY,
    ),
    "go: a comment added beside live code": dict(
        path="mux.go",
        after="\t// Match the host first.\n\tif !r.matchHost(req) {\n\t\treturn false\n\t}",
        **ADDED,
        **GO,
    ),
}


@pytest.mark.parametrize("fields", UNRELATED.values(), ids=UNRELATED.keys())
def test_a_block_paired_with_an_unrelated_one_is_dropped_with_the_word_counts(fields):
    rule, reason, _ = decide(**fields)
    assert rule == "unrelated_sides"
    assert "before and after share" in reason and "words (under 10%)" in reason


@pytest.mark.parametrize("fields", RELATED.values(), ids=RELATED.keys())
def test_a_rewrite_that_keeps_its_names_or_has_no_words_to_compare_is_kept(fields):
    assert decide(**fields)[:2] == (None, None)


@pytest.mark.parametrize("fields", COMMENTED.values(), ids=COMMENTED.keys())
def test_added_or_edited_commented_out_code_is_dropped(fields):
    rule, reason, _ = decide(**fields)
    assert rule == "commented_code"
    assert "commented-out code" in reason and "does not say it disables" in reason


@pytest.mark.parametrize("fields", NOT_COMMENTED.values(), ids=NOT_COMMENTED.keys())
def test_code_switched_off_on_purpose_comments_in_words_doc_examples_and_notes_are_kept(fields):
    assert decide(**fields)[:2] == (None, None)


def test_the_reason_counts_the_shared_words():
    _, reason, _ = decide(**UNRELATED["rust: a pipe check paired with a new function"])
    assert reason.startswith("before and after share 0 of their ")


def test_a_scratch_play_file_and_a_dashed_version_subject_are_dropped():
    assert decide(path="play.ts", after="const a = z.string();", **TS)[0] == "scratch_file"
    assert decide(path="playwright.config.ts", **TS)[0] is None
    assert decide(comment="Version bump - 0.1.0", **JS)[0] == "contentless_comment"
    assert decide(comment="Version 2 of the retry logic", **JS)[0] is None


def test_the_thresholds_are_the_rules_own(tmp_path):
    loose = _load(
        tmp_path,
        "rules:\n  - name: u\n    type: unrelated_sides\n    min_lines: 1\n    min_words: 1\n"
        "    max_shared_words: 60\n",
    )
    one_shared = dict(before="let a = b;", after="let c = d;")  # 1 of 5 words: 20%
    assert decide(loose, **one_shared)[0] == "u"
    assert decide(DEFAULT, **one_shared)[0] is None  # one line a side
    strict = _load(tmp_path, "rules:\n  - {name: u, type: unrelated_sides, max_shared_words: 1}\n")
    assert decide(strict, **UNRELATED["rust: a pipe check paired with a new function"])[0] == "u"
    assert decide(strict, **UNRELATED["js: a response object paired with url parsing"])[0] is None


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ("    type: unrelated_sides\n    max_shared_words: 101\n", "a number from 0 to 100"),
        ("    type: unrelated_sides\n    min_lines: 0\n", "`min_lines` must be at least 1"),
        ("    type: unrelated_sides\n    min_words: -2\n", "`min_words` must be a non-negative"),
        ("    type: commented_code\n    field: after\n", "unknown key 'field' for a commented"),
        ("    type: commented_code\n    except: ['(a+)+']\n", "backtrack catastrophically"),
    ],
)
def test_a_bad_rule_of_the_new_types_fails_at_load_naming_it(tmp_path, rule, problem):
    with pytest.raises(RulesError) as e:
        _load(tmp_path, "rules:\n  - name: r1\n" + rule)
    assert problem in str(e.value) and "rule 'r1'" in str(e.value)


def test_vectorised_rules_agree_with_the_per_row_reference():
    cases = [*UNRELATED.values(), *RELATED.values(), *COMMENTED.values(), *NOT_COMMENTED.values()]
    rows = [item(**f, source_ref=f"p{i}") for i, f in enumerate(cases)]
    rows += [
        item(after="//\n#\n// x;", language="", source_ref="e1"),
        item(after="# x = 1\n# y = 2", language="yaml", source_ref="e2"),
        item(after="# x = 1", before="x = 1\ny = 2", language="python", source_ref="e3"),
        item(before=None, after="// f(x);", language="go", source_ref="e4"),
        item(before="a b c\nd e f", after="g h i\nj k l", language=None, source_ref="e5"),
    ]
    assert_vectorised_is_the_reference(rows, DEFAULT, STRICT)
