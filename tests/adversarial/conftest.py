"""Hostile inputs through the real CLI: write a file, ingest it, and look at everything a user
would: the exit code, the one error line, items.parquet, errors.parquet, the manifest, and
whether `editcurate verify` accounts for every record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from pipeline.cli import app

GOOD = [
    {"before": f"x = {i}", "after": f"y = {i}", "comment": f"good {i}", "path": "a.py"}
    for i in range(3)
]
EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_IO = 0, 1, 2, 3


def jsonl(rows: list[dict]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in rows)


def csv_text(rows: list[dict], cols=("before", "after", "comment")) -> str:
    out = [",".join(cols)]
    for r in rows:
        out.append(",".join(_csv_cell(str(r.get(c, ""))) for c in cols))
    return "\n".join(out) + "\n"


def _csv_cell(v: str) -> str:
    return '"' + v.replace('"', '""') + '"' if any(c in v for c in ',"\n\r') else v


@dataclass
class Ingest:
    res: Any  # click Result
    run: Path
    name: str  # the source name (the file name)

    @property
    def code(self) -> int:
        return self.res.exit_code

    @property
    def items(self) -> pl.DataFrame:
        return pl.read_parquet(self.run / "ingest" / "items.parquet")

    @property
    def errors(self) -> pl.DataFrame:
        return pl.read_parquet(self.run / "ingest" / "errors.parquet")

    @property
    def source(self) -> dict[str, Any]:
        m = json.loads((self.run / "ingest" / "manifest.json").read_text())
        return m["conservation"]["sources"][self.name]

    def comments(self) -> list[str]:
        return sorted(self.items["comment"].to_list())

    def error_line(self) -> str:
        """The one `error: ` line of a failed run (no traceback)."""
        lines = [ln for ln in self.res.output.splitlines() if ln.startswith("error: ")]
        assert len(lines) == 1, self.res.output
        assert "Traceback" not in self.res.output
        return lines[0]

    def verify_passes(self) -> None:
        res = CliRunner().invoke(app, ["verify", str(self.run)])
        assert res.exit_code == 0, res.output
        s = self.source
        accounted = self.items.filter(pl.col("source") == self.name)["source_ref"]
        keys = accounted.str.split("#").list.first().unique().len()
        assert s["input_records"] == keys + self.errors.height, s

    def errors_name_where(self) -> None:
        """Each error record names its file (the source) and line/row/element, in one line."""
        e = self.errors
        assert (e["source"] == self.name).all()
        refs = e["source_ref"].to_list()
        assert all(
            r == "file" or r.split(" ")[0] in ("line", "row", "element", "value") for r in refs
        ), refs
        assert not any("\n" in r for r in e["reason"].to_list())


def config(tmp_path: Path, path: str, extra: str = "", kind: str = "table") -> Path:
    p = tmp_path / "editcurate.toml"
    p.write_text(
        f'[run]\nname = "t"\nroot = "runs"\n\n[[ingest.sources]]\nkind = "{kind}"\n'
        f"path = {json.dumps(path)}\n{extra}"
    )
    return p


@pytest.fixture
def ingest(tmp_path):
    """ingest(filename, bytes | None, extra_toml="", *sets) -> Ingest. With bytes None the
    path is used as it is (a FIFO, a folder ...)."""

    def run(name: str, data: bytes | str | None, extra: str = "", *sets: str) -> Ingest:
        path = tmp_path / name
        if isinstance(data, str):
            data = data.encode()
        if data is not None:
            path.write_bytes(data)
        cfg = config(tmp_path, str(path), extra)
        args = ["ingest", "--config", str(cfg)]
        for s in sets:
            args += ["--set", s]
        res = CliRunner().invoke(app, args)
        return Ingest(res, tmp_path / "runs" / "t", Path(name).name)

    return run


def ingest_subprocess(
    tmp_path: Path, path: Path, timeout: float = 60
) -> subprocess.CompletedProcess:
    """The CLI in its own process, for inputs whose danger is a hang: a timeout fails the
    test instead of hanging the suite."""
    cfg = config(tmp_path, str(path))
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    code = "from pipeline.cli import app; app()"
    return subprocess.run(
        [sys.executable, "-c", code, "ingest", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )


@pytest.fixture
def quick_plots(monkeypatch):
    """Plots are pixels of counts, never data text: here they skip layout and rendering (0.8 s
    a run) and are a 1x1 PNG, so a hundred runs stay fast. The report's text is built as ever."""
    import matplotlib.pyplot as plt

    from pipeline.report import plots

    def save(fig, path: Path) -> str:
        plt.close(fig)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_PNG)
        return path.name

    monkeypatch.setattr(plots, "_save", save)


_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)
