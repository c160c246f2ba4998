"""Streaming: same text as generate, cancellation on close, use from another thread."""

from __future__ import annotations

import threading

import pytest

from conftest import CONVERSATIONS, RAW_PROMPTS

LONG_PROMPT = RAW_PROMPTS[1]  # code: the model does not stop within a few tokens


def test_pieces_join_to_the_generated_text(llm):
    for prompt in (RAW_PROMPTS[0], CONVERSATIONS[0]):
        expected = llm.generate(prompt, max_new_tokens=30)
        stream = llm.stream(prompt, max_new_tokens=30)
        assert stream.result is None
        pieces = list(stream)
        assert len(pieces) > 1
        assert "".join(pieces) == expected.text
        assert stream.result.tokens == expected.tokens
        assert stream.result.finish_reason == expected.finish_reason
        assert list(stream) == []  # exhausted stays exhausted


def test_stop_strings_apply_to_streams(llm):
    full = llm.generate(LONG_PROMPT, max_new_tokens=40)
    stop = full.text[12:15]
    pieces = list(llm.stream(LONG_PROMPT, max_new_tokens=40, stop=stop))
    assert "".join(pieces) == full.text[: full.text.index(stop)]


def test_close_cancels_generation(llm):
    stream = llm.stream(LONG_PROMPT, max_new_tokens=200)
    first = [next(stream), next(stream)]
    stream.close()
    r = stream.result
    assert r.finish_reason == "cancelled"
    # The decoder runs only a few pieces ahead of the consumer.
    assert r.usage.completion_tokens < 20
    assert r.text.startswith("".join(first))
    with pytest.raises(StopIteration):
        next(stream)


def test_leaving_with_block_cancels(llm):
    with llm.stream(LONG_PROMPT, max_new_tokens=200) as stream:
        for _ in stream:
            break
    assert stream.result.finish_reason == "cancelled"


def test_dropping_a_session_stream_gives_the_session_back(llm):
    session = llm.session()
    stream = session.stream("Count from one to fifty in words.", max_new_tokens=200)
    next(stream)
    del stream  # cancels and waits for the decoder to stop
    r = session.send("Thanks!", max_new_tokens=5)
    assert r.usage.completion_tokens <= 5


def test_consumed_from_another_thread(llm):
    expected = llm.generate(RAW_PROMPTS[0], max_new_tokens=30).text
    stream = llm.stream(RAW_PROMPTS[0], max_new_tokens=30)
    got: list[str] = []
    worker = threading.Thread(target=lambda: got.extend(stream))
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive()
    assert "".join(got) == expected
    assert stream.result.text == expected


def test_two_streams_at_once(llm):
    a = llm.stream(RAW_PROMPTS[0], max_new_tokens=15)
    b = llm.stream(CONVERSATIONS[0], max_new_tokens=15)
    pa, pb = [], []
    for x, y in zip(a, b):
        pa.append(x)
        pb.append(y)
    pa.extend(a)
    pb.extend(b)
    assert "".join(pa) == llm.generate(RAW_PROMPTS[0], max_new_tokens=15).text
    assert "".join(pb) == llm.generate(CONVERSATIONS[0], max_new_tokens=15).text
