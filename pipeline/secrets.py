"""Secrets found and masked before the first write: `[REDACTED:<rule>]` keeps the kind.

Rules come from two places:
- the maintained detector set of Yelp's detect-secrets (Apache-2.0, pinned in pyproject): the
  `denylist` regexes of its RegexBasedDetector plugins (AWS, GitHub, GitLab, Slack, Stripe,
  OpenAI, PyPI, npm, Twilio, SendGrid, Azure, Artifactory, Discord, Telegram, basic-auth URLs
  ...), read as data from the installed package; a pattern's first group, when it holds 8 or
  more characters, is the secret (so `://user:[REDACTED]@host` keeps its shape), else the
  whole match (`(ghp|gho)_...` names a prefix). Left out: its IP-address detector
  (not a secret), and its private-key and JWT patterns, which match a header alone; ours below
  need the key body / all three JWT parts.
- ours: private-key blocks (header, body, to the END line or the end of the text; a body and
  END line whose header was cut off, as in a diff's context), JWTs, `password / secret / token
  / api_key = <literal>` assignments (env, YAML, JSON, code), and high-entropy literals in any
  assignment; a literal may be triple-quoted or cut off at the end of its line.

Not secrets: placeholders (`${X}`, `{token}`, `<x>`, `%(x)s`, `***`, `changeme`), code (a
call, an attribute, a subscript), tokenizer special tokens (`"<|endoftext|>"`), git SHAs and
other pure-hex digests, SRI hashes (`sha512-...`), lock-file digests (`sha256:...`).

Speed: each rule has a prefilter regex (a superset, in the syntax Python and polars share);
`mask_columns` runs the prefilters vectorised over a whole Arrow batch and calls the Python
rules only on the rows they flag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

import polars as pl
import pyarrow as pa

MARK = "[REDACTED:{}]"
SKIP_DETECTORS = {"IPPublicDetector", "PrivateKeyDetector", "JwtTokenDetector"}


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    prefilter: str  # a superset of `pattern`, valid for Python re and polars (Rust regex)
    group: int | str = 0  # the part of the match that is the secret
    check: Callable[[re.Match[str]], bool] | None = None  # False: not a secret after all


# ------------------------------------------------------------------------ our rules

_PLACEHOLDER = re.compile(
    r"""^(?:
      \$\{?[\w.-]*\}? | \{\{?[^}]*\}?\} | <[^>]*> | %\([^)]*\)s | \*{3,}.* | \.{3,}
    | x{4,} | (?:your|my|the|some|insert|enter|put)[_-]?[\w-]* | [\w-]*[_-]here
    | \w*(?:example|sample|dummy|placeholder|changeme|change_me|redacted|secret|password
    | passwd|token|xxxx|fake|unused|notused|not[-_]used|not[-_]?needed|not[-_]?set|todo|tbd
    | fixme)[\w-]*
    )$""",
    re.I | re.X,
)
_CODE = re.compile(r"[()\[\]{}<>$%|`\s]|^[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)+$")
_PATH = re.compile(r"^(?:[~.]{0,2}/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)|^[\w.-]+(?:/[\w.-]+)+/?$")
_NOT_LITERAL = {"none", "null", "nil", "true", "false", "undefined", "required", "optional"}
_NUMBER = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")

KEYWORDS = (
    r"pass(?:word|wd|phrase)|secret(?:_?key)?|token|api_?key|apikey|access_?key|"
    r"auth_?key|private_?key|client_?secret|credentials?"
)
_ASSIGN = re.compile(
    r"""(?P<name>[\w.-]*?(?:"""
    + KEYWORDS
    + r""")["']?)                       # the name ends with a credential word
    (?:\s*:\s*[A-Za-z_][\w\[\], .]*?)??  # an optional type annotation (password: str = ...)
    \s*(?::=|=>|=|:)\s*
    (?:(?P<q>["'])(?P=q){0,2}(?P<quoted>[^"'\n]{6,200})  # quoted, or triple-quoted
       (?:(?P=q)|(?=\r?\n|\Z))                           # closed, or cut off at a line end
    | (?P<bare>[^\s"',;#]{6,200}))""",
    re.I | re.X,
)


def _literal_secret(v: str, quoted: bool) -> bool:
    """Whether an assigned value is a literal credential rather than code or a placeholder."""
    if v.lower() in _NOT_LITERAL or _NUMBER.match(v):
        return False
    if _PLACEHOLDER.match(v) or _CODE.search(v) or _PATH.match(v):
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
    r"""(?P<name>[\w.-]+)["']?\s*(?::=|=>|=|:)\s*(?P<q>["'])(?P=q){0,2}"""
    r"""(?P<v>[A-Za-z0-9+/=_-]{24,})(?:(?P=q)|(?=\r?\n|\Z))"""
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


_KEY_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
# A key body read backwards from its END line (reversed, so one anchored match walks it in
# linear time): separators (newlines, escaped "\n", spaces) and base64 runs of 16+.
_BODY_REVERSED = re.compile(
    r"(?:(?:[ \t]*(?:\n\r?|n\\(?:r\\)?)[ \t]*|[ \t]+)[A-Za-z0-9+/=]{16,}(?!\\))+"
)


def _key_tail_start(m: re.Match[str]) -> int | None:
    """Where the key body before an END line starts, or None when none is there (a key whose
    header was cut off, as in a diff's context: the body alone is still the secret)."""
    size = 2048  # grown while the body fills it, to 32k (an 8192-bit key's body is 6.5k)
    while True:
        window = m.string[max(0, m.start() - size) : m.start()]
        body = _BODY_REVERSED.match(window[::-1])
        if not body or body.end() < len(window) - 100 or size > 20_000:
            return m.start() - body.end() if body else None
        size *= 4


def _own_rules() -> list[Rule]:
    return [
        Rule(
            "private_key",
            re.compile(
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
                r"(?:[ \t]*(?:\r?\n|\\r?\\n)|[ \t]+)"  # a newline, or spaces on one line
                r"(?:[A-Za-z-]+:[^\n]*(?:\r?\n|\\r?\\n)){0,4}\s*(?:\\n)?[ \t]*[A-Za-z0-9+/=]{16,}"
                r"[\s\S]*?(?:" + _KEY_END + r"|\Z)"
            ),
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY",
        ),
        Rule("private_key", re.compile(_KEY_END), _KEY_END, "key_tail"),  # a header cut off
        Rule(
            "jwt",
            re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
            r"eyJ[A-Za-z0-9_-]{8,}\.eyJ",
        ),
        Rule(
            "credential_assignment",
            _ASSIGN,
            r"(?i:" + KEYWORDS + r")[\"']?\s*(?::|=)",
            "quoted_or_bare",
            _assignment_ok,
        ),
        Rule(
            "high_entropy_assignment",
            _HIGH,
            r"(?::|=)\s*[\"']{1,3}[A-Za-z0-9+/=_-]{24,}",
            "v",
            _high_entropy_ok,
        ),
    ]


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
    return pw.lower() not in TEMPLATE_PASSWORDS and not _PLACEHOLDER.match(pw)


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


def rust_ok(p: str) -> bool:
    try:
        pl.Series([""], dtype=pl.String).str.contains(p)
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
                rules.append(Rule(name, rx, pre, 1 if rx.groups else 0, CHECKS.get(name)))
    return rules


@lru_cache(maxsize=1)
def rules() -> tuple[Rule, ...]:
    """Specific detectors first: where two find the same secret, the first names it."""
    own = _own_rules()
    return (*own[:3], *detect_secrets_rules(), *own[3:])


@lru_cache(maxsize=1)
def _prefilter() -> re.Pattern[str]:
    """One Python regex matching wherever any rule might."""
    return re.compile("|".join(f"(?:{r.prefilter})" for r in rules()))


def flagged(col: pl.Series) -> dict[int, list[int]]:
    """row -> the rules whose prefilter matches it, vectorised (one Rust scan per rule)."""
    df = pl.DataFrame({"t": col.fill_null("")})
    hits = df.select(
        [pl.col("t").str.contains(r.prefilter).alias(str(k)) for k, r in enumerate(rules())]
    )
    any_hit = hits.select(pl.any_horizontal(pl.all())).to_series().arg_true()
    out: dict[int, list[int]] = {}
    for row, flags in zip(any_hit.to_list(), hits[any_hit].iter_rows(), strict=True):
        out[row] = [k for k, f in enumerate(flags) if f]
    return out


# ------------------------------------------------------------------------ masking


def _span(r: Rule, m: re.Match[str]) -> tuple[int, int]:
    if r.group == "quoted_or_bare":
        g = "quoted" if m.group("quoted") is not None else "bare"
        return m.span(g)
    if r.group == "key_tail":  # an END line alone is a mention: an empty span, no finding
        s = _key_tail_start(m)
        return (m.end() if s is None else s), m.end()
    if r.group == 1:  # detect-secrets: group 1 is the secret when it holds one, else a prefix
        s, e = m.span(1)
        return (s, e) if s >= 0 and e - s >= 8 else m.span(0)
    return m.span(r.group)


def find(text: str, only: list[int] | None = None) -> list[tuple[int, int, str]]:
    """(start, end, rule) of every secret in text, leftmost first, without overlaps.

    only: the indices of the rules to try (their prefilters already matched)."""
    if not text or (only is None and not _prefilter().search(text)):
        return []
    found = []
    all_rules = rules()
    for k in range(len(all_rules)) if only is None else only:
        r = all_rules[k]
        if only is None and not re.search(r.prefilter, text):
            continue
        for m in r.pattern.finditer(text):
            if r.check is None or r.check(m):
                s, e = _span(r, m)
                if e > s:
                    found.append((s, -e, k, r.name))
    found.sort()
    out: list[tuple[int, int, str]] = []
    for s, neg_e, _, name in found:
        e = -neg_e
        if out and s < out[-1][1]:
            continue  # inside an earlier, wider finding
        out.append((s, e, name))
    return out


def mask(text: str, only: list[int] | None = None) -> tuple[str, list[str]]:
    """(text with every secret replaced by [REDACTED:<rule>], the rules that fired)."""
    hits = find(text, only)
    if not hits:
        return text, []
    parts, at = [], 0
    for s, e, name in hits:
        parts += [text[at:s], MARK.format(name)]
        at = e
    parts.append(text[at:])
    return "".join(parts), [n for _, _, n in hits]


def mask_columns(
    batch: pa.RecordBatch, columns: tuple[str, ...]
) -> tuple[pa.RecordBatch, dict[str, int]]:
    """The batch with secrets masked in `columns` (string), and secrets masked per rule.

    The prefilters run vectorised over the row's columns joined (one scan per rule, the
    regexes compiled once a batch); Python looks only at the rows they flag."""
    fired: dict[str, int] = {}
    if batch.num_rows == 0:
        return batch, fired
    cols = [batch.schema.get_field_index(c) for c in columns]
    frame = pl.DataFrame(
        [cast(pl.Series, pl.from_arrow(batch.column(i))).alias(str(i)) for i in cols]
    )
    joined = frame.select(
        pl.concat_str([pl.col(str(i)).fill_null("") for i in cols], separator="\n")
    ).to_series()
    which = flagged(joined)
    if not which:
        return batch, fired
    rows = list(which)
    arrays = list(batch.columns)
    for i in cols:
        col = frame[str(i)]
        fixed = {}
        for k, v in zip(rows, col.gather(rows).to_list(), strict=True):
            new, names = mask(v, which[k]) if v else (v, [])
            for n in names:
                fired[n] = fired.get(n, 0) + 1
            if names:
                fixed[k] = new
        if fixed:
            col = col.clone().scatter(list(fixed), list(fixed.values()))
            arrays[i] = col.to_arrow().cast(batch.schema.field(i).type)
    return pa.RecordBatch.from_arrays(arrays, schema=batch.schema), fired
