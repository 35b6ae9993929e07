"""Generation models end to end against Hugging Face transformers (the reference users run).

Tiny random models of each family member (built here with transformers' configs and
save_pretrained: no download): Llama with Llama-3 RoPE scaling and untied embeddings, Mistral with
a sliding window shorter than the text, Qwen2 with q/k/v bias and tied embeddings. Each is
compiled into prefill (chunks of 8) and decode entry points at batch 2 and compared with
transformers at prefill and at several decode steps, with ragged prompts (5 and 13 tokens: the
second spans two chunks), then greedy generation must give the same tokens. Also: the KV cache is
written in place (the dispatch report and the device buffer), seeded sampling is reproducible,
and bad input is refused with clear errors.
"""

from __future__ import annotations

import json
import subprocess
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import inferx_compiler  # noqa: E402
from helpers import rel_l2  # noqa: E402
from llm_models import family_configs, save_tiny  # noqa: E402
from inferx_compiler.cli.common import python_entry  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402
from inferx_compiler.errors import InputValidationError  # noqa: E402
from inferx_compiler.runtime.generation import Sampling  # noqa: E402

CHUNK, BATCH, MAX_SEQ = 8, 2, 40
# f32 everywhere, sums in another order: ~1e-6; a wrong position, mask or RoPE is off by O(1)
TOLERANCE = 1e-4


@pytest.fixture(scope="module", params=sorted(family_configs()))
def family(request, tmp_path_factory):
    """(name, transformers model, artifact path) for each family member."""
    folder = tmp_path_factory.mktemp(request.param)
    class_name, config = family_configs()[request.param]
    reference = save_tiny(folder, class_name, config)
    out = folder / "model.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--prefill-lengths", str(CHUNK), "--batch-sizes", str(BATCH),
                         "--max-seq", str(MAX_SEQ), "--kv-block-size", "4", "--with-logits", "-q", "-o", str(out)]) == 0
    return request.param, reference, out


def _prompts():
    rng = np.random.default_rng(3)
    return [list(rng.integers(3, 320, 5)), list(rng.integers(3, 320, 13))]


@torch.no_grad()
def _reference_logits(model, ids: list[int]) -> np.ndarray:
    return model(torch.tensor([ids])).logits[0].numpy()


def test_prefill_and_decode_logits_match_transformers(family):
    """Ragged batch of 2: the prompts in chunks of 8 (logits at each one's last token), then 4 decode
    steps teacher-forced with the reference's next tokens."""
    name, reference, artifact = family
    sess = inferx_compiler.load(str(artifact))
    prompts = _prompts()
    full = [p + list(np.random.default_rng(b).integers(3, 320, 4)) for b, p in enumerate(prompts)]
    refs = [_reference_logits(reference, ids) for ids in full]
    lens = np.array([len(p) for p in prompts])
    # sequence b in blocks placed apart and out of order: the table, not the layout, says where
    width = sess.table_width
    table = np.array([[1 + b + BATCH * j for j in range(width)][::-1] for b in range(BATCH)], np.int64)
    done = np.zeros(BATCH, np.int64)
    last = np.zeros((BATCH, 320), np.float32)
    while (done < lens).any():  # the prompts through the logits prefill entry, chunk by chunk
        take = np.minimum(lens - done, CHUNK)
        tokens = np.zeros((BATCH, CHUNK), np.int64)
        for b in range(BATCH):
            tokens[b, :take[b]] = prompts[b][done[b]:done[b] + take[b]]
        logits = sess.prefill_logits(tokens, done, take, table)
        last = np.where((take > 0)[:, None], logits, last)
        done += take
    for b in range(BATCH):
        assert rel_l2(last[b], refs[b][lens[b] - 1]) < TOLERANCE, (name, "prefill", b)
    for step in range(4):
        tokens = np.array([full[b][lens[b] + step] for b in range(BATCH)])
        logits = sess.decode_logits(tokens, lens + step, table)
        for b in range(BATCH):
            assert rel_l2(logits[b], refs[b][lens[b] + step]) < TOLERANCE, (name, "decode", step, b)


@torch.no_grad()
def test_greedy_tokens_equal_transformers(family):
    name, reference, artifact = family
    sess = inferx_compiler.load(str(artifact))
    prompts = _prompts()
    steps = list(sess.generate_ids(prompts, 12, stop_ids=()))
    for b, prompt in enumerate(prompts):
        ours = [s[b] for s in steps]
        out = reference.generate(torch.tensor([prompt]), max_new_tokens=12, do_sample=False, eos_token_id=None,
                                 attention_mask=torch.ones(1, len(prompt), dtype=torch.int64), pad_token_id=0)
        assert ours == out[0, len(prompt):].tolist(), (name, b)


