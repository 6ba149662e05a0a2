"""The model for smoke-train: a local checkpoint (offline) or a tiny one built from a config."""

from __future__ import annotations

from typing import Any

import torch

from pipeline.train.data import ByteTokenizer, HFTokenizer


def tiny_model(seed: int = 0) -> tuple[Any, ByteTokenizer]:
    """A 2-layer, 64-wide Llama with a byte-level vocabulary: runs anywhere, downloads nothing."""
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = ByteTokenizer()
    cfg = LlamaConfig(
        vocab_size=tok.vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=4096,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg), tok


def load_model(path: str, dtype: torch.dtype = torch.float32) -> tuple[Any, HFTokenizer]:
    """A local Hugging Face checkpoint folder; never touches the hub."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    return model, HFTokenizer(tok)


def add_lora(model: Any, r: int = 16, alpha: int = 32) -> tuple[Any, dict[str, Any]]:
    """LoRA on all linear layers; adapter weights forced to fp32 and counted."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", lora_dropout=0.0)
    model = get_peft_model(model, cfg)
    params = adapter_params(model)
    for p in params.values():
        p.data = p.data.float()
    info = {
        "tensors": len(params),
        "dtypes": sorted({str(p.dtype).removeprefix("torch.") for p in params.values()}),
        "parameters": int(sum(p.numel() for p in params.values())),
        "r": r,
        "alpha": alpha,
    }
    return model, info


def adapter_params(model: Any) -> dict[str, torch.nn.Parameter]:
    return {n: p for n, p in model.named_parameters() if p.requires_grad}


def adapter_finite(model: Any) -> bool:
    return all(bool(torch.isfinite(p).all()) for p in adapter_params(model).values())


def build(
    model_path: str, seed: int, r: int, alpha: int, device: str = "cpu"
) -> tuple[Any, Any, dict[str, Any]]:
    """(peft model, tokenizer, info); base weights bf16 on CUDA, fp32 elsewhere; adapter fp32."""
    tok: HFTokenizer | ByteTokenizer
    if model_path:
        dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
        model, tok = load_model(model_path, dtype)
        name = model_path
    else:
        model, tok = tiny_model(seed)
        name = "tiny (2 layers, hidden 64, byte-level tokenizer; not a real model)"
    torch.manual_seed(seed)
    model, info = add_lora(model, r, alpha)
    info["model"] = name
    info["tiny"] = not model_path
    return model, tok, info
