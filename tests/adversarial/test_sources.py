"""Every source kind end to end (`editcurate run`) with secrets of every kind planted in every
text field it maps, and Rich markup, HTML and Markdown breakers in every text field.

Each kind is run once (module-scoped); the cases then look at that run: exit 0, verify, no
secret in any output, the report safe in HTML and Markdown, the markup printed literally by
the terminal and kept as data in the export, every planted field masked with its kind."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.adversarial.hostile import (
    HTML,
    MARKUP,
    MARKUP_LINES,
    NO_SLASH,
    ONE_LINE,
    RICH,
    SECRETS,
    assert_html_safe,
    assert_md_safe,
    assert_no_secret,
    assert_sound_run,
    cli,
    jsonl,
    verify_passes,
    write_config,
)

# plots are pixels of counts, not data text (conftest); the sample-run tests draw real ones
pytestmark = pytest.mark.usefixtures("quick_plots")
SOURCE_NAME = "[bold]src[/] <b>"  # markup in the source name the config gives


def _markup_items(k: int) -> dict[str, str]:
    """A kept item with markup everywhere. k varies only digits in the changed lines (one
    shape group per repo) and a long unique line around them (no near-duplicate)."""
    uniq = " ".join(f"w{k}_{j}" for j in range(80))
    return {
        "before": f"{uniq} = 0\n{MARKUP_LINES}\nvalue = {k}  # {MARKUP}\ntail_{uniq} = 1",
        "after": f"{uniq} = 0\n{MARKUP_LINES}\nvalue = {k + 1}  # {MARKUP}\ntail_{uniq} = 1",
        "comment": f"{RICH} please bump this {HTML} ``` a|b {k}",
        "context": f"ctx {MARKUP}",
        "path": "src/a|b [bold]p[/] <i>.py",
        "repo": "o/[bold]r[/]",
        "author": "[link=file:///etc/passwd]y[/link] <u>",
        "change": "[red]7[/]",
    }


@dataclass
class Ran:
    kind: str
    res: Any
    run: Path
    fields: tuple[str, ...]  # item fields a secret was planted in

    @property
    def items(self) -> pl.DataFrame:
        return pl.read_parquet(self.run / "ingest" / "items.parquet")

    @property
    def exported(self) -> pl.DataFrame:
        parts = [pl.read_parquet(self.run / "export" / f"{s}.parquet") for s in SPLITS]
        return pl.concat(parts)


SPLITS = ("train", "validation", "test")


def _run(tmp: Path, kind: str, path: str, fields: tuple[str, ...], extra: str = "") -> Ran:
    src = (
        f'[[ingest.sources]]\nname = {json.dumps(SOURCE_NAME)}\nkind = "{kind}"\n'
        f"path = {json.dumps(path)}\n{extra}"
    )
    cfg = write_config(tmp, src)
    res = cli("run", "--config", cfg)
    return Ran(kind, res, tmp / "runs" / "t", fields)


# ------------------------------------------------------------------ one builder per kind

TABLE_FIELDS = ("before", "after", "context", "comment", "path", "repo", "author", "change")


def _table(tmp: Path) -> Ran:
    rows = []
    for k, (s, text) in enumerate(SECRETS.items()):
        for f in TABLE_FIELDS + ("language",):
            row = {"before": f"a{k} = 1", "after": f"a{k} = 2", "comment": f"fix value {k} {f}"}
            one = f in ("path", "repo", "author", "change", "language")
            row[f] = (ONE_LINE[s] if one else text) + (f" {k}" if f in ("before",) else "")
            rows.append(row)
    rows += [_markup_items(k) for k in range(3)]
    (tmp / "d.jsonl").write_text(jsonl(rows))
    return _run(tmp, "table", "d.jsonl", TABLE_FIELDS + ("language",))


HUNK = "@@ -1,4 +1,4 @@\n import os\n-x = 1\n+x = 2\n y = 3"


def _gh_comment(k: int, **over: Any) -> dict:
    c = {
        "id": k,
        "body": f"Use a constant {k}.\n```suggestion\ny = THREE_{k}\n```",
        "diff_hunk": HUNK,
        "path": f"src/app{k}.py",
        "line": 4,
        "side": "RIGHT",
        "pull_request_url": f"https://api.github.com/repos/octo/widgets/pulls/{k}",
        "user": {"login": f"alice{k}", "type": "User"},
        "created_at": "2023-05-10T00:49:04Z",
    }
    c.update(over)
    return c


def _github(tmp: Path) -> Ran:
    rows, k = [], 0
    for s, text in SECRETS.items():
        k += 1
        lines = text.split("\n")
        hunk_ctx = "".join(f" {ln}\n" for ln in lines)  # context lines above the comment
        rows += [
            _gh_comment(k, body=f"{text}\nplease\n```suggestion\ny = 4\n```"),
            _gh_comment(k + 100, body=f"Use it.\n```suggestion\n{text}\n```"),
            _gh_comment(
                k + 200, diff_hunk=f"@@ -1,9 +1,9 @@\n{hunk_ctx}-x = 1\n+x = 2\n y = 3 {k}"
            ),
            _gh_comment(
                k + 300, diff_hunk=f"@@ -1,9 +1,9 @@\n{hunk_ctx}", line=len(lines), start_line=1
            ),
            _gh_comment(k + 400, path=f"src/{ONE_LINE[s]}.py"),
            _gh_comment(k + 500, user={"login": ONE_LINE[s], "type": "User"}),
        ]
        if s in NO_SLASH:
            url = f"https://api.github.com/repos/{NO_SLASH[s]}/w/pulls/{k}"
            rows.append(_gh_comment(k + 600, pull_request_url=url))
    for j in range(3):
        m = _markup_items(j)
        hunk = "@@ -1,30 +1,30 @@\n" + "".join(f" {ln}\n" for ln in m["before"].split("\n"))
        rows.append(
            _gh_comment(
                900 + j,
                body=f"{m['comment']}\n```suggestion\n{m['after']}\n```\n{MARKUP_LINES}",
                diff_hunk=hunk.rstrip("\n"),
                line=len(m["before"].split("\n")),
                start_line=1,
                path=m["path"],
                user={"login": m["author"], "type": "User"},
                pull_request_url="https://api.github.com/repos/o/[bold]r[/]/pulls/7",
            )
        )
    (tmp / "c.json").write_text(json.dumps(rows, indent=1))  # a JSON array (an API page)
    return _run(
        tmp, "github", "c.json", ("comment", "after", "before", "context", "path", "author", "repo")
    )


def _codereviewer(tmp: Path) -> Ran:
    rows = []
    for k, (s, text) in enumerate(SECRETS.items()):
        base = {"old": f"a{k} = 1", "new": f"a{k} = 2", "comment": f"fix {k}", "repo": "o/r"}
        for f, v in (
            ("old", text),
            ("new", text),
            ("comment", text),
            ("repo", ONE_LINE[s]),
            ("path", ONE_LINE[s]),
            ("lang", ONE_LINE[s]),
            ("ghid", ONE_LINE[s]),
        ):
            rows.append({**base, f: v + (f" {k}" if f == "old" else "")})
        diff = "".join(f" {ln}\n" for ln in text.split("\n"))
        rows.append(
            {"patch": f"@@ -1,3 +1,3 @@\n{diff}-x = {k}\n+y = {k}\n", "msg": "m", "proj": "o/p"}
        )
        rows.append(
            {
                "patch": f"@@ -1,2 +1,2 @@\n-x = {k}\n+{text.split(chr(10))[0]}\n",
                "msg": text,
                "proj": ONE_LINE[s],
            }
        )
    for j in range(3):
        m = _markup_items(j)
        rows.append(
            {
                "old": m["before"],
                "new": m["after"],
                "comment": m["comment"],
                "repo": m["repo"],
                "path": m["path"],
                "lang": f"py {RICH}",
                "ghid": 7,
            }
        )
    (tmp / "cr.jsonl").write_text(jsonl(rows))
    return _run(
        tmp,
        "codereviewer",
        "cr.jsonl",
        ("before", "after", "comment", "repo", "path", "language", "change", "context"),
    )


def _git(tmp: Path) -> Ran:
    from tests.test_ingest_git import Repo

    r = Repo(tmp / "repo")
    for k, (s, text) in enumerate(SECRETS.items()):
        # a file named by the secret (not the URL: a file name holds no '/')
        name = f"dir{k}/{ONE_LINE[s]}.cfg" if "/" not in ONE_LINE[s] else f"dir{k}/x.cfg"
        r.write(f"f{k}.py", f"keep = {k}\n{text}\nold_{k} = 1\n")
        r.write(name, f"v = {k}\n")
        r.commit(f"add {k}")
        r.write(f"f{k}.py", f"keep = {k}\n{text}\nnew_{k} = 2\n")  # the secret as context
        r.commit(f"subject {ONE_LINE[s]}")
        r.write(name, f"v = {k + 1}\n")
        r.commit(f"bump {k}", author=(ONE_LINE[s], "a@b.c"))
        r.write(f"g{k}.py", f"{text}\n")  # added: after; removed next: before
        r.commit(f"add g{k}")
        r.write(f"g{k}.py", f"g_{k} = 0\n")
        r.commit(f"drop g{k}")
    for j in range(3):
        m = _markup_items(j)
        r.write("src/a|b [bold]p[/] <i>.py", m["before"] + "\n")
        r.commit(m["comment"].replace("\n", " "), author=("[bold]dev[/] <u>", "d@e.f"))
        r.write("src/a|b [bold]p[/] <i>.py", m["after"] + "\n")
        r.commit(m["comment"].replace("\n", " "), author=("[bold]dev[/] <u>", "d@e.f"))
    return _run(
        tmp,
        "git",
        "repo",
        ("before", "after", "context", "comment", "path", "author"),
        'repo = "o/[bold]r[/]"\n',
    )


def _hf(tmp: Path) -> Ran:
    import datasets

    fields = ("before", "after", "context", "comment", "path", "repo", "author", "change")
    rows: list[dict[str, str]] = []
    for k, (s, text) in enumerate(SECRETS.items()):
        for f in (*fields, "language"):
            row = {x: "" for x in (*fields, "language")}
            row.update(before=f"a{k} = 1", after=f"a{k} = 2", comment=f"fix {k} {f}")
            row[f] = (
                ONE_LINE[s] if f in ("path", "repo", "author", "change", "language") else text
            ) + (f" {k}" if f == "before" else "")
            rows.append(row)
    rows += [{**_markup_items(j), "language": f"py {RICH}"} for j in range(3)]
    cols = {c: [r[c] for r in rows] for c in rows[0]}
    half = len(rows) // 2
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({c: v[:half] for c, v in cols.items()}),
            "test": datasets.Dataset.from_dict({c: v[half:] for c, v in cols.items()}),
        }
    )
    dd.save_to_disk(str(tmp / "ds"))
    return _run(tmp, "hf", "ds", (*fields, "language"), 'format = "disk"\n')


BUILDERS = {
    "table": _table,
    "github": _github,
    "codereviewer": _codereviewer,
    "git": _git,
    "hf": _hf,
}
KINDS = list(BUILDERS)
_CACHE: dict[str, Ran] = {}


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    def get(kind: str) -> Ran:
        if kind not in _CACHE:
            _CACHE[kind] = BUILDERS[kind](tmp_path_factory.mktemp(kind))
        return _CACHE[kind]

    return get


# ------------------------------------------------------------------ the cases


@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_source_runs_soundly(ran, kind):
    """exit 0, verify passes, no planted secret in any output file, report.html holds no
    live markup, report.md's fences balance, the HF card is safe Markdown."""
    r = ran(kind)
    assert_sound_run(r.res, r.run)
    assert (r.run / "export" / "hf" / "dataset_dict.json").exists()


