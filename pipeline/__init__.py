"""editcurate: code-review edits -> a clean fine-tuning corpus.

    from pipeline import Pipeline
    run = Pipeline.from_paths("edits.jsonl").run()
    train = run.read("export/train").collect()

`Pipeline` and `Run` are imported on first use, so `import pipeline` stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pipeline.api import Pipeline, Run

__all__ = ["Pipeline", "Run"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pipeline import api

        return getattr(api, name)
    raise AttributeError(f"module 'pipeline' has no attribute {name!r}")
