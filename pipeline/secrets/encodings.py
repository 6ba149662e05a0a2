"""Secrets in the encodings real repositories ship them in (issue 28): the rules for credential
files by their format, and the views of a text that the rules read it through.

Rules (`encoding_rules`, after the others in the finding order):
- docker_config (HIGH): a docker config's `auths` entry with a literal `password`, `auth`
  (base64 of user:password), `identitytoken` or `registrytoken`; a placeholder is not one.
- putty_private_key (HIGH): a PuTTY key's `Private-Lines: N` lines through its `Private-MAC`
  (PuTTY-User-Key-File-2 and -3); the public lines stay.
- kubernetes_secret (SAMPLE): the values under `data:` / `stringData:` of a manifest whose
  `kind: Secret`; a value that is (decodes to) a placeholder, a template, empty, a boolean or a
  number, or a certificate is not one. The manifest's `kind` must be in the same text.
- pem_body (SAMPLE): 4 or more lines of exactly 64 base64 characters (and a shorter last one):
  the middle of a PEM block whose header and END line a diff's hunk cut off. A certificate's
  body looks the same, so SAMPLE; next to a BEGIN or END line the private_key rule (or no rule:
  a certificate) decides.
- encoded (HIGH) and continued (WEAK), the TRIGGERS: never find anything themselves; their
  prefilters flag the rows the views below need, so the vectorised scan sends those rows to
  Python (and a row they did not flag skips the views).

Views (`encoded_found`, hooked into pipeline.secrets.finding's `_all_found`, one level deep: a
view's own text is never viewed again):
- base64 blobs: a run of 32 to 16,384 base64 characters (or a wrapped one: lines of one
  width) whose first 24 bytes are ASCII, decoded when it is mostly printable UTF-8; the HIGH
  rules run on the decoded text, and a hit masks the whole encoded run under the hit's rule
  (`tls.key: LS0tLS1CRUdJTi...` -> `[REDACTED:private_key]`). At most MAX_BLOBS a text.
- edits (masking rules): `\\u0067` / `\\x67` escapes decoded, and the junction between two
  string literals joined (`"ghp_" + "0123..."`, `"ghp_" "0123..."`, across a line, Go's and
  JavaScript's `+`): a hit maps back to the original span, all parts and operators in it.
- continuations (WEAK rules): a backslash-newline after `=` or `:` joined, so
  `export PASSWORD=\\` + newline + `"..."` is the assignment it is.

Every regex here is linear by construction, and RE2 compiles it (no look-arounds or
back-references, no count over 1,000): repeats are bounded, or one character class that what
follows cannot extend (a base64 run, a line's rest), or a group of lines each of which starts
with the newline its content cannot match; none nests an ambiguous repeat in another. The work
a text costs is capped: MAX_BLOBS decodes of at most MAX_BLOB characters, MAX_EDITS edits.
"""

from __future__ import annotations

import base64
import binascii
from bisect import bisect_right
from collections.abc import Callable, Collection, Iterator
from functools import lru_cache

from pipeline import linear
from pipeline.linear import Match
from pipeline.secrets.rules import HIGH, SAMPLE, WEAK, Rule, alphabet, placeholder

Finding = tuple[int, int, int, str]  # start, -end, rule index, name (finding.Finding)
# A view's text -> its findings; the flag: the text is a decoded blob (HIGH rules only)
Run = Callable[[str, bool], list[Finding]]

MAX_BLOBS = 32  # base64 blobs decoded per text
MAX_BLOB = 16_384  # characters of one blob (an 8192-bit RSA key's PEM, in base64, is 8.7k)
MAX_EDITS = 4_096  # escapes and junctions taken out of one text
TRIGGERS = frozenset({"encoded", "continued"})  # the rules that only flag rows for the views

# ------------------------------------------------------------------------ triggers

