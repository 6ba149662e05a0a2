"""Secrets: precise by default, never silently damaging code.

A high-confidence credential (a private-key block, a provider token with its own format) is
masked at ingest wherever it is and its item dropped (`secret_masked`); a JWT or a literal
password in a URL is one outside test fixtures and docs. Anything weaker (a credential word
assigned a literal, a high-entropy literal) is never masked: the item keeps its code and, where
a weak rule matched, gets the flag `possible_secret:<reason>`. Identifiers, placeholders and
documentation examples, test fixtures, comments, encrypted CI values and alphabets are not
secrets at all. Cases from JavaScript, TypeScript, Go, Java and Rust history."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import polars as pl
import pytest

from pipeline.filter.apply import apply_rules, reference_decide
from pipeline.secrets.finding import rules, suspects
from pipeline.secrets.masking import mask, mask_columns
from pipeline.secrets.places import SAMPLE_PATH, sample_path
from pipeline.secrets.rules import placeholder
from pipeline.secrets.rust import rust_superset
from tests.conftest import shared, toml_config
from tests.test_filter import DEFAULT, STRICT, frame, item

GHP = "ghp_Zx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk1Lm"
AKIA = "AKIAZ7QX3M4N5P6R7S8T"
STRIPE = "sk_live_51Hx7Zx81bQ7kPp2LmN3vR9sTq8Wm2Lk5"
SLACK = "xoxb-2748392011-4820138471234-Zx81bQ7kPp2LmN3vR9sT4wY6"
KEY_BODY = "MIIEpAIBAAKCAQEA7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5g"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----"
JWT = (  # jwt.io's example: in every JWT library's tests
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwia"
    "WF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
TRAVIS = (  # `travis encrypt` output: ciphertext, not a secret
    "KG1FCRt4ZbKM1LatEje3cI6hsADBaHhwibcahvHbYiZI0Pvj7Wnz4+rMt4su1F7XKe06BewUqAcW+6QqhXDvDvK1P"
    "aRgjAIysVxaUhyM/BncbK1MPK/pUnB1Bhk420vmuI/A/ikunqNg0mn2ZFWyD6K1SGakMRmvHncCgeHIKFpgpsnS9g9z=="
)
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

# (path, text): kept, unmasked and unflagged
CLEAN = {
    "js_identifiers": (
        "lib/core/mergeConfig.js",
        "    withXSRFToken: withXSRFToken,\n    withCredentials: defaultToConfig2,\n"
        "    cancelToken: defaultToConfig2,\n",
    ),
    "js_expressions": (
        "lib/adapters/xhr.js",
        "request.withCredentials = !!config.withCredentials;\n"
        "const auth = { token: token, password: this.password, secret: process.env.X };\n"
        "axios.CancelToken = CancelToken_1;\n",
    ),
    "js_readme_example": (
        "README.md",
        "  auth: {\n    username: 'janedoe',\n    password: 's00pers3cret'\n  },\n",
    ),
    "js_docs_example": (
        "docs/posts/auth.js",
        "const auth = {\n  username: 'janedoe',\n  password: 's00pers3cret',\n};\n",
    ),
    "js_example_value_in_code": (
        "lib/defaults/auth.js",
        "const example = { username: 'janedoe', password: 'janedoe' };\n",
    ),
    "ts_env": (
        "packages/docs/components/inkeep-bubble.tsx",
        "      apiKey: process.env.NEXT_PUBLIC_INKEEP_KEY!, // required\n",
    ),
    "ts_test_fixture": (
        "packages/zod/src/v4/classic/tests/string.test.ts",
        '  const tooLong = "0o0t9hkGxgFLtd3lmJ4TSTeY0VbA";\n'
        '  expect(() => url.parse("https://anonymous:flabada@developer.mozilla.org")).toThrow();\n'
        f'  const GOOD_JWT_HS256 = "{JWT}";\n',
    ),
    "go_test_fixture": (
        "auth/auth_test.go",
        'func TestAuth(t *testing.T) {\n\ttoken := "test-token-123"\n\tpassword := "Zx9!pq-42ab"\n',
    ),
    "go_test_value_outside_tests": ("auth/auth.go", 'var defaultToken = "test-token-123"\n'),
    "go_alphabet": (
        "encoding/base64.go",
        f'const encodeStd = "{ALPHABET}"\n',
    ),
    "go_comment": (
        "client.go",
        '// Example:\n//   password := "hunter2xyzQ9"\nfunc Dial(addr string) {}\n',
    ),
    "java_field_name": (
        "src/main/java/com/squareup/javapoet/Login.java",
        'private static final String PASSWORD_FIELD = "password";\n',
    ),
    "java_test_fixture": (
        "src/test/java/com/squareup/javapoet/LoginTest.java",
        'String apiKey = "k9UPgHV7iB3m03nbqnsG";\n',
    ),
    "rust_env": ("src/config.rs", 'let secret = env::var("SECRET")?;\n'),
    "rust_doc_comment": (
        "src/lib.rs",
        '/// let token = "8f3kQ9zLmP2vX7wR";\npub fn connect() {}\n',
    ),
    "travis_secure": (
        ".travis.yml",
        f'deploy:\n  provider: releases\n  api_key:\n    secure: "{TRAVIS}"\n',
    ),
    "travis_env_secure": (
        ".travis.yml",
        f'env:\n  global:\n    - secure: "{TRAVIS}"\n    - secure: "{TRAVIS[::-1]}"\n',
    ),
    "js_base64_alphabet": (
        "lib/helpers/btoa.js",
        f"var chars = '{ALPHABET}=';\n",
    ),
    "sops_value": (
        "deploy/secrets.yaml",
        "password: ENC[AES256_GCM,data:Tr0ub4dor,iv:x,type:str]\n",
    ),
    "npm_version": ("package.json", '    "parse-passwd": "^1.0.0",\n'),
}

# (path, text, reason): kept, unmasked, flagged possible_secret:<reason>
FLAGGED = {
    "js_password_literal": (
        "src/db.js",
        'const db = { user: "app", password: "Zx9!pq-42ab" };\n',
        "password_assignment",
    ),
    "ts_form_defaults": (
        "src/form/defaults.ts",
        '  email: "not an email",\n  password: "peanuts",\n',
        "password_assignment",
    ),
    "go_api_key": ("client.go", 'apiKey := "k9UPgHV7iB3m03nbqnsG"\n', "api_key_assignment"),
    "java_high_entropy": (
        "src/main/java/com/squareup/billing/Signer.java",
        'String signingKey = "Q7vX2kP9mZ4wR8tL3nB6yH1cJ5dF0gS";\n',
        "high_entropy_literal",
    ),
    "rust_token_const": (
        "src/client.rs",
        'const API_TOKEN: &str = "8f3kQ9zLmP2vX7wR";\n',
        "token_assignment",
    ),
    "env_file": (".env.production", "DB_PASSWORD=Tr0ub4dor&3\n", "password_assignment"),
}

# (path, text, secret, mask): masked at ingest, the item dropped (secret_masked)
DROPPED = {
    "js_ghp": ("lib/github.js", f"const token = '{GHP}';\n", GHP, "github_token"),
    "go_akia": (
        "aws/session.go",
        f'creds := credentials.NewStaticCredentials("{AKIA}", secret, "")\n',
        AKIA,
        "aws_access_key",
    ),
    "go_ghp_in_a_test": ("auth/auth_test.go", f'token := "{GHP}"\n', GHP, "github_token"),
    "java_pem": ("src/main/resources/server.pem", PEM, KEY_BODY, "private_key"),
    "java_pem_in_a_string": (
        "src/main/java/com/example/Tls.java",
        'String KEY = "' + PEM.replace("\n", "\\n") + '";\n',
        KEY_BODY,
        "private_key",
    ),
    "rust_stripe": (
        "src/billing.rs",
        f'const STRIPE_KEY: &str = "{STRIPE}";\n',
        STRIPE,
        "stripe_access_key",
    ),
    "ts_slack": (
        "src/notify.ts",
        f'const slack = new WebClient("{SLACK}");\n',
        SLACK,
        "slack_token",
    ),
    "ts_jwt_outside_tests": (
        "src/api/client.ts",
        f'headers.Authorization = "Bearer {JWT}";\n',
        JWT,
        "jwt",
    ),
    "ts_url_password_outside_tests": (
        "src/db.ts",
        'const url = "postgres://app:Zx9pq42abQ@db.internal:5432/app";\n',
        "Zx9pq42abQ",
        "basic_auth_credentials",
    ),
}


def _row(k: str, path: str, text: str) -> dict:
    return {"repo": "o/r", "change": k, "path": path, "before": "x = 1\n", "after": text}


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """Every case as one item of a table source, through ingest and filter."""
    tmp = tmp_path_factory.mktemp("precision")
    rows = [_row(k, p, t) for k, (p, t) in CLEAN.items()]
    rows += [_row(k, p, t) for k, (p, t, _) in FLAGGED.items()]
    rows += [_row(k, p, t) for k, (p, t, _, _) in DROPPED.items()]
    for r in rows:
        r["comment"] = f"update {r['change']}"
    (tmp / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = toml_config(tmp, '[[ingest.sources]]\nkind = "table"\npath = "d.jsonl"\n')
    from typer.testing import CliRunner

    from pipeline.cli import app

    res = CliRunner().invoke(app, ["run", "--config", str(cfg), "--until", "filter"])
    assert res.exit_code == 0, res.output
    return tmp / "runs" / "t"


def _kept(run: Path) -> dict[str, dict]:
    return {r["change"]: r for r in pl.read_parquet(run / "filter" / "kept.parquet").to_dicts()}


def _rejected(run: Path) -> dict[str, dict]:
    rej = pl.read_parquet(run / "filter" / "rejected.parquet")
    return {r["change"]: r for r in rej.to_dicts()}


@pytest.mark.parametrize("case", list(CLEAN))
def test_code_examples_fixtures_and_ciphertext_are_kept_unmasked_and_unflagged(run, case):
    path, text = CLEAN[case]
    assert mask(text, path=path) == (text, [])
    assert suspects(text, path) == []
    row = _kept(run)[case]
    assert row["after"] == text  # the code as written, not a [REDACTED:...] in it
    assert row["flags"] == [] or not any(f.startswith("possible_secret") for f in row["flags"])


@pytest.mark.parametrize("case", list(FLAGGED))
def test_a_possible_secret_is_kept_unmasked_and_flagged_with_its_reason(run, case):
    path, text, reason = FLAGGED[case]
    assert mask(text, path=path) == (text, [])
    assert [r for _, _, r in suspects(text, path)] == [reason]
    row = _kept(run)[case]
    assert row["after"] == text
    assert [f for f in row["flags"] if f.startswith("possible_secret")] == [
        f"possible_secret:{reason}"
    ]


@pytest.mark.parametrize("case", list(DROPPED))
def test_a_real_token_is_masked_and_dropped_in_every_language(run, case):
    path, text, secret, kind = DROPPED[case]
    masked, fired = mask(text, path=path)
    assert secret not in masked and f"[REDACTED:{kind}]" in masked, masked
    row = _rejected(run)[case]
    assert row["rule"] == "secret_masked"
    assert secret not in row["after"] and f"[REDACTED:{kind}]" in row["after"]
    items = pl.read_parquet(run / "ingest" / "items.parquet").filter(pl.col("change") == case)
    assert not items["after"].str.contains(secret, literal=True).any()  # never written


def test_a_jwt_or_url_password_in_a_commit_message_is_masked_even_for_a_test_file():
    """A test's path makes its file's text a sample, not the commit message beside it."""
    import pyarrow as pa

    msg = f"rotate the deploy token {JWT}"
    batch = pa.RecordBatch.from_pydict(
        {"path": ["src/__tests__/jwt.test.ts"], "after": [f'const t = "{JWT}";'], "comment": [msg]}
    )
    out, fired = mask_columns(batch, ("path", "after", "comment"))
    assert out.column(1)[0].as_py() == f'const t = "{JWT}";'
    assert out.column(2)[0].as_py() == "rotate the deploy token [REDACTED:jwt]"
    assert fired == {"jwt": 1}


def test_sample_paths_are_tests_fixtures_and_docs_by_each_languages_convention():
    samples = [
        "auth_test.go",
        "pkg/auth/auth_test.go",
        "src/auth.test.ts",
        "src/auth.spec.js",
        "src/__tests__/auth.ts",
        "src/test/java/com/x/LoginTest.java",
        "LoginTests.java",
        "tests/integration.rs",
        "crates/x/tests/it.rs",
        "spec/models/user_spec.rb",
        "testdata/config.yaml",
        "test/fixtures/key.json",
        "tests/test_auth.py",
        "README.md",
        "docs/guide.rst",
        "website/docs/auth.mdx",
        "examples/basic/main.go",
    ]
    code = [
        "src/auth.ts",
        "latest.java",
        "src/contest.py",
        "lib/testing_utils.go",  # a file name, not a folder
        "src/attestation/mod.rs",
        "main.go",
    ]
    assert [p for p in samples if not sample_path(p)] == []
    assert [p for p in code if sample_path(p)] == []
    col = pl.Series(samples + code).str.contains(SAMPLE_PATH).to_list()  # the filter's Rust
    assert col == [True] * len(samples) + [False] * len(code)


def test_the_vectorised_filter_agrees_with_the_per_row_reference_on_every_case():
    rows = [item(path=p, after=t, source_ref=k) for k, (p, t) in CLEAN.items()]
    rows += [item(path=p, after=t, source_ref=k) for k, (p, t, _) in FLAGGED.items()]
    rows += [item(path=p, after=t, source_ref=k) for k, (p, t, _, _) in DROPPED.items()]
    for rule_set in (DEFAULT, STRICT):
        res = apply_rules(frame(rows), rule_set)
        got = {r["source_ref"]: (r["rule"], r["flags"]) for r in res.rejected.iter_rows(named=True)}
        got |= {r["source_ref"]: (None, r["flags"]) for r in res.kept.iter_rows(named=True)}
        for row in rows:
            assert got[row["source_ref"]] == reference_decide(rule_set, row), row["source_ref"]


def test_a_password_in_a_url_drops_only_outside_tests_and_docs():
    """The rules file's own URL pattern (filter, not ingest) is a sample pattern."""
    text = 'connectionString.parse("postgres://:password@host:1234")'
    assert apply_rules(frame([item(path="src/db.ts", after=text)]), DEFAULT).rejected.height
    for path in ("tests/template-literal.test.ts", "docs/db.md"):
        res = apply_rules(frame([item(path=path, after=text)]), DEFAULT)
        assert res.kept["after"].to_list() == [text], path


