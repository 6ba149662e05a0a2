"""detect-secrets' RegexBasedDetector `denylist` patterns, read as data from the installed
package, as rules; a token they match is masked to its end (`whole_token`): detect-secrets 1.5
matches Stripe keys for 24 characters and would leave the rest shown. Left out: its IP-address
detector (not a secret), and its private-key and JWT patterns, which match a header alone
(pipeline.secrets.rules has ours, which need the key body / all three JWT parts).

Each pattern runs on RE2 (pipeline.linear), never on Python's backtracking `re`: its
look-arounds, of two shapes in detect-secrets 1.5, are rewritten (`re2_pattern`); a pattern
RE2 still cannot run is left out (none is: a test holds every detector to a rule)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from pipeline import linear
from pipeline.linear import Match
from pipeline.secrets.rules import HIGH, NEXT, SAMPLE, WEAK, Rule, placeholder, random_key
from pipeline.secrets.rust import rust_ok, strip_lookarounds

SKIP_DETECTORS = {"IPPublicDetector", "PrivateKeyDetector", "JwtTokenDetector"}
# detect-secrets detectors that are a keyword and a value shape, not a format: WEAK (their
# patterns with a URL in them are a password in a URL: SAMPLE).
KEYWORD_DETECTORS = {"CloudantDetector", "IbmCloudIamDetector", "IbmCosHmacDetector"}
KEYWORD_DETECTORS |= {"SoftlayerDetector"}
SAMPLE_DETECTORS = {"BasicAuthDetector"}  # a literal password in a URL

_URL_AUTH = linear.compile(r"://(?P<user>[^:/?#\[\]@\s]*):(?P<pw>[^:/?#\[\]@\s]+)@")
TEMPLATE_PASSWORDS = {"x-oauth-basic", "x-access-token", "oauth2", "token"}


def _aws_ok(m: Match) -> bool:
    """An access key id (AKIA...) as matched; a secret key named aws...key: random-looking."""
    return m.re.groups == 0 or random_key(m.group(1))


def _url_auth_ok(m: Match) -> bool:
    """A URL's user:password is literal: a placeholder in either part means a template
    (`https://{token}:x-oauth-basic@github.com`)."""
    u = _URL_AUTH.search(m.group(0))
    if not u:
        return True
    user, pw = u.group("user"), u.group("pw")
    if any(c in part for part in (user, pw) for c in "${}<>*%"):
        return False
    return pw.lower() not in TEMPLATE_PASSWORDS and not placeholder(pw)


CHECKS: dict[str, Callable[[Match], bool]] = {
    "basic_auth_credentials": _url_auth_ok,
    "aws_access_key": _aws_ok,
}


# detect-secrets' look-arounds: a keyword detector's name must not follow a word character
# (a look-behind: here the pattern takes that character, or the text's start), and a token
# must not run on (a look-ahead (?!\w) or (?![a-f0-9]): here the pattern takes the character
# after it, in group NEXT, which the secret's span leaves out: Rule.ahead)
_LEAD = r"(?:(?<=\W)|(?<=^))"
_AHEAD = re.compile(r"\(\?!(\\w|\[[^\]]*\])\)")  # on the pattern's text


def re2_pattern(p: str) -> tuple[str, bool]:
    """A detect-secrets pattern without its look-arounds, matching where it matches, and
    whether it takes the character after its match (group NEXT)."""
    if p.startswith(_LEAD):
        p = r"(?:^|\W)" + p[len(_LEAD) :]
    ahead = _AHEAD.findall(p)
    if len(ahead) != 1:
        return p, False
    not_x = r"\W" if ahead[0] == r"\w" else "[^" + ahead[0][1:]
    return _AHEAD.sub(lambda _: f"(?:(?P<{NEXT}>{not_x})|\\z)", p), True


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
                p, ahead = re2_pattern(rx.pattern)
                try:
                    pattern = linear.compile(p, rx.flags & ~re.UNICODE)
                except linear.LinearError:
                    continue  # none today (a test holds each to a rule)
                if not rust_ok(pre) or linear.problem(pre):
                    continue  # none today; a future pattern Rust cannot run is left out
                group = 1 if rx.groups else 0
                tier = HIGH
                if cname in SAMPLE_DETECTORS or (cname in KEYWORD_DETECTORS and "://" in pre):
                    tier = SAMPLE
                elif cname in KEYWORD_DETECTORS:
                    tier = WEAK
                rules.append(Rule(name, pattern, pre, group, CHECKS.get(name), True, tier, ahead))
    return rules