# 8 base64 quads each of which encodes 3 bytes below 0x80 (the first character's index < 32,
# the second's mod 16 < 8, the third's mod 4 < 2): 24 bytes of ASCII text. Random base64 (a
# hash, ciphertext, a key's DER) passes a quad one time in 8, so 8 in a row about never.
ASCII_QUADS = r"(?:[A-Za-f][A-HQ-Xg-nw-z0-3][ABEFIJMNQRUVYZcdghklopstwx014589][A-Za-z0-9+/]){8}"
ESCAPE = r"\\(?:u00[2-7][0-9A-Fa-f]|x[2-7][0-9A-Fa-f])"  # \u0067, \x67: a printable ASCII one
# Between two string literals: `" + "`, `" "`, `"` newline `"`, `" +` newline `"`, newline
# `+ "`; the opening quote may be escaped (a JSON line's raw text: `_edits` takes the closing
# quote's backslashes too). It starts with its quote, so a search skips ahead to one.
JUNCTION = (
    r"""["'](?:[ \t]{0,16}\+[ \t]{0,16}(?:\r?\n[ \t]{0,64})?"""
    r"""|[ \t]{0,16}\r?\n[ \t]{0,64}(?:\+[ \t]{0,16})?|[ \t]{1,16})(?:\\{1,2})?["']"""
)
# a junction in what may be a token: 2 token characters before it, 8 after (a Go import block's
# `"net/http"` newline `"testing"` is not one)
JOINED = r"[A-Za-z0-9_-]{2}(?:\\{1,2})?" + JUNCTION + r"[A-Za-z0-9_-]{8}"
CONTINUED = r"[=:][ \t]{0,16}\\\r?\n"  # an assignment continued on the next line

_QUADS = linear.compile(ASCII_QUADS)
_ESCAPE = linear.compile(ESCAPE)
_JUNCTION_ON = linear.compile(JUNCTION + r"[A-Za-z0-9_-]{8}")  # JOINED from its quote: found faster
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_EDIT = linear.compile(f"(?P<esc>{ESCAPE})|(?P<join>{JUNCTION})")
_CONTINUED = linear.compile(r"[=:][ \t]{0,16}(?P<cont>\\\r?\n)")

# ------------------------------------------------------------------------ views


class _View:
    """A text with some spans replaced (edits: sorted, apart), and the way back (`back`): a
    view position -> the original one; a finding starting inside a replacement starts at its
    edit's start, one ending inside it ends at the edit's end."""

    def __init__(self, text: str, edits: list[tuple[int, int, str]]):
        parts: list[str] = []
        self.v_at: list[int] = []  # where each replacement starts in the view
        self.v_len: list[int] = []
        self.o_start: list[int] = []
        self.o_end: list[int] = []
        at = v = 0
        for s, e, rep in edits:
            parts += [text[at:s], rep]
            v += s - at
            self.v_at.append(v)
            self.v_len.append(len(rep))
            self.o_start.append(s)
            self.o_end.append(e)
            v += len(rep)
            at = e
        parts.append(text[at:])
        self.text = "".join(parts)

    def _orig(self, p: int, end: bool) -> int:
        k = bisect_right(self.v_at, p) - 1
        if k < 0:
            return p + end
        inside = p - self.v_at[k]
        if inside < self.v_len[k]:
            return self.o_end[k] if end else self.o_start[k]
        return self.o_end[k] + inside - self.v_len[k] + end

    def back(self, found: list[Finding]) -> list[Finding]:
        """Findings in the view as findings in the original text."""
        return [(self._orig(s, False), -self._orig(-ne - 1, True), k, n) for s, ne, k, n in found]


def _edits(text: str) -> list[tuple[int, int, str]]:
    """The escapes decoded and the junctions taken out (with the closing quote's backslashes)."""
    out: list[tuple[int, int, str]] = []
    for m in _EDIT.finditer(text):
        if len(out) >= MAX_EDITS:
            break
        if m.group("esc"):
            out.append((m.start(), m.end(), chr(int(m.group("esc")[2:], 16))))
            continue
        s, after = m.start(), out[-1][1] if out else 0
        while s > max(after, m.start() - 2) and text[s - 1] == "\\":
            s -= 1
        out.append((s, m.end(), ""))
    return out


def _continuations(text: str) -> list[tuple[int, int, str]]:
    out = []
    for m in _CONTINUED.finditer(text):
        out.append((m.start("cont"), m.end("cont"), ""))
        if len(out) >= MAX_EDITS:
            break
    return out


_B64_RUN = linear.compile(r"[A-Za-z0-9+/]{32}[A-Za-z0-9+/]*={0,2}")  # greedy: a run whole
_WRAP = linear.compile(r"\r?\n[ \t]{0,64}")  # between two lines of a wrapped blob
_UNPRINTABLE = linear.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# the short last line of a wrapped blob (a run is 32 characters or more), alone on its line
_TAIL = linear.compile(r"\r?\n[ \t]{0,64}(?P<tail>[A-Za-z0-9+/]{1,31}={0,2})[ \t]*(?:\r?\n|$)")


