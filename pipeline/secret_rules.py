"""The secret rules `pipeline.secrets` masks with, and what each one counts as a secret.

- detect-secrets' RegexBasedDetector `denylist` patterns, read as data from the installed
  package (see `pipeline.secrets`); a token they match is masked to its end (`whole_token`):
  detect-secrets 1.5 matches Stripe keys for 24 characters and would leave the rest shown.
- TOKEN_FORMATS: token formats detect-secrets 1.5 lacks, as data (name -> regex).
- ours: private-key blocks, JWTs, credential assignments, high-entropy assigned literals.

Each rule carries a prefilter: a superset of its pattern in the syntax Python and Rust share;
`rust_superset` turns it into the Rust regex polars runs, where Python's `\\s`, `\\w` and `\\b`
mean other character sets (Python's `\\s` also takes U+001C..U+001F).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import polars as pl

SKIP_DETECTORS = {"IPPublicDetector", "PrivateKeyDetector", "JwtTokenDetector"}

# Token formats detect-secrets 1.5 does not know: fine-grained GitHub tokens, Google API keys,
# Hugging Face tokens. Data, like the detect-secrets patterns: add a format here.
TOKEN_FORMATS = {
    "github_token": r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    "google_api_key": r"\bAIza[0-9A-Za-z_-]{35}",
    "huggingface_token": r"\bhf_[A-Za-z0-9]{30,}",
}


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    prefilter: str  # a superset of `pattern`, valid for Python re and polars (Rust regex)
    group: int | str = 0  # the part of the match that is the secret
    check: Callable[[re.Match[str]], bool] | None = None  # False: not a secret after all
    whole_token: bool = False  # the span runs on over token characters after the match


# ------------------------------------------------------------------------ placeholders

# A value that is a placeholder as a whole: a template (${X}, {{ x }}, <x>, %(x)s) or a mask
# (***..., ..., xxxxxx, sk-xxxxxxxx).
_TEMPLATE = re.compile(
    r"""^(?:\$\{?[\w.-]*\}? | \{\{?[^}]*\}?\} | <[^>]*> | %\([^)]*\)s | \*{3,}.* | \.{3,}
    | [\w.-]*?(?:x{4,}|X{4,})[\w.-]*)$""",
    re.X,
)
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


def placeholder(v: str) -> bool:
    """Whether the value as a whole is a placeholder, not a literal."""
    if _TEMPLATE.match(v):
        return True
    if not _WORDS_ONLY.fullmatch(v):
        return False
    words = [w.lower() for w in _WORD.findall(v)]
    return words[0] in _LEAD or words[-1] in _TAIL or all(w in _VOCAB for w in words)


# ------------------------------------------------------------------------ our rules

_CODE = re.compile(r"[()\[\]{}<>$%|`\s]|^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$")
_PATH = re.compile(r"^(?:[~.]{0,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)|^[\w.-]+(?:/[\w.-]+)+/?$")
_NOT_LITERAL = {"none", "null", "nil", "true", "false", "undefined", "required", "optional"}
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")

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
    (?:\s*:\s*[A-Za-z_][\w\[\], .]*?)??  # an optional type annotation (password: str = ...)
    \s*(?::=|=>|=|:)\s*
    (?:(?P<q>\\*["'])(?P=q){0,2}(?P<quoted>[^"'\n]{6,200}?)  # quoted, or triple-quoted
       (?:(?P=q)|(?=\\*["']|\r?\n|\Z))                   # closed, or cut off
    | (?P<bare>[^\s"',;#]{6,200}))""",
    re.I | re.X,
)


def _literal_secret(v: str, quoted: bool) -> bool:
    """Whether an assigned value is a literal credential rather than code or a placeholder."""
    if v.lower() in _NOT_LITERAL or _NUMBER.match(v):
        return False
    if _AWS_SECRET.fullmatch(v):  # its / would make it a path below
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
    return _literal_secret(m.group("quoted") if quoted else m.group("bare"), quoted)


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in (s.count(x) for x in set(s))) if n else 0.0


_DIGEST_NAMES = re.compile(
    r"(?:^|[_.-])(?:integrity|sha\d*|hash|checksum|digest|rev|revision|commit|etag|md5|sri)$",
    re.I,
)
_HIGH = re.compile(
    r"""(?P<name>[\w.-]{1,64})(?:\\*["'])?\s*(?::=|=>|=|:)\s*(?P<q>\\*["'])(?P=q){0,2}"""
    r"""(?P<v>[A-Za-z0-9+/=_-]{24,})(?:(?P=q)|(?=\r?\n|\\[rn]|\Z))"""
)


def _high_entropy_ok(m: re.Match[str]) -> bool:
    v, name = m.group("v"), m.group("name")
    if re.fullmatch(r"[0-9a-fA-F]+", v) or _DIGEST_NAMES.search(name):
        return False  # git SHAs, digests
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
        ),
        Rule(
            "credential_assignment",
            _ASSIGN,
            r"(?i:" + KEYWORDS + r")(?:\\*[\"'])?\s*(?::|=)",
            "quoted_or_bare",
            _assignment_ok,
        ),
        Rule(
            "high_entropy_assignment",
            _HIGH,
            r"(?::|=)\s*(?:\\*[\"']){1,3}[A-Za-z0-9+/=_-]{24,}",
            "v",
            _high_entropy_ok,
        ),
    ]


def token_format_rules() -> list[Rule]:
    return [Rule(name, re.compile(p), p, whole_token=True) for name, p in TOKEN_FORMATS.items()]


# ------------------------------------------------------------------------ detect-secrets

_URL_AUTH = re.compile(r"://(?P<user>[^:/?#\[\]@\s]*):(?P<pw>[^:/?#\[\]@\s]+)@")
TEMPLATE_PASSWORDS = {"x-oauth-basic", "x-access-token", "oauth2", "token"}


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


CHECKS: dict[str, Callable[[re.Match[str]], bool]] = {"basic_auth_credentials": _url_auth_ok}

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
                rules.append(Rule(name, rx, pre, group, CHECKS.get(name), whole_token=True))
    return rules
