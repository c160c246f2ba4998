"""`torchnative serve` through the official openai client, unchanged.

Each server is the real CLI on 127.0.0.1 with a free port, the default model. Load is bounded:
a few dozen requests of a few tokens, every wait with a timeout.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import struct
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import openai
import pytest

CLI = os.environ.get("TORCHNATIVE_CLI", "")
MODEL = os.environ.get("TORCHNATIVE_MODEL", "")
# The sentence-embedding model (scripts/fetch-encoder.sh) served at /v1/embeddings.
ENCODER = os.environ.get("TORCHNATIVE_ENCODER", "")
NAME = Path(MODEL).stem
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Server:
    def __init__(self, *args: str) -> None:
        if not (CLI and Path(CLI).is_file() and MODEL and Path(MODEL).is_file()):
            pytest.fail("TORCHNATIVE_CLI and TORCHNATIVE_MODEL must name the CLI and the model")
        self.proc = subprocess.Popen(
            [CLI, "serve", MODEL, "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline()
        m = re.search(r"http://(\S+)", line)
        if not m:
            err = self.proc.stderr.read() if self.proc.poll() is not None else ""
            raise RuntimeError(f"server did not start: {line!r} {err}")
        self.base = f"http://{m.group(1)}"
        self.ready = line

    def client(self, **kw) -> openai.OpenAI:
        kw.setdefault("api_key", "unused")
        return openai.OpenAI(base_url=self.base + "/v1", max_retries=0, timeout=120, **kw)

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return r.read().decode()

    def metric(self, series: str) -> float:
        """The value of one series, named with its labels as /metrics prints them."""
        for line in self.get("/metrics").splitlines():
            if line.startswith(series + " "):
                return float(line.split()[-1])
        raise KeyError(series)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@pytest.fixture(scope="module")
def server():
    if not (ENCODER and Path(ENCODER).is_dir()):
        pytest.fail("TORCHNATIVE_ENCODER must name the embedding model directory")
    s = Server("--parallel", "4", "--ctx-per-request", "1024", "--embedding-model", ENCODER)
    yield s
    s.close()


def cli_run(prompt: str, max_tokens: int) -> dict:
    out = subprocess.run(
        [CLI, "run", MODEL, prompt, "--max-tokens", str(max_tokens), "--temperature", "0", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout)


def chat(client: openai.OpenAI, content: str, **kw):
    kw.setdefault("max_tokens", 16)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": content}], **kw
    )


def test_models_health_and_a_greedy_chat_equal_to_torchnative_run(server):
    assert json.loads(server.get("/health"))["status"] == "ok"
    client = server.client()
    assert [m.id for m in client.models.list().data] == [NAME, Path(ENCODER).name]
    r = chat(client, "What is the capital of France?", max_tokens=20)
    want = cli_run("What is the capital of France?", 20)
    assert r.choices[0].message.content == want["text"]
    assert r.choices[0].message.role == "assistant"
    assert r.usage.completion_tokens == want["usage"]["completion_tokens"]
    assert r.usage.prompt_tokens == want["usage"]["prompt_tokens"]
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    assert r.choices[0].finish_reason == "length"


def test_sixteen_concurrent_greedy_requests_equal_each_alone(server):
    client = server.client()
    questions = [f"Tell me one fact about the number {i}." for i in range(16)]
    alone = [chat(client, q).choices[0].message.content for q in questions]
    with cf.ThreadPoolExecutor(16) as pool:
        together = list(pool.map(lambda q: chat(client, q).choices[0].message.content, questions))
    assert together == alone


def test_an_f16_kv_pool_holds_twice_the_positions_and_answers_alike_under_load():
    """`--kv-cache-dtype f16`: the same `--kv-cache-mib` holds twice the blocks of f32, and 8
    concurrent greedy requests over the f16 pool each get the answer they get alone."""
    blocks = {}
    for dtype in ("f32", "f16"):
        s = Server("--parallel", "4", "--ctx-per-request", "512", "--kv-cache-mib", "24",
                   "--kv-cache-dtype", dtype)
        try:
            assert f"of {dtype})" in s.ready, s.ready
            blocks[dtype] = (s.metric("torchnative_kv_blocks_used")
                             + s.metric("torchnative_kv_blocks_free"))
            if dtype == "f16":
                client = s.client()
                questions = [f"Name one animal that starts with the letter {c}." for c in "ABCDEFGH"]
                alone = [chat(client, q).choices[0].message.content for q in questions]
                with cf.ThreadPoolExecutor(8) as pool:
                    together = list(pool.map(
                        lambda q: chat(client, q).choices[0].message.content, questions))
                assert together == alone
        finally:
            s.close()
    assert blocks["f32"] > 0 and blocks["f16"] == 2 * blocks["f32"], blocks
    bad = subprocess.run([CLI, "serve", MODEL, "--port", "0", "--kv-cache-dtype", "bf16"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "--kv-cache-dtype" in bad.stderr, bad.stderr


def test_stream_with_usage_joins_to_the_same_text(server):
    client = server.client()
    whole = chat(client, "Name three fruits.", max_tokens=24)
    full = whole.choices[0].message.content
    pieces, usage, finish = [], None, None
    stream = chat(
        client, "Name three fruits.", max_tokens=24, stream=True, stream_options={"include_usage": True}
    )
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    assert "".join(pieces) == full
    assert finish == whole.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


def test_completions_stop_seed_n_and_logprobs(server):
    client = server.client()
    r = client.completions.create(model=NAME, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0)
    text = r.choices[0].text
    assert text
    stop = text.strip()[:2]
    s = client.completions.create(
        model=NAME, prompt="1, 2, 3, 4,", max_tokens=12, temperature=0, stop=[stop]
    )
    assert stop not in s.choices[0].text and s.choices[0].finish_reason == "stop"
    # Seeds reproduce sampled answers; n gives several choices.
    a = chat(client, "Write a word.", temperature=1.0, seed=7, n=2, max_tokens=12)
    b = chat(client, "Write a word.", temperature=1.0, seed=7, n=2, max_tokens=12)
    assert [c.message.content for c in a.choices] == [c.message.content for c in b.choices]
    assert [c.index for c in a.choices] == [0, 1]
    # Logprobs: greedy picks the most likely token; alternatives are sorted.
    lp = chat(client, "Say yes.", logprobs=True, top_logprobs=3, max_tokens=6)
    content = lp.choices[0].logprobs.content
    assert len(content) == lp.usage.completion_tokens
    for t in content:
        assert t.logprob <= 0
        assert len(t.top_logprobs) == 3
        assert t.top_logprobs[0].logprob == t.logprob
        assert t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob >= t.top_logprobs[2].logprob


def test_errors_have_openai_shapes_and_status_codes(server):
    client = server.client()
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="no-such-model", messages=QUESTION)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "hi", temperature=3.5)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError):
        chat(client, "hi", max_tokens=5000)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "hi " * 1200, max_tokens=10)
    assert "context" in str(e.value)
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "hi", response_format={"type": "xml"})
    assert e.value.body["param"] == "response_format"
    with pytest.raises(openai.BadRequestError) as e:
        chat(client, "hi", response_format={"type": "json_schema", "json_schema": {
            "name": "x", "schema": {"type": "object", "properties": {"a": {"type": "strnig"}}}}})
    assert e.value.body["param"] == "response_format" and "strnig" in str(e.value)
    req = urllib.request.Request(
        server.base + "/v1/chat/completions", data=b"{not json", method="POST",
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as h:
        urllib.request.urlopen(req, timeout=30)
    assert h.value.code == 400 and "error" in json.loads(h.value.read())


def test_api_key_is_required_when_set():
    s = Server("--api-key", "sesame", "--parallel", "1")
    try:
        with pytest.raises(openai.AuthenticationError):
            chat(s.client(api_key="wrong"), "hi", max_tokens=2)
        assert chat(s.client(api_key="sesame"), "hi", max_tokens=2).choices[0].message.content is not None
    finally:
        s.close()


def test_overload_gets_429_and_nothing_accepted_is_lost():
    s = Server("--parallel", "1", "--max-queue", "2", "--batch-tokens", "64")
    try:
        client = s.client()

        def one(i):
            try:
                r = chat(client, f"Count to {i}.", max_tokens=8)
                return ("ok", r.usage.completion_tokens)
            except openai.RateLimitError as e:
                assert e.response.headers.get("retry-after") == "1"
                return ("429", 0)

        with cf.ThreadPoolExecutor(30) as pool:
            results = list(pool.map(one, range(30)))
        ok = [r for r in results if r[0] == "ok"]
        assert len(ok) + len([r for r in results if r[0] == "429"]) == 30
        assert ok and all(n == 8 for _, n in ok), results
        assert len(ok) < 30, "30 concurrent requests overflow one slot and a queue of 2"
        # Still serving.
        assert chat(client, "hi", max_tokens=2).usage.completion_tokens == 2
        assert s.metric("torchnative_queue_depth") == 0
    finally:
        s.close()


def test_a_client_that_disconnects_cancels_its_request(server):
    client = server.client()
    before = server.metric('torchnative_requests_total{outcome="cancelled"}')
    stream = chat(client, "Write a long story about a dragon.", max_tokens=400, stream=True)
    got = 0
    for chunk in stream:
        got += 1
        if got == 5:
            break
    stream.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        if server.metric('torchnative_requests_total{outcome="cancelled"}') > before:
            break
        time.sleep(0.1)
    assert server.metric('torchnative_requests_total{outcome="cancelled"}') > before
    assert server.metric("torchnative_running_requests") == 0
    assert server.metric("torchnative_sequence_slots_free") == 4
    assert server.metric("torchnative_kv_blocks_used") == 0


def test_a_system_prompt_shared_by_8_requests_is_computed_once(server):
    client = server.client()
    system = (
        "You are the help desk of a small museum of river history. Answer in one friendly "
        "sentence. The museum opens at nine and closes at five, every day except Monday. "
        "Tickets cost four euros, children under twelve enter free, and the cafe on the "
        "ground floor serves soup and cake. Never invent facts about the exhibits."
    )

    def ask(q):
        return client.chat.completions.create(
            model=NAME,
            messages=[{"role": "system", "content": system}, {"role": "user", "content": q}],
            max_tokens=8,
            temperature=0,
        )

    hits0 = server.metric("torchnative_prefix_cache_hit_tokens_total")
    prompt0 = server.metric("torchnative_prompt_tokens_total")
    # All 8 at once: the first to be scheduled computes the system prompt's blocks, the others
    # wait for them and attach them.
    questions = ["When do you open?"] + [f"Question number {i}?" for i in range(7)]
    with cf.ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, questions))
    hits = server.metric("torchnative_prefix_cache_hit_tokens_total") - hits0
    computed = server.metric("torchnative_prompt_tokens_total") - prompt0
    # The system prompt's whole blocks (16 positions) come from the cache for 7 of the 8.
    shared = min(r.usage.prompt_tokens for r in answers) - 12
    assert hits >= 7 * (shared // 16 * 16 - 16), (hits, computed, shared)
    assert computed + hits == sum(r.usage.prompt_tokens for r in answers)
    assert server.metric("torchnative_prefix_cache_hit_rate") > 0


CITY_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
        "population": {"type": "integer"},
        "landmarks": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["city", "population", "landmarks"],
    "additionalProperties": False,
}


def check_city(text):
    v = json.loads(text)
    assert list(v) == ["city", "population", "landmarks"], v
    assert v["city"] in ("Paris", "Rome", "Oslo") and isinstance(v["population"], int)
    assert len(v["landmarks"]) <= 2 and all(isinstance(x, str) for x in v["landmarks"])


def test_response_format_json_schema_and_json_mode(server):
    client = server.client()
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "strict": True, "schema": CITY_SCHEMA}}
    r = chat(client, "Describe Rome as JSON.", response_format=fmt, max_tokens=200)
    assert r.choices[0].finish_reason == "stop"
    check_city(r.choices[0].message.content)
    # Streamed: the pieces join to a valid document.
    stream = client.chat.completions.create(
        model=NAME, messages=[{"role": "user", "content": "Describe Oslo as JSON."}],
        response_format=fmt, max_tokens=200, stream=True, temperature=0,
    )
    chunks = [c for c in stream if c.choices]
    assert chunks[-1].choices[0].finish_reason == "stop"
    check_city("".join(c.choices[0].delta.content or "" for c in chunks))
    # Sampled with seeds (n = 3): every answer that finished parses and validates.
    r = chat(client, "Describe Paris.", response_format=fmt, max_tokens=200, n=3, temperature=1.0, seed=11)
    finished = [c for c in r.choices if c.finish_reason == "stop"]
    assert finished
    for choice in finished:
        check_city(choice.message.content)
    # JSON mode: any object.
    r = chat(client, "Reply with a JSON object with keys name and age for a cat called Tom aged 3.",
             response_format={"type": "json_object"}, max_tokens=120)
    assert isinstance(json.loads(r.choices[0].message.content), dict)


def test_embeddings_equal_torchnative_embed(server):
    client = server.client()
    name = Path(ENCODER).name
    assert name in [m.id for m in client.models.list().data]
    texts = ["The river museum opened in 1921.", "A lighthouse on a rocky island.", "Hi"]
    r = client.embeddings.create(model=name, input=texts)
    cli = subprocess.run(
        [CLI, "embed", ENCODER, "--json", *[a for t in texts for a in ("--text", t)]],
        capture_output=True, text=True, check=True, timeout=120,
    )
    want = json.loads(cli.stdout)
    # The client asks for base64 (exact f32 values); the CLI prints the shortest decimal of each
    # f32, which rounds back to the same f32.
    f32 = lambda xs: [struct.unpack("f", struct.pack("f", x))[0] for x in xs]  # noqa: E731
    assert [d.embedding for d in r.data] == [f32(d["embedding"]) for d in want["data"]]
    floats = client.embeddings.create(model=name, input=texts, encoding_format="float")
    assert [d.embedding for d in floats.data] == [d["embedding"] for d in want["data"]]
    assert r.usage.prompt_tokens == want["usage"]["prompt_tokens"] > 0
    one = client.embeddings.create(model=name, input=texts[0])
    assert one.data[0].embedding == r.data[0].embedding, "batch invariant"
    ids = client.embeddings.create(model=name, input=[[101, 7592, 102]])
    assert len(ids.data[0].embedding) == len(r.data[0].embedding)
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-encoder", input="x")
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model=name, input="word " * 400)
    assert e.value.body["param"] == "input"
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model=name, input=[])


def write_peft_adapter(path: Path, seed: int, r: int = 4) -> None:
    """A PEFT LoRA adapter (q_proj and v_proj of every layer, A and B random: PEFT would start B
    at zero) for the served model, written as safetensors by hand (the client venv has no
    numpy)."""
    import random

    info = json.loads(
        subprocess.run([CLI, "info", MODEL, "--json"], capture_output=True, text=True,
                       check=True, timeout=60).stdout
    )
    d, q, kv = info["hidden_size"], info["heads"] * info["head_dim"], info["kv_heads"] * info["head_dim"]
    rng = random.Random(seed)
    tensors = []
    for layer in range(info["layers"]):
        for module, out in [("q_proj", q), ("v_proj", kv)]:
            base = f"base_model.model.model.layers.{layer}.self_attn.{module}"
            tensors.append((f"{base}.lora_A.weight", [r, d]))
            tensors.append((f"{base}.lora_B.weight", [out, r]))
    header, blobs, offset = {}, [], 0
    for name, shape in tensors:
        n = shape[0] * shape[1]
        blob = struct.pack(f"<{n}f", *(rng.uniform(-0.1, 0.1) for _ in range(n)))
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.mkdir(parents=True, exist_ok=True)
    (path / "adapter_model.safetensors").write_bytes(
        struct.pack("<Q", len(head)) + head + b"".join(blobs)
    )
    (path / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": r, "lora_alpha": 2 * r, "target_modules": ["q_proj", "v_proj"],
        "bias": "none",
    }))


def test_lora_adapters_are_served_as_models_of_their_own(tmp_path):
    """`--lora NAME=PATH[:SCALE]`: the adapter is a model in /v1/models (its parent the base);
    a request naming it runs the base with the adapter, as `torchnative run --lora` does, and
    the answer names it; requests for the base and for each adapter batched together answer as
    each does alone; an unknown name is a 404 listing the served ones; a bad --lora is refused
    at start."""
    write_peft_adapter(tmp_path / "ada", seed=1)
    write_peft_adapter(tmp_path / "bob", seed=2)
    s = Server("--parallel", "4", "--lora", f"ada={tmp_path / 'ada'}",
               "--lora", f"bob={tmp_path / 'bob'}:0.5")
    try:
        client = s.client()
        models = {m.id: m for m in client.models.list().data}
        assert list(models) == [NAME, "ada", "bob"]
        assert models["ada"].model_extra.get("parent") == NAME
        prompts = [f"Tell me one fact about the number {i}." for i in range(4)]

        def ask(model: str, prompt: str) -> str:
            r = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}], max_tokens=12,
                temperature=0,
            )
            assert r.model == model
            return r.choices[0].message.content

        alone = {(m, p): ask(m, p) for m in [NAME, "ada", "bob"] for p in prompts}
        for m, lora in [("ada", [f"{tmp_path / 'ada'}"]), ("bob", [f"{tmp_path / 'bob'}:0.5"])]:
            want = subprocess.run(
                [CLI, "run", MODEL, prompts[0], "--max-tokens", "12", "--temperature", "0",
                 "--json", *[a for spec in lora for a in ("--lora", spec)]],
                capture_output=True, text=True, check=True, timeout=120,
            )
            assert alone[(m, prompts[0])] == json.loads(want.stdout)["text"], m
        # The adapters change the answers (else none of this would show anything).
        assert len({alone[(m, p)] for m in [NAME, "ada", "bob"] for p in prompts}) > len(prompts)
        with cf.ThreadPoolExecutor(12) as pool:
            together = dict(zip(alone, pool.map(lambda k: ask(*k), alone)))
        assert together == alone
        with pytest.raises(openai.NotFoundError) as e:
            client.chat.completions.create(model="carol", messages=QUESTION, max_tokens=4)
        assert "carol" in str(e.value) and "ada" in str(e.value)
    finally:
        s.close()
    for bad in ["ada", f"={tmp_path / 'ada'}", f"{NAME}={tmp_path / 'ada'}",
                f"x={tmp_path / 'missing'}"]:
        proc = subprocess.run([CLI, "serve", MODEL, "--port", "0", "--lora", bad],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0 and "--lora" in proc.stderr, (bad, proc.stderr)


def test_prompt_lookup_speculation_keeps_answers_and_counts_drafts():
    """`--prompt-lookup K`: the answer equals `torchnative run`'s, and /metrics counts the
    drafted and accepted tokens."""
    s = Server("--parallel", "2", "--prompt-lookup", "4")
    try:
        text = "one two three four five six seven eight nine ten"
        prompt = f"Repeat exactly: {text}. {text}."
        r = chat(s.client(), prompt, max_tokens=24)
        assert r.choices[0].message.content == cli_run(prompt, 24)["text"]
        drafted = s.metric("torchnative_speculative_drafted_tokens_total")
        accepted = s.metric("torchnative_speculative_accepted_tokens_total")
        assert 0 < accepted <= drafted
    finally:
        s.close()


def post_json(base: str, path: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_rerank_equals_torchnative_rerank(tmp_path):
    """/v1/rerank (Jina / Cohere / vLLM shape) with a tiny random BERT cross-encoder that
    transformers builds: the same scores and order as `torchnative rerank`, errors by status."""
    python = os.environ.get("TORCHNATIVE_ORACLE_PYTHON", "")
    if not (python and Path(python).is_file()):
        pytest.fail("TORCHNATIVE_ORACLE_PYTHON must name the oracle venv's python")
    model = tmp_path / "tiny-reranker"
    texts = [f"the jury said {i} times that the city election was well run" for i in range(40)]
    texts += ["a quiet river", "the county court", "ballots and voters"]
    request = tmp_path / "tiny.json"
    request.write_text(json.dumps({
        "cmd": "tiny", "arch": "bert", "seed": 6, "texts": texts, "head": {"num_labels": 1},
        "pooling": {"pooling_mode_cls_token": True}, "normalize": False, "max_seq_length": 64,
        "out_dir": str(model)}))
    script = Path(__file__).resolve().parents[3] / "runtime/tests/oracle/embed_reference.py"
    subprocess.run([python, "-W", "ignore", str(script), str(request)], check=True, timeout=600,
                   capture_output=True)
    query = "what did the jury say about the election"
    docs = ["the county court", "the jury said the election was well run", "a quiet river",
            "ballots and voters"]
    args = [CLI, "rerank", str(model), "--query", query, "--json"]
    for d in docs:
        args += ["--doc", d]
    want = json.loads(subprocess.run(args, capture_output=True, text=True, check=True,
                                     timeout=120).stdout)
    s = Server("--parallel", "1", "--rerank-model", str(model))
    try:
        assert [m.id for m in s.client().models.list().data] == [NAME, model.name]
        status, got = post_json(s.base, "/v1/rerank",
                                {"model": model.name, "query": query, "documents": docs})
        assert status == 200, got
        assert got["results"] == want["results"]
        assert got["usage"]["total_tokens"] == want["usage"]["total_tokens"]
        status, top = post_json(s.base, "/v1/rerank", {
            "query": query, "documents": [{"text": d} for d in docs], "top_n": 2,
            "return_documents": False})
        assert status == 200, top
        assert top["results"] == [{k: r[k] for k in ("index", "relevance_score")}
                                  for r in want["results"][:2]]
        long = "ballots and voters " * 40
        status, err = post_json(s.base, "/v1/rerank", {"query": query, "documents": ["ok", long]})
        assert status == 400 and "document 1" in err["error"]["message"], err
        status, ok = post_json(s.base, "/v1/rerank",
                               {"query": query, "documents": [long], "truncation": True})
        assert status == 200 and 0 < ok["results"][0]["relevance_score"] < 1, ok
        status, err = post_json(s.base, "/v1/rerank",
                                {"model": "nope", "query": query, "documents": docs})
        assert status == 404 and err["error"]["code"] == "model_not_found", err
        for bad in ({"query": query, "documents": []}, {"query": query, "documents": [3]},
                    {"query": query, "documents": docs, "top_k": 2}):
            status, err = post_json(s.base, "/v1/rerank", bad)
            assert status == 400, (bad, err)
    finally:
        s.close()