def _runs(text: str) -> list[tuple[int, int]]:
    """The base64 runs of the text, the lines of a wrapped blob (lines of one width, a
    multiple of 4 and 48 or more, then a shorter last one) as one."""
    runs: list[list[int]] = []  # start, end, the width of its lines
    for m in _B64_RUN.finditer(text):
        s, e = m.span()
        if runs:
            ps, pe, width = runs[-1]
            last = pe - ps if width == pe - ps else pe - _line_start(text, pe)
            if (
                last == width >= 48
                and width % 4 == 0
                and text[pe - 1] != "="
                and _WRAP.fullmatch(text[pe:s])
                and e - ps <= MAX_BLOB
            ):
                runs[-1][1] = e
                continue
        runs.append([s, e, e - s])
    for r in runs:  # a wrapped blob's last line, too short to be a run of its own
        s, e, width = r
        if e - s > width and not text[e - 1] == "=" and e - _line_start(text, e) == width:
            tail = _TAIL.match(text, e)
            if tail:
                r[1] = tail.end("tail")
    return [(s, e) for s, e, _ in runs]


def _line_start(text: str, end: int) -> int:
    """Where the line that ends at `end` starts, its indentation skipped."""
    at = text.rfind("\n", 0, end) + 1
    while text[at] in " \t":
        at += 1
    return at


def decoded(b64: str) -> str | None:
    """The text a base64 value decodes to, when it is mostly printable UTF-8, else None."""
    core = "".join(b64.split()).rstrip("=")
    if len(core) % 4 == 1:
        core = core[:-1]
    try:
        raw = base64.b64decode(core + "=" * (-len(core) % 4), validate=True)
    except (binascii.Error, ValueError):
        return None
    text = raw.decode("utf-8", errors="replace")  # a character cut at the end is no reason
    bad = len(_UNPRINTABLE.findall(text)) + text.count("\ufffd")
    return text if text and bad * 20 <= len(text) else None


def _blob_found(text: str, run: Run) -> list[Finding]:
    out: list[Finding] = []
    tried = 0
    for s, e in _runs(text):
        if e - s > MAX_BLOB or not _QUADS.match(text, s):
            continue
        tried += 1
        if tried > MAX_BLOBS:
            break
        plain = decoded(text[s:e])
        hits = run(plain, True) if plain else []
        if hits:
            _, _, k, name = min(hits)
            out.append((s, -e, k, name))
    return out


def encoded_found(
    text: str, weak: bool, run: Run, flagged: Collection[str] | None = None
) -> list[Finding]:
    """The findings the views of the text add (positions in the text): `run` finds them in a
    view's text. weak: for the WEAK rules (continuations only), else for the masking rules
    (base64 blobs, escapes and junctions). flagged: the names of the rules whose prefilters
    matched the text (None: not known); without the trigger rule's, no view can add one."""
    if flagged is not None and ("continued" if weak else "encoded") not in flagged:
        return []
    if weak:
        if "\\" not in text or not _CONTINUED.search(text):
            return []
        view = _View(text, _continuations(text))
        return view.back(run(view.text, False))
    out: list[Finding] = []
    if _QUADS.search(text):
        out += _blob_found(text, run)
    if ("\\" in text and _ESCAPE.search(text)) or _joined(text):
        view = _View(text, _edits(text))
        out += view.back(run(view.text, False))
    return out


def _joined(text: str) -> bool:
    """Whether JOINED matches the text (searched from the quote: a quote is rarer than the
    token characters JOINED starts with)."""
    for m in _JUNCTION_ON.finditer(text):
        s = m.start()
        while s > m.start() - 2 and text[s - 1 : s] == "\\":
            s -= 1
        if s >= 2 and text[s - 1] in _TOKEN_CHARS and text[s - 2] in _TOKEN_CHARS:
            return True
    return False


# ------------------------------------------------------------------------ docker config

_DOCKER = linear.compile(
    r""""(?P<key>auth|password|identitytoken|registrytoken)"[ \t]{0,16}:[ \t]{0,16}"""
    r""""(?P<v>[^"\\\r\n]{1,1000})\""""
)
_AUTHS = '"auths"'
_NUMBER = linear.compile(r"[-+]?\d+(?:\.\d+)?")


