"""Damage in the non-table sources, end to end: truncated and concatenated files, wrong types,
huge lines, a broken repository or dataset. Damage costs the damaged record (or the source,
with one line and exit 3), never the run's accounting: verify passes and no secret leaks."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import polars as pl
import pytest

from tests.adversarial.hostile import (
    SECRETS,
    assert_no_secret,
    assert_sound_run,
    cli,
    jsonl,
    one_error_line,
    verify_passes,
    write_config,
)
from tests.test_ingest_git import Repo

pytestmark = pytest.mark.usefixtures("quick_plots")  # conftest: plots are not what is tested

JWT_TEXT = next(t for s, t in SECRETS.items() if s.startswith("eyJ"))
HUNK = "@@ -1,4 +1,4 @@\n import os\n-x = 1\n+x = 2\n y = 3"


def gh(k: int, **over) -> dict:
    c = {
        "id": k,
        "body": f"Name it well {k}.\n```suggestion\ny = value_{k}_{'abcdefgh'[k % 8]}\n```",
        "diff_hunk": HUNK,
        "path": f"src/m{k}.py",
        "line": 4,
        "side": "RIGHT",
        "pull_request_url": f"https://api.github.com/repos/o/r/pulls/{k}",
        "user": {"login": "alice", "type": "User"},
    }
    c.update(over)
    return c


def cr(k: int, **over) -> dict:
    r = {"old": f"a_{k} = compute({k})", "new": f"a_{k} = compute_fast({k})", "comment": "faster"}
    r.update(over)
    return r


def source_run(tmp: Path, kind: str, path: str, extra: str = "", *sets: str):
    src = f'[[ingest.sources]]\nname = "s"\nkind = "{kind}"\npath = {json.dumps(path)}\n{extra}'
    args = ["run", "--config", write_config(tmp, src)]
    for s in sets:
        args += ["--set", s]
    return cli(*args), tmp / "runs" / "t"


def ingest_run(tmp: Path, kind: str, path: str, extra: str = ""):
    """Only ingest (record-level damage is ingest's to account for): exit 0, verify passes,
    no secret in its outputs."""
    src = f'[[ingest.sources]]\nname = "s"\nkind = "{kind}"\npath = {json.dumps(path)}\n{extra}'
    res = cli("ingest", "--config", write_config(tmp, src))
    run_dir = tmp / "runs" / "t"
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    verify_passes(run_dir)
    assert_no_secret(run_dir)
    return res, run_dir


def counts(run_dir: Path) -> tuple[int, int]:
    items = pl.read_parquet(run_dir / "ingest" / "items.parquet")
    errors = pl.read_parquet(run_dir / "ingest" / "errors.parquet")
    return items.height, errors.height


# ------------------------------------------------------------------ github


def test_github_array_truncated_mid_element(tmp_path):
    text = json.dumps([gh(k) for k in range(4)])
    (tmp_path / "c.json").write_text(text[: len(text) - 40])  # the last element cut off
    res, run_dir = source_run(tmp_path, "github", "c.json")
    assert_sound_run(res, run_dir)
    items, errors = counts(run_dir)
    assert items == 3 and errors == 1


def test_github_two_api_pages_concatenated(tmp_path):
    page1 = json.dumps([gh(k) for k in range(3)])
    page2 = json.dumps([gh(k) for k in range(3, 5)])
    (tmp_path / "c.json").write_text(page1 + page2)
    res, run_dir = source_run(tmp_path, "github", "c.json")
    assert "Traceback" not in res.output
    if res.exit_code == 0:
        assert_sound_run(res, run_dir)
        assert sum(counts(run_dir)) >= 4
    else:
        assert res.exit_code in (1, 3) and one_error_line(res)


def test_github_jsonl_lines_glued_together(tmp_path):
    rows = [json.dumps(gh(k)) for k in range(4)]
    (tmp_path / "c.jsonl").write_text(rows[0] + "\n" + rows[1] + rows[2] + "\n" + rows[3] + "\n")
    res, run_dir = source_run(tmp_path, "github", "c.jsonl")
    assert_sound_run(res, run_dir)
    assert sum(counts(run_dir)) == 3  # three lines: the glued one is one record


@pytest.mark.parametrize(
    "over",
    [
        {"line": "4"},
        {"user": "alice"},
        {"body": 123},
        {"diff_hunk": None},
        {"line": 2**70},
        {"start_line": 9, "line": 4},
        {"side": "[bold]MIDDLE[/]"},
        {"path": ["a", "b"]},
        {"body": f"```suggestion\n{JWT_TEXT}"},  # unclosed: an error, its raw masked
    ],
    ids=lambda o: "-".join(o),
)
def test_github_wrong_types_cost_one_record(tmp_path, over):
    rows = [gh(k) for k in range(3)] + [gh(9, **over)]
    (tmp_path / "c.jsonl").write_text(jsonl(rows))
    _, run_dir = ingest_run(tmp_path, "github", "c.jsonl")
    items, errors = counts(run_dir)
    assert items == 3 and errors == 1


@pytest.mark.parametrize("line", [-5, 0, 10**9])
def test_github_line_numbers_out_of_any_file(tmp_path, line):
    """Only the span (line - start_line) is used: odd numbers give an item or an error, and
    the accounting holds either way."""
    rows = [gh(k) for k in range(3)] + [gh(9, line=line, start_line=line)]
    (tmp_path / "c.jsonl").write_text(jsonl(rows))
    _, run_dir = ingest_run(tmp_path, "github", "c.jsonl")
    assert sum(counts(run_dir)) == 4


def test_github_huge_suggestion_line(tmp_path):
    huge = "x" * 300_000
    rows = [gh(k) for k in range(3)] + [gh(9, body=f"```suggestion\n{huge}\n```")]
    (tmp_path / "c.jsonl").write_text(jsonl(rows))
    res, run_dir = source_run(tmp_path, "github", "c.jsonl", "", "ingest.max_record_bytes=100000")
    assert_sound_run(res, run_dir)
    errors = pl.read_parquet(run_dir / "ingest" / "errors.parquet")
    assert errors.height == 1 and errors["raw"].str.len_chars().max() < 100_000


# ------------------------------------------------------------------ codereviewer


def test_codereviewer_gzip_truncated(tmp_path):
    data = gzip.compress(jsonl([cr(k) for k in range(200)]).encode())
    (tmp_path / "cr.jsonl.gz").write_bytes(data[: len(data) // 2])
    res, run_dir = source_run(tmp_path, "codereviewer", "cr.jsonl.gz")
    assert_sound_run(res, run_dir)
    items, errors = counts(run_dir)
    assert 0 < items < 200 and errors >= 1


def test_codereviewer_two_files_concatenated_without_a_newline(tmp_path):
    a, b = jsonl([cr(k) for k in range(3)]), jsonl([cr(k) for k in range(3, 6)])
    (tmp_path / "cr.jsonl").write_text(a.rstrip("\n") + b)
    res, run_dir = source_run(tmp_path, "codereviewer", "cr.jsonl")
    assert_sound_run(res, run_dir)
    assert sum(counts(run_dir)) == 5  # the joined line is one (bad) record


@pytest.mark.parametrize(
    "over",
    [{"old": ["a"]}, {"comment": 7}, {"ghid": {"x": 1}}, {"repo": 1.5}, {"lang": True}],
    ids=["old_list", "comment_int", "ghid_object", "repo_float", "lang_bool"],
)
def test_codereviewer_wrong_types_cost_one_record(tmp_path, over):
    rows = [cr(k) for k in range(3)] + [cr(9, **over)]
    (tmp_path / "cr.jsonl").write_text(jsonl(rows))
    _, run_dir = ingest_run(tmp_path, "codereviewer", "cr.jsonl")
    assert counts(run_dir) == (3, 1)


def test_codereviewer_patch_that_is_all_headers(tmp_path):
    rows = [cr(k) for k in range(3)]
    rows.append({"patch": "@@ -1 +1 @@\n@@ -2 +2 @@\n\\ No newline at end of file\n", "msg": "x"})
    (tmp_path / "cr.jsonl").write_text(jsonl(rows))
    _, run_dir = ingest_run(tmp_path, "codereviewer", "cr.jsonl")
    assert counts(run_dir) == (3, 1)


# ------------------------------------------------------------------ git


@pytest.fixture
def repo(tmp_path) -> Repo:
    r = Repo(tmp_path / "repo")
    for k in range(3):
        r.write(f"m{k}.py", f"value_{k} = compute({k})\n")
        r.commit(f"add m{k}")
        r.write(f"m{k}.py", f"value_{k} = compute_fast({k})\n")
        r.commit(f"speed up m{k}")
    return r


def test_git_binary_latin1_and_huge_changes_are_skips(tmp_path, repo):
    repo.write("img.bin", bytes(range(256)) * 4)
    repo.write("latin.py", "caf\xe9 = 1\n".encode("latin-1"))
    repo.write("wide.py", "w = '" + "x" * 200_000 + "'\n")
    repo.commit("odd files")
    repo.write("latin.py", "caf\xe9 = 2\n".encode("latin-1"))
    repo.write("wide.py", "w = '" + "y" * 200_000 + "'\n")
    repo.commit("change odd files")
    res, run_dir = source_run(tmp_path, "git", "repo", "", "ingest.max_record_bytes=100000")
    assert_sound_run(res, run_dir)
    errors = pl.read_parquet(run_dir / "ingest" / "errors.parquet")
    assert {"binary", "non_utf8"} <= set(errors["reason"].str.split(":").list.first())
    assert errors.filter(pl.col("reason").str.starts_with("hunk_too_large")).height >= 1


def test_git_commit_subjects_with_markup_secrets_and_control_characters(tmp_path, repo):
    repo.write("m0.py", "value_0 = compute_fastest(0)\n")
    repo.commit(f"[bold]x[/] <script>alert(1)</script> \x1b[31mred\x1b[0m {JWT_TEXT}")
    res, run_dir = source_run(tmp_path, "git", "repo")
    assert_sound_run(res, run_dir)
    items = pl.read_parquet(run_dir / "ingest" / "items.parquet")
    assert items["comment"].str.contains("[bold]x[/]", literal=True).any()


def test_git_repository_with_a_missing_object_is_one_line_exit_3(tmp_path, repo):
    objects = repo.path / ".git" / "objects"
    head = repo.git("rev-parse", "HEAD~1")
    (objects / head[:2] / head[2:]).unlink()
    res, run_dir = source_run(tmp_path, "git", "repo")
    assert res.exit_code == 3, res.output
    assert str(tmp_path / "repo") in one_error_line(res)
    assert not (run_dir / "ingest" / "manifest.json").exists()


def test_git_rev_that_looks_like_an_option(tmp_path, repo):
    res, _ = source_run(tmp_path, "git", "repo", 'rev = "--output=/tmp/pwned"\n')
    assert res.exit_code == 3 and "must not start with '-'" in one_error_line(res)
    assert not os.path.exists("/tmp/pwned")


def test_git_empty_repository(tmp_path):
    Repo(tmp_path / "repo")
    res, _ = source_run(tmp_path, "git", "repo")
    assert res.exit_code == 1 and "no records" in one_error_line(res)


# ------------------------------------------------------------------ hf


def _dataset(tmp: Path, cols: dict) -> Path:
    import datasets

    datasets.Dataset.from_dict(cols).save_to_disk(str(tmp / "ds"))
    return tmp / "ds"


def test_hf_columns_of_the_wrong_type(tmp_path):
    n = 4
    _dataset(
        tmp_path,
        {
            "before": [f"x_{k} = 1" for k in range(n)],
            "after": [f"x_{k} = 2" for k in range(n)],
            "comment": ["ok"] * n,
            "lines_added": [2**40, -1, 0, 7],
            "created_at": ["9999-99-99", "", "2024-01-01T00:00:00Z", "[bold]"],
            "author": [1, 2, 3, 4],
        },
    )
    _, run_dir = ingest_run(tmp_path, "hf", "ds", 'format = "disk"\n')
    assert sum(counts(run_dir)) == n


def test_hf_dataset_with_a_truncated_arrow_file_is_one_line(tmp_path):
    ds = _dataset(tmp_path, {"before": ["a"] * 50, "after": ["b"] * 50})
    arrow = next(ds.glob("*.arrow"))
    arrow.write_bytes(arrow.read_bytes()[:200])
    res, _ = source_run(tmp_path, "hf", "ds", 'format = "disk"\n')
    assert res.exit_code == 3, res.output
    assert str(tmp_path / "ds") in one_error_line(res)


def test_hf_dataset_info_that_is_not_json(tmp_path):
    ds = _dataset(tmp_path, {"before": ["a"], "after": ["b"]})
    (ds / "dataset_info.json").write_text("{[bold]")
    (ds / "state.json").write_text("[]")
    res, _ = source_run(tmp_path, "hf", "ds", 'format = "disk"\n')
    assert res.exit_code == 3, res.output
    assert str(tmp_path / "ds") in one_error_line(res)


def test_hf_path_that_is_a_plain_file(tmp_path):
    (tmp_path / "ds").write_text("not a dataset")
    res, _ = source_run(tmp_path, "hf", "ds", 'format = "disk"\n')
    assert res.exit_code == 3 and "ds" in one_error_line(res)
    shutil.rmtree(tmp_path / "runs", ignore_errors=True)