@pytest.mark.parametrize("kind", KINDS)
def test_every_planted_field_is_masked_with_its_kind(ran, kind):
    r = ran(kind)
    items = r.items
    for f in r.fields:
        col = items[f].drop_nulls()
        assert col.str.contains("[REDACTED:", literal=True).any(), (kind, f)
    m = json.loads((r.run / "ingest" / "manifest.json").read_text())
    masked = m["conservation"]["sources"][SOURCE_NAME]["secrets_masked"]
    for rule in (
        "aws_access_key",
        "github_token",
        "slack_token",
        "jwt",
        "private_key",  # credential_assignment, high_entropy_assignment: never masked now
    ):
        assert masked.get(rule, 0) >= 1, (kind, rule, masked)


@pytest.mark.parametrize("kind", KINDS)
def test_markup_is_printed_literally_by_the_terminal(ran, kind):
    out = ran(kind).res.output
    assert SOURCE_NAME in out  # the ingest table: a config value as written
    data = out.replace(SOURCE_NAME, "")  # the shapes table's example comment, as written
    assert "[bold]x[/] [link=file:///etc/passwd]" in data


@pytest.mark.parametrize("kind", KINDS)
def test_markup_is_kept_as_data_in_the_export(ran, kind):
    ex = ran(kind).exported
    assert ex.height >= 1
    text = "\n".join(ex["comment"].to_list() + ex["before"].to_list() + ex["path"].to_list())
    for s in ("[bold]x[/]", "<script>alert(1)</script>", "onerror=alert(1)", "```", "a|b"):
        assert s in text, (kind, s)


