"""The secret rules of our own, and what each one counts as a secret.

- TOKEN_FORMATS: token formats detect-secrets 1.5 lacks, as data (name -> regex).
- ours: private-key blocks, JWTs, AWS secret keys, credential assignments, high-entropy
  assigned literals, with the checks that tell a literal credential from code, a placeholder,
  an example, a version, an alphabet or an encrypted value.

Each rule has a tier (`Rule.tier`: HIGH, SAMPLE or WEAK; the package's docstring says what
each does) and a prefilter: a superset of its pattern in the syntax Python and Rust share
(pipeline.secrets.rust runs it vectorised). Every pattern runs on RE2 (pipeline.linear), in
time linear in the text: where Python needed a look-around or a backreference, the pattern
consumes what it looked at and its check holds the rest (a closing quote repeating the opening
one, the character before a name).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from pipeline import linear
from pipeline.linear import Match, Regex

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
    pattern: Regex  # RE2 (pipeline.linear)
    prefilter: str  # a superset of `pattern`, valid for RE2 and polars (Rust regex)
    group: int | str = 0  # the part of the match that is the secret
    check: Callable[[Match], bool] | None = None  # False: not a secret after all
    whole_token: bool = False  # the span runs on over token characters after the match
    tier: str = HIGH  # HIGH, SAMPLE or WEAK (the package's docstring)
    # the match ends with the character after it (group NEXT), which a Python look-ahead
    # (detect-secrets' `(?!\w)`) only looked at: the secret ends before it
    ahead: bool = False


NEXT = "_next"  # the group a rule with `ahead` consumes the character after its match in


# ------------------------------------------------------------------------ placeholders

# A value that is a placeholder as a whole: a template (${X}, {{ x }}, <x>, %(x)s) or a mask
# (***..., ..., xxxxxx, sk-xxxxxxxx).
_TEMPLATE = linear.compile(
    r"^(?:\$\{?[\w.-]*\}?|\{\{?[^}]*\}?\}|<[^>]*>|%\([^)]*\)s|\*{3,}.*|\.{3,})$"
)
_MASKED = linear.compile(r"[\w.-]*")  # ... with xxxx or XXXX in it (tested apart)
_WORDS_ONLY = linear.compile(r"[A-Za-z]+(?:[ _.-]+[A-Za-z]+)*")
_CASE_RUN = linear.compile(r"[A-Z]+[a-z]*|[a-z]+")  # split further by _words
_LETTERS = linear.compile(r"[A-Za-z]+")
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
_FIXTURE = linear.compile(
    r"(?i)(?:test|fake|dummy|mock|example|sample)[a-z]*(?:[_.-][a-z]+)*[_.-]?\d*"
)


def _words(v: str) -> list[str]:
    """The words of a camelCase / snake_case value: HTTPServer -> HTTP, Server."""
    out = []
    for run in _CASE_RUN.findall(v):
        upper = len(run) - len(run.lstrip("ABCDEFGHIJKLMNOPQRSTUVWXYZ"))
        if upper > 1 and upper < len(run):  # an acronym, then a capitalised word
            out += [run[: upper - 1], run[upper - 1 :]]
        else:
            out.append(run)
    return out


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
            _segments(w.lower()) for w in _LETTERS.findall(v)
        )
    words = [w.lower() for w in _words(v)]
    if words[0] in _LEAD or words[-1] in _TAIL or all(w in _VOCAB for w in words):
        return True
    return all(_segments(w) for w in words)


# ------------------------------------------------------------------------ our rules

_CODE = linear.compile(r"[()\[\]{}<>$%|`\s]|^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$")
_PATH = linear.compile(r"^(?:[~.]{0,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)|^[\w.-]+(?:/[\w.-]+)+/?$")
_NOT_LITERAL = {"none", "null", "nil", "true", "false", "undefined", "required", "optional"}
_NUMBER = linear.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")
_VERSION = linear.compile(r"^[~^<>=!v]*\d+(?:\.\d+)+(?:[-+][\w.-]*)?$")  # ^1.0.0, >=2.3, 1.2.3-rc.1
# encrypted values are not secrets: Travis `secure:`, sops `ENC[...]`, ansible-vault
_ENCRYPTED_NAME = linear.compile(r"(?:^|[_.-])(?:secure|encrypted|enc|ciphertext|vault)$", re.I)
_ENCRYPTED_VALUE = linear.compile(r"^(?:ENC\[|\$ANSIBLE_VAULT|!vault|-----BEGIN PGP MESSAGE)")

KEYWORDS = (
    r"pass(?:word|wd|phrase)|secret(?:_?key)?|token|api_?key|apikey|access_?key|"
    r"auth_?key|private_?key|client_?secret|credentials?"
)
_KEYWORD = linear.compile(KEYWORDS, re.I)
_AWS_SECRET = linear.compile(r"[A-Za-z0-9/+]{40}")  # a secret access key: random_key
# A quote may be escaped (`\"`, as in a JSON line's raw text or a string in code). A quoted
# value ends at the first quote (escaped or not), line break or the text's end: closed or cut
# off. The name is bounded ({0,64}) and the type too ({0,60}), in ASCII classes: RE2's time is
# linear in the text times the pattern's size, and a Unicode class (\w) in a bounded repeat
# makes that size 100 times larger.
_ASSIGN = linear.compile(
    r"(?P<name>[A-Za-z0-9_.-]{0,64}?(?:"
    + KEYWORDS
    + r")(?:\\*[\"'])?)"  # ends with a credential word
    + r"(?:\s*:\s*&?(?:'static\s+)?[A-Za-z_][A-Za-z0-9_\[\], .]{0,60}?)??"  # password: str
    + r"\s*(?::=|=>|=|:)\s*"
    # quoted or triple-quoted (_same_quotes: RE2 has no backreference to repeat the first)
    + r"(?:(?P<open>\\*\"(?:\\*\"){0,2}|\\*'(?:\\*'){0,2})(?P<quoted>[^\"'\n]{6,200}?)"
    + r"(?:\\*[\"']|\r?\n|\z)"
    + r"|(?P<bare>[^\s\"',;#]{6,200}))",
    re.I,
)


def _same_quotes(s: str) -> bool:
    """Whether a run of opening quotes repeats its first quote exactly (`\"\"\"`, `\\'`), as a
    triple quote does; `\"\\"` is two quotes, not one opening."""
    first = next(i for i, c in enumerate(s) if c in "\"'") + 1
    return s == s[:first] * (len(s) // first)


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


def _assignment_ok(m: Match) -> bool:
    quoted = m.group("quoted") is not None
    if quoted and not _same_quotes(m.group("open")):
        return False
    if _ENCRYPTED_NAME.search(m.group("name").strip("\\\"'")):
        return False
    return _literal_secret(m.group("quoted") if quoted else m.group("bare"), quoted)


_REASONS = (  # the credential word a name ends with -> the flag's reason
    (linear.compile(r"pass", re.I), "password_assignment"),
    (linear.compile(r"private_?key", re.I), "private_key_assignment"),
    (linear.compile(r"secret", re.I), "secret_assignment"),
    (linear.compile(r"token", re.I), "token_assignment"),
    (linear.compile(r"key", re.I), "api_key_assignment"),
)


def assignment_reason(m: Match) -> str:
    """The reason a credential assignment is flagged, by the credential word its name ends
    with: password_assignment, secret_assignment, token_assignment, api_key_assignment ..."""
    words = _KEYWORD.findall(m.group("name"))
    last = words[-1] if words else ""
    return next((r for rx, r in _REASONS if rx.search(last)), "credential_assignment")


def entropy(s: str) -> float:
    """Shannon entropy in bits per character."""
    n = len(s)
    return -sum(c / n * math.log2(c / n) for c in (s.count(x) for x in set(s))) if n else 0.0


_DIGEST_NAMES = linear.compile(
    r"(?:^|[_.-])(?:integrity|sha\d*|hash|checksum|digest|rev|revision|commit|etag|md5|sri)$",
    re.I,
)
# A name, a quoted value of 24+ base64 / token characters closed by the quote it opened with
# (_high_entropy_ok: RE2 has no backreference) or cut off at a line break (real or escaped) or
# the text's end. The name is matched in ASCII (as _ASSIGN's) and read whole by _whole_name
# (RE2 has no look-behind to start it at a word's start).
_HIGH = linear.compile(
    r"(?P<name>[A-Za-z0-9_.-]{1,64})(?:\\*[\"'])?\s*(?::=|=>|=|:)\s*"
    r"(?P<open>\\*\"(?:\\*\"){0,2}|\\*'(?:\\*'){0,2})(?P<v>[A-Za-z0-9+/=_-]{24,})"
    r"(?:(?P<close>\\*[\"'])|\r?\n|\\[rn]|\z)"
)
_HEX = linear.compile(r"[0-9a-fA-F]+")
_SRI = linear.compile(r"(?:sha\d+|md5)[-_]", re.I)
_PARTS = linear.compile(r"[-_/]")


def _whole_name(m: Match) -> str | None:
    """A _HIGH match's name with the word characters before it (é: outside ASCII), as a
    name of at most 64 characters starting a word; None when that name is longer."""
    text, s = m.string, m.start()
    at = s
    while at > 0 and s - at <= 64 and (text[at - 1].isalnum() or text[at - 1] in "_.-"):
        at -= 1
    name = text[at:s] + m.group("name")
    return name if len(name) <= 64 else None


def _closed_as_opened(m: Match) -> bool:
    """The quotes of a _HIGH match: the opening a repeat of one quote, the closing (if any)
    that quote."""
    opening, close = m.group("open"), m.group("close")
    if not _same_quotes(opening):
        return False
    first = next(i for i, c in enumerate(opening) if c in "\"'") + 1
    return close is None or close == opening[:first]


def _high_entropy_ok(m: Match) -> bool:
    name = _whole_name(m)
    if name is None or not _closed_as_opened(m):
        return False
    v = m.group("v")
    if _HEX.fullmatch(v) or _DIGEST_NAMES.search(name):
        return False  # git SHAs, digests
    if _ENCRYPTED_NAME.search(name) or alphabet(v):
        return False  # Travis `secure: "..."` ciphertext; the base64 alphabet
    if _SRI.match(v):
        return False  # SRI hashes
    parts = [p for p in _PARTS.split(v) if p]
    if len(parts) >= 2 and all(len(p) <= 16 for p in parts):
        return False  # an identifier or a path: meta-llama/Llama-2-7b-hf
    mixed = any(c.islower() for c in v) and any(c.isupper() for c in v)
    if not (mixed and any(c.isdigit() for c in v)):
        return False
    return entropy(v) >= min(4.3, 0.85 * math.log2(len(v)))


KEY_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
# A key body read backwards from its END line (reversed, so one anchored match walks it):
# separators (newlines, spaces) and base64 runs of 16+. Escaped line breaks are made real ones
# first (_ESCAPED_BREAKS, of the same length), so no run ends in an escape's n or r.
_BODY_REVERSED = linear.compile(r"(?:(?:[ \t]*\n\r?[ \t]*|[ \t]+)[A-Za-z0-9+/=]{16,})+")
_ESCAPED_BREAKS = (("\\r\\n", "  \r\n"), ("\\n", " \n"))


def _breaks_unescaped(s: str) -> str:
    for escaped, real in _ESCAPED_BREAKS:
        s = s.replace(escaped, real)
    return s


def key_tail_start(m: Match) -> int | None:
    """Where the key body before an END line starts, or None when none is there (a key whose
    header was cut off, as in a diff's context: the body alone is still the secret)."""
    size = 2048  # grown while the body fills it, to 32k (an 8192-bit key's body is 6.5k)
    while True:
        window = m.string[max(0, m.start() - size) : m.start()]
        body = _BODY_REVERSED.match(_breaks_unescaped(window)[::-1])
        if not body or body.end() < len(window) - 100 or size > 20_000:
            return m.start() - body.end() if body else None
        size *= 4


def own_rules() -> list[Rule]:
    return [
        Rule(
            "private_key",
            linear.compile(
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                r"(?:[ \t]*(?:\r?\n|(?:\\r)?\\n)|[ \t]+)"  # a newline, or spaces on one line
                r"(?:[A-Za-z-]+:[^\n]*(?:\r?\n|(?:\\r)?\\n)){0,4}"  # header lines (Proc-Type: ...)
                r"\s*(?:\\n)?[ \t]*[A-Za-z0-9+/=]{16,}"
                r"[\s\S]*?(?:" + KEY_END + r"|\Z)"
            ),
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY",
        ),
        Rule("private_key", linear.compile(KEY_END), KEY_END, "key_tail"),  # a header cut off
        Rule(
            "jwt",
            linear.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
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
_AWS_SECRET_ASSIGN = linear.compile(  # 40 characters, then none of them (or the end)
    _AWS_SECRET_NAME
    + r"(?:\\*[\"'])?\s*(?::|=)\s*(?:\\*[\"'])?(?P<v>[A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)"
)


def random_key(v: str) -> bool:
    """Whether a 40-character value looks like an AWS secret access key: lower and upper case
    and digits (never a git SHA, a word, a run of one letter)."""
    return (
        _AWS_SECRET.fullmatch(v) is not None
        and any(c.islower() for c in v)
        and any(c.isupper() for c in v)
        and any(c.isdigit() for c in v)
    )


def token_format_rules() -> list[Rule]:
    return [Rule(name, linear.compile(p), p, whole_token=True) for name, p in TOKEN_FORMATS.items()]
