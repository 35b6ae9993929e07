"""Weight-only int8/int4 generation models (`--precision int8|int4` on a Hugging Face folder).

The projections (q, k, v, o, gate, up, down and the output head, tied to the embedding here)
store integer weights, int4 in groups of 128 along the reduction; the embedding gather, the
norms, attention and the KV cache stay in the model's float dtype (f32 on CPUs). The reference is
transformers with each projection's weight replaced by the very values the build stores
(precision/quantization.fake_quantize): what is left is the CPU form's dynamic int8 rounding
of the activations (about 1%), while the float model is 20% away at int4 on these random
weights, so a build that did not quantize, or quantized another way, fails. A `--weights
reference` build quantizes the folder's tensors at load and must give the copied build's numbers.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import zipfile

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import inferx_compiler  # noqa: E402
from helpers import rel_l2  # noqa: E402
from llm_models import save_tiny  # noqa: E402
from inferx_compiler.cli.common import python_entry  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402
from inferx_compiler.precision.quantization import WeightScheme, fake_quantize  # noqa: E402

CHUNK, BATCH, MAX_SEQ, GROUP = 8, 2, 32, 128
VOCAB = 320
PROJECTIONS = ("q", "k", "v", "o", "gate", "up", "down")  # the decoder's weight names


def _config():
    from transformers import LlamaConfig

    # widths that int4 groups of 128 divide (hidden 128, intermediate 256); the head tied to the
    # embedding, which the gather keeps reading in float
    return LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                       bos_token_id=1, eos_token_id=2, tie_word_embeddings=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama_q")
    save_tiny(path, "LlamaForCausalLM", _config())
    return path


def _build(folder, precision: str, *extra: str):
    out = folder.parent / f"{folder.name}_{precision}{'_ref' if extra else ''}.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--precision", precision, "--prefill-lengths", str(CHUNK),
                         "--batch-sizes", str(BATCH), "--max-seq", str(MAX_SEQ), "--kv-block-size", "4",
                         "--greedy-only", "--with-logits", "-q", *extra, "-o", str(out)]) == 0
    return out


@pytest.fixture(scope="module", params=["int8", "int4"])
def build(request, folder):
    return request.param, _build(folder, request.param)


def _stored_keys(artifact) -> dict:
    """{parameter key: bytes} of the artifact's weights.irpa."""
    import iree.runtime as rt

    with zipfile.ZipFile(artifact) as z, tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "weights.irpa")
        with open(path, "wb") as f:
            f.write(z.read("weights.irpa"))
        index = rt.ParameterIndex()
        index.load(path)
        return {key: entry.length for key, entry in index.items()}


def _uses_group_kernel(artifact) -> bool:
    """Whether the build's int4 sums run per group (the AVX-512 VNNI u8 x s4 kernel) rather
    than on weights requantized to int8 per column at load (every other CPU)."""
    with zipfile.ZipFile(artifact) as z:
        report = json.loads(z.read("report.json"))
    return any("u8 x s4" in d["decision"] for d in report["decisions"])


def _fake_quantized_reference(folder, precision: str, int4_groups: bool):
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone())  # untie: the gather reads float
    scheme = WeightScheme("int8", 0, True) if precision == "int8" else WeightScheme("int4", GROUP, True)
    with torch.no_grad():
        for name, module in model.named_modules():
            if isinstance(module, torch.nn.Linear):
                module.weight.copy_(torch.from_numpy(fake_quantize(module.weight.numpy(), scheme, int4_groups)))
    return model


def _prompts():
    rng = np.random.default_rng(5)
    return [list(rng.integers(3, VOCAB, 6)), list(rng.integers(3, VOCAB, 8))]


def _logits_run(sess, prompts, follow):
    """Prefill logits at each prompt's last token, then 3 decode steps teacher-forced with
    `follow`: [prefill, step 0, step 1, step 2] each [B, vocab]."""
    lens = np.array([len(p) for p in prompts])
    table = sess.block_table([[1 + b + BATCH * j for j in range(sess.table_width)] for b in range(BATCH)], BATCH)
    tokens = np.zeros((BATCH, CHUNK), np.int64)
    for b, p in enumerate(prompts):
        tokens[b, :len(p)] = p
    out = [sess.prefill_logits(tokens, np.zeros(BATCH, np.int64), lens, table)]
    for step in range(3):
        out.append(sess.decode_logits(np.array([f[step] for f in follow]), lens + step, table))
    return out


@torch.no_grad()
def _reference_run(model, prompts, follow):
    full = [model(torch.tensor([p + f])).logits[0].numpy() for p, f in zip(prompts, follow)]
    return [np.stack([full[b][len(prompts[b]) - 1 + i] for b in range(BATCH)]) for i in range(4)]


