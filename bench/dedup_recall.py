"""Merged into bench/dedup_accuracy.py (prefix-filter truth at 100k and 1M, templated
families); this name runs it with the same flags.

    python bench/dedup_recall.py [--items 100000] [--families 40] [--family-size 300]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from dedup_accuracy import main  # noqa: E402

if __name__ == "__main__":
    main()