def test_the_cache_is_written_in_place(family):
    """The report: each decode step imports the caller's cache buffer to write it in place and
    copies no slice of it (only a few small values); at run time the session's own device buffer
    holds the new rows, in the blocks the pool gave each sequence and nowhere else."""
    _, _, artifact = family
    with zipfile.ZipFile(artifact) as z:
        functions = json.loads(z.read("report.json"))["functions"]
        manifest = json.loads(z.read("manifest.json"))
    config, geometry = manifest["generation"]["config"], manifest["generation"]["cache"]
    cache_bytes = 4 * config["layers"] * 2 * geometry["blocks"] * config["kv_heads"] * geometry["block_size"] \
        * config["head_dim"]
    one_layer = cache_bytes // (config["layers"] * 2)  # one layer's keys (or values)
    for name in (f"decode_b{BATCH}", f"decode_b{BATCH}_sample"):
        step = functions[name]
        assert step["in_place_bytes"] == cache_bytes, step
        assert step["largest_copy_bytes"] < one_layer // 4 and step["copy_bytes"] < one_layer, step
        assert step["dispatches"] > 0
    sess = inferx_compiler.load(str(artifact))
    list(sess.generate_ids(_prompts(), 3, stop_ids=()))
    bs = geometry["block_size"]
    written = np.abs(sess.cache().to_host()).sum(axis=(0, 1, 3, 5)) > 0  # [block, row]
    # blocks come from the pool in order: sequence 0 (5 + 3 positions) first, then sequence 1 (13 + 3)
    first, second = -(-(5 + 3) // bs), -(-(13 + 3) // bs)
    positions = written[1:1 + first].reshape(-1), written[1 + first:1 + first + second].reshape(-1)
    assert positions[0][:5 + 2].all() and positions[1][:13 + 2].all()  # prompts and the decoded tokens
    assert not positions[0][5 + 2:].any() and not positions[1][13 + 2:].any()  # nothing past them
    assert not written[1 + first + second:].any()  # no block outside theirs (0 is the scratch block)


def test_seeded_sampling_is_reproducible_and_follows_top_k(family):
    name, reference, artifact = family
    sess = inferx_compiler.load(str(artifact))
    prompts = _prompts()

    def sample(**kw):
        return list(sess.generate_ids(prompts, 6, [Sampling(**kw)] * BATCH, stop_ids=()))

    hot = dict(temperature=1.5, top_k=0, top_p=1.0)
    assert sample(seed=7, **hot) == sample(seed=7, **hot)
    assert sample(seed=7, **hot) != sample(seed=8, **hot)
    greedy = list(sess.generate_ids(prompts, 6, stop_ids=()))
    assert sample(temperature=1.0, top_k=1, seed=3) == greedy  # top-1 is the argmax
    # a draw with top_k=5 is among the 5 best tokens of the reference's next-token logits
    first = sample(temperature=2.0, top_k=5, seed=11)[0]
    for b, prompt in enumerate(prompts):
        best5 = np.argsort(_reference_logits(reference, prompt)[-1])[-5:]
        assert first[b] in best5, (name, b)


def test_text_streams_and_the_command_prints_rates(family, tmp_path):
    name, _, artifact = family
    if name != "llama3_rope_untied":
        pytest.skip("one family is enough for the command")
    sess = inferx_compiler.load(str(artifact))
    pieces = list(sess.generate("hello", 6, stop_ids=()))
    assert "".join(pieces) == sess.tokenizer.decode(sess.last_token_ids, skip_special_tokens=True)
    assert len(sess.last_token_ids) == 6 and sess.last_stats.new_tokens == 6
    proc = subprocess.run(python_entry("inferx_compiler.cli.generate") + [
        str(artifact), "--prompt", "hello", "--max-new-tokens", "6", "--ids"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [str(t) for t in sess.last_token_ids]  # greedy: the same tokens
    assert "time to first token" in proc.stderr and "tokens/s" in proc.stderr


def test_an_over_long_prompt_is_refused(family):
    _, _, artifact = family
    sess = inferx_compiler.load(str(artifact))
    with pytest.raises(InputValidationError, match=f"does not fit.*{MAX_SEQ} positions"):
        list(sess.generate_ids([list(range(3, 4 + MAX_SEQ))], 2))
    with pytest.raises(InputValidationError, match="compiled for batches"):
        list(sess.generate_ids([[5]] * (BATCH + 1), 2))


def test_unsupported_models_are_refused_naming_the_field(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["GPT2LMHeadModel"], "vocab_size": 10}))
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile") + [str(folder), "--target", "cpu", "-o",
                                                                           str(tmp_path / "m.ixa")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "architectures=['GPT2LMHeadModel'] is not supported" in proc.stderr
    assert "Traceback" not in proc.stderr
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 7)
    proc = subprocess.run(python_entry("inferx_compiler.cli.compile") + [str(bad), "--target", "cpu", "-o",
                                                                           str(tmp_path / "m.ixa")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "broken.gguf: not a readable GGUF file" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.fixture(scope="module")
def half_reference_build(tmp_path_factory):
    """A Llama folder saved in float16, compiled --precision fp16 --weights reference."""
    folder = tmp_path_factory.mktemp("llama_f16")
    class_name, config = family_configs()["llama3_rope_untied"]
    save_tiny(folder, class_name, config)
    getattr(transformers, class_name).from_pretrained(folder, dtype=torch.float16).save_pretrained(folder)
    out = folder.parent / "llama_f16.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--precision", "fp16", "--weights", "reference",
                         "--prefill-lengths", str(CHUNK), "--batch-sizes", "1", "--max-seq", str(MAX_SEQ),
                         "--with-logits", "-q", "-o", str(out)]) == 0
    return folder, out


