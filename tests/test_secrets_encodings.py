"""Secrets in every encoding that ships in real repositories (issue 28, item 2): each reached
the exported corpus unmasked before. A private key base64-wrapped in a Kubernetes Secret, a
docker config's credentials (base64 or not), a Secret manifest's values, PuTTY and PGP private
keys, the middle lines of a PEM body a diff cut from its header, a password on the line after a
backslash continuation (flagged, never masked), a token split by string concatenation, a token
written with JSON or Unicode escapes. And what must stay as written: placeholders, fixtures and
docs (SAMPLE rules), ConfigMaps, certificates, and base64 of other widths (MIME lines, SRI
hashes, lock-file digests, hex digests)."""

from __future__ import annotations

import base64
import json
import random
import time
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.secrets.finding import suspect_column, suspects
from pipeline.secrets.masking import mask, mask_columns
from tests.conftest import toml_config

KEY_BODY = "MIIEpAIBAAKCAQEA7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5g"
PEM = f"-----BEGIN RSA PRIVATE KEY-----\n{KEY_BODY}\n{KEY_BODY}\n-----END RSA PRIVATE KEY-----\n"
PEM_B64 = base64.b64encode(PEM.encode()).decode()  # LS0tLS1CRUdJTiBSU0Eg...
GHP_TAIL = "0123456789abcdefghijABCDEFGHIJ012345"  # after the ghp_ prefix


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


def masked(text: str, path: str | None = None) -> str:
    return mask(text, path=path)[0]


# ------------------------------------------------------------------------ 1. base64-wrapped PEM

K8S_TLS = f"""apiVersion: v1
kind: Secret
metadata:
  name: ingress-tls
type: kubernetes.io/tls
data:
  tls.crt: {b64("-----BEGIN CERTIFICATE-----")}
  tls.key: {PEM_B64}
"""


@pytest.mark.parametrize("path", ["deploy/ingress-tls.yaml", "tests/fixtures/tls.yaml", None])
def test_a_base64_wrapped_private_key_is_masked_whole_everywhere(path):
    """HIGH: the decoded text is a private key, so the whole encoded value goes, also in a
    fixture; the certificate beside it stays."""
    out = masked(K8S_TLS, path)
    assert "  tls.key: [REDACTED:private_key]\n" in out, out
    assert PEM_B64[:40] not in out and PEM_B64[-40:] not in out
    assert b64("-----BEGIN CERTIFICATE-----") in out
    # not only in a manifest: any base64 run that decodes to a key
    assert masked(f'KEY = "{PEM_B64}"') == 'KEY = "[REDACTED:private_key]"'


def test_a_wrapped_base64_key_is_decoded_as_one_blob():
    """`base64` wraps at 76 (or 64): each width, a last line long or too short to be a run."""
    tails = set()
    for width in (64, 76):
        for pad in range(4):
            encoded = b64(PEM + "\n" * pad)
            wrapped = "\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))
            tails.add(len(wrapped.rsplit("\n", 1)[1]) < 32)
            out = masked(f"key: |\n  {wrapped.replace(chr(10), chr(10) + '  ')}\nnext: 1\n")
            assert out == "key: |\n  [REDACTED:private_key]\nnext: 1\n", (width, pad, out)
    assert tails == {True, False}


# ------------------------------------------------------------------------ 2. docker config

AUTH = b64("u:p4ss-Real-9x")
DOCKER = json.dumps(
    {"auths": {"registry.example.com": {"username": "u", "password": "p4ss-Real-9x", "auth": AUTH}}}
)


def test_a_base64_dockerconfigjson_is_masked():
    manifest = (
        "apiVersion: v1\nkind: Secret\ntype: kubernetes.io/dockerconfigjson\n"
        f"data:\n  .dockerconfigjson: {b64(DOCKER)}\n"
    )
    for path in ("k8s/pull-secret.yaml", "tests/fixtures/pull-secret.yaml"):
        out = masked(manifest, path)
        assert "  .dockerconfigjson: [REDACTED:docker_config]\n" in out, (path, out)


