"""The transformers zoo (tools/corpus/transformers_zoo.py): models exported from Hugging Face
transformers by both torch.onnx routes compile with no flags and match onnxruntime at two batch
sizes and two lengths. CI runs a sample; the whole zoo runs under the slow marker."""

from __future__ import annotations

import dataclasses
import json
import os
import sys

import pytest

pytest.importorskip("transformers")
pytest.importorskip("onnxscript")  # the dynamo route writes ONNX through it

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "corpus"))
import transformers_zoo as zoo  # noqa: E402


@pytest.mark.parametrize("name,route", [
    ("bert", "torchscript"),  # position ids sliced from a buffer, expanded to the batch (onnx_shapes)
    # window counts read from a shape whose batch is dynamic (partial fold); test_frontend.py covers the rewrite
    pytest.param("swin", "torchscript", marks=pytest.mark.slow),
    # Conv1D's view(-1, 64) and the heads merged: Reshapes of two dynamic dims; test_frontend.py covers the rewrite
    pytest.param("gpt2", "dynamo", marks=pytest.mark.slow),
    ("llama", "dynamo"),  # grouped-query attention, RoPE, causal + padding mask
])
def test_sample_compiles_with_no_flags_and_matches_onnxruntime(name, route, tmp_path):
    result = zoo.run_one(zoo.by_name()[name], "small", route, "cpu", tmp_path)
    assert result.stage == "match", dataclasses.asdict(result)
    model = zoo.by_name()[name]
    assert [c[:2] for c in result.cases] == [[b, n] for b in (1, 3) for n in model.lengths["small"]]
    assert len(result.cases) == (4 if model.family in ("text-encoder", "decoder") else 2)
    assert result.worst_rel_l2 <= zoo.TOLERANCE


def test_default_size_keeps_the_width_and_cuts_layers_only_where_too_large():
    llama = zoo.by_name()["llama"].make_config("default")
    assert (llama.hidden_size, llama.num_attention_heads, llama.vocab_size) == (4096, 32, 32000)
    assert 1 <= llama.num_hidden_layers < 32
    assert zoo.size_label(zoo.by_name()["llama"], "default").startswith("default width, ")
    bert = zoo.by_name()["bert"].make_config("default")
    assert (bert.hidden_size, bert.num_hidden_layers) == (768, 12)
    assert zoo.size_label(zoo.by_name()["bert"], "default") == "default"


def test_unknown_model_is_refused(capsys):
    with pytest.raises(SystemExit) as exit_info:
        zoo.main(["run", "--models", "bert,gpt5"])
    assert exit_info.value.code == 2
    assert "unknown model(s) gpt5" in capsys.readouterr().err


@pytest.mark.slow
def test_whole_small_zoo_matches(tmp_path):
    assert zoo.main(["run", "--sizes", "small", "--out", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(results) == 2 * len(zoo.ZOO)
    failed = [(r["model"], r["route"], r["stage"], r["error_class"]) for r in results if r["stage"] != "match"]
    assert not failed
