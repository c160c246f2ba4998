"""One-shot generation against transformers (f32) and the binding's own contracts."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import torchnative
from conftest import CONVERSATIONS, ORACLE_NEW_TOKENS, RAW_PROMPTS


def test_tokenize_matches_transformers(llm, oracle):
    for prompt, ref in zip(RAW_PROMPTS, oracle["raw"]):
        assert llm.tokenize(prompt) == ref["prompt_ids"], prompt


def test_chat_template_matches_transformers(llm, oracle):
    for conv, ref in zip(CONVERSATIONS, oracle["chat"]):
        assert llm.apply_chat_template(conv) == ref["text"]


def test_detokenize_round_trips_tokenize(llm):
    text = "Hello, world! Ünïcödé and  two spaces."
    assert llm.detokenize(llm.tokenize(text)) == text


def _check_against(result, greedy, llm):
    assert result.tokens == greedy
    expected_reason = "length" if len(greedy) == ORACLE_NEW_TOKENS else "stop"
    assert result.finish_reason == expected_reason
    assert result.usage.completion_tokens == len(greedy)
    assert result.text == llm.detokenize(greedy)


def test_greedy_raw_prompt_matches_transformers(llm_f32, oracle):
    for prompt, ref in zip(RAW_PROMPTS, oracle["raw"]):
        r = llm_f32.generate(prompt, max_new_tokens=ORACLE_NEW_TOKENS)
        _check_against(r, ref["greedy"], llm_f32)
        assert r.usage.prompt_tokens == len(ref["prompt_ids"])


def test_greedy_chat_matches_transformers(llm_f32, oracle):
    for conv, ref in zip(CONVERSATIONS, oracle["chat"]):
        via_chat = llm_f32.chat(conv, max_new_tokens=ORACLE_NEW_TOKENS)
        _check_against(via_chat, ref["greedy"], llm_f32)
        assert via_chat.usage.prompt_tokens == len(ref["prompt_ids"])
        via_generate = llm_f32.generate(conv, max_new_tokens=ORACLE_NEW_TOKENS)
        assert via_generate.tokens == via_chat.tokens


def test_native_weights_chat_equals_generate_and_is_deterministic(llm):
    conv = CONVERSATIONS[0]
    a = llm.chat(conv, max_new_tokens=20)
    b = llm.generate(conv, max_new_tokens=20)
    assert a.tokens == b.tokens and a.text == b.text
    assert a.text.strip(), "the model answered nothing"


def test_result_fields(llm):
    r = llm.generate(RAW_PROMPTS[0], max_new_tokens=5)
    assert isinstance(r, torchnative.Result)
    assert r.finish_reason in ("stop", "length")
    assert len(r.tokens) == r.usage.completion_tokens <= 5
    assert r.timings.load_ms > 0
    assert r.timings.prefill_ms > 0
    assert r.timings.time_to_first_token_ms >= r.timings.prefill_ms
    assert r.timings.decode_tokens_per_second >= 0
    assert str(r) == r.text


def test_max_new_tokens_limits_length(llm):
    r = llm.generate(RAW_PROMPTS[1], max_new_tokens=3)
    assert (len(r.tokens), r.finish_reason) == (3, "length")


def test_stop_string_cuts_text(llm):
    full = llm.generate(RAW_PROMPTS[1], max_new_tokens=40)
    # Stop at a piece of the greedy text: the result is the text before its first occurrence.
    stop = full.text[10:14]
    assert stop and stop in full.text
    r = llm.generate(RAW_PROMPTS[1], max_new_tokens=40, stop=[stop, "\u2603never"])
    assert r.finish_reason == "stop"
    assert r.text == full.text[: full.text.index(stop)]
    assert llm.generate(RAW_PROMPTS[1], max_new_tokens=40, stop=stop).text == r.text


def test_min_new_tokens_suppresses_end_of_sequence(llm):
    conv = [{"role": "user", "content": "What is 2+2?"}]
    short = llm.chat(conv, max_new_tokens=60)
    assert short.finish_reason == "stop", "needs a prompt the model answers before the limit"
    n = len(short.tokens) + 5
    longer = llm.chat(conv, max_new_tokens=n, min_new_tokens=n)
    assert len(longer.tokens) == n
    assert longer.tokens[: len(short.tokens)] == short.tokens


def test_seeded_sampling_is_reproducible(llm):
    kw = dict(max_new_tokens=24, do_sample=True, temperature=1.3, top_k=50, top_p=0.95)
    a = llm.generate(RAW_PROMPTS[0], seed=7, **kw)
    b = llm.generate(RAW_PROMPTS[0], seed=7, **kw)
    c = llm.generate(RAW_PROMPTS[0], seed=8, **kw)
    assert a.tokens == b.tokens
    assert a.tokens != c.tokens


def test_sampling_parameters_are_ignored_without_do_sample(llm):
    # As in transformers: temperature & co only shape sampling, greedy stays greedy.
    greedy = llm.generate(RAW_PROMPTS[0], max_new_tokens=12)
    tempered = llm.generate(RAW_PROMPTS[0], max_new_tokens=12, temperature=5.0, top_k=3)
    assert tempered.tokens == greedy.tokens


def test_load_options(model_file):
    small = torchnative.load_llm(str(model_file), n_ctx=64, threads=1)
    assert small.session().capacity == 64
    assert small.context_length >= 64
    assert small.source.endswith(".gguf")


def _cli_json(cli: str, *args: str) -> dict:
    out = subprocess.run([cli, "run", "--json", *args], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_greedy_equals_the_cli(llm, model_file):
    """The same request through the Rust CLI (`torchnative run --json`) and through Python."""
    cli = os.environ.get("TORCHNATIVE_CLI")
    if not cli or not os.path.isfile(cli):
        pytest.skip("TORCHNATIVE_CLI is not set to a built `torchnative` binary")
    for prompt in RAW_PROMPTS:
        ref = _cli_json(cli, "--raw", "--max-tokens", "24", str(model_file), prompt)
        r = llm.generate(prompt, max_new_tokens=24)
        assert (r.tokens, r.text, r.finish_reason) == (ref["tokens"], ref["text"], ref["finish_reason"])
        assert r.usage.prompt_tokens == ref["usage"]["prompt_tokens"]
    question = CONVERSATIONS[0][0]["content"]
    ref = _cli_json(cli, "--max-tokens", "24", str(model_file), question)
    r = llm.chat([{"role": "user", "content": question}], max_new_tokens=24)
    assert (r.tokens, r.text) == (ref["tokens"], ref["text"])
