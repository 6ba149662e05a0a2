"""`editcurate why`: every decision a run made about given items, stage by stage.

`explain(run_dir, queries)` returns one JSON-ready dict per query; `render(results)` turns them
into Rich `Text` lines. Outputs are scanned lazily, filtered by id, only the columns needed.
Exact duplicates share one id, so each ingested row (id, source, source_ref) is followed alone.
"""

from pipeline.why.decisions import explain
from pipeline.why.lookup import resolve, unresolved
from pipeline.why.render import render

__all__ = ["explain", "render", "resolve", "unresolved"]