def test_a_docker_config_json_is_masked_unless_a_placeholder():
    out = masked(DOCKER, "config.json")
    assert "p4ss-Real-9x" not in out and AUTH not in out
    assert out.count("[REDACTED:docker_config]") == 2 and '"username": "u"' in out
    pretty = json.dumps(json.loads(DOCKER), indent=2)
    assert "p4ss-Real-9x" not in masked(pretty) and AUTH not in masked(pretty)
    for pw, auth in [("changeme", ""), ("${REGISTRY_PASSWORD}", b64("user:password"))]:
        text = DOCKER.replace("p4ss-Real-9x", pw).replace(AUTH, auth)
        assert mask(text) == (text, []), text
    # a password in JSON that is not a docker config's: a guess, flagged, not masked
    other = json.dumps({"db": {"host": "h", "password": "p4ss-Real-9x"}})
    assert mask(other) == (other, [])


# ------------------------------------------------------------------------ 3. Secret manifests

SECRET = f"""apiVersion: v1
data:
  password: {b64("hunter2-Real-Pass9")}  # kubectl's order: data before kind
  username: {b64("admin")}
  placeholder: {b64("changeme")}
  empty: ""
  port: {b64("5432")}
kind: Secret
metadata:
  name: db
type: Opaque
---
apiVersion: v1
kind: Secret
metadata:
  name: api
stringData:
  API_TOKEN: "sk9-Q2vX7kP4mZ8wR1tL"
  FROM_ENV: ${{API_TOKEN}}
  HELM: {{{{ .Values.token | quote }}}}
  config.yaml: |
    url: https://db.internal
    secret: Zx8-Real-Value-42
---
apiVersion: v1
kind: ConfigMap
data:
  LOG_LEVEL: {b64("debug-Real-Value-9")}
"""


def test_a_secret_manifests_values_are_masked_outside_fixtures_and_docs():
    out, fired = mask(SECRET, path="deploy/db.yaml")
    assert b64("hunter2-Real-Pass9") not in out and "sk9-Q2vX7kP4mZ8wR1tL" not in out
    assert "  password: [REDACTED:kubernetes_secret]\n" in out, out
    assert "  API_TOKEN: [REDACTED:kubernetes_secret]\n" in out
    assert "    secret: [REDACTED:kubernetes_secret]\n" in out  # a block scalar's lines
    # placeholders, templates, a number and empty values stay; a ConfigMap is not a Secret
    for kept in ("admin", "changeme", "5432", "debug-Real-Value-9"):
        assert f": {b64(kept)}" in out, kept
    assert 'empty: ""' in out and "FROM_ENV: ${API_TOKEN}" in out and "HELM: {{ .Values" in out
    assert set(fired) == {"kubernetes_secret"}
    for path in ("tests/fixtures/db.yaml", "docs/secrets.md", "examples/db.yaml"):
        assert mask(SECRET, path=path) == (SECRET, []), path  # SAMPLE: examples there


def test_data_values_without_a_secret_kind_are_not_masked():
    text = SECRET.replace("kind: Secret", "kind: Service")
    assert mask(text, path="deploy/db.yaml") == (text, [])


# ------------------------------------------------------------------------ 4. PuTTY and PGP

PPK_PUBLIC = "AAAAB3NzaC1yc2EAAAADAQABAAABAQDZx81bQ7kPp2LmN3vR9sT4wY6uA0cE5gHk"
PPK_PRIVATE = ["AAABAQCq7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5gHkPp2", "Lm3vR9sT4wY6"]
MAC = "5a4c3b2e1f0d9c8b7a6f5e4d3c2b1a0f9e8d7c6b"


@pytest.mark.parametrize(
    "head",
    [
        "PuTTY-User-Key-File-2: ssh-rsa\nEncryption: none\nComment: rsa-key-20200101",
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: aes256-cbc\nComment: deploy\n"
        "Key-Derivation: Argon2id\nArgon2-Memory: 8192\nArgon2-Passes: 13\n"
        "Argon2-Parallelism: 1\nArgon2-Salt: 0123456789abcdef0123456789abcdef",
    ],
    ids=["v2", "v3"],
)
def test_a_putty_keys_private_lines_are_masked_through_the_mac(head):
    private = "\n".join(PPK_PRIVATE)
    text = (
        f"{head}\nPublic-Lines: 1\n{PPK_PUBLIC}\nPrivate-Lines: 2\n{private}\nPrivate-MAC: {MAC}\n"
    )
    out, fired = mask(text, path="tests/keys/deploy.ppk")  # HIGH: a fixture's too
    assert out == text.replace(f"{private}\nPrivate-MAC: {MAC}", "[REDACTED:putty_private_key]")
    assert fired == ["putty_private_key"] and PPK_PUBLIC in out