# ------------------------------------------------------------------------ the real corpora

CORPORA = ("axios", "zod", "fd", "gorilla-mux", "javapoet")  # JS, TS, Rust, Go, Java: no live key


def test_the_js_ts_rust_go_java_corpora_lose_at_most_three_items_to_secrets(tmp_path, cli):
    """72 items of these corpora were rejected for secrets (identifiers, README examples, test
    fixtures, Travis ciphertext, the base64 alphabet); 3 are real credential material: an AWS
    access key id in fd's README (a presigned S3 URL, twice) and axios's test TLS key. Only a
    record that a masking rule's prefilter or the `secret` rule's own patterns match can be
    rejected for a secret (weak rules only flag): those records go through ingest and filter."""
    secret_rule = next(r for r in DEFAULT.rules if r.name == "secret")
    yaml = [p for _, p in (*secret_rule.params["patterns"], *secret_rule.params["sample_patterns"])]
    pre = "|".join([*(f"(?:{rust_superset(r.prefilter)})" for r in rules()), *yaml])
    sources = ""
    for name in CORPORA:
        with gzip.open(shared(f"{name}.jsonl.gz"), "rb") as f:
            df = pl.read_ndjson(io.BytesIO(f.read()), infer_schema_length=None)
        fields = ("before", "after", "context", "comment")
        text = pl.concat_str([pl.col(c).fill_null("") for c in fields], separator="\n")
        df.filter(text.str.contains(pre)).write_ndjson(tmp_path / f"{name}.jsonl")
        sources += (
            f'[[ingest.sources]]\nname = "{name}"\nkind = "table"\npath = "{name}.jsonl"\n'
            f'[ingest.sources.fields]\nchange = "commit"\ncreated_at = "timestamp"\n'
        )
    cli("run", "--config", toml_config(tmp_path, sources), "--until", "filter")
    d = tmp_path / "runs" / "t" / "filter"
    rej = pl.read_parquet(d / "rejected.parquet")
    secret = rej.filter(
        pl.col("rules").list.eval(pl.element().is_in(["secret", "secret_masked"])).list.any()
    )
    assert sorted(zip(secret["source"], secret["path"], strict=True)) == [
        ("axios", "test/unit/adapters/key.pem"),
        ("fd", "README.md"),
        ("fd", "README.md"),
    ]
    kept = pl.read_parquet(d / "kept.parquet")
    assert not kept["after"].str.contains("[REDACTED:", literal=True).any()
    assert not kept["before"].str.contains("[REDACTED:", literal=True).any()


