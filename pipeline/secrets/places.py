"""Where a value sits, which decides whether it counts as a secret: a test fixture's or a doc's
file (SAMPLE_PATH: a JWT or a URL password there is an example), source code (an unquoted
value there is an expression), a comment or a docstring (a weak finding there is prose)."""

from __future__ import annotations

import bisect

from pipeline import linear

# Test fixtures and documentation, by path: a value there is an example. Valid in Python `re`
# and Rust `regex` (the filter runs it vectorised). Folders anywhere in the path; test files
# by their language's convention (`*_test.go`, `*.test.ts`, `FooTest.java`, `test_x.py`).
SAMPLE_PATH = (
    r"(?i:(?:^|/)(?:tests?|__tests__|spec|specs|fixtures?|testdata|test_data|testing|__mocks__"
    r"|mocks?|e2e|docs?|documentation|examples?)/"
    r"|(?:^|/)(?:test_[^/]*\.py|conftest\.py|[^/]*_tests?\.(?:py|go|rs|rb|exs?)|[^/]*_spec\.rb"
    r"|[^/]*[.-](?:test|spec)\.[cm]?[jt]sx?|readme(?:\.[^/]*)?|[^/]*\.(?:md|mdx|markdown|rst|adoc"
    r"|asciidoc))$)"
    r"|(?:^|/)[A-Z][^/]*(?:Tests?|IT|Spec)\.(?:java|kt|scala|groovy|cs)$"
)
_SAMPLE_PATH = linear.compile(SAMPLE_PATH)
# The item fields that are the file's own text: only there does its path make a value a sample
# (a commit message, an author, a repo name are not the file's).
CONTENT_FIELDS = ("before", "after", "context")
# Source code, by extension: an unquoted value there is an expression (`password: this.pw`,
# `withXSRFToken: withXSRFToken`), never a literal; in env, ini, YAML, shell files it is one.
CODE_EXTENSIONS = frozenset(
    "js jsx ts tsx mjs cjs mts cts vue svelte go java kt kts scala groovy rs py pyi rb php cs c "
    "h cc cpp cxx hpp m mm swift dart lua ex exs erl hs ml fs jl r pl".split()
)


def sample_path(path: str | None) -> bool:
    """Whether the item's file is a test fixture or documentation (SAMPLE_PATH)."""
    return bool(path) and _SAMPLE_PATH.search(path) is not None  # type: ignore[arg-type]


def code_path(path: str | None) -> bool:
    """Whether the file is source code (an unquoted value there is an expression)."""
    if not path or "." not in path.rsplit("/", 1)[-1]:
        return False
    return path.rsplit(".", 1)[-1].lower() in CODE_EXTENSIONS


class Comments:
    """Where a text's comments and docstrings are, found once: `pos in comments` says whether
    text[pos] is inside a comment or a docstring: a comment line (`//`, `#`, `*`, `/*`, `-- `,
    `;`, `<!--`), a trailing comment (`x = 1  // ...`), or a line inside a block comment or a
    triple-quoted string (a docstring) opened on a line above. Each position costs a bisect,
    not a rescan of the text before it (a long line with many findings was quadratic)."""

    _LEADS = ("//", "/*", "*", "-- ", "<!--", ";", "%")
    _BLOCKS = (("/*", "*/"), ("<!--", "-->"))

    def __init__(self, text: str):
        self.text = text
        self.breaks = linear.positions(text, "\n")
        self.blocks = [
            (linear.positions(text, o), linear.positions(text, c), len(o), len(c))
            for o, c in self._BLOCKS
        ]
        self.triples = sorted(linear.positions(text, '"""') + linear.positions(text, "'''"))
        self._trailing: dict[int, int] = {}

    def _first_trailing(self, start: int) -> int:
        """The end of the first trailing-comment marker of the line at `start` that stands
        outside quotes (an even count of each quote before it), or -1."""
        if start not in self._trailing:
            i = bisect.bisect_left(self.breaks, start)
            end = self.breaks[i] if i < len(self.breaks) else len(self.text)
            line, found = self.text[start:end], -1
            for m in _TRAILING_COMMENT.finditer(line):
                before = line[: m.start()]
                if before.count('"') % 2 == 0 and before.count("'") % 2 == 0:
                    found = start + m.end()
                    break
            self._trailing[start] = found
        return self._trailing[start]

    def __contains__(self, pos: int) -> bool:
        text = self.text
        i = bisect.bisect_left(self.breaks, pos)
        start = self.breaks[i - 1] + 1 if i else 0
        lead_at = start
        while lead_at < pos and text[lead_at] in " \t\r\f\v":
            lead_at += 1
        lead = text[lead_at : min(pos, lead_at + 8)]
        if lead.startswith(self._LEADS):
            return True
        if lead.startswith("#") and not lead.startswith(("#define", "#include", "#if")):
            return True
        trailing = self._first_trailing(start)
        if 0 <= trailing <= pos:
            return True
        for opens, closes, lo, lc in self.blocks:  # a block opened on a line above
            k = bisect.bisect_right(opens, start - lo) - 1
            c = bisect.bisect_right(closes, start - lc) - 1
            o = opens[k] if k >= 0 else -1
            if o >= 0 and o > (closes[c] if c >= 0 else -1) and (o == 0 or text[o - 1].isspace()):
                return True
        return bisect.bisect_right(self.triples, start - 3) % 2 == 1


# at the line's start or after a space (taken: RE2 has no look-behind; only the end is used)
_TRAILING_COMMENT = linear.compile(r"(?:^|\s)(?://|#)")