def test_a_pgp_private_key_block_is_masked():
    body = "lQOYBGBk3Y0BCAC7bq3Yz9xQ2vR8sT4wY6uA0cE5gHkPp2LmN3vR9sT4wY6uA0cE5g"
    for header in ("Version: GnuPG v2\n\n", "\n"):
        text = (
            f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n{header}{body}\n{body}\n=AbCd\n"
            "-----END PGP PRIVATE KEY BLOCK-----\nx = 1"
        )
        assert masked(text) == "[REDACTED:private_key]\nx = 1"
    public = (
        "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n" + body + "\n-----END PGP PUBLIC KEY BLOCK-----"
    )
    assert mask(public) == (public, [])


# ------------------------------------------------------------------------ 5. a headless PEM body


def _base64_lines(n: int, width: int, seed: int = 7) -> list[str]:
    data = base64.b64encode(random.Random(seed).randbytes(n * width)).decode()
    return [data[i * width : (i + 1) * width] for i in range(n)]


BODY = _base64_lines(6, 64)


def test_the_middle_lines_of_a_pem_body_are_masked_outside_fixtures():
    text = "\n".join(BODY) + "\nAbCdEfGh0123==\n"
    assert masked(text, "deploy/server.key") == "[REDACTED:pem_body]\n"
    indented = 'key = """\n' + "".join(f"    {ln}\n" for ln in BODY[:4]) + '"""\n'
    assert BODY[2] not in masked(indented, "app/keys.py")
    assert mask(text, path="tests/fixtures/server.key") == (text, [])  # SAMPLE


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(_base64_lines(6, 76)),  # MIME lines
        "\n".join(BODY[:3]),  # 3 lines
        "\n".join(BODY[:5]).replace("\n", "\n\n"),  # not consecutive
        "\n".join(f"{random.Random(k).randbytes(32).hex()}" for k in range(6)),  # sha256 digests
        "\n".join(f'"integrity": "sha512-{b64("x" * 63 + str(k))}",' for k in range(6)),  # SRI
        "\n".join(f'checksum = "{random.Random(k).randbytes(32).hex()}"' for k in range(6)),
        "-----BEGIN CERTIFICATE-----\n" + "\n".join(BODY) + "\nAbCd==\n-----END CERTIFICATE-----",
        "\n".join(BODY) + "\n-----END CERTIFICATE-----",  # a certificate's body, header cut off
        "\n".join(["ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"] * 5),
        "!function(e,t){" + "a" * 40 + "}\n" * 5,  # minified code
    ],
    ids=[
        "mime76",
        "three_lines",
        "gaps",
        "hex_digests",
        "sri",
        "lock_digests",
        "certificate",
        "certificate_tail",
        "alphabet",
        "minified",
    ],
)
def test_base64_lines_of_other_shapes_are_not_a_pem_body(text):
    assert mask(text, path="src/data.txt") == (text, [])


# ------------------------------------------------------------------------ 6. continuations


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("deploy/env.sh", 'export PASSWORD=\\\n  "hunter2-Real-Pass9"\n'),
        ("app/settings.py", 'password = \\\n    "hunter2-Real-Pass9"\n'),
    ],
    ids=["shell", "python"],
)
def test_a_password_after_a_line_continuation_is_flagged_not_masked(path, text):
    assert mask(text, path=path) == (text, [])  # WEAK: never masked
    found = suspects(text, path)
    assert [(text[s:e], r) for s, e, r in found] == [("hunter2-Real-Pass9", "password_assignment")]
    frame = pl.DataFrame({"path": [path, path], "after": [text, "x = 1"]})
    assert suspect_column(frame, ("after",)).to_list() == [["password_assignment in after"], []]


# ------------------------------------------------------------------------ 7. concatenation