AWS_KEY = "Zq8kL2mN4pR6sT8vX0bC2dF4hJ6kM8nQ1rT3wY5z"


@pytest.mark.parametrize(
    "text",
    [
        f"  secretAccessKey: '{AWS_KEY}',",  # the JS SDK's name
        f"      SecretAccessKey: {AWS_KEY}",  # CloudFormation
        f"AWS_SECRET={AWS_KEY}",
        'ANTHROPIC_API_KEY = "sk-ant-api03-' + "a1B2_c3D4-" * 9 + '"',
    ],
)
def test_a_real_key_under_another_name_or_a_newer_format_is_masked(text):
    masked, fired = mask(text)
    assert fired and "[REDACTED:" in masked
    assert AWS_KEY not in masked and "a1B2_c3D4" not in masked


def test_hostile_values_cost_linear_time():
    """Each took minutes or days (nested repeats backtracking): a fixture-like password in a
    URL (`test` + letters), a long run of x, a long line of weak findings (a comment scan
    per finding)."""
    assert not placeholder("test" + "a" * 60 + "1x")
    assert placeholder("test_token_42") and placeholder("sk-xxxxxxxx")
    assert not placeholder("x" * 100_000 + "!")
    url = 'DATABASE_URL = "postgres://app:test' + "a" * 60 + '1x@db:5432/app"'
    assert mask(url)[1] == ["basic_auth_credentials"]  # a literal password, masked
    line = 'password = "Xk9pQ2mZ7rT4" ' * 8000
    assert len(suspects(line, path="deploy/prod.env")) == 8000
