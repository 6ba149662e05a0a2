"""Tokenise, mask and order items for smoke-train; the pre-flight that runs before any step.

The prompt is the project's template (pipeline/template.py), wrapped in the tokenizer's chat
template when it has one. Only the `after` tokens (+ EOS) are supervised. Counts are taken
after the causal shift (the first token is never a target) and after truncation, so an item
whose target is cut off or gone is reported before it can waste (or poison) a step.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import polars as pl

from pipeline.template import render

IGNORE = -100


class ByteTokenizer:
    """UTF-8 bytes shifted by 3; ids 0/1/2 are pad/bos/eos. Needs no files or downloads."""

    pad_token_id = 0
    bos_token_id = 1
    eos_token_id = 2
    vocab_size = 259
    template = "project"

    def encode(self, text: str) -> list[int]:
        return [b + 3 for b in text.encode("utf-8")]

    def decode(self, ids: list[int]) -> str:
        return bytes(i - 3 for i in ids if i >= 3).decode("utf-8", errors="replace")


class HFTokenizer:
    """The same small interface over a Hugging Face tokenizer from a local checkpoint."""

    def __init__(self, tok: Any) -> None:
        self.tok = tok
        self.eos_token_id = tok.eos_token_id
        self.bos_token_id = tok.bos_token_id
        pad = tok.pad_token_id
        self.pad_token_id = pad if pad is not None else tok.eos_token_id
        self.template = "chat" if getattr(tok, "chat_template", None) else "project"

    def encode(self, text: str) -> list[int]:
        return self.tok(text, add_special_tokens=False)["input_ids"]

    def decode(self, ids: list[int]) -> str:
        return self.tok.decode(ids, skip_special_tokens=True)


@dataclass
class Example:
    """One tokenised item: input ids and labels (-100 on the prompt), plus its counts."""

    id: str
    input_ids: list[int]
    labels: list[int]
    prompt_tokens: int
    target_tokens: int
    supervised_tokens: int  # labels != -100 after the causal shift and truncation
    truncated_target: bool


def render_item(item: dict[str, Any]) -> tuple[str, str]:
    """The one template (pipeline/template.py) over an item row; missing fields are ""."""
    return render(*(item.get(k) or "" for k in ("path", "comment", "context", "before", "after")))


def prompt_ids(tok: Any, prompt: str) -> list[int]:
    """What training and generation condition on: the prompt as one user turn of the
    tokenizer's chat template (which brings its own special tokens) when it has one, else BOS
    (when the tokenizer has one) + the prompt's token ids."""
    if getattr(tok, "template", "project") == "chat":
        turn = [{"role": "user", "content": prompt}]
        text = tok.tok.apply_chat_template(turn, tokenize=False, add_generation_prompt=True)
        return tok.encode(text)
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    return bos + tok.encode(prompt)


def encode_item(item: dict[str, Any], tok: Any, max_len: int) -> Example:
    prompt, completion = render_item(item)
    p = prompt_ids(tok, prompt)
    t = tok.encode(completion.rstrip("\n")) + [tok.eos_token_id]
    ids = (p + t)[:max_len]
    labels = ([IGNORE] * len(p) + t)[:max_len]
    supervised = sum(1 for x in labels[1:] if x != IGNORE)  # position 0 is never predicted
    return Example(
        id=item["id"],
        input_ids=ids,
        labels=labels,
        prompt_tokens=len(p),
        target_tokens=len(t),
        supervised_tokens=supervised,
        truncated_target=len(p) + len(t) > max_len,
    )


def order_items(df: pl.DataFrame, seed: int) -> pl.DataFrame:
    """The training order: shapes' `batch_order` when present, else a seeded shuffle by id."""
    if "batch_order" in df.columns:
        return df.sort(["batch_order", "id"])
    ids = sorted(df["id"].to_list())
    random.Random(seed).shuffle(ids)
    rank = {k: i for i, k in enumerate(ids)}
    return (
        df.with_columns(pl.col("id").replace_strict(rank, return_dtype=pl.Int64).alias("_o"))
        .sort(["_o"])
        .drop("_o")
    )


def preflight(
    df: pl.DataFrame, tok: Any, max_len: int, exclude: bool = True
) -> tuple[list[Example], pl.DataFrame, dict[str, Any]]:
    """Encode every item; return the trainable examples, a per-item table and a summary.

    Zero-supervision and truncated-target items are reported; with `exclude` they are not
    trained on.
    """
    rows, keep = [], []
    for item in df.iter_rows(named=True):
        ex = encode_item(item, tok, max_len)
        reason = ""
        if ex.supervised_tokens == 0:
            reason = "zero_supervision"
        elif ex.truncated_target:
            reason = "truncated_target"
        excluded = bool(reason) and exclude
        rows.append(
            {
                "id": ex.id,
                "prompt_tokens": ex.prompt_tokens,
                "target_tokens": ex.target_tokens,
                "supervised_tokens": ex.supervised_tokens,
                "truncated_target": ex.truncated_target,
                "problem": reason,
                "excluded": excluded,
            }
        )
        if not excluded:
            keep.append(ex)
    table = pl.DataFrame(
        rows,
        schema={
            "id": pl.String,
            "prompt_tokens": pl.Int64,
            "target_tokens": pl.Int64,
            "supervised_tokens": pl.Int64,
            "truncated_target": pl.Boolean,
            "problem": pl.String,
            "excluded": pl.Boolean,
        },
    )
    total = (table["prompt_tokens"] + table["target_tokens"]).to_list()
    edges = [0, 64, 128, 256, 512, 1024, 2048, 4096]
    hist = {}
    for lo, hi in zip(edges, edges[1:] + [None], strict=True):
        label = f"{lo}-{hi}" if hi else f"{lo}+"
        hist[label] = sum(1 for n in total if n >= lo and (hi is None or n < hi))
    summary = {
        "items": table.height,
        "trainable": len(keep),
        "zero_supervision": table.filter(pl.col("problem") == "zero_supervision")["id"].to_list(),
        "truncated_target": table.filter(pl.col("problem") == "truncated_target")["id"].to_list(),
        "excluded": int(table["excluded"].sum()),
        "max_len": max_len,
        "length_histogram": hist,
    }
    return keep, table, summary


def collate(batch: list[Example], pad_id: int, pad_to: int = 1, device: str = "cpu") -> dict:
    """Right-padded tensors for one micro-batch (no packing), length a multiple of pad_to.

    The attention mask is sent only when some row is padded: right padding sits after every
    real token, so a causal model reads the same without it, and a model given no mask does
    not inspect one on the host.
    """
    import torch

    n = max(len(e.input_ids) for e in batch)
    n = -(-n // pad_to) * pad_to
    ids = torch.full((len(batch), n), pad_id, dtype=torch.long)
    labels = torch.full((len(batch), n), IGNORE, dtype=torch.long)
    mask = torch.zeros((len(batch), n), dtype=torch.long)
    for i, e in enumerate(batch):
        k = len(e.input_ids)
        ids[i, :k] = torch.tensor(e.input_ids)
        labels[i, :k] = torch.tensor(e.labels)
        mask[i, :k] = 1
    out = {"input_ids": ids, "labels": labels}
    if any(len(e.input_ids) < n for e in batch):
        out["attention_mask"] = mask
    if device == "cpu":
        return out
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in out.items()}