@pytest.mark.parametrize(
    ("text", "want"),
    [
        (f'token = "ghp_" + "{GHP_TAIL}"', 'token = "[REDACTED:github_token]"'),
        (f'token = ("ghp_" "{GHP_TAIL}")', 'token = ("[REDACTED:github_token]")'),
        (
            f'token = (\n    "ghp_"\n    "{GHP_TAIL}"\n)',
            'token = (\n    "[REDACTED:github_token]"\n)',
        ),
        (f'const token = "ghp_" +\n\t"{GHP_TAIL}"', 'const token = "[REDACTED:github_token]"'),
        (f"const t = 'ghp_0123' + '{GHP_TAIL[4:]}';", "const t = '[REDACTED:github_token]';"),
        (f"const t = 'ghp_01'\n  + '{GHP_TAIL[2:]}';", "const t = '[REDACTED:github_token]';"),
    ],
    ids=["python_plus", "python_adjacent", "python_lines", "go_plus", "js_plus", "js_leading"],
)
def test_a_token_split_by_concatenation_is_masked_with_all_its_parts(text, want):
    assert mask(text, path="src/app.py") == (want, ["github_token"])


@pytest.mark.parametrize(
    "text",
    [
        'greeting = "Hello, " + "world_and_more"',
        'import (\n\t"net/http"\n\t"testing_utils"\n)',
        'msg = ("first part of a long message"\n       "second part of the message")',
        'version = "0.24.0"\n  "version": "0.25.0"',
    ],
)
def test_ordinary_concatenation_is_kept(text):
    assert mask(text, path="src/app.py") == (text, [])


# ------------------------------------------------------------------------ 8. escapes


@pytest.mark.parametrize("prefix", ["\\u0067hp_", "\\x67hp_", "\\u0067\\u0068\\u0070_"])
def test_a_token_written_with_escapes_is_masked(prefix):
    text = f'const t = "{prefix}{GHP_TAIL}";'
    assert mask(text) == ('const t = "[REDACTED:github_token]";', ["github_token"])


# ------------------------------------------------------------------------ the vectorised path

CASES = [
    (K8S_TLS, "deploy/tls.yaml"),
    (DOCKER, "config.json"),
    (SECRET, "deploy/db.yaml"),
    (SECRET, "tests/db.yaml"),
    ("\n".join(BODY) + "\n", "deploy/server.key"),
    (f'token = "ghp_" + "{GHP_TAIL}"', "src/app.py"),
    (f'const t = "\\u0067hp_{GHP_TAIL}";', "web/app.js"),
    ('import (\n\t"net/http"\n\t"testing_utils"\n)', "main.go"),
    ("x = 1", "a.py"),
]


def test_vectorised_masking_equals_the_per_value_reference_on_every_encoding():
    paths = [p for _, p in CASES]
    values = [t for t, _ in CASES]
    batch = pa.RecordBatch.from_pydict({"path": paths, "after": values, "comment": values})
    out, fired = mask_columns(batch, ("after", "comment"))
    assert out.column(1).to_pylist() == [mask(v, path=p)[0] for v, p in CASES]
    assert out.column(2).to_pylist() == [mask(v)[0] for v in values]  # no path: a message
    assert fired["private_key"] == 2 and fired["github_token"] == 4


# ------------------------------------------------------------------------ bounded cost


def test_views_cost_linear_time_on_hostile_text():
    from pipeline.secrets import encodings

    texts = {
        "long_run": "A" * 300_000,
        "many_blobs": (b64("x" * 30) + " ") * 20_000,
        "many_junctions": '"ab" + "cdefghijkl" + ' * 20_000,
        "many_escapes": "\\u0041" * 60_000,
        "pem_lines": ("\n".join(_base64_lines(4000, 64)) + "\n\n") * 3,
        "k8s": "kind: Secret\ndata:\n" + f"  k: {b64('v4lue-Real-9')}\n" * 20_000,
        "putty": ("Private-Lines: 1\n" + "A" * 200 + "\n") * 5_000,
        "docker": ('{"auths":{"r":{"auth":"' + "a" * 999) * 200,
        "continuations": "x = \\\n" * 50_000,
    }
    for name, text in texts.items():
        t = time.perf_counter()
        mask(text)
        suspects(text, "deploy/x.env")
        assert time.perf_counter() - t < 10, name
    assert encodings.MAX_BLOBS <= 64 and encodings.MAX_BLOB <= 65_536