def test_the_projections_are_stored_as_integers(build, folder):
    precision, artifact = build
    keys = _stored_keys(artifact)
    tag = "int8t" if precision == "int8" else f"int4g{GROUP}t"
    integer = {k: n for k, n in keys.items() if k.endswith(f"#q:{tag}")}
    # every projection of both layers, and the output head (tied: derived from the embedding)
    assert set(integer) == {f"layers.{layer}.{p}#q:{tag}" for layer in range(2) for p in PROJECTIONS} | {
        f"embed#q:{tag}"}, sorted(keys)
    assert "layers.0.up" not in keys  # the float projection weights are not stored
    assert "embed" in keys  # the gather still reads the float embedding
    k, n = 128, 256  # up_proj: 128 in, 256 out
    assert integer["layers.0.up#q:" + tag] == (k * n if precision == "int8" else k * n // 2)
    with zipfile.ZipFile(artifact) as z:
        generation = json.loads(z.read("manifest.json"))["generation"]
    assert generation["quantization"] == {"kind": precision, "group_size": GROUP if precision == "int4" else 0}
    assert generation["cache"]["dtype"] == "float32"


def test_logits_match_the_fake_quantized_reference(build, folder):
    """Prefill and decode logits, ragged batch of 2, against transformers with the stored weights."""
    precision, artifact = build
    prompts = _prompts()
    follow = [list(np.random.default_rng(b).integers(3, VOCAB, 3)) for b in range(BATCH)]
    ours = _logits_run(inferx_compiler.load(str(artifact)), prompts, follow)
    fake = _reference_run(_fake_quantized_reference(folder, precision, _uses_group_kernel(artifact)), prompts, follow)
    exact = _reference_run(transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(),
                           prompts, follow)
    for i, (o, f, e) in enumerate(zip(ours, fake, exact)):
        for b in range(BATCH):
            err, err_float = rel_l2(o[b], f[b]), rel_l2(o[b], e[b])
            assert err < 3e-2, (precision, i, b, err)  # the activations' int8 rounding only
            if precision == "int4":  # and the int4 weights are what makes the float model differ
                assert err < err_float / 4, (i, b, err, err_float)


def test_a_referenced_folder_is_quantized_at_load(folder):
    """--weights reference at int4: the artifact stores no weights, lists the integer ones it
    derives, and loading the folder gives the copied build's logits exactly."""
    copied, referenced = _build(folder, "int4"), _build(folder, "int4", "--weights", "reference")
    with zipfile.ZipFile(referenced) as z:
        assert "weights.irpa" not in z.namelist()
        record = json.loads(z.read("manifest.json"))["generation"]["weights"]
    assert "model.layers.0.mlp.up_proj.weight#q:int4g128t" in record["derived"]
    prompts = _prompts()
    follow = [[5, 6, 7], [8, 9, 10]]
    a = _logits_run(inferx_compiler.load(str(copied)), prompts, follow)
    b = _logits_run(inferx_compiler.load(str(referenced), weights=str(folder)), prompts, follow)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def test_one_source_quantized_in_two_schemes_at_load(tmp_path):
    """A CUDA build stores a projection twice: [K, N] groups for the prefill's matmul and [N, K]
    ('n', reduction innermost) for the decode step's matrix-vector kernel. Loading derives both
    from the one tensor of the folder (this failed on the H100: schemes were sorted as values)."""
    from safetensors.numpy import save_file

    from inferx_compiler.runtime.parameters import derived_weights

    weight = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
    save_file({"w": weight}, str(tmp_path / "model.safetensors"))
    schemes = [WeightScheme("int4", 128, f16_scales=True), WeightScheme("int4", 128, f16_scales=True, k_inner=True)]
    keys = [k for s in schemes for k in (s.weight_key("w"), s.scale_key("w"))]
    derived = derived_weights(keys, [str(tmp_path / "model.safetensors")])
    assert sorted(derived) == sorted(keys)
    for s in schemes:
        assert derived[s.weight_key("w")].dtype.itemsize == 1 and derived[s.scale_key("w")].dtype == np.float16
    assert not np.array_equal(derived[schemes[0].weight_key("w")], derived[schemes[1].weight_key("w")])  # two layouts


# ------------------------------------------------------------------------------ int8 KV cache
@torch.no_grad()
def test_an_int8_kv_cache_matches_its_torch_definition(folder):
    """--kv-cache-dtype int8: the cache holds int8 rows with their scale's exponent (head_dim + 1)
    and takes a quarter of the f32 cache's bytes. Prefill and decode logits equal our decoder run
    eagerly in torch over an int8 cache (the definition: decoder.quantize_rows), to f32 rounding,
    while the float-cache model is measurably (and only slightly) away: the rounding is real."""
    from inferx_compiler.frontend.llm.decoder import LlamaDecoder, new_cache
    from inferx_compiler.frontend.llm.source import open_source

    artifact = folder.parent / "llama_q_kv8.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--kv-cache-dtype", "int8", "--prefill-lengths", str(CHUNK),
                         "--batch-sizes", str(BATCH), "--max-seq", str(MAX_SEQ), "--kv-block-size", "4",
                         "--greedy-only", "--with-logits", "-q", "-o", str(artifact)]) == 0
    with zipfile.ZipFile(artifact) as z:
        cache = json.loads(z.read("manifest.json"))["generation"]["cache"]
    assert cache["dtype"] == "int8" and cache["row"] == 33  # head_dim 32 + the exponent
    sess = inferx_compiler.load(str(artifact))
    assert sess.cache().to_host().dtype == np.int8
    source = open_source(str(folder))
    model = LlamaDecoder.from_state(source.config, source.read_weights())
    torch_cache = new_cache(source.config, cache["blocks"], cache["block_size"], torch.int8)
    assert tuple(torch_cache.shape) == sess.cache_shape()
    prompts = _prompts()
    follow = [list(np.random.default_rng(9 + b).integers(3, VOCAB, 3)) for b in range(BATCH)]
    ours = _logits_run(sess, prompts, follow)
    lens = np.array([len(p) for p in prompts])
    table = torch.from_numpy(sess.block_table([[1 + b + BATCH * j for j in range(sess.table_width)]
                                               for b in range(BATCH)], BATCH))
    tokens = torch.zeros(BATCH, CHUNK, dtype=torch.int64)
    for b, p in enumerate(prompts):
        tokens[b, :len(p)] = torch.tensor(p)
    start, lens_t = torch.zeros(BATCH, dtype=torch.int64), torch.from_numpy(lens)
    theirs = [model.step(tokens, start, lens_t, table, torch_cache).numpy()]
    for step in range(3):
        step_tokens = torch.tensor([[f[step]] for f in follow])
        theirs.append(model.step(step_tokens, lens_t + step, torch.ones(BATCH, dtype=torch.int64), table,
                                 torch_cache).numpy())
    exact = _reference_run(transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval(),
                           prompts, follow)
    for i in range(4):
        for b in range(BATCH):
            assert rel_l2(ours[i][b], theirs[i][b]) < 1e-4, (i, b)
            if i > 0:  # decode steps read the int8 cache (a prefill chunk attends to its own rows)
                assert 1e-4 < rel_l2(ours[i][b], exact[i][b]) < 3e-2, (i, b)


