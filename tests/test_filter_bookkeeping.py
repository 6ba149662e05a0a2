"""Release bookkeeping and tool output that a path or subject does not name.

A documentation edit that only moves a version number (an install command, a CDN link, a
dependency snippet at a release), any edit of a changelog, a license text, and an import list
that rustfmt only reordered. Each in Rust, JavaScript, TypeScript, Go and Java, beside what
only looks like it: a fixed value in a README example, a version bump in a manifest, a module
named license, a `use` that imports something else.
"""

from __future__ import annotations

import pytest

from tests.test_filter import DEFAULT, STRICT, assert_vectorised_is_the_reference, decide, item
from tests.test_filter_code_defaults import GO, JAVA, JS, RUST, TS

MD = dict(language="markdown")


def _docs(lang: dict) -> dict:
    return {**{k: v for k, v in lang.items() if k != "language"}, **MD}


CAUGHT = {
    "rust: the .deb in the README at a release": (
        dict(
            path="README.md",
            before="sudo dpkg -i rf_8.5.1_amd64.deb  # adapt version number and architecture",
            after="sudo dpkg -i rf_8.5.2_amd64.deb  # adapt version number and architecture",
            comment="Updates for rf 8.5.2",
            **_docs(RUST),
        ),
        "doc_version_bump",
    ),
    "java: the Maven snippet in the README": (
        dict(
            path="README.md",
            before="  <version>1.7.0</version>",
            after="  <version>1.8.0</version>",
            **_docs(JAVA),
        ),
        "doc_version_bump",
    ),
    "js: the CDN link in the README": (
        dict(
            path="README.md",
            before='<script src="https://unpkg.com/fetchy@1.1.2/dist/fetchy.min.js"></script>',
            after='<script src="https://unpkg.com/fetchy@1.6.7/dist/fetchy.min.js"></script>',
            **_docs(JS),
        ),
        "doc_version_bump",
    ),
    "go: go get in the install docs": (
        dict(
            path="docs/install.md",
            before="go get -u github.com/acme/muxer@v1.7.4",
            after="go get -u github.com/acme/muxer@v1.8.0",
            **_docs(GO),
        ),
        "doc_version_bump",
    ),
    "ts: an MDX page of unknown language": (
        dict(
            path="packages/docs/content/index.mdx",
            before="npm install schemakit@3.22.4",
            after="npm install schemakit@3.23.0",
            **{**TS, "language": ""},
        ),
        "doc_version_bump",
    ),
    "java: a changelog heading edited": (
        dict(
            path="CHANGELOG.md",
            before="Version 1.0.0 *(2015-01-28)*",
            after="JavaWriter 1.0.0 *(2015-01-28)*",
            **_docs(JAVA),
        ),
        "changelog_entry",
    ),
    "rust: a license added in the initial commit": (
        dict(
            path="LICENSE-MIT",
            before="",
            after="MIT License\n\nCopyright (c) 2017 ...",
            lines_removed=0,
            **{**RUST, "language": ""},
        ),
        "license_file",
    ),
    "go: a license year": (
        dict(
            path="LICENSE",
            before="Copyright (c) 2012 Acme",
            after="Copyright (c) 2012-2023 Acme",
            **{**GO, "language": "text"},
        ),
        "license_file",
    ),
    "rust: rustfmt reordering a use list": (
        dict(
            path="src/filter/owner.rs",
            before="use anyhow::{anyhow, Result};",
            after="use anyhow::{Result, anyhow};",
            **RUST,
        ),
        "format_only",
    ),
    "rust: a multi-line use reordered": (
        dict(
            path="src/walk.rs",
            before="use std::{\n    io,\n    fs,\n};",
            after="use std::{\n    fs,\n    io,\n};",
            **RUST,
        ),
        "format_only",
    ),
}

