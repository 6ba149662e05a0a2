"""smoke-train's culprit search: ddmin, blocks by suspicion, training windows, the fp32 row."""

from __future__ import annotations

import math

import polars as pl
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from pipeline.train import stage as smoke  # noqa: E402
from pipeline.train.bisect import Passes, ddmin, diagnostic_rows, locate_window  # noqa: E402
from pipeline.train.data import preflight  # noqa: E402
from pipeline.train.faults import parse_fault  # noqa: E402
from pipeline.train.loop import LoopConfig, train  # noqa: E402
from pipeline.train.model import adapter_params, as_fp32, build  # noqa: E402
from pipeline.train.probe import blocks, probe  # noqa: E402
from tests.test_train_smoke import items, run_dir, small  # noqa: E402

torch.set_num_threads(1)  # 2 threads on a busy 2-core runner spin: slower, not faster


def test_ddmin_minimal_set():
    assert ddmin(list(range(20)), lambda s: 3 in s and 17 in s) == [3, 17]
    assert ddmin(list(range(9)), lambda s: 4 in s) == [4]


def test_blocks_put_group_members_together_then_every_item_once():
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(40), tok, 256)
    groups = [("shape group (change)", {"i03": 1, "i31": 1}), ("dedup component", {"i07": 2})]
    bs = blocks(examples, 8, groups, seed=0)
    assert bs[0].tier == "shape group (change)" and [e.id for e in bs[0].items] == ["i03", "i31"]
    assert all(b.tier != "dedup component" for b in bs)  # a group of one is no group
    assert all(len(b.items) <= 8 for b in bs)
    assert {e.id for b in bs for e in b.items} == {e.id for e in examples}  # each item runs
    tiers = [b.tier for b in bs]
    assert tiers == sorted(
        tiers, key=["shape group (change)", "near-identical length", "seeded random"].index
    )


def test_pair_in_one_shape_group_is_found_whatever_the_order():
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(40), tok, 256)
    groups = [("shape group (repo)", {"i05": 9, "i33": 9})]
    fault = parse_fault("pair:i05,i33")
    for seed in range(3):
        run = Passes(model, tok.pad_token_id, "cpu", fault)
        res = probe(run, examples, 8, groups, seed, repeats=2)
        (c,) = res["culprits"]
        assert sorted(c["ids"]) == ["i05", "i33"] and c["found_by"] == "shape group (repo)"
        table = {r["condition"]: r["grad_norm"] for r in c["table"]}
        assert table["the set, 2 repeats"] == "NaN every time"
        assert math.isfinite(float(table["i05 alone"])) and math.isfinite(float(table["i33 alone"]))
        assert table["reversed order"] == "NaN"
        assert table["each with an unrelated item"] == "finite"
        assert sum(run.count.values()) <= len(examples)  # at most one pass per item


def test_fault_in_a_micro_batch_4_window_is_located_on_the_saved_weights():
    """The fault fires only on the weights the window saw: ddmin on the end weights would find
    nothing, ddmin on the kept weights finds exactly the pair."""
    model, tok, _ = build("", 0, 16, 32)
    examples, _, _ = preflight(items(16), tok, 256)
    first: dict[str, float] = {}

    def fault(ids):
        if not {"i01", "i03"} <= set(ids):
            return False
        fp = float(sum(p.detach().double().sum() for p in adapter_params(model).values()))
        first.setdefault("fp", fp)
        return fp == first["fp"]

    cfg = LoopConfig(micro_batch=4, grad_accum=2, lr=1e-2)
    it, st, kept = train(model, examples, tok.pad_token_id, cfg, fault=fault)
    assert it.filter(pl.col("dropped"))["id"].to_list() == ["i00", "i01", "i02", "i03"]
    (w,) = kept
    assert (w["step"], w["bad"], w["batches"][0]) == (0, [0], ["i00", "i01", "i02", "i03"])
    assert w["optimizer"]["state"] == {}  # the state before step 0: nothing yet
    run = Passes(model, tok.pad_token_id, "cpu", fault)
    assert math.isfinite(run.norm(examples[:4], "screen"))  # end weights: no fault
    end = {n: p.detach().clone() for n, p in adapter_params(model).items()}
    (c,) = locate_window(w, {e.id: e for e in examples}, run, examples[8], repeats=2)
    assert c["ids"] == ["i01", "i03"] and c["found_by"].startswith("training window (step 0")
    assert {r["condition"]: r["grad_norm"] for r in c["table"]}["reversed order"] == "NaN"
    for n, p in adapter_params(model).items():  # the trained adapter is back
        assert torch.equal(p, end[n])


def test_stage_reports_window_culprits_keeps_the_state_and_probes(tmp_path):
    train = items(16).with_columns(batch_order=pl.int_range(16))  # training order i00..i15
    d = run_dir(tmp_path, train, validation=items(2, start=50), test=items(8, start=60))
    fault = parse_fault("pair:i01,i03;pair:i61,i66")
    s = smoke.run(
        d,
        small(micro_batch=4, grad_accum=2, skip_budget=0.5, probe_batch=8),
        fault=fault,
        generate=False,
    )
    p = s["probe"]
    assert p["culprits"][0] == ["i01", "i03"] and p["found_by"][0].startswith("training window")
    assert ["i61", "i66"] in p["culprits"]  # a test-split pair: only the probe sees it
    assert p["weights"].startswith("before step 0") and p["cost"]["passes"] > 0
    state = torch.load(d / "smoke" / "windows" / "step_0.pt")
    assert set(state) >= {"adapter", "optimizer", "batches", "bad", "step"}


def test_fp32_row_casts_the_model_to_fp32_and_back():
    model, tok, _ = build("", 0, 16, 32)
    base = [p for n, p in model.named_parameters() if not p.requires_grad]
    for p in base:
        p.data = p.data.to(torch.bfloat16)
    saved = [p.detach().clone() for p in base]
    seen = []

    def fault(ids):
        seen.append({p.dtype for p in model.parameters()})
        return False

    with as_fp32(model):
        assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert all(
        p.dtype == torch.bfloat16 and torch.equal(p, q) for p, q in zip(base, saved, strict=True)
    )
    examples, _, _ = preflight(items(2), tok, 256)
    rows = diagnostic_rows(examples, Passes(model, tok.pad_token_id, "cpu", fault))
    assert rows[0]["condition"] == "fp32 weights, no autocast" and seen[0] == {torch.float32}
    assert {torch.bfloat16, torch.float32} == seen[1]  # the next row: back to bf16 base
    assert [r["condition"] for r in rows[2:]] == [
        "attention eager",
        "attention sdpa",
        "attention flash_attention_2",
    ]
