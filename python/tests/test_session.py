"""Multi-turn sessions: a later turn equals a fresh chat over the whole conversation."""

from __future__ import annotations

import pytest

import torchnative

TURN1 = "Hi! My name is Ada and I like astronomy."
TURN2 = "What is my name?"


def test_second_turn_equals_fresh_chat_over_the_conversation(llm):
    session = llm.session()
    r1 = session.send(TURN1, max_new_tokens=30)
    r2 = session.send({"role": "user", "content": TURN2}, max_new_tokens=30)
    conversation = [
        {"role": "user", "content": TURN1},
        {"role": "assistant", "content": r1.text},
        {"role": "user", "content": TURN2},
    ]
    assert session.messages == conversation + [{"role": "assistant", "content": r2.text}]
    fresh = llm.chat(conversation, max_new_tokens=30)
    assert r2.tokens == fresh.tokens
    assert r2.text == fresh.text
    # The second turn reused the first turn's cache instead of evaluating it again.
    assert r2.usage.cached_prompt_tokens > r1.usage.prompt_tokens // 2
    assert r2.usage.prompt_tokens == fresh.usage.prompt_tokens


def test_first_turn_equals_chat(llm):
    session = llm.session()
    assert session.send(TURN2, max_new_tokens=20).tokens == llm.chat(
        [{"role": "user", "content": TURN2}], max_new_tokens=20
    ).tokens


def test_reset_forgets_the_conversation(llm):
    session = llm.session()
    session.send(TURN1, max_new_tokens=10)
    assert session.n_tokens > 0
    session.reset()
    assert session.messages == [] and session.n_tokens == 0
    again = session.send(TURN2, max_new_tokens=20)
    assert again.tokens == llm.chat([{"role": "user", "content": TURN2}], max_new_tokens=20).tokens


def test_streamed_turn_is_kept(llm):
    session = llm.session()
    stream = session.stream(TURN1, max_new_tokens=20)
    text = "".join(stream)
    assert text == stream.result.text
    assert session.messages[-1] == {"role": "assistant", "content": text}


def test_session_is_busy_while_its_stream_runs(llm):
    session = llm.session()
    stream = session.stream(TURN1, max_new_tokens=50)
    next(stream)
    with pytest.raises(torchnative.InvalidArgumentError, match="stream"):
        session.send(TURN2, max_new_tokens=5)
    stream.close()
    assert session.send(TURN2, max_new_tokens=5).usage.completion_tokens <= 5


def test_session_capacity(llm):
    assert llm.session(n_ctx=128).capacity == 128