def _docker_ok(m: Match) -> bool:
    """Inside a docker config's `auths` (an entry of its object), and a literal."""
    text, s = m.string, m.start()
    at = text.rfind(_AUTHS, max(0, s - 4096), s)
    if at < 0:
        return False
    between = text[at + len(_AUTHS) : s]
    if between.count("{") - between.count("}") < 2:
        return False  # not inside a registry's entry
    v = m.group("v")
    if m.group("key") == "auth":
        plain = decoded(v)
        if plain is None or ":" not in plain:
            return not _not_literal(v)
        v = plain.split(":", 1)[1]
    return not _not_literal(v)


def _not_literal(v: str) -> bool:
    """A placeholder, a template, a number or a boolean, empty: not a credential."""
    v = v.strip().strip("\"'").strip()
    if not v or v.lower() in ("true", "false", "null", "none", "yes", "no"):
        return True
    if _NUMBER.fullmatch(v) or any(t in v for t in ("{{", "${", "$(")):
        return True
    return placeholder(v)


# ------------------------------------------------------------------------ PuTTY keys

_NL = r"(?:\r?\n|(?:\\r)?\\n)"  # a newline, or an escaped one (a JSON line's raw text)
_PUTTY = linear.compile(
    r"Private-Lines:[ \t]{0,8}\d{1,4}[ \t]{0,8}" + _NL + r"(?P<body>"
    r"(?:[ \t]{0,16}[A-Za-z0-9+/=]{1,128}[ \t]{0,16}(?:" + _NL + r"|$))+"
    r"(?:[ \t]{0,16}Private-MAC:[ \t]{0,8}[0-9A-Fa-f]{0,128})?)"
)

# ------------------------------------------------------------------------ headless PEM body

_PEM_LINE = "[A-Za-z0-9+/]{64}"
_PEM_BODY = linear.compile(
    r"(?m)^[ \t]{0,16}(?P<body>" + _PEM_LINE + r"(?:\r?\n[ \t]{0,16}" + _PEM_LINE + r"){3,}"
    r"(?:\r?\n[ \t]{0,16}[A-Za-z0-9+/]{1,63}={0,2})?)[ \t]{0,16}\r?$"
)
_PEM_PREFILTER = r"[ \t]*".join([_PEM_LINE + r"\r?\n"] * 3) + r"[ \t]*" + _PEM_LINE
_BEGIN = linear.compile(r"-----BEGIN [A-Z0-9 ]{1,64}-----")
_HEADER_LINE = linear.compile(r"[A-Za-z-]{1,64}:[^\n]*")
_HEX = linear.compile(r"[0-9A-Fa-f]+")
_LOWER, _UPPER, _DIGIT = (linear.compile(c) for c in ("[a-z]", "[A-Z]", "[0-9]"))


def _pem_body_ok(m: Match) -> bool:
    """Random base64 (mixed case and digits, not hex, not an alphabet), with no BEGIN or END
    line next to it: with one, it is a whole block, the private_key rule's or a certificate's."""
    body = m.group("body")
    first = body[:64]
    if _HEX.fullmatch(first) or alphabet(body) or len(set(first)) < 20:
        return False
    if not (_LOWER.search(first) and _UPPER.search(first) and _DIGIT.search(first)):
        return False
    text = m.string
    after = text[m.end() : m.end() + 80].lstrip()
    if after.startswith("-----END"):
        return False
    before = text[max(0, m.start() - 600) : m.start()]
    begins = list(_BEGIN.finditer(before))
    if begins:
        between = before[begins[-1].end() :].splitlines()
        if all(not ln.strip() or _HEADER_LINE.fullmatch(ln.strip()) for ln in between):
            return False
    return True


# ------------------------------------------------------------------------ Kubernetes Secrets