def test_fp16_weights_referenced_in_the_model_folder(half_reference_build, tmp_path):
    """The artifact holds no weights (the manifest names the safetensors file and its sha256, and
    each tensor's dtype and shape); loading needs the folder and checks it; fp16 logits are within
    fp16 rounding of transformers' f32 run of the same fp16 weights, and greedy tokens agree."""
    folder, artifact = half_reference_build
    with zipfile.ZipFile(artifact) as z:
        manifest = json.loads(z.read("manifest.json"))
        assert "weights.irpa" not in z.namelist()
    record = manifest["generation"]["weights"]
    assert record["mode"] == "reference" and record["files"][0]["name"] == "model.safetensors"
    assert record["tensors"]["model.layers.0.mlp.up_proj.weight"] == {"dtype": "float16", "shape": [96, 64]}
    assert manifest["generation"]["cache"]["dtype"] == "float16"
    with pytest.raises(InputValidationError, match="give the folder"):
        inferx_compiler.load(str(artifact))
    sess = inferx_compiler.load(str(artifact), weights=str(folder))
    reference = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    prompt = _prompts()[1]
    tokens = np.zeros((1, CHUNK), np.int64)
    tokens[0] = prompt[:CHUNK]
    table = sess.block_table([list(range(1, 1 + sess.table_width))], 1)
    logits = sess.prefill_logits(tokens, np.array([0]), np.array([CHUNK]), table)
    err = rel_l2(logits[0], _reference_logits(reference, prompt[:CHUNK])[-1])
    assert 1e-5 < err < 2e-2, err  # fp16 arithmetic (an f32 build of these weights: ~1e-7), and right
    steps = list(sess.generate_ids([prompt], 8, stop_ids=()))
    out = reference.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False, eos_token_id=None,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.int64), pad_token_id=0)
    assert [s[0] for s in steps] == out[0, len(prompt):].tolist()


def test_a_referenced_folder_that_differs_is_refused(half_reference_build, tmp_path):
    folder, artifact = half_reference_build
    other = tmp_path / "other"
    class_name, config = family_configs()["llama3_rope_untied"]
    save_tiny(other, class_name, config)  # the same names, in float32
    with pytest.raises(InputValidationError, match=r"tensor .* is \('float32'.*reads float16"):
        inferx_compiler.load(str(artifact), weights=str(other))


def test_a_greedy_only_build_generates_and_refuses_sampling(tmp_path):
    """--greedy-only: no sampler compiled (prefill returns the argmax); greedy tokens still equal
    transformers', a temperature is refused naming the build."""
    folder = tmp_path / "llama"
    class_name, config = family_configs()["llama3_rope_untied"]
    reference = save_tiny(folder, class_name, config)
    out = tmp_path / "greedy.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--greedy-only", "--prefill-lengths", str(CHUNK),
                         "--batch-sizes", "1", "--max-seq", str(MAX_SEQ), "-q", "-o", str(out)]) == 0
    with zipfile.ZipFile(out) as z:
        entries = json.loads(z.read("manifest.json"))["generation"]["entries"]
    assert sorted((e["name"], e["output"]) for e in entries) == [("decode_b1", "greedy"),
                                                                 (f"prefill_b1_t{CHUNK}", "greedy")]
    sess = inferx_compiler.load(str(out))
    prompt = _prompts()[1]
    steps = list(sess.generate_ids([prompt], 6, stop_ids=()))
    ref = reference.generate(torch.tensor([prompt]), max_new_tokens=6, do_sample=False, eos_token_id=None,
                             attention_mask=torch.ones(1, len(prompt), dtype=torch.int64), pad_token_id=0)
    assert [s[0] for s in steps] == ref[0, len(prompt):].tolist()
    with pytest.raises(InputValidationError, match="compiled --greedy-only"):
        list(sess.generate_ids([prompt], 2, Sampling(temperature=0.8, seed=1)))
