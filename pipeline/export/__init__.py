"""The export stage: splits by whole group (split.py), the dataset card and HF dataset
(card.py), the stage's step (stage.py)."""

from pipeline.export.split import assign_splits, deal, groupings, leakage, split_rule

__all__ = ["assign_splits", "deal", "groupings", "leakage", "split_rule"]
