"""torchnative.Engine (continuous batching) and torchnative.serve (the OpenAI HTTP API in a
background thread) on the default model."""

from __future__ import annotations

import json
import threading
import urllib.request

import pytest

import torchnative

QUESTIONS = [
    "What is the capital of France?",
    "Name three fruits.",
    "Count from one to five.",
    "What is 2 + 2?",
    "Say hello in German.",
    "Name a colour.",
]


@pytest.fixture(scope="module")
def engine(llm):
    return torchnative.Engine(llm, max_running=3, batch_tokens=32)


def test_concurrent_requests_equal_each_run_alone(llm, engine):
    messages = [[{"role": "user", "content": q}] for q in QUESTIONS]
    streams = [engine.submit(m, max_new_tokens=20) for m in messages]
    # Consume from several threads at once.
    texts: dict[int, str] = {}

    def drain(i):
        texts[i] = streams[i].text()

    threads = [threading.Thread(target=drain, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    for i, m in enumerate(messages):
        alone = llm.chat(m, max_new_tokens=20)
        assert texts[i] == alone.text
        result = streams[i].result
        assert result.tokens == alone.tokens
        assert result.usage.prompt_tokens == alone.usage.prompt_tokens
    stats = engine.stats()
    assert stats["running"] == 0 and stats["queued"] == 0
    assert stats["generated_tokens"] >= sum(len(s.result.tokens) for s in streams)


def test_an_f16_kv_cache_gives_the_same_answers_under_load_as_alone(llm):
    messages = [[{"role": "user", "content": q}] for q in QUESTIONS[:4]]
    busy = torchnative.Engine(llm, max_running=4, batch_tokens=24, kv_cache_dtype="f16")
    streams = [busy.submit(m, max_new_tokens=24) for m in messages]
    texts = [s.text() for s in streams]
    alone = torchnative.Engine(llm, max_running=1, kv_cache_dtype="f16")
    for m, text, s in zip(messages, texts, streams):
        want = alone.submit(m, max_new_tokens=24)
        assert text == want.text()
        assert s.result.tokens == want.result.tokens
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        torchnative.Engine(llm, kv_cache_dtype="bf16")


def test_seeded_sampling_and_closing_a_stream(llm, engine):
    a = engine.submit("Once upon a time", max_new_tokens=16, do_sample=True, temperature=0.9, seed=3)
    b = llm.generate("Once upon a time", max_new_tokens=16, do_sample=True, temperature=0.9, seed=3)
    assert a.text() == b.text
    s = engine.submit("Write a long story about a fox.", max_new_tokens=200, min_new_tokens=200)
    next(iter(s))
    s.close()
    assert s.result.finish_reason == "cancelled"
    with pytest.raises(TypeError):
        engine.submit("hi", max_tokens=3)
    with pytest.raises(torchnative.TorchnativeError):
        engine.submit([{"role": "user", "content": "hi"}], max_new_tokens=4000).text()


def test_serve_answers_the_openai_api_and_stops(llm):
    with torchnative.serve(llm, port=0, model_name="smol", max_running=2) as server:
        assert server.url.startswith("http://127.0.0.1:")
        with urllib.request.urlopen(server.url + "/v1/models", timeout=30) as r:
            assert json.loads(r.read())["data"][0]["id"] == "smol"
        body = json.dumps(
            {
                "model": "smol",
                "messages": [{"role": "user", "content": QUESTIONS[0]}],
                "max_tokens": 12,
                "temperature": 0,
            }
        ).encode()
        req = urllib.request.Request(
            server.url + "/v1/chat/completions",
            data=body,
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=120) as r:
            answer = json.loads(r.read())
        want = llm.chat([{"role": "user", "content": QUESTIONS[0]}], max_new_tokens=12)
        assert answer["choices"][0]["message"]["content"] == want.text
        url = server.url
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/health", timeout=5)


def test_prompt_lookup_speculation_keeps_the_answers(llm):
    engine = torchnative.Engine(llm, max_running=2, prompt_lookup=4)
    text = "one two three four five six seven eight nine ten"
    messages = [[{"role": "user", "content": f"Repeat exactly: {text}. {text}."}],
                [{"role": "user", "content": "Say hello in German."}]]
    streams = [engine.submit(m, max_new_tokens=32) for m in messages]
    assert [s.text() for s in streams] == [llm.chat(m, max_new_tokens=32).text for m in messages]
    stats = engine.stats()
    assert 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    with pytest.raises(torchnative.InvalidArgumentError, match="prompt_lookup"):
        torchnative.Engine(llm, prompt_lookup=-1)
    with pytest.raises(torchnative.TorchnativeError, match="prompt_lookup_tokens"):
        torchnative.Engine(llm, prompt_lookup=1000)
