"""The model for smoke-train: a local checkpoint (offline) or one built from a config.

`--model PATH` loads a Hugging Face checkpoint folder with `local_files_only`; `--model
config:NAME` builds a randomly initialised model from a config in PRESETS (no files, no
download), with the byte-level tokenizer; "" is `config:tiny`.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from pipeline.train.data import ByteTokenizer, HFTokenizer

# name -> (architecture, config keywords, what the output says about it)
PRESETS: dict[str, tuple[str, dict[str, Any], str]] = {
    "tiny": (
        "llama",
        dict(
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=4,
            max_position_embeddings=4096,
            tie_word_embeddings=False,
        ),
        "tiny (2 layers, hidden 64, byte-level tokenizer; not a real model)",
    ),
    # Qwen2-0.5B's shapes (494M parameters with its 151,936-row vocabulary), random weights.
    "0.5b": (
        "qwen2",
        dict(
            vocab_size=151936,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=32768,
            rope_theta=1000000.0,
            tie_word_embeddings=True,
        ),
        "0.5b (Qwen2-0.5B shapes from a config, random weights, byte-level tokenizer)",
    ),
}


def preset_name(model: str) -> str | None:
    """The PRESETS key `model` names ("" and "config:tiny" -> "tiny"), or None for a path."""
    if not model:
        return "tiny"
    return model.removeprefix("config:") if model.startswith("config:") else None


def config_model(name: str, seed: int = 0, device: str = "cpu") -> tuple[Any, ByteTokenizer, str]:
    """(model, byte tokenizer, label) for a preset, initialised with `seed` on `device`."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    arch, kw, label = PRESETS[name]
    tok = ByteTokenizer()
    special = dict(
        pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id
    )
    kw = {"vocab_size": tok.vocab_size, **kw, **special}
    torch.manual_seed(seed)
    # the tiny model is built on the CPU so that its weights are the same on every device
    model: Any
    with torch.device(device if name != "tiny" else "cpu"):
        if arch == "llama":
            model = LlamaForCausalLM(LlamaConfig(**kw))
        else:
            model = Qwen2ForCausalLM(Qwen2Config(**kw))
    return model, tok, label


def load_model(path: str, dtype: torch.dtype = torch.float32) -> tuple[Any, HFTokenizer]:
    """A local Hugging Face checkpoint folder; never touches the hub (transformers >= 4.56)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    return model, HFTokenizer(tok)


def add_lora(model: Any, r: int = 16, alpha: int = 32) -> tuple[Any, dict[str, Any]]:
    """LoRA on all linear layers; adapter weights forced to fp32 and counted."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=r, lora_alpha=alpha, target_modules="all-linear", lora_dropout=0.0)
    with warnings.catch_warnings():  # peft reads a name transformers 5 deprecates; not ours
        warnings.filterwarnings("ignore", ".*is_gradient_checkpointing.*", FutureWarning)
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
    """One host read for the whole adapter (a per-tensor check would sync once per tensor)."""
    norms = torch._foreach_norm([p.detach() for p in adapter_params(model).values()])
    return bool(torch.isfinite(torch.stack(norms)).all())


def adapter_state(model: Any) -> dict[str, torch.Tensor]:
    """A copy of the adapter weights, on their device."""
    return {n: p.detach().clone() for n, p in adapter_params(model).items()}


def load_adapter_state(model: Any, state: dict[str, torch.Tensor]) -> None:
    with torch.no_grad():
        for n, p in adapter_params(model).items():
            p.copy_(state[n])


def enable_checkpointing(model: Any) -> None:
    """Activation checkpointing (non-reentrant: frozen inputs need no requires_grad hook)."""
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False


@contextlib.contextmanager
def as_fp32(model: Any) -> Iterator[None]:
    """Every floating parameter and buffer in fp32 for the block, then back to its own dtype.

    bf16 -> fp32 -> bf16 is exact, and the fp32 adapter is never touched, so the model leaves
    the block as it came in.
    """
    tensors = [*model.parameters(), *model.buffers()]
    saved = [(t, t.dtype) for t in tensors if t.is_floating_point() and t.dtype != torch.float32]
    for t, _ in saved:
        t.data = t.data.float()
    try:
        yield
    finally:
        for t, dt in saved:
            t.data = t.data.to(dt)


def build(
    model_path: str,
    seed: int,
    r: int,
    alpha: int,
    device: str = "cpu",
    checkpointing: bool = False,
) -> tuple[Any, Any, dict[str, Any]]:
    """(peft model on `device`, tokenizer, info); base weights bf16 on CUDA, fp32 elsewhere;
    adapter fp32."""
    tok: HFTokenizer | ByteTokenizer
    dtype = torch.bfloat16 if device.startswith("cuda") else torch.float32
    preset = preset_name(model_path)
    if preset is None:
        model, tok = load_model(model_path, dtype)
        name = model_path
    else:
        model, tok, name = config_model(preset, seed, device)
        model = model.to(dtype)
    model.to(device)
    if checkpointing:
        enable_checkpointing(model)
    torch.manual_seed(seed)
    model, info = add_lora(model, r, alpha)
    info["model"] = name
    info["tiny"] = preset == "tiny"
    info["preset"] = preset
    info["base_dtype"] = str(dtype).removeprefix("torch.")
    info["base_parameters"] = int(sum(p.numel() for p in model.parameters()) - info["parameters"])
    info["template"] = getattr(tok, "template", "project")
    info["grad_checkpointing"] = checkpointing
    return model, tok, info