def test_every_new_pattern_would_compile_under_re2():
    re2 = pytest.importorskip("re2", reason="google-re2 is not installed")
    from pipeline.secrets import encodings

    patterns = [r.pattern.pattern for r in encodings.encoding_rules()]
    patterns += [r.prefilter for r in encodings.encoding_rules()]
    patterns += [
        p.pattern
        for p in vars(encodings).values()
        if hasattr(p, "pattern") and hasattr(p, "finditer")
    ]
    for p in patterns:
        re2.compile(p)


# ------------------------------------------------------------------------ a whole run


def _everything(run: Path) -> str:
    out = []
    for p in sorted(run.rglob("*")):
        if p.is_file():
            out.append(p.read_bytes().decode("utf-8", errors="replace"))
            if p.suffix == ".parquet":
                out.append(str(pq.read_table(p).to_pylist()))
    return "\n".join(out)


def test_no_encoded_secret_reaches_any_output_of_a_run(tmp_path, cli):
    """Items, errors' raw, exports, report: every text lands through the same masking."""
    rows = [
        dict(change="tls", path="deploy/tls.yaml", before="", after=K8S_TLS),
        dict(change="docker", path="deploy/pull.yaml", before="", after=f"auth: {b64(DOCKER)}"),
        dict(change="db", path="deploy/db.yaml", before="", after=SECRET),
        dict(change="concat", path="src/gh.py", before="", after=f'T = "ghp_" + "{GHP_TAIL}"\n'),
        dict(change="esc", path="web/gh.js", before="", after=f'const t = "\\u0067hp_{GHP_TAIL}";'),
        dict(
            change="cont",
            path="deploy/env.sh",
            before="",
            after='export PASSWORD=\\\n  "h2-Real9x"\n',
        ),
    ]
    for k in range(4):
        rows.append(
            dict(change=f"c{k}", path=f"m{k}.py", before=f"x = {k}\n", after=f"x = {k + 1}\n")
        )
    lines = [json.dumps(dict(r, repo="o/r", comment=f"update {r['change']}")) for r in rows]
    # a malformed record: its raw text keeps the JSON escape, as written
    lines.append('{"change": "bad", "after": "t = \\"\\u0067hp_' + GHP_TAIL + '\\" BROKEN')
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    cfg = toml_config(tmp_path, '[[ingest.sources]]\nkind = "table"\npath = "d.jsonl"\n')
    res = cli("run", "--config", cfg)
    run = tmp_path / "runs" / "t"
    items = pl.read_parquet(run / "ingest" / "items.parquet")
    after = dict(zip(items["change"], items["after"], strict=True))
    assert "  tls.key: [REDACTED:private_key]\n" in after["tls"]
    assert after["docker"] == "auth: [REDACTED:docker_config]"
    assert "  password: [REDACTED:kubernetes_secret]" in after["db"]
    assert after["concat"] == 'T = "[REDACTED:github_token]"\n'
    assert after["esc"] == 'const t = "[REDACTED:github_token]";'
    assert after["cont"] == 'export PASSWORD=\\\n  "h2-Real9x"\n'  # WEAK: kept
    errors = pl.read_parquet(run / "ingest" / "errors.parquet")
    assert errors.height == 1 and "\\u0067hp_" not in errors["raw"][0]
    assert "[REDACTED:github_token]" in errors["raw"][0]
    everything = _everything(run) + res.output
    for secret in (PEM_B64[:40], KEY_BODY, b64(DOCKER)[:40], "p4ss-Real-9x", GHP_TAIL):
        assert secret not in everything, secret
    assert b64("hunter2-Real-Pass9") not in everything and "Zx8-Real-Value-42" not in everything
    kept = pl.read_parquet(run / "filter" / "kept.parquet")
    cont = kept.filter(pl.col("change") == "cont")
    assert "possible_secret:password_assignment" in cont["flags"][0]
    rejected = pl.read_parquet(run / "filter" / "rejected.parquet")
    dropped = set(rejected.filter(pl.col("rule") == "secret_masked")["change"])
    assert {"tls", "docker", "db", "concat", "esc"} <= dropped
    assert cli("verify", run).exit_code == 0