def test_an_fp8_or_mismatched_cache_dtype_is_refused(tmp_path, folder):
    for kv, precision, message in (("fp8", "fp32", "does not lower float8"),
                                   ("fp16", "fp32", "the cache is in the model's dtype")):
        proc = subprocess.run(python_entry("inferx_compiler.cli.compile") + [
            str(folder), "--target", "cpu", "--precision", precision, "--kv-cache-dtype", kv, "-o",
            str(tmp_path / "m.ixa")], capture_output=True, text=True)
        assert proc.returncode != 0 and message in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr and not (tmp_path / "m.ixa").exists()


# ------------------------------------------------------------------------------ f16 decode on CUDA
def test_cuda_fp16_decode_projections_run_the_few_row_kernel(tmp_path, folder):
    """A float generation model for a GPU: every projection of a decode step (and the output
    head) reads its stored f16 weight through our few-row kernel (inferx-f16-matvec) (so do the
    8 rows of this build's prefill chunk: fewer than 16); `--disable-pass` restores
    IREE's matrix-vector code. (Numbers: the kernel's f16 form in test_dequant_kernel's
    interpreter tests; no GPU here.)"""
    pytest.importorskip("triton")

    def build(*extra):
        out = tmp_path / f"h100{len(extra)}.ixa"
        assert compile_main([str(folder), "--target", "h100", "--precision", "fp16", "--prefill-lengths", str(CHUNK),
                             "--batch-sizes", "1", "--max-seq", str(MAX_SEQ), "--greedy-only", "-q", *extra,
                             "-o", str(out)]) == 0
        with zipfile.ZipFile(out) as z:
            return json.loads(z.read("report.json"))

    report = build()
    taken = [d for d in report["decisions"] if d["pass"] == "inferx-f16-matvec" and d["decision"].startswith("f16:")]
    layers = _config().num_hidden_layers
    assert len([d for d in taken if d["function"] == "decode_b1"]) == layers * len(PROJECTIONS) + 1  # and the head
    assert any(d["config_source"] == "rule (inferx-f16-matvec)" for d in report["dispatches"])
    off = build("--disable-pass", "inferx-f16-matvec")
    assert not any(d["pass"] == "inferx-f16-matvec" for d in off["decisions"])
    assert not any(d["config_source"] == "rule (inferx-f16-matvec)" for d in off["dispatches"])
