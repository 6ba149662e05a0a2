"""The secret rules `pipeline.secrets` masks with or flags by, and what each one counts as a
secret.

- detect-secrets' RegexBasedDetector `denylist` patterns, read as data from the installed
  package (see `pipeline.secrets`); a token they match is masked to its end (`whole_token`):
  detect-secrets 1.5 matches Stripe keys for 24 characters and would leave the rest shown.
- TOKEN_FORMATS: token formats detect-secrets 1.5 lacks, as data (name -> regex).
- ours: private-key blocks, JWTs, AWS secret keys, credential assignments, high-entropy
  assigned literals.

Each rule has a tier (`Rule.tier`):
- HIGH: a credential wherever it is (a private-key block, a provider token with its own format
  or prefix, an AWS secret key by name and shape): masked at ingest, the item dropped.
- SAMPLE: a credential outside test fixtures and documentation (SAMPLE_PATH): a JWT, a literal
  password in a URL. There they are examples (jwt.io's token, `https://user:pass@host`):
  neither masked nor flagged; elsewhere as HIGH.
- WEAK: a guess with no format (a credential word assigned a literal, a high-entropy literal,
  detect-secrets' keyword detectors): never masked; the filter's `weak_secret` rule flags the
  item with the reason. Not in test fixtures or docs, not in comments or docstrings, not for
  identifiers, placeholders, sample values, versions, alphabets or encrypted CI values.

Each rule carries a prefilter: a superset of its pattern in the syntax Python and Rust share;
`rust_superset` turns it into the Rust regex polars runs, where Python's `\\s`, `\\w` and `\\b`
mean other character sets (Python's `\\s` also takes U+001C..U+001F).
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import polars as pl

SKIP_DETECTORS = {"IPPublicDetector", "PrivateKeyDetector", "JwtTokenDetector"}
HIGH, SAMPLE, WEAK = "high", "sample", "weak"
# detect-secrets detectors that are a keyword and a value shape, not a format: WEAK (their
# patterns with a URL in them are a password in a URL: SAMPLE).
KEYWORD_DETECTORS = {"CloudantDetector", "IbmCloudIamDetector", "IbmCosHmacDetector"}
KEYWORD_DETECTORS |= {"SoftlayerDetector"}
SAMPLE_DETECTORS = {"BasicAuthDetector"}  # a literal password in a URL

# Token formats detect-secrets 1.5 does not know: fine-grained GitHub tokens, Google API keys,
# Hugging Face tokens, npm tokens outside an .npmrc, PyPI tokens by their prefix alone (the
# base64 of the macaroon's location, pypi.org or test.pypi.org: detect-secrets wants 70 more
# characters). Data, like the detect-secrets patterns: add a format here.
TOKEN_FORMATS = {
    "github_token": r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "huggingface_token": r"\bhf_[A-Za-z0-9]{30,}",
    "npm_token": r"\bnpm_[A-Za-z0-9]{36}",
    "pypi_token": r"\bpypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{16,}",
    "anthropic_key": r"\bsk-ant-(?:api|admin)[0-9]{2}-[A-Za-z0-9_-]{80,}",
}


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    prefilter: str  # a superset of `pattern`, valid for Python re and polars (Rust regex)
    group: int | str = 0  # the part of the match that is the secret
    check: Callable[[re.Match[str]], bool] | None = None  # False: not a secret after all
    whole_token: bool = False  # the span runs on over token characters after the match
    tier: str = HIGH  # HIGH, SAMPLE or WEAK (the module's docstring)


# ------------------------------------------------------------------------ where a value sits

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
_SAMPLE_PATH = re.compile(SAMPLE_PATH)
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
        self.breaks = [m.start() for m in re.finditer("\n", text)]
        self.blocks = [
            ([m.start() for m in re.finditer(re.escape(o), text)],
             [m.start() for m in re.finditer(re.escape(c), text)], len(o), len(c))
            for o, c in self._BLOCKS
        ]  # fmt: skip
        self.triples = [m.start() for m in re.finditer("\"\"\"|'''", text)]
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


_TRAILING_COMMENT = re.compile(r"(?:^|(?<=\s))(?://|#)")


# ------------------------------------------------------------------------ placeholders

# A value that is a placeholder as a whole: a template (${X}, {{ x }}, <x>, %(x)s) or a mask
# (***..., ..., xxxxxx, sk-xxxxxxxx).
_TEMPLATE = re.compile(
    r"""^(?:\$\{?[\w.-]*\}? | \{\{?[^}]*\}?\} | <[^>]*> | %\([^)]*\)s | \*{3,}.* | \.{3,})$""",
    re.X,
)
_MASKED = re.compile(r"[\w.-]*")  # ... with xxxx or XXXX in it (tested apart: as one regex,
# [\w.-]*?x{4,}[\w.-]* backtracked cubically on a long run of x)
_WORDS_ONLY = re.compile(r"[A-Za-z]+(?:[ _.-]+[A-Za-z]+)*")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])")
# Or words only (a digit or a symbol makes it a value) naming what goes there:
# your_api_key_here, changeme, TODO, not-set. A value that merely contains such a word
# (SuperSecret2024, tbdK8s9dLq0wPz7XnM2) is a literal.
_LEAD = {"your", "insert", "enter", "put", "replace", "example", "sample", "dummy", "fake"}
_TAIL = {"here", "placeholder", "goes"}
_VOCAB = {
    *("example", "sample", "dummy", "placeholder", "fake", "redacted", "changeme", "change"),
    *("me", "secret", "password", "passwd", "token", "key", "api", "apikey", "unused"),
    *("notused", "not", "used", "needed", "set", "todo", "tbd", "fixme", "xxx", "none"),
    *("value", "test", "string", "access", "auth", "bearer", "client", "private", "my"),
}
# Names and words documentation examples use as values (`password: 'janedoe'`, 'foobar',
# 'mypassword'): a value made of these (and _VOCAB) words only is an example, not a secret.
_SAMPLE_WORDS = {
    *("john", "jane", "doe", "foo", "bar", "baz", "qux", "quux", "alice", "bob", "admin"),
    *("root", "guest", "user", "username", "demo", "hello", "world", "pass", "pwd", "mock"),
    *("mike", "mikey", "anonymous", "abc", "new", "old", "your", "the", "some", "super"),
}
_SEGMENT_WORDS = frozenset(_VOCAB | _SAMPLE_WORDS | _LEAD)
# a fixture's value: test-token-123, fake_password_1, dummy-key-42
# (one way to split it: an optional separator between letter runs backtracked exponentially)
_FIXTURE = re.compile(r"(?i)(?:test|fake|dummy|mock|example|sample)[a-z]*(?:[_.-][a-z]+)*[_.-]?\d*")


def _segments(word: str) -> bool:
    """Whether the word is a run of _SEGMENT_WORDS (janedoe, mypassword, foobar)."""
    ok = [True] + [False] * len(word)
    for i in range(1, len(word) + 1):
        ok[i] = any(ok[j] and word[j:i] in _SEGMENT_WORDS for j in range(max(0, i - 10), i))
    return ok[-1]


def placeholder(v: str) -> bool:
    """Whether the value as a whole is a placeholder or an example, not a literal."""
    if _TEMPLATE.match(v) or (("xxxx" in v or "XXXX" in v) and _MASKED.fullmatch(v)):
        return True
    if not _WORDS_ONLY.fullmatch(v):
        return bool(_FIXTURE.fullmatch(v)) and all(
            _segments(w.lower()) for w in re.findall("[A-Za-z]+", v)
        )
    words = [w.lower() for w in _WORD.findall(v)]
    if words[0] in _LEAD or words[-1] in _TAIL or all(w in _VOCAB for w in words):
        return True
    return all(_segments(w) for w in words)


# ------------------------------------------------------------------------ our rules

_CODE = re.compile(r"[()\[\]{}<>$%|`\s]|^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$")
_PATH = re.compile(r"^(?:[~.]{0,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)|^[\w.-]+(?:/[\w.-]+)+/?$")
_NOT_LITERAL = {"none", "null", "nil", "true", "false", "undefined", "required", "optional"}
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_VERSION = re.compile(r"^[~^<>=!v]*\d+(?:\.\d+)+(?:[-+][\w.-]*)?$")  # ^1.0.0, >=2.3, 1.2.3-rc.1
# encrypted values are not secrets: Travis `secure:`, sops `ENC[...]`, ansible-vault
_ENCRYPTED_NAME = re.compile(r"(?:^|[_.-])(?:secure|encrypted|enc|ciphertext|vault)$", re.I)
_ENCRYPTED_VALUE = re.compile(r"^(?:ENC\[|\$ANSIBLE_VAULT|!vault|-----BEGIN PGP MESSAGE)")

KEYWORDS = (
    r"pass(?:word|wd|phrase)|secret(?:_?key)?|token|api_?key|apikey|access_?key|"
    r"auth_?key|private_?key|client_?secret|credentials?"
)
_KEYWORD = re.compile(KEYWORDS, re.I)
_AWS_SECRET = re.compile(r"(?=.*[a-z])(?=.*[A-Z])(?=.*\d)[A-Za-z0-9/+]{40}")  # a secret access key
# A quote may be escaped (`\"`, as in a JSON line's raw text or a string in code): the
# closing quote must then be escaped the same way.
_ASSIGN = re.compile(
    r"""(?P<name>[\w.-]{0,64}?(?:"""  # bounded: a long word run cost O(n^2) (13 s at 20k)
    + KEYWORDS
    + r""")(?:\\*["'])?)                 # the name ends with a credential word
    (?:\s*:\s*&?(?:'static\s+)?[A-Za-z_][\w\[\], .]{0,60}?)??  # a type (password: str,
    # &str); bounded: it overlaps the space after it, and a long run of spaces was quadratic
    \s*(?::=|=>|=|:)\s*
    (?:(?P<q>\\*["'])(?P=q){0,2}(?P<quoted>[^"'\n]{6,200}?)  # quoted, or triple-quoted
       (?:(?P=q)|(?=\\*["']|\r?\n|\Z))                   # closed, or cut off
    | (?P<bare>[^\s"',;#]{6,200}))""",
    re.I | re.X,
)


def alphabet(v: str) -> bool:
    """Whether the value holds a run of 8 consecutive characters (ABCDEFGH, 01234567): a
    charset or an alphabet (base64's), never a random key."""
    run = 1
    for a, b in zip(v, v[1:], strict=False):
        run = run + 1 if ord(b) == ord(a) + 1 else 1
        if run >= 8:
            return True
    return False


def _literal_secret(v: str, quoted: bool) -> bool:
    """Whether an assigned value is a literal credential rather than code or a placeholder."""
    if v.lower() in _NOT_LITERAL or _NUMBER.match(v) or _VERSION.match(v):
        return False
    if _ENCRYPTED_VALUE.match(v) or alphabet(v):
        return False
    if random_key(v):  # its / would make it a path below
        return True
    if placeholder(v) or _CODE.search(v) or _PATH.match(v):
        return False
    if _WORDS_ONLY.fullmatch(v) and _KEYWORD.search(v):  # HF_TOKEN, eos_token: a name
        return False
    if len(set(v)) < 4:  # xxxxxx, 000000
        return False
    if quoted:
        return True
    # unquoted (env files, YAML): a bare identifier is a variable, not a password
    return any(c.isdigit() or c in "!@#^&*+/=~?" for c in v)


def _assignment_ok(m: re.Match[str]) -> bool:
    quoted = m.group("quoted") is not None
    if _ENCRYPTED_NAME.search(m.group("name").strip("\\\"'")):
        return False
    return _literal_secret(m.group("quoted") if quoted else m.group("bare"), quoted)


_REASONS = (  # the credential word a name ends with -> the flag's reason
    (re.compile(r"pass", re.I), "password_assignment"),
    (re.compile(r"private_?key", re.I), "private_key_assignment"),
    (re.compile(r"secret", re.I), "secret_assignment"),
    (re.compile(r"token", re.I), "token_assignment"),
    (re.compile(r"key", re.I), "api_key_assignment"),
)


def assignment_reason(m: re.Match[str]) -> str:
    """The reason a credential assignment is flagged, by the credential word its name ends
    with: password_assignment, secret_assignment, token_assignment, api_key_assignment ..."""
    words = _KEYWORD.findall(m.group("name"))
    last = words[-1] if words else ""
    return next((r for rx, r in _REASONS if rx.search(last)), "credential_assignment")


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in (s.count(x) for x in set(s))) if n else 0.0


_DIGEST_NAMES = re.compile(
    r"(?:^|[_.-])(?:integrity|sha\d*|hash|checksum|digest|rev|revision|commit|etag|md5|sri)$",
    re.I,
)
_HIGH = re.compile(
    r"""(?<![\w.-])(?P<name>[\w.-]{1,64})(?:\\*["'])?\s*(?::=|=>|=|:)\s*(?P<q>\\*["'])(?P=q){0,2}"""
    r"""(?P<v>[A-Za-z0-9+/=_-]{24,})(?:(?P=q)|(?=\r?\n|\\[rn]|\Z))"""
)


def _high_entropy_ok(m: re.Match[str]) -> bool:
    v, name = m.group("v"), m.group("name")
    if re.fullmatch(r"[0-9a-fA-F]+", v) or _DIGEST_NAMES.search(name):
        return False  # git SHAs, digests
    if _ENCRYPTED_NAME.search(name) or alphabet(v):
        return False  # Travis `secure: "..."` ciphertext; the base64 alphabet
    if re.match(r"(?:sha\d+|md5)[-_]", v, re.I):
        return False  # SRI hashes
    parts = [p for p in re.split(r"[-_/]", v) if p]
    if len(parts) >= 2 and all(len(p) <= 16 for p in parts):
        return False  # an identifier or a path: meta-llama/Llama-2-7b-hf
    mixed = any(c.islower() for c in v) and any(c.isupper() for c in v)
    if not (mixed and any(c.isdigit() for c in v)):
        return False
    return entropy(v) >= min(4.3, 0.85 * math.log2(len(v)))


KEY_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
# A key body read backwards from its END line (reversed, so one anchored match walks it in
# linear time): separators (newlines, escaped "\n", spaces) and base64 runs of 16+.
_BODY_REVERSED = re.compile(
    r"(?:(?:[ \t]*(?:\n\r?|n\\(?:r\\)?)[ \t]*|[ \t]+)[A-Za-z0-9+/=]{16,}(?!\\))+"
)


def key_tail_start(m: re.Match[str]) -> int | None:
    """Where the key body before an END line starts, or None when none is there (a key whose
    header was cut off, as in a diff's context: the body alone is still the secret)."""
    size = 2048  # grown while the body fills it, to 32k (an 8192-bit key's body is 6.5k)
    while True:
        window = m.string[max(0, m.start() - size) : m.start()]
        body = _BODY_REVERSED.match(window[::-1])
        if not body or body.end() < len(window) - 100 or size > 20_000:
            return m.start() - body.end() if body else None
        size *= 4


def own_rules() -> list[Rule]:
    return [
        Rule(
            "private_key",
            re.compile(
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                r"(?:[ \t]*(?:\r?\n|(?:\\r)?\\n)|[ \t]+)"  # a newline, or spaces on one line
                r"(?:[A-Za-z-]+:[^\n]*(?:\r?\n|(?:\\r)?\\n)){0,4}"  # header lines (Proc-Type: ...)
                r"\s*(?:\\n)?[ \t]*[A-Za-z0-9+/=]{16,}"
                r"[\s\S]*?(?:" + KEY_END + r"|\Z)"
            ),
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY",
        ),
        Rule("private_key", re.compile(KEY_END), KEY_END, "key_tail"),  # a header cut off
        Rule(
            "jwt",
            re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ",
            tier=SAMPLE,
        ),
        Rule(  # unquoted too (env files); detect-secrets' own AWS pattern needs quotes
            "aws_secret_access_key",
            _AWS_SECRET_ASSIGN,
            _AWS_SECRET_NAME,
            "v",
            lambda m: random_key(m.group("v")),
        ),
        Rule(
            "credential_assignment",
            _ASSIGN,
            r"(?i:" + KEYWORDS + r")(?:\\*[\"'])?\s*(?::|=)",
            "quoted_or_bare",
            _assignment_ok,
            tier=WEAK,
        ),
        Rule(
            "high_entropy_assignment",
            _HIGH,
            r"(?::|=)\s*(?:\\*[\"']){1,3}[A-Za-z0-9+/=_-]{24,}",
            "v",
            _high_entropy_ok,
            tier=WEAK,
        ),
    ]


# what an AWS secret key is named: aws_secret_access_key, the SDKs' and CloudFormation's
# secretAccessKey / SecretAccessKey, AWS_SECRET
_AWS_SECRET_NAME = r"(?i:(?:aws_?)?secret_?access_?key|aws_?secret(?:_?key)?)"
_AWS_SECRET_ASSIGN = re.compile(
    _AWS_SECRET_NAME
    + r"(?:\\*[\"'])?\s*(?::|=)\s*(?:\\*[\"'])?(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
)


def random_key(v: str) -> bool:
    """Whether a 40-character value looks like an AWS secret access key: lower and upper case
    and digits (never a git SHA, a word, a run of one letter)."""
    return _AWS_SECRET.fullmatch(v) is not None


def token_format_rules() -> list[Rule]:
    return [Rule(name, re.compile(p), p, whole_token=True) for name, p in TOKEN_FORMATS.items()]


# ------------------------------------------------------------------------ detect-secrets

_URL_AUTH = re.compile(r"://(?P<user>[^:/?#\[\]@\s]*):(?P<pw>[^:/?#\[\]@\s]+)@")
TEMPLATE_PASSWORDS = {"x-oauth-basic", "x-access-token", "oauth2", "token"}


def _aws_ok(m: re.Match[str]) -> bool:
    """An access key id (AKIA...) as matched; a secret key named aws...key: random-looking."""
    return m.re.groups == 0 or random_key(m.group(1))


def _url_auth_ok(m: re.Match[str]) -> bool:
    """A URL's user:password is literal: a placeholder in either part means a template
    (`https://{token}:x-oauth-basic@github.com`)."""
    u = _URL_AUTH.search(m.group(0))
    if not u:
        return True
    user, pw = u.group("user"), u.group("pw")
    if any(c in part for part in (user, pw) for c in "${}<>*%"):
        return False
    return pw.lower() not in TEMPLATE_PASSWORDS and not placeholder(pw)


CHECKS: dict[str, Callable[[re.Match[str]], bool]] = {
    "basic_auth_credentials": _url_auth_ok,
    "aws_access_key": _aws_ok,
}

_LOOKAROUND = re.compile(r"\(\?(?:<?[=!])")


def strip_lookarounds(p: str) -> str:
    """The pattern with every look-around group removed: a superset Rust regex can run."""
    out, i = [], 0
    while i < len(p):
        m = _LOOKAROUND.match(p, i)
        if m and (i == 0 or p[i - 1] != "\\"):
            depth, j = 0, i
            while j < len(p):
                if p[j] == "\\":
                    j += 2
                    continue
                depth += p[j] == "("
                depth -= p[j] == ")"
                j += 1
                if depth == 0:
                    break
            i = j
            continue
        out.append(p[i])
        i += 1
    return "".join(out)


# Python's classes as Rust sets that hold them: Python's \s also takes U+001C..U+001F, its \w
# every letter and number (Rust's \w misses some numbers); \b and \B are dropped (with two
# \w sets the boundaries differ), \W becomes any character.
_OUTSIDE = {"s": r"[\s\x1c-\x1f]", "w": r"[\w\p{L}\p{N}]", "b": "", "B": "", "W": r"[\s\S]"}
_INSIDE = {"s": r"\s\x1c-\x1f", "w": r"\w\p{L}\p{N}", "W": r"\W\w"}


def rust_superset(p: str) -> str:
    """A prefilter written for Python, as a Rust regex matching wherever Python's does."""
    out, i, in_class = [], 0, False
    while i < len(p):
        c = p[i]
        if c == "\\" and i + 1 < len(p):
            x = p[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(x, c + x))
            i += 2
            continue
        if c == "[" and not in_class:
            in_class = True
            out.append(c)
            # a ] (or ^]) right after the opening bracket is a literal
            j = i + 1 + (p[i + 1 : i + 2] == "^")
            if p[j : j + 1] == "]":
                out.append(p[i + 1 : j + 1])
                i = j
        elif c == "]" and in_class:
            in_class = False
            out.append(c)
        else:
            out.append(c)
        i += 1
    return "".join(out)


def rust_ok(p: str) -> bool:
    try:
        pl.Series([""], dtype=pl.String).str.contains(rust_superset(p))
        return True
    except pl.exceptions.PolarsError:
        return False


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_")


def detect_secrets_rules() -> list[Rule]:
    """The RegexBasedDetector patterns of the installed detect-secrets, as rules."""
    import importlib
    import inspect
    import pkgutil

    import detect_secrets.plugins as plugins
    from detect_secrets.plugins.base import RegexBasedDetector

    rules = []
    for info in sorted(pkgutil.iter_modules(plugins.__path__), key=lambda m: m.name):
        mod = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        for cname, cls in sorted(inspect.getmembers(mod, inspect.isclass)):
            if (
                cls.__module__ != mod.__name__
                or not issubclass(cls, RegexBasedDetector)
                or cls is RegexBasedDetector
                or cname in SKIP_DETECTORS
            ):
                continue
            # detect-secrets declares both as abstract properties on the base class; its
            # plugins set them as class attributes (as its docs ask), which is what we read
            denylist: Iterable[re.Pattern[str]] = cls.denylist  # type: ignore[assignment]
            name = _slug(cls.secret_type)  # type: ignore[arg-type]
            for rx in denylist:
                pre = strip_lookarounds(rx.pattern)
                pre = f"(?i:{pre})" if rx.flags & re.I else pre
                if not rust_ok(pre):
                    continue  # none today; a future pattern Rust cannot run is left out
                group = 1 if rx.groups else 0
                tier = HIGH
                if cname in SAMPLE_DETECTORS or (cname in KEYWORD_DETECTORS and "://" in pre):
                    tier = SAMPLE
                elif cname in KEYWORD_DETECTORS:
                    tier = WEAK
                rules.append(Rule(name, rx, pre, group, CHECKS.get(name), True, tier))
    return rules