SUBJECTS = {
    "go: a merge's default subject": (
        dict(comment="Merge branch 'master' into route-vars", **GO),
        "contentless_comment",
    ),
    "js: the web editor's merge of the base branch": (
        dict(comment="Update base with master (#4755)", **JS),
        "contentless_comment",
    ),
    "java: a merged pull request with no body": (
        dict(comment="Merge pull request #612 from dev/indent", **JAVA),
        "contentless_comment",
    ),
    "ts: only an issue reference": (dict(comment="fixes #1901", **TS), "contentless_comment"),
    "rust: only two issue references": (dict(comment="#123, #124", **RUST), "contentless_comment"),
    "ts: switched back to an older text": (
        dict(comment="switched back to v1 readme on master", **TS),
        "revert_commit",
    ),
}
SUBJECTS_KEPT = {
    "go: a fix that names its issue and says what": dict(
        comment="Fix #12 by checking the port before binding", **GO
    ),
    "js: merging two things in code": dict(comment="Merge two header sets when keys overlap", **JS),
    "ts: an update that says what": dict(comment="Update parser to handle 1.2 syntax", **TS),
    "rust: a merge with a body saying more": dict(
        comment="Merge branch 'exec-batch'\n\nAdd --exec-batch, which runs the command once.",
        **RUST,
    ),
    "java: a switch statement": dict(comment="Switch back-references to a map", **JAVA),
    "go: a word that starts like undo": dict(comment="Undocumented flags are hidden", **GO),
}

KEPT = {
    "java: a value fixed in a README example": dict(
        path="README.md",
        before='      .addStatement("int result = 0")',
        after='      .addStatement("int result = 1")',
        **_docs(JAVA),
    ),
    "ts: a version bump in the manifest (shapes groups it)": dict(
        path="package.json",
        before='    "typescript": "^5.4.2",',
        after='    "typescript": "^5.5.0",',
        **{**TS, "language": "json"},
    ),
    "go: a version in code": dict(
        path="version.go", before='const Version = "1.7.4"', after='const Version = "1.8.0"', **GO
    ),
    "js: a docs sentence that changes a version and words": dict(
        path="README.md",
        before="Requires Node 14.0 or later.",
        after="Requires Node 18.0 or later, and a fetch polyfill.",
        **_docs(JS),
    ),
    "rust: a module named license": dict(
        path="src/license.rs", before="fn check() {}", after="fn check() -> bool { true }", **RUST
    ),
    "rust: a use that imports something else": dict(
        path="src/walk.rs", before="use std::fs;", after="use std::io;", **RUST
    ),
}


@pytest.mark.parametrize(("fields", "rule"), CAUGHT.values(), ids=CAUGHT.keys())
def test_bookkeeping_is_dropped_under_its_rule(fields, rule):
    got, reason, _ = decide(**fields)
    assert got == rule
    assert reason


@pytest.mark.parametrize("fields", KEPT.values(), ids=KEPT.keys())
def test_what_only_looks_like_bookkeeping_is_kept(fields):
    assert decide(**fields)[:2] == (None, None)


def test_the_reason_names_the_language():
    _, reason, _ = decide(**CAUGHT["java: the Maven snippet in the README"][0])
    assert reason == "a markdown edit that only changes version numbers"
    _, reason, _ = decide(**CAUGHT["ts: an MDX page of unknown language"][0])
    assert reason == "a (no language) edit that only changes version numbers"


def test_vectorised_rules_agree_with_the_per_row_reference():
    rows = [item(**f, source_ref=f"c{i}") for i, (f, _) in enumerate(CAUGHT.values())]
    rows += [item(**f, source_ref=f"k{i}") for i, f in enumerate(KEPT.values())]
    rows += [item(**f, source_ref=f"s{i}") for i, (f, _) in enumerate(SUBJECTS.values())]
    rows += [item(**f, source_ref=f"t{i}") for i, f in enumerate(SUBJECTS_KEPT.values())]
    rows += [  # non-ASCII text takes the Python reference inside the vectorised rule
        item(
            path="README.md",
            language="markdown",
            before="Version 1.2 – «stable»",
            after="Version 1.3 – «stable»",
            source_ref="u1",
        ),
        item(
            path="README.md",
            language="markdown",
            before="v1.2\u00a0beta",
            after="v1.3 beta",
            source_ref="u2",
        ),
    ]
    assert_vectorised_is_the_reference(rows, DEFAULT, STRICT)


@pytest.mark.parametrize(("fields", "rule"), SUBJECTS.values(), ids=SUBJECTS.keys())
def test_subjects_that_say_nothing_or_go_back_are_dropped(fields, rule):
    assert decide(**fields)[0] == rule


@pytest.mark.parametrize("fields", SUBJECTS_KEPT.values(), ids=SUBJECTS_KEPT.keys())
def test_subjects_that_say_what_was_done_are_kept(fields):
    assert decide(**fields)[:2] == (None, None)
