"""smoke-train: run every curated item through a LoRA loop and explain any non-finite step."""