@pytest.mark.parametrize("kind", KINDS)
def test_why_prints_a_hostile_item_literally(ran, kind):
    r = ran(kind)
    ex = r.exported
    row = ex.filter(pl.col("comment").str.contains("[bold]x[/]", literal=True)).row(0, named=True)
    res = cli("why", r.run, row["id"])
    assert res.exit_code == 0, res.output
    assert row["id"] in res.output and "[bold]x[/]" in res.output
    assert "[link=file:///etc/passwd]y[/link]" in res.output
    res = cli("why", r.run, row["id"], "--json")
    assert json.loads(res.output)[0]["id"] == row["id"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_rerun_is_skipped_and_still_sound(ran, kind):
    r = ran(kind)
    cfg = r.run.parent.parent / "editcurate.toml"
    res = cli("run", "--config", cfg)
    assert res.exit_code == 0 and "skipped" in res.output, res.output
    verify_passes(r.run)
    assert_no_secret(r.run)
    assert_html_safe((r.run / "report" / "report.html").read_text())
    assert_md_safe((r.run / "report" / "report.md").read_text())


def test_sources_of_every_kind_in_one_run(ran, tmp_path):
    """All five kinds as sources of one run: names kept apart, everything accounted for."""
    srcs = []
    for kind in KINDS:
        r = ran(kind)
        base = r.run.parent.parent
        path = {
            "table": "d.jsonl",
            "github": "c.json",
            "codereviewer": "cr.jsonl",
            "git": "repo",
            "hf": "ds",
        }[kind]
        extra = 'format = "disk"\n' if kind == "hf" else ""
        srcs.append(
            f'[[ingest.sources]]\nname = "{kind} [i]x[/i]"\nkind = "{kind}"\n'
            f"path = {json.dumps(os.fspath(base / path))}\n{extra}"
        )
    cfg = write_config(tmp_path, "\n".join(srcs))
    res = cli("run", "--config", cfg)
    run = tmp_path / "runs" / "t"
    assert_sound_run(res, run)
    sources = set(pl.read_parquet(run / "ingest" / "items.parquet")["source"].unique())
    assert sources == {f"{k} [i]x[/i]" for k in KINDS}
