"""The export stage: splits by whole group (split.py: the rule; assign.py: its passes), the
dataset card and HF dataset (card.py), the stage's step (stage.py)."""

from pipeline.export.assign import assign_splits
from pipeline.export.split import deal, groupings, leakage, split_rule

__all__ = ["assign_splits", "deal", "groupings", "leakage", "split_rule"]
