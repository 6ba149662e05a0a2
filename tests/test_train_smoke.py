"""smoke-train: pre-flight, the token-sum loop and its schedule, host reads, the stage, the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from pipeline.config import SmokeConfig  # noqa: E402
from pipeline.runs import StageRun, read_manifest  # noqa: E402
from pipeline.stage import SPLITS  # noqa: E402
from pipeline.train import stage as smoke  # noqa: E402
from pipeline.train.data import ByteTokenizer, order_items, preflight, prompt_ids  # noqa: E402
from pipeline.train.loop import (  # noqa: E402
    HOST_READS,
    Flat,
    LoopConfig,
    count_windows,
    lr_factor,
    micro_step,
    train,
)
from pipeline.train.model import adapter_finite, adapter_params, build  # noqa: E402

torch.set_num_threads(1)  # 2 threads on a busy 2-core runner spin: slower, not faster


def items(n: int, start: int = 0) -> pl.DataFrame:
    rows = [
        {
            "id": f"i{k:02d}",
            "path": f"src/m{k % 3}.py",
            "comment": "rename the variable",
            "context": "",
            "before": f"x{k} = {k}",
            "after": f"value_{k} = {k}",
        }
        for k in range(start, start + n)
    ]
    return pl.DataFrame(rows)


def run_dir(tmp_path: Path, train: pl.DataFrame, validation=None, test=None) -> Path:
    """A run folder with a finished export: its three splits."""
    d = tmp_path / "run"
    export = StageRun(run_dir=d, stage="export", fingerprint="t", config_fingerprint="", inputs={})
    export.begin()
    empty = train.clear()
    for name, df in (("train", train), ("validation", validation), ("test", test)):
        (empty if df is None else df).write_parquet(d / "export" / f"{name}.parquet")
        export.record_output(f"{name}.parquet", "terminal")
    export.finish({})
    return d


def small(**kw) -> SmokeConfig:
    base = dict(grad_accum=4, max_len=256, eval_items=8, lr=2e-3, max_new_tokens=8)
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


def test_token_sum_loss_matches_hand_computation_on_a_two_item_window():
    model, tok, _ = build("", 0, 16, 32)
    df = items(2).with_columns(pl.Series("after", ["v = 0", "a_much_longer_name_here = 1"]))
    examples, _, _ = preflight(df, tok, 256)
    n = [e.supervised_tokens for e in examples]
    assert n[0] != n[1]
    # by hand: log-softmax at every supervised position, summed over both items, / their tokens
    hand_sum, per_item_mean = 0.0, []
    total = torch.zeros((), dtype=torch.float64)
    for e in examples:
        ids = torch.tensor([e.input_ids])
        logp = torch.log_softmax(model(input_ids=ids).logits[0].double(), -1)
        s = -sum(logp[t - 1, e.labels[t]] for t in range(1, len(e.labels)) if e.labels[t] >= 0)
        total = total + s
        hand_sum += float(s)
        per_item_mean.append(float(s) / e.supervised_tokens)
    hand = hand_sum / sum(n)
    (total / sum(n)).backward()
    want = torch.cat([p.grad.reshape(-1) for p in adapter_params(model).values()])
    model.zero_grad(set_to_none=True)
    # the loop's two micro-steps, each divided by the window's tokens, summed
    flat = Flat(model)
    got = sum(micro_step(model, [e], tok.pad_token_id, "cpu", flat, sum(n))[0] for e in examples)
    torch.testing.assert_close(got.double(), want.double(), rtol=1e-4, atol=1e-7)
    _, steps, _ = train(model, examples, tok.pad_token_id, LoopConfig(grad_accum=2))
    assert steps["loss"][0] == pytest.approx(hand, rel=1e-5)
    assert steps["tokens"][0] == sum(n)
    assert abs(hand - sum(per_item_mean) / 2) > 1e-3  # not the mean of per-item means


def test_warmup_then_cosine_or_linear_decay():
    for schedule in ("cosine", "linear"):
        f = [lr_factor(s, 20, 0.1, schedule) for s in range(20)]
        assert f[0] < f[1] < f[2] == 1.0  # two warmup steps, then the peak
        assert all(a >= b for a, b in zip(f[2:], f[3:], strict=False)) and f[-1] == 0.1
    assert lr_factor(5, 20, 0.1, "cosine") > lr_factor(5, 20, 0.1, "linear")  # early: higher


def test_one_host_read_per_window_not_per_tensor():
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(16), tok, 256)
    before = HOST_READS[0]
    train(model, examples, tok.pad_token_id, LoopConfig(grad_accum=4))
    reads = HOST_READS[0] - before
    assert reads == 4 + 1  # one per window (16 micro-steps) and one for the weight norms


def test_grad_checkpointing_gives_the_same_gradients():
    grads = []
    for ckpt in (False, True):
        model, tok, info = build("", 0, 16, 32, checkpointing=ckpt)
        model.train()
        examples, _, _ = preflight(items(2), tok, 256)
        n = sum(e.supervised_tokens for e in examples)
        g, _, _ = micro_step(model, examples, tok.pad_token_id, "cpu", Flat(model), n)
        grads.append(g)
        assert info["grad_checkpointing"] is ckpt
    assert grads[0].abs().sum() > 0
    torch.testing.assert_close(grads[0], grads[1])


def test_chat_template_when_the_tokenizer_has_one():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from pipeline.train.data import HFTokenizer

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=280, special_tokens=["<eos>"], initial_alphabet=alphabet
    )
    bpe.train_from_iterator(["value = 1", "x = 2"], trainer)
    raw = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>")
    assert HFTokenizer(raw).template == "project"
    plain = prompt_ids(HFTokenizer(raw), "hi")
    raw.chat_template = "{% for m in messages %}[USER]{{ m['content'] }}{% endfor %}[BOT]"
    tok = HFTokenizer(raw)
    assert tok.template == "chat"
    ids = prompt_ids(tok, "hi")
    assert raw.decode(ids) == "[USER]hi[BOT]" and ids != plain


def _trained(n: int, fault, **kw):
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(n), tok, 256)
    it, st, kept = train(
        model, examples, tok.pad_token_id, LoopConfig(grad_accum=4, **kw), fault=fault
    )
    return model, it, st, kept


def test_loop_drops_only_marked_items_and_names_the_parameter():
    marked = {"i03", "i09"}
    model, it, st, kept = _trained(16, lambda ids: bool(marked & set(ids)))
    dropped = it.filter(pl.col("dropped"))
    assert sorted(dropped["id"].to_list()) == sorted(marked)
    assert all("lora_" in name for name in dropped["first_bad"].to_list())
    assert it.height == 16  # every item seen
    assert st["skipped"].to_list() == [1, 0, 1, 0] and st["stepped"].all()
    assert [w["step"] for w in kept] == [0, 2] and adapter_finite(model)


def test_forward_non_finite_is_named_loss():
    model, it, st, _ = _trained(8, lambda ids: "forward" if "i01" in ids else False)
    bad = it.filter(pl.col("dropped")).row(0, named=True)
    assert (bad["id"], bad["first_bad"], bad["loss_finite"]) == ("i01", "loss", False)
    assert it["dropped"].sum() == 1 and adapter_finite(model)


def test_nan_never_reaches_the_adapter():
    model, tok, _ = build("", 0, 16, 32)
    before = {n: p.detach().clone() for n, p in adapter_params(model).items()}
    examples, _, _ = preflight(items(8), tok, 256)
    it, st, _ = train(
        model, examples, tok.pad_token_id, LoopConfig(grad_accum=4), fault=lambda _: True
    )
    assert it["dropped"].all() and not st["stepped"].any()
    assert st["adapter_rel_change"].to_list() == [0.0, 0.0]
    for n, p in adapter_params(model).items():
        assert torch.equal(p, before[n])


def test_run_trains_on_train_split_and_reports_zero_supervision(tmp_path):
    df = items(24).with_columns(
        pl.when(pl.col("id") == "i05")
        .then(pl.lit("c" * 400))
        .otherwise(pl.col("comment"))
        .alias("comment")
    )
    d = run_dir(tmp_path, df, validation=items(2, start=50))
    s = smoke.run(d, small(eval_items=2))
    assert s["verdict"] == "trains", s["reason"]
    # the runner's manifest: export's outputs as inputs, every declared output recorded
    m = read_manifest(d / "smoke")
    assert m is not None and set(m["inputs"]) == {f"export/{x}.parquet" for x in SPLITS}
    assert {"summary.json", "items.parquet", "eval.parquet"} <= set(m["outputs"])
    assert s["eval_loss_after"] < s["eval_loss_before"]
    assert s["model"]["tensors"] == 28 and s["model"]["dtypes"] == ["float32"]
    assert s["preflight"]["zero_supervision"] == ["i05"]
    assert s["data"] == {"train": 24, "validation": 2, "test": 0, "curated": 26}
    out = pl.read_parquet(d / "smoke" / "items.parquet")
    assert out.height == 24
    i05 = out.filter(pl.col("id") == "i05").row(0, named=True)
    assert i05["excluded"] and i05["position"] is None  # reported, not trained on
    assert out.filter(~pl.col("excluded"))["position"].sort().to_list() == list(range(23))
    steps = pl.read_parquet(d / "smoke" / "steps.parquet")
    assert steps.height == 6 and steps["stepped"].all()
    assert steps["lr"].to_list()[1] == max(steps["lr"]) > steps["lr"].to_list()[-1]  # decays
    assert {"adapter_norm", "adapter_rel_change", "lr", "tokens"} <= set(steps.columns)
    assert (d / "smoke" / "adapter" / "adapter_model.safetensors").exists()
    assert (d / "smoke" / "loss_grad.png").exists()
    assert json.loads((d / "smoke" / "summary.json").read_text())["verdict"] == "trains"


def test_over_budget_fails_clearly(tmp_path):
    d = run_dir(tmp_path, items(12))
    s = smoke.run(d, small(), fault=lambda ids: "i02" in ids, generate=False)
    assert s["verdict"] == "fails" and "skipped 1 of 12 items" in s["reason"]
    assert s["skipped"][0]["id"] == "i02" and s["adapter_finite"]


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


def test_eval_items_0_exits_0_with_gate_skipped(tmp_path, cli):
    d = run_dir(tmp_path, items(16), validation=items(2, start=50))
    res = cli("smoke-train", d, "--grad-accum", "4", "--lr", "2e-3", "--eval-items", "0")
    s = json.loads((d / "smoke" / "summary.json").read_text())
    assert res.exit_code == 0 and s["verdict"] == "trains"
    assert s["gate"] == "skipped" and "--eval-items 0" in s["gate_reason"]
    assert "gate: skipped" in res.output and "no held-out items judged" in res.output


def test_cli_needs_export_and_a_valid_fault(tmp_path, cli):
    res = cli("smoke-train", tmp_path / "nope", ok=False)
    assert res.exit_code == 2 and "nope: no such run folder" in res.output
    (tmp_path / "nope").mkdir()
    res = cli("smoke-train", tmp_path / "nope", ok=False)
    assert res.exit_code == 2 and "run `editcurate export " in res.output
    d = run_dir(tmp_path, items(4))
    res = cli("smoke-train", d, "--fault", "both:a", ok=False)
    assert res.exit_code == 2 and "pair:ID,ID | item:ID | forward:ID" in res.output
    res = cli("smoke-train", d, "--model", "config:huge", ok=False)
    assert res.exit_code != 0 and "unknown preset; presets: config:tiny, config:0.5b" in res.output


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
    d = run_dir(tmp_path, items(8), validation=items(1, start=50))
    args = ["--grad-accum", "4", "--lr", "2e-3", "--max-len", "256", "--eval-items", "1"]
    res = cli("smoke-train", d, "--model", ckpt, *args, "--max-new-tokens", "4", ok=False)
    s = json.loads((d / "smoke" / "summary.json").read_text())
    assert s["model"]["tiny"] is False and s["model"]["dtypes"] == ["float32"]
    assert s["items_seen"] == 8 and s["items_skipped"] == 0
    assert res.exit_code == (0 if s["verdict"] == "trains" else 1)
    assert math.isfinite(s["held_out_loss_after"])


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_asked_on_a_cpu_only_torch_is_one_line_exit_3(tmp_path, cli):
    d = run_dir(tmp_path, items(4))
    res = cli("smoke-train", d, "--device", "cuda", ok=False)
    assert res.exit_code == 3
    assert "--device cuda: no usable GPU" in res.output and "Traceback" not in res.output
    assert not (d / "smoke" / "items.parquet").exists()  # refused before any work


def test_count_windows_is_the_loops_step_count():
    cfg = LoopConfig(micro_batch=3, grad_accum=4)
    assert [count_windows(n, cfg) for n in (0, 1, 12, 13, 24, 25)] == [0, 1, 1, 2, 2, 3]
    assert count_windows(16, LoopConfig(grad_accum=4)) == 4


def _outputs(d: Path) -> dict[str, bytes]:
    """Every file smoke-train wrote, but the manifest (wall and CPU time)."""
    smoke_dir = d / "smoke"
    return {
        str(p.relative_to(smoke_dir)): p.read_bytes()
        for p in sorted(smoke_dir.rglob("*"))
        if p.is_file() and p.name != "manifest.json"
    }


def test_progress_per_window_and_phase_quiet_says_none_and_outputs_are_identical(
    tmp_path, cli, monkeypatch
):
    """Issue 27: each long phase says what it does and how many units, each training window its
    step, loss and the items skipped so far (a line per window here: LOG_EVERY 0; off a
    terminal it is every LOG_EVERY seconds); --quiet says none of it; neither changes a file."""
    import re

    import pipeline.console as pc

    monkeypatch.setattr(pc, "LOG_EVERY", 0.0)
    args = [
        *("--grad-accum", "4", "--lr", "2e-3", "--max-len", "256", "--seed", "3"),
        *("--eval-items", "2", "--max-new-tokens", "4", "--probe-batch", "4"),
        *("--fault", "item:i05"),  # a kept non-finite window: bisection; over budget: exit 1
    ]
    dirs = {}
    for mode in ("loud", "quiet"):
        d = run_dir(tmp_path / mode, items(16), validation=items(2, start=50))
        res = cli("smoke-train", d, *args, *(["--quiet"] if mode == "quiet" else []), ok=False)
        assert res.exit_code == 1 and "smoke-train: wrote" in res.output, res.output
        dirs[mode] = (d, res.output)
    out = dirs["loud"][1]
    steps = re.findall(
        r"^smoke-train: training steps: (\d)/4 \(\d+%\), loss ([\d.]+), skipped (\d), \d+s$",
        out,
        re.M,
    )
    assert [int(s) for s, _, _ in steps] == [1, 2, 3, 4]  # one line per window
    assert all(math.isfinite(float(loss)) for _, loss, _ in steps)
    assert int(steps[-1][2]) == 1  # i05's micro-batch, left out
    for phase in (
        "building model config:tiny (LoRA r 16) on ",
        "training 4 steps of 4 x 1 items (16 items)",
        "generating with the base model for 2 validation items",
        "bisecting 1 non-finite micro-batch in 1 kept window",
        "probing 5 blocks of up to 4 items (18 items)",
        "generating with the trained adapter for 2 validation items",
        "held-out loss on 2 validation items",
    ):
        assert f"smoke-train: {phase}" in out, phase
    assert re.search(r"^smoke-train: probe blocks: 5/5 \(100%\), \d+ passes", out, re.M)
    quiet = dirs["quiet"][1]
    assert "smoke-train: training" not in quiet and "building model" not in quiet
    assert "skipped 1 of 16 items" in quiet  # the summary still prints
    # progress changes no output: every file byte for byte, summary.json but its timings
    loud_files, quiet_files = (_outputs(dirs[m][0]) for m in ("loud", "quiet"))
    assert set(loud_files) == set(quiet_files)
    assert any(f.startswith("windows/step_") for f in loud_files)  # the kept window's state
    timed = ("train_s", "tokens_per_s")
    summaries = [json.loads(f.pop("summary.json")) for f in (loud_files, quiet_files)]
    for s in summaries:
        for k in timed:
            s.pop(k)
    assert summaries[0] == summaries[1]
    assert loud_files == quiet_files
