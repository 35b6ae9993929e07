"""Tiny random generation models for the tests, built with transformers' own configs and
save_pretrained (no download), with a one-character-a-token tokenizer."""

from __future__ import annotations

import torch

COMMON = dict(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
              bos_token_id=1, eos_token_id=2)


def family_configs():
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    return {
        "llama3_rope_untied": ("LlamaForCausalLM", LlamaConfig(
            **COMMON, tie_word_embeddings=False, rope_theta=500000.0,
            rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 16})),
        "mistral_window_6": ("MistralForCausalLM", MistralConfig(**COMMON, tie_word_embeddings=False,
                                                                  sliding_window=6, head_dim=16)),
        "qwen2_bias_tied": ("Qwen2ForCausalLM", Qwen2Config(**COMMON, tie_word_embeddings=True)),
    }


def save_tiny(folder, class_name: str, config, seed: int = 0):
    """Random weights (biases and norm scales too, so that they count) and a character tokenizer."""
    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers

    torch.manual_seed(seed)
    model = getattr(transformers, class_name)(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias") or "norm" in name:
                p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "norm" in name else 0.0))
    model.save_pretrained(folder)
    vocab = {(chr(i) if i >= 64 else f"<{i}>"): i for i in range(config.vocab_size)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<0>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tokenizer.save(str(folder / "tokenizer.json"))
    return model
