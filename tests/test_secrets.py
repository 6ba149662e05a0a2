"""High-confidence secrets are masked at ingest, before the first write, in every text column
and in errors.raw; the mask names the kind; placeholders, digests and code are left alone.
Possible secrets with no format (a password assigned a literal, a high-entropy literal) are never
masked: `suspects` finds them, for the filter to flag (tests/test_secrets_precision.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pyarrow as pa
import pytest

from pipeline.secrets.finding import rules, suspects
from pipeline.secrets.masking import mask, mask_columns
from pipeline.secrets.rust import rust_ok
from tests.conftest import toml_config

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ."
    "SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
KEY_BODY = "MIIEpAIBAAKCAQEA7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5g"
# planted high-confidence secret -> the text it sits in -> the rule that must name it
PLANTED = {
    "AKIAZ7QX3M4N5P6R7S8T": ("aws_access_key_id = AKIAZ7QX3M4N5P6R7S8T", "aws_access_key"),
    "ghp_Zx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk1Lm": (
        "GITHUB = 'ghp_Zx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk1Lm'",
        "github_token",
    ),
    "xoxb-2748392011-4820138471234-Zx81bQ7kPp2LmN3vR9sT4wY6": (
        "slack: xoxb-2748392011-4820138471234-Zx81bQ7kPp2LmN3vR9sT4wY6",
        "slack_token",
    ),
    "sk_live_51Hx7Zx81bQ7kPp2LmN3vR9sT": (
        "stripe.api_key = 'sk_live_51Hx7Zx81bQ7kPp2LmN3vR9sT'",
        "",
    ),
    JWT: (f"Authorization: Bearer {JWT}", "jwt"),
    KEY_BODY: (
        f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----",
        "private_key",
    ),
    "hunter2pass": ("url = 'https://deploy:hunter2pass@db.internal/x'", "basic_auth_credentials"),
    "pypi-AgEIcHlwaS5vcmcCJGE3ZjhkODFmLTg2MjQtNGUzMS05NjliLWRlYzU2ZWJjNjBjNAACKlszLCI": (
        "password = pypi-AgEIcHlwaS5vcmcCJGE3ZjhkODFmLTg2MjQtNGUzMS05NjliLWRlYzU2ZWJjNjBjNAAC"
        "KlszLCI",
        "pypi_token",
    ),
}
# possible secrets with no format -> the text -> the reason `suspects` (the filter's flag) gives;
# they were masked before (credential_assignment, high_entropy_assignment): now never masked
WEAK = {
    "Tr0ub4dor&3": ("PASSWORD=Tr0ub4dor&3", "password_assignment"),
    "s3cr3t-v4lue-9": ('client_secret: "s3cr3t-v4lue-9"', "secret_assignment"),
    "Q7vX2kP9mZ4wR8tL3nB6yH1cJ5dF0gS": (
        'SIGNING = "Q7vX2kP9mZ4wR8tL3nB6yH1cJ5dF0gS"',
        "high_entropy_literal",
    ),
}
NOT_SECRETS = [
    "rev: 6d7ab4f28a3d0bd0a1a6b4a8a5a0f6c7e2b1d9e0",
    '"integrity": "sha512-Q9Xc8bqfDzV0xZ7eW7K8uJ4v2f1YHn0q4t3n7q0mJv9w2XyZ0aB1c2D3e4F5g6H7=="',
    "--hash=sha256:3b0c9f1e2d4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c",
    "url = 'https://{token}:x-oauth-basic@github.com/org/repo.git'",
    "url = 'https://${GH_USER}:${GH_TOKEN}@github.com/org/repo.git'",
    "hf_token = os.getenv('HF_TOKEN')",
    "password = request.form['password']",
    'eos_token = "<|endoftext|>"',
    'checkpoint = "meta-llama/Llama-2-7b-chat-hf"',
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "max_tokens = 2048",
    "KEYS = [b'BEGIN RSA PRIVATE KEY', b'BEGIN DSA PRIVATE KEY']",
    "api_key = 'your-api-key-here'",
    "PASSWORD = password_input",
]


@pytest.mark.parametrize("secret", list(PLANTED))
def test_each_planted_kind_is_masked_with_its_kind(secret):
    text, kind = PLANTED[secret]
    masked, fired = mask(text)
    assert secret not in masked and "[REDACTED:" in masked
    if kind:
        assert f"[REDACTED:{kind}]" in masked, masked


@pytest.mark.parametrize("secret", list(WEAK))
def test_each_possible_secret_is_found_with_its_reason_and_never_masked(secret):
    text, reason = WEAK[secret]
    assert mask(text) == (text, [])
    assert [r for _, _, r in suspects(text)] == [reason]
    s, e, _ = suspects(text)[0]
    assert text[s:e] == secret


@pytest.mark.parametrize("text", NOT_SECRETS)
def test_placeholders_digests_and_code_are_not_secrets(text):
    assert mask(text) == (text, [])
    assert suspects(text) == []


def test_a_url_keeps_its_shape_and_a_key_block_goes_whole():
    assert mask("https://deploy:hunter2pass@db/x")[0] == (
        "https://deploy:[REDACTED:basic_auth_credentials]@db/x"
    )
    text = PLANTED[KEY_BODY][0] + "\nnext = 1"
    assert mask(text)[0] == "[REDACTED:private_key]\nnext = 1"


def test_vectorised_masking_equals_the_per_value_reference():
    values = [t for t, _ in (*PLANTED.values(), *WEAK.values())] + NOT_SECRETS + ["", "x = 1"]
    batch = pa.RecordBatch.from_pydict({"a": values, "b": list(reversed(values))})
    out, fired = mask_columns(batch, ("a", "b"))
    assert out.column(0).to_pylist() == [mask(v)[0] for v in values]
    assert out.column(1).to_pylist() == [mask(v)[0] for v in reversed(values)]
    assert sum(fired.values()) == 2 * sum(len(mask(v)[1]) for v in values)


def test_the_detect_secrets_rule_set_is_loaded_as_data():
    names = {r.name for r in rules()}
    assert {"aws_access_key", "github_token", "slack_token", "stripe_access_key"} <= names
    assert all(rust_ok(r.prefilter) for r in rules())


def _strings_of_every_output(run: Path) -> str:
    """Every string column of every Parquet file of the run, read as data (compression
    would hide a secret from a byte search), plus every text file."""
    out = []
    for p in run.rglob("*"):
        if p.suffix == ".parquet":
            df = pl.read_parquet(p)
            for c in df.columns:
                if df[c].dtype == pl.String:
                    out += df[c].drop_nulls().to_list()
                elif df[c].dtype == pl.List(pl.String):
                    out += [x for v in df[c].drop_nulls().to_list() for x in v]
        elif p.is_file() and p.suffix in (".json", ".md", ".html", ".csv", ".txt", ".arrow"):
            out.append(p.read_bytes().decode("utf-8", errors="replace"))
    return "\n".join(out)


def test_no_planted_secret_reaches_any_output_of_a_run(tmp_path, cli):
    fields = ("before", "after", "context", "comment", "path", "repo", "author")
    rows = []
    for k, (text, _) in enumerate(PLANTED.values()):
        f = fields[k % len(fields)]
        row = {"before": f"x = {k}", "after": f"x = {k + 1}", "comment": "fix the value"}
        row[f] = text
        rows.append(json.dumps(row))
    # possible secrets: kept unmasked, flagged with the reason
    for k, (text, _) in enumerate(WEAK.values()):
        rows.append(json.dumps({"before": f"y = {k}", "after": text, "comment": "set it"}))
    # a malformed record holding secrets: errors.raw
    rows.append('{"before": "' + PLANTED[JWT][0] + " PASSWORD=Tr0ub4dor&3")
    (tmp_path / "d.jsonl").write_text("\n".join(rows) + "\n")
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "d.jsonl"\n')
    cli("run", "--config", cfg)
    run = tmp_path / "runs" / "t"
    everything = _strings_of_every_output(run)
    for secret in PLANTED:
        assert secret not in everything, secret
    m = json.loads((run / "ingest" / "manifest.json").read_text())
    masked = m["conservation"]["sources"]["d.jsonl"]["secrets_masked"]
    assert masked["jwt"] >= 2 and masked["private_key"] == 1
    assert not {"credential_assignment", "high_entropy_assignment"} & set(masked)
    kept = pl.read_parquet(run / "filter" / "kept.parquet")
    for text, reason in WEAK.values():
        row = kept.filter(pl.col("after") == text)
        assert row["flags"].to_list() == [[f"possible_secret:{reason}"]], text
    assert cli("verify", run).exit_code == 0


@pytest.mark.parametrize(
    "text",
    [
        f"-----BEGIN RSA PRIVATE KEY----- {KEY_BODY} -----END RSA PRIVATE KEY-----",  # one line
        f"{KEY_BODY}\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\nx = 2",  # header cut off
        f'k = "{KEY_BODY}\\n{KEY_BODY}\\n-----END PRIVATE KEY-----\\n"',  # escaped, headless
    ],
    ids=["pem_one_line", "pem_headless", "pem_escaped_headless"],
)
def test_secrets_in_flattened_or_cut_text_are_masked(text):
    masked, fired = mask(text)
    assert fired and "[REDACTED:" in masked
    assert KEY_BODY not in masked, masked


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        # cut off before its closing quote
        ('SIGNING = "Q7vX2kP9mZ4wR8tL3nB6yH1cJ5dF0gS', "Q7vX2kP9mZ4wR8tL3nB6yH1cJ5dF0gS"),
        ('client_secret: "s3cr3t-v4lue-9', "s3cr3t-v4lue-9"),
        ('password = """hunter2pass!"""', "hunter2pass!"),  # triple-quoted
    ],
    ids=["cut_high", "cut_cred", "triple"],
)
def test_possible_secrets_in_cut_or_triple_quoted_text_are_found_not_masked(text, secret):
    """These were masked before; a guess is now only found (the filter flags the item)."""
    assert mask(text) == (text, [])
    assert [text[s:e] for s, e, _ in suspects(text)] == [secret]


@pytest.mark.parametrize(
    "text",
    [
        "the -----END RSA PRIVATE KEY----- line closes it",
        "-----BEGIN RSA PRIVATE KEY----- is the header",
        'password = ""',
    ],
)
def test_key_markers_without_a_body_are_mentions(text):
    assert mask(text) == (text, [])


def test_a_headless_key_walk_stays_linear():
    import time

    many_ends = (("A" * 64 + "\n") * 3 + "-----END RSA PRIVATE KEY-----\n") * 5000
    t = time.time()
    masked, _ = mask(many_ends)
    assert time.time() - t < 10 and "A" * 64 not in masked


# --- literal screens: the prefilters scan only the rows holding one of a rule's strings -------


def _every_prefilter_on_every_row(col: pl.Series, weak: bool) -> dict[int, list[int]]:
    """What `flagged` found before screens: every rule's Rust prefilter on every row, and on
    the text with quotes unescaped."""
    from pipeline.secrets.finding import _RUST_ESCAPED_QUOTE, _rust_prefilters

    pres = _rust_prefilters(weak)
    t = col.fill_null("")
    views = [t, t.str.replace_all(_RUST_ESCAPED_QUOTE, "$1")]
    hits = [
        pl.DataFrame({"t": v}).select(
            pl.col("t").str.contains(p).alias(str(k)) for k, p in enumerate(pres)
        )
        for v in views
    ]
    out: dict[int, list[int]] = {}
    for row in range(len(t)):
        ks = [k for k in range(len(pres)) if any(h[row, k] for h in hits)]
        if ks:
            out[row] = ks
    return out


def test_screened_prefilters_flag_what_every_prefilter_on_every_row_flags():
    from pipeline.secrets.finding import flagged
    from tests import test_secrets_encodings as enc

    texts = [t for t, _ in PLANTED.values()] + [t for t, _ in WEAK.values()] + NOT_SECRETS
    texts += [t for t, _ in enc.CASES] + [enc.K8S_TLS, enc.DOCKER, enc.SECRET]
    # case folding: Rust's (?i) reads the long s as s and the Kelvin sign as k
    texts += ["\u017fecret_access_key = 'x'", "AWS_\u212aEY = 'abc'", "XOX" + "b-12-ab"]
    texts += [t.replace('"', '\\"') for t in texts]  # quotes escaped, as in a JSON string
    col = pl.Series(texts)
    for weak in (False, True):
        assert flagged(col, weak) == _every_prefilter_on_every_row(col, weak)
    assert flagged(col)  # the cases hold secrets: a screen that passed no row would fail


@pytest.mark.parametrize(
    ("pattern", "literals", "icase"),
    [
        (r"\bgithub_pat_[A-Za-z0-9_]{22,}", ("github_pat_",), False),
        (r"eyJ[A-Za-z0-9_-]{8,}\.eyJ", (".eyJ",), False),  # the longer of two runs
        (r"(?:r|s)k_live_[0-9a-zA-Z]{24}", ("rk_live_", "sk_live_"), False),  # each spelling
        (r"(?i:aws.{0,20}?(?:key|pwd))", ("aws",), True),
        (r"(?:glpat|gldt)-[A-Za-z0-9_\-]{20,50}", ("gldt-", "glpat-"), False),
        (r"AC[a-z0-9]{32}", None, False),  # two letters: in too many rows to screen
        (r"(?:foo)?bar_[0-9]{4}|baz", ("bar_", "baz"), False),  # one of each alternative's
        (r"[0-9]{4}|baz", None, False),  # an alternative with no string
        (r"(?:abc)*def", ("def",), False),  # a repeat that may be absent requires nothing
        # what Python's parser and Rust's read apart is not screened: Rust's word edges,
        # verbose mode, a repeat with a space, an ignore-case string that is not ASCII
        (r"\<token_x", None, False),
        (r"\b{start}token_x", None, False),
        ("(?x)ab\u00a0cd", None, False),
        (r"abc{1, 2}", None, False),
        # Rust's nested classes: Python reads `[[ab]` and then a literal `]`
        (r"[[ab]]xyz", None, False),
        (r"[[:alpha:]]_xyz", None, False),
        # braces that are no repeat leave the strings screened; a `]` first in a class is in it
        (r"(?m)^(?:\{\{-?[ \t]*/\*|#)[^\n]{0,80}@generated\b", ("@generated",), False),
        (r"[]a]bcd", ("]bcd", "abcd"), False),
        ("(?i)\u017fecret", None, True),
    ],
)
def test_a_prefilter_screen_is_strings_every_match_holds(pattern, literals, icase):
    from pipeline.secrets.screen import Screen, screen

    got = screen(pattern)
    assert got == (None if literals is None else Screen(literals, icase))
