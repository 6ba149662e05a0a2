"""smoke-train: pre-flight, the finite-checked loop, fault injection, bisection, sweep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from pipeline.config import SmokeConfig  # noqa: E402
from pipeline.runs import write_json  # noqa: E402
from pipeline.train import stage as smoke  # noqa: E402
from pipeline.train.bisect import ddmin, probe  # noqa: E402
from pipeline.train.data import ByteTokenizer, order_items, preflight  # noqa: E402
from pipeline.train.loop import LoopConfig, train  # noqa: E402
from pipeline.train.model import adapter_finite, adapter_params, build  # noqa: E402

torch.set_num_threads(2)


def items(n: int) -> pl.DataFrame:
    rows = [
        {
            "id": f"i{k:02d}",
            "path": f"src/m{k % 3}.py",
            "comment": "rename the variable",
            "context": "",
            "before": f"x{k} = {k}",
            "after": f"value_{k} = {k}",
        }
        for k in range(n)
    ]
    return pl.DataFrame(rows)


def run_dir(tmp_path: Path, df: pl.DataFrame) -> Path:
    d = tmp_path / "run"
    (d / "shapes").mkdir(parents=True)
    df.write_parquet(d / "shapes" / "kept.parquet")
    write_json(d / "shapes" / "manifest.json", {"stage": "shapes"})
    return d


def small(**kw) -> SmokeConfig:
    base = dict(grad_accum=4, max_len=256, eval_items=8, lr=2e-3)
    return SmokeConfig(**{**base, **kw})


def test_preflight_reports_zero_supervision_and_truncated_target():
    tok = ByteTokenizer()
    df = items(3)
    df = df.with_columns(
        pl.when(pl.col("id") == "i01")
        .then(pl.lit("c" * 300))
        .otherwise(pl.col("comment"))
        .alias("comment"),
        pl.when(pl.col("id") == "i02")
        .then(pl.lit("y" * 40))
        .otherwise(pl.col("after"))
        .alias("after"),
    )
    keep, table, summary = preflight(df, tok, max_len=200)
    row = {r["id"]: r for r in table.iter_rows(named=True)}
    # i00: every target byte + EOS supervised (the causal shift drops only position 0).
    assert row["i00"]["supervised_tokens"] == row["i00"]["target_tokens"] == len("value_0 = 0") + 1
    assert row["i01"]["problem"] == "zero_supervision" and row["i01"]["supervised_tokens"] == 0
    assert row["i02"]["problem"] == "truncated_target"
    assert summary["zero_supervision"] == ["i01"] and summary["truncated_target"] == ["i02"]
    assert [e.id for e in keep] == ["i00"]


def test_order_uses_batch_order_else_seeded_shuffle():
    df = items(6).with_columns(pl.Series("batch_order", [5, 4, 3, 2, 1, 0]))
    assert order_items(df, 0)["id"].to_list() == ["i05", "i04", "i03", "i02", "i01", "i00"]
    a = order_items(items(6), 1)["id"].to_list()
    assert a == order_items(items(6).reverse(), 1)["id"].to_list()


def test_sample_run_trains_and_reports_zero_supervision(tmp_path):
    df = items(24).with_columns(
        pl.when(pl.col("id") == "i05")
        .then(pl.lit("c" * 400))
        .otherwise(pl.col("comment"))
        .alias("comment")
    )
    d = run_dir(tmp_path, df)
    s = smoke.run(d, small(eval_items=2, max_new_tokens=8))
    assert s["verdict"] == "trains", s["reason"]
    assert s["eval_loss_after"] < s["eval_loss_before"]
    assert s["model"]["tensors"] == 28 and s["model"]["dtypes"] == ["float32"]
    assert s["preflight"]["zero_supervision"] == ["i05"]
    out = pl.read_parquet(d / "smoke" / "items.parquet")
    assert out.height == 24
    i05 = out.filter(pl.col("id") == "i05").row(0, named=True)
    assert i05["excluded"] and i05["position"] is None  # reported, not trained on
    assert out.filter(~pl.col("excluded"))["position"].sort().to_list() == list(range(23))
    steps = pl.read_parquet(d / "smoke" / "steps.parquet")
    assert steps.height == 6 and steps["stepped"].all()
    assert {"adapter_norm", "adapter_rel_change", "lr", "tokens"} <= set(steps.columns)
    assert (d / "smoke" / "adapter" / "adapter_model.safetensors").exists()
    assert (d / "smoke" / "loss_grad.png").exists()
    assert json.loads((d / "smoke" / "summary.json").read_text())["verdict"] == "trains"


def _trained(n: int, fault, **kw):
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(n), tok, 256)
    it, st = train(model, examples, tok.pad_token_id, LoopConfig(grad_accum=4, **kw), fault=fault)
    return model, it, st


def test_loop_drops_only_marked_items_and_names_the_parameter():
    marked = {"i03", "i09"}
    model, it, st = _trained(16, lambda ids: bool(marked & set(ids)))
    dropped = it.filter(pl.col("dropped"))
    assert sorted(dropped["id"].to_list()) == sorted(marked)
    assert all("lora_" in name for name in dropped["first_bad"].to_list())
    assert it.height == 16  # every item seen
    assert st["skipped"].to_list() == [1, 0, 1, 0] and st["stepped"].all()
    assert adapter_finite(model)


def test_forward_non_finite_is_named_loss():
    model, it, st = _trained(8, lambda ids: "forward" if "i01" in ids else False)
    bad = it.filter(pl.col("dropped")).row(0, named=True)
    assert (bad["id"], bad["first_bad"], bad["loss_finite"]) == ("i01", "loss", False)
    assert it["dropped"].sum() == 1 and adapter_finite(model)


def test_nan_never_reaches_the_adapter():
    model, tok, _ = build("", 0, 16, 32)
    before = {n: p.detach().clone() for n, p in adapter_params(model).items()}
    examples, _, _ = preflight(items(8), tok, 256)
    it, st = train(
        model, examples, tok.pad_token_id, LoopConfig(grad_accum=4), fault=lambda _: True
    )
    assert it["dropped"].all() and not st["stepped"].any()
    for n, p in adapter_params(model).items():
        assert torch.equal(p, before[n])


def test_over_budget_fails_clearly(tmp_path):
    d = run_dir(tmp_path, items(12))
    s = smoke.run(d, small(), fault=lambda ids: "i02" in ids, generate=False)
    assert s["verdict"] == "fails" and "skipped 1 of 12 items" in s["reason"]
    assert s["skipped"][0]["id"] == "i02" and s["adapter_finite"]


def pair_fault(a: str, b: str):
    return lambda ids: a in ids and b in ids


def test_bisection_returns_exactly_the_pair():
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(16), tok, 256)
    res = probe(model, examples, 8, tok.pad_token_id, fault=pair_fault("i02", "i06"), repeats=2)
    assert res["non_finite_batches"] == [0]
    (c,) = res["culprits"]
    assert sorted(c["ids"]) == ["i02", "i06"]
    table = {r["condition"]: r["grad_norm"] for r in c["table"]}
    assert table["the set, 2 repeats"] == "NaN every time"
    assert math.isfinite(float(table["i02 alone"])) and math.isfinite(float(table["i06 alone"]))
    assert table["reversed order"] == "NaN"
    assert table["each with an unrelated item"] == "finite"


def test_ddmin_minimal_set():
    assert ddmin(list(range(20)), lambda s: 3 in s and 17 in s) == [3, 17]
    assert ddmin(list(range(9)), lambda s: 4 in s) == [4]


def test_sweep_data_positioned(tmp_path):
    d = run_dir(tmp_path, items(8))
    sweep = smoke.parse_sweep("lr=2e-4,8e-3")
    s = smoke.run(d, small(skip_budget=0.5), sweep, fault=lambda ids: "i04" in ids, generate=False)
    assert s["sweep"]["class"] == "data-positioned" and s["sweep"]["ids"] == ["i04"]


def test_classify_sweep_moving_positions():
    runs = [
        {"dropped_positions": [3], "dropped_ids": ["a"], "loss_curve": [1.0]},
        {"dropped_positions": [7], "dropped_ids": ["b"], "loss_curve": [2.0]},
    ]
    assert smoke.classify_sweep(runs)["class"] == "optimisation-driven"
    with pytest.raises(smoke.SmokeFailed, match="two or more"):
        smoke.parse_sweep("lr=1e-3")


def test_cli_needs_shapes(tmp_path, cli):
    res = cli("smoke-train", tmp_path / "nope", ok=False)
    assert res.exit_code == 2 and "nope: no such run folder" in res.output
    (tmp_path / "nope").mkdir()
    res = cli("smoke-train", tmp_path / "nope", ok=False)
    assert res.exit_code == 2 and "run `editcurate shapes` first" in res.output


def test_local_checkpoint_offline(tmp_path, cli):
    """--model loads a checkpoint folder with local_files_only (one built here, no hub)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator(["value = 1", "rename the variable", "x = 2"], trainer)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    ckpt = tmp_path / "ckpt"
    tok.save_pretrained(ckpt)
    cfg = GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=1, n_head=2, n_positions=512)
    GPT2LMHeadModel(cfg).save_pretrained(ckpt)
    d = run_dir(tmp_path, items(8))
    res = cli(
        "smoke-train",
        d,
        "--model",
        ckpt,
        "--grad-accum",
        "4",
        "--lr",
        "2e-3",
        "--max-len",
        "256",
        "--eval-items",
        "2",
        ok=False,
    )
    s = json.loads((d / "smoke" / "summary.json").read_text())
    assert s["model"]["tiny"] is False and s["model"]["dtypes"] == ["float32"]
    assert s["items_seen"] == 8 and s["items_skipped"] == 0
    assert res.exit_code == (0 if s["verdict"] == "trains" else 1)
