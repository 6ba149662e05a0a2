"""The secret rules of our own, and what each one counts as a secret.

- TOKEN_FORMATS: token formats detect-secrets 1.5 lacks, as data (name -> regex).
- ours: private-key blocks, JWTs, AWS secret keys, credential assignments, high-entropy
  assigned literals, with the checks that tell a literal credential from code, a placeholder,
  an example, a version, an alphabet or an encrypted value.

Each rule has a tier (`Rule.tier`: HIGH, SAMPLE or WEAK; the package's docstring says what
each does) and a prefilter: a superset of its pattern in the syntax Python and Rust share
(pipeline.secrets.rust runs it vectorised).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

HIGH, SAMPLE, WEAK = "high", "sample", "weak"

# Token formats detect-secrets 1.5 does not know: fine-grained GitHub tokens, Google API keys,
# Hugging Face tokens, npm tokens outside an .npmrc, PyPI tokens by their prefix alone (the
# base64 of the macaroon's location, pypi.org or test.pypi.org: detect-secrets wants 70 more
# characters). Data, like the detect-secrets patterns: add a format here. The filter's secret
# rules name these by their key (`github_pat: {format: github_token}`) rather than spell them.
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
    tier: str = HIGH  # HIGH, SAMPLE or WEAK (the package's docstring)


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