K8S_KIND = r"kind:\s*[\"']?Secret"
_KIND = linear.compile(r"^[ \t]*(?:-[ \t]+)?kind:[ \t]*[\"']?Secret[\"']?[ \t]*(?:#.*)?$")
_DOC = linear.compile(r"^(?:---|\.\.\.)(?:[ \t].*)?$")
_DATA = linear.compile(r"^(?P<ind>[ \t]*(?:-[ \t]+)?)(?P<k>data|stringData):[ \t]*(?:#.*)?$")
# a line's value: after `key: `, else the whole line (a block scalar's)
_K8S_LINE = linear.compile(
    r"(?m)^[ \t]{1,64}(?:(?P<k>[\"']?[A-Za-z0-9._-]{1,253}[\"']?):[ \t]{1,16})?"
    r"(?P<v>[^ \t\r\n][^\r\n]*)"
)
_BLOCK = linear.compile(r"[|>][+-]?[0-9]?[ \t]*(?:#.*)?")
_COMMENT = linear.compile(r"(?m)[ \t]#[^\n]*$")  # a YAML comment after a value
_PUBLIC = ("-----BEGIN CERTIFICATE", "-----BEGIN PUBLIC KEY", "-----BEGIN X509")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _secret_value(v: str, encoded: bool) -> bool:
    """A Secret's value is a secret: not a placeholder, template, number, boolean or empty
    (decoded first under `data:`), nor a certificate or a public key."""
    v = _COMMENT.sub("", v).strip()
    if v[:1] in "\"'" and v[-1:] == v[:1] and len(v) >= 2:
        v = v[1:-1]
    if encoded and not any(t in v for t in ("{{", "${", "$(")):
        plain = decoded(v)
        if plain is not None:
            v = plain
        elif v:
            try:
                base64.b64decode("".join(v.split()), validate=True)
                return True  # binary: a keystore, a DER key
            except (binascii.Error, ValueError):
                pass
    return not _not_literal(v) and not v.lstrip().startswith(_PUBLIC)


def _data_values(lines: list[str], a: int, b: int) -> Iterator[tuple[bool, list[int]]]:
    """Each value under `data:` / `stringData:` in lines[a:b]: (under `data:`, its lines: the
    `key: value` line, or a block scalar's lines)."""
    parent = child = -1
    encoded = True
    i = a
    while i < b:
        ln = lines[i].rstrip("\r\n")
        i += 1
        ind = _indent(ln)
        d = _DATA.match(ln)
        if not ln.strip():
            continue
        if d:
            parent, child, encoded = len(d.group("ind")), -1, d.group("k") == "data"
        elif parent < 0 or ind <= parent:
            parent = -1
        elif child < 0 or ind == child:
            child = ind
            value = ln.strip().split(":", 1)[-1].strip()
            if not _BLOCK.fullmatch(value):
                yield encoded, [i - 1]
                continue
            block = []
            while i < b and (not lines[i].strip() or _indent(lines[i]) > child):
                if lines[i].strip():
                    block.append(i)
                i += 1
            yield encoded, block


@lru_cache(maxsize=16)
def _secret_values(text: str) -> frozenset[int]:
    """Where (the start of `_K8S_LINE`'s value) the secret values of the text's `kind: Secret`
    manifests are: one line's value under `data:` / `stringData:`, or each line of a block
    scalar (`key: |`) there."""
    lines = text.splitlines(keepends=True)
    starts, at = [], 0
    for ln in lines:
        starts.append(at)
        at += len(ln)
    docs, begin = [], 0
    for i, ln in enumerate(lines):
        if _DOC.match(ln.rstrip("\r\n")):
            docs.append((begin, i))
            begin = i + 1
    docs.append((begin, len(lines)))
    out: set[int] = set()
    for a, b in docs:
        if not any(_KIND.match(lines[i].rstrip("\r\n")) for i in range(a, b)):
            continue
        for encoded, at_lines in _data_values(lines, a, b):
            found = [m for i in at_lines if (m := _K8S_LINE.match(text, starts[i]))]
            if len(at_lines) == 1 and found and not found[0].group("k"):
                continue  # not a `key: value` line
            value = "\n".join(m.group("v") for m in found)
            if found and _secret_value(value, encoded):
                out.update(m.start("v") for m in found)
    return frozenset(out)


def _k8s_ok(m: Match) -> bool:
    return m.start("v") in _secret_values(m.string)


# ------------------------------------------------------------------------ the rules


def encoding_rules() -> list[Rule]:
    never = linear.compile(r"[^\s\S]")  # the trigger rules' pattern: matches nothing
    return [
        Rule("docker_config", _DOCKER, _AUTHS, "v", _docker_ok),
        Rule("putty_private_key", _PUTTY, r"Private-Lines:", "body"),
        Rule("kubernetes_secret", _K8S_LINE, K8S_KIND, "v", _k8s_ok, tier=SAMPLE),
        Rule("pem_body", _PEM_BODY, _PEM_PREFILTER, "body", _pem_body_ok, tier=SAMPLE),
        Rule("encoded", never, f"{ASCII_QUADS}|{ESCAPE}|{JOINED}", tier=HIGH),
        Rule("continued", never, CONTINUED, tier=WEAK),
    ]
