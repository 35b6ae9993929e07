"""inferx-serve --model: the OpenAI-compatible and KServe generate endpoints over the engine.

The stock `openai` client (completions and chat, streamed and not) must work unchanged and give
the tokens `generate` gives alone; 200 concurrent streamed requests with different prompts,
lengths and seeds, some of them dropped by their client mid-stream, must each equal the same
request run alone, and every KV block must be free afterwards (the metrics gauge reads 0); bad
input answers OpenAI's error JSON with a 4xx status on a connection that keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import re
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

import inferx_compiler  # noqa: E402
from inferx_compiler.cli.compile import main as compile_main  # noqa: E402
from inferx_compiler.runtime.generation import Sampling  # noqa: E402
from inferx_compiler.runtime.llm_models import GenerationModels  # noqa: E402
from inferx_compiler.runtime.repository import ModelRepository  # noqa: E402
from inferx_compiler.runtime.server import InferenceServer  # noqa: E402
from llm_models import family_configs, save_tiny  # noqa: E402

MAX_SEQ = 64
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    folder = tmp_path_factory.mktemp("served")
    class_name, config = family_configs()["qwen2_bias_tied"]
    save_tiny(folder, class_name, config)
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}))
    out = folder / "tiny.ixa"
    assert compile_main([str(folder), "--target", "cpu", "--prefill-lengths", "8,32", "--batch-sizes", "1,4,8",
                         "--max-seq", str(MAX_SEQ), "--kv-block-size", "8", "-q", "-o", str(out)]) == 0
    return str(out)


@pytest.fixture(scope="module")
def server(artifact):
    models = GenerationModels.load([artifact], max_batch=8)
    srv = InferenceServer(ModelRepository([]), port=0, generation=models).start()
    yield srv
    srv.shutdown()


@pytest.fixture(scope="module")
def alone(artifact):
    sess = inferx_compiler.load(artifact)

    def run(prompt, max_tokens, temperature=0.0, top_p=1.0, seed=0) -> str:
        ids = [s[0] for s in sess.generate_ids([prompt], max_tokens, Sampling(temperature, 0, top_p, seed),
                                                stop_ids=())]
        ids = ids[:next((i + 1 for i, t in enumerate(ids) if t in sess.eos_ids), len(ids))]
        return sess.tokenizer.decode(ids, skip_special_tokens=True)

    run.session = sess
    return run


def _client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def test_the_openai_client_completes_and_streams(server, alone):
    client = _client(server)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    prompt = "Hello world"
    out = client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0)
    assert out.choices[0].text == alone(prompt, 12)
    assert out.usage.prompt_tokens == len(alone.session.encode(prompt)) and out.usage.completion_tokens >= 1
    pieces = list(client.completions.create(model="tiny", prompt=prompt, max_tokens=12, temperature=0, stream=True,
                                            stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in pieces if c.choices) == alone(prompt, 12)
    assert pieces[-1].usage.completion_tokens == out.usage.completion_tokens
    sampled = client.completions.create(model="tiny", prompt=prompt, max_tokens=10, temperature=0.9, top_p=0.8,
                                        seed=1234)
    assert sampled.choices[0].text == alone(prompt, 10, 0.9, 0.8, 1234)


def test_the_openai_client_chats_with_the_models_template(server, alone):
    client = _client(server)
    messages = [{"role": "user", "content": "Hi there"}]
    prompt = "<user>Hi there<assistant>"
    out = client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, temperature=0)
    assert out.choices[0].message.role == "assistant" and out.choices[0].message.content == alone(prompt, 10)
    stream = client.chat.completions.create(model="tiny", messages=messages, max_tokens=10, temperature=0,
                                            stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == alone(prompt, 10)


def test_stop_strings_and_several_choices(server, alone):
    client = _client(server)
    full = alone("abc", 16)
    stop = full[4:6]
    out = client.completions.create(model="tiny", prompt="abc", max_tokens=16, temperature=0, stop=[stop])
    assert out.choices[0].text == full[:full.find(stop)] and out.choices[0].finish_reason == "stop"
    out = client.completions.create(model="tiny", prompt="abc", max_tokens=8, temperature=1.0, seed=7, n=3)
    assert [c.text for c in out.choices] == [alone("abc", 8, 1.0, 1.0, 7 + i) for i in range(3)]


def _metric(server, name: str) -> float:
    text = httpx.get(server.url + "/metrics").text
    m = re.search(rf'^{name}{{model="tiny"}} (\S+)$', text, re.M)
    return float(m.group(1))


def test_two_hundred_concurrent_streams_equal_each_request_alone(server, alone):
    rng = np.random.default_rng(11)
    work = []
    for i in range(200):
        prompt = "".join(chr(int(c)) for c in rng.integers(65, 320, int(rng.integers(1, 40))))
        work.append({"model": "tiny", "prompt": prompt, "max_tokens": int(rng.integers(1, 20)),
                     "temperature": float(rng.choice([0.0, 0.7])), "seed": int(rng.integers(0, 2**30)),
                     "stream": True})
    dropped = set(range(0, 200, 9))

    async def one(client, i, body):
        text = ""
        async with client.stream("POST", server.url + "/v1/completions", json=body) as response:
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                text += json.loads(line[6:])["choices"][0]["text"]
                if i in dropped and text:
                    return i, text, False  # the client goes away mid-stream
        return i, text, True

    async def main():
        limits = httpx.Limits(max_connections=200)
        async with httpx.AsyncClient(timeout=300, limits=limits) as client:
            return await asyncio.gather(*(one(client, i, b) for i, b in enumerate(work)))

    results = asyncio.run(main())
    for i, text, finished in results:
        b = work[i]
        expected = alone(b["prompt"], b["max_tokens"], b["temperature"], 1.0, b["seed"])
        if finished:
            assert text == expected, i
        else:
            assert i in dropped and expected.startswith(text), i
    deadline = time.monotonic() + 60  # the dropped streams' requests end at the engine's next step
    while _metric(server, "generation_kv_blocks_in_use") != 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _metric(server, "generation_kv_blocks_in_use") == 0
    assert _metric(server, "generation_requests_running") == 0
    assert 'generation_time_to_first_token_seconds_count{input_length_bin="tiny",model="tiny",model_version="1"}' \
        in httpx.get(server.url + "/metrics").text


def test_bad_requests_get_openai_errors_and_the_connection_stays(server):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        cases = [({"model": "nope", "prompt": "a"}, 404, "model"),
                 ({"model": "tiny", "prompt": "a" * (MAX_SEQ + 5)}, 400, "context"),
                 ({"model": "tiny", "prompt": "a", "temperature": "hot"}, 400, "temperature"),
                 ({"model": "tiny", "prompt": "a", "max_tokens": 0}, 400, "max_tokens"),
                 ({"model": "tiny", "prompt": {"x": 1}}, 400, "prompt")]
        for body, status, word in cases:
            r = c.post("/v1/completions", json=body)
            assert r.status_code == status and word in json.dumps(r.json()["error"]), (body, r.text)
        r = c.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and "not valid JSON" in r.json()["error"]["message"]
        r = c.post("/v1/completions", json={"model": "tiny", "prompt": "ok", "max_tokens": 3, "temperature": 0})
        assert r.status_code == 200 and r.json()["choices"][0]["text"]


def test_kserve_generate_and_generate_stream(server, alone):
    with httpx.Client(base_url=server.url, timeout=60) as c:
        r = c.post("/v2/models/tiny/generate", json={"text_input": "Hey", "parameters": {"max_tokens": 9}})
        assert r.status_code == 200 and r.json()["text_output"] == alone("Hey", 9)
        with c.stream("POST", "/v2/models/tiny/generate_stream",
                      json={"text_input": "Hey", "parameters": {"max_tokens": 9}}) as response:
            events = [json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")]
        assert "".join(e["text_output"] for e in events) == alone("Hey", 9)
        assert events[-1]["finish_reason"] in ("length", "stop")
        assert c.post("/v2/models/nope/generate", json={"text_input": "Hey"}).status_code == 404


@pytest.mark.parametrize("given", ["artifact", "folder", "repository"])
def test_the_command_serves_a_generation_model_and_logs_each_request(artifact, alone, given, tmp_path):
    """An artifact, the model folder itself (compiled by the command first, for the CPU), or a
    --model-repository holding the artifact as NAME/VERSION/model.ixa (served by its engine
    under NAME, the highest version, and not as a KServe model)."""
    import os
    import shutil
    import signal
    import subprocess

    from inferx_compiler.cli.common import python_entry

    if given == "repository":
        for version in ("1", "3"):
            os.makedirs(tmp_path / "repo" / "tinyllm" / version)
            shutil.copy(artifact, tmp_path / "repo" / "tinyllm" / version / "model.ixa")
        where = ["--model-repository", str(tmp_path / "repo")]
        name = "tinyllm"
    else:
        model = artifact if given == "artifact" else os.path.dirname(artifact)
        where = ["--model", model]
        name = "tiny" if given == "artifact" else os.path.basename(model)
    proc = subprocess.Popen(python_entry("inferx_compiler.cli.serve") + where + [
        "--max-batch-size", "2", "--port", "0", "--no-grpc"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        match = re.match(rf"serving {name} on (http://127\.0\.0\.1:\d+)$", line)
        assert match, line + proc.stderr.read()
        client = openai.OpenAI(base_url=match.group(1) + "/v1", api_key="unused", max_retries=0)
        out = client.completions.create(model=name, prompt="Hi", max_tokens=5, temperature=0)
        assert out.choices[0].text == alone("Hi", 5)
        if given == "repository":  # not a KServe (tensor) model
            assert httpx.get(match.group(1) + f"/v2/models/{name}").status_code == 404
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=90) == 0
    records = [json.loads(x) for x in proc.stderr.read().splitlines() if x.startswith('{"event": "generation_request"')]
    assert len(records) == 1 and records[0]["completion_tokens"] == out.usage.completion_tokens
    assert records[0]["prompt_tokens"] == 2 and records[0]["time_to_first_token_s"] > 0


def test_the_heatmap_draws_the_generation_histograms(server, tmp_path):
    """inferx-heatmap --metric generation_*: the quantile per version and prompt-length bin."""
    import subprocess

    from inferx_compiler.cli.common import python_entry
    from inferx_compiler.runtime.heatmap import load_table

    client = _client(server)
    for prompt in ("a", "b" * 30):  # (this model's context: 64 tokens, all in the bin "tiny")
        client.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=0)
    scrape = httpx.get(server.url + "/metrics").text
    table = load_table(scrape, model="tiny", metric="generation_time_to_first_token_seconds")
    assert table.counts[("1", "tiny")] >= 2 and ("1", "small") not in table.counts
    assert 0 < table.value("1", "tiny") < 60
    tpot = load_table(scrape, model="tiny", metric="generation_time_per_output_token_seconds")
    assert tpot.counts[("1", "tiny")] >= 2 and tpot.value("1", "tiny") < table.value("1", "tiny") * 10
    (tmp_path / "scrape.txt").write_text(scrape)
    out = subprocess.run(python_entry("inferx_compiler.cli.heatmap") + [
        str(tmp_path / "scrape.txt"), "-o", str(tmp_path / "ttft.png"), "--model", "tiny",
        "--metric", "generation_time_to_first_token_seconds"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "P95 time to first token, model tiny" in out.stdout and (tmp_path / "ttft.png").stat().st_size > 1000
