"""Constrained decoding (json_schema, grammar, regex, json_object) and speculative decoding
(draft="prompt_lookup" or a draft LLM) through the Python API."""

from __future__ import annotations

import json
import re

import pytest

import torchnative

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
        "founded": {"type": "integer"},
        "rivers": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["city", "founded", "rivers"],
    "additionalProperties": False,
}


def ask(text):
    return [{"role": "user", "content": text}]


def test_json_schema_output_parses_validates_and_keeps_property_order(llm):
    r = llm.chat(ask("Describe Rome as JSON."), json_schema=SCHEMA, max_new_tokens=120)
    assert r.finish_reason == "stop"
    v = json.loads(r.text)
    assert list(v) == ["city", "founded", "rivers"], v
    assert v["city"] in ("Paris", "Rome", "Oslo") and isinstance(v["founded"], int)
    assert len(v["rivers"]) <= 2
    # The same schema as JSON text, sampled: still valid.
    s = llm.chat(ask("Describe Oslo."), json_schema=json.dumps(SCHEMA), max_new_tokens=120,
                 do_sample=True, temperature=0.8, seed=5)
    if s.finish_reason == "stop":
        assert list(json.loads(s.text)) == ["city", "founded", "rivers"]


def test_grammar_regex_and_json_mode(llm):
    r = llm.chat(ask("Is the sky green?"), grammar='root ::= ("yes" | "no") "."')
    assert r.text in ("yes.", "no.")
    r = llm.chat(ask("Invent a date."), regex=r"20[0-9]{2}-[01][0-9]-[0-3][0-9]")
    assert re.fullmatch(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", r.text), r.text
    r = llm.chat(ask("Reply with a JSON object with keys name and age for a cat called Tom aged 3."),
                 json_object=True, max_new_tokens=100)
    assert isinstance(json.loads(r.text), dict)
    pieces = list(llm.stream(ask("Is fire cold?"), grammar='root ::= ("yes" | "no") "."'))
    assert "".join(pieces) in ("yes.", "no.")


def test_constraint_errors(llm):
    with pytest.raises(torchnative.InvalidArgumentError, match="regular expression"):
        llm.generate("x", regex="(?=a)b")
    with pytest.raises(torchnative.InvalidArgumentError, match="GBNF"):
        llm.generate("x", grammar="root ::= undefined")
    with pytest.raises(torchnative.InvalidArgumentError, match="at most one"):
        llm.generate("x", regex="a", json_object=True)
    with pytest.raises(TypeError):
        llm.generate("x", json_schema=3)


def test_speculative_decoding_gives_the_plain_output(llm):
    prompt = ask("Repeat this twice: the quick brown fox jumps over the lazy dog.")
    plain = llm.chat(prompt, max_new_tokens=40)
    spec = llm.chat(prompt, max_new_tokens=40, draft="prompt_lookup", draft_tokens=4)
    assert spec.tokens == plain.tokens and spec.text == plain.text
    assert spec.accepted_tokens > 0 and spec.drafted_tokens >= spec.accepted_tokens
    assert plain.drafted_tokens == 0
    sampled = dict(max_new_tokens=30, do_sample=True, temperature=0.9, seed=2)
    assert llm.chat(prompt, draft=llm, draft_tokens=2, **sampled).tokens == llm.chat(prompt, **sampled).tokens
    with pytest.raises(TypeError):
        llm.chat(prompt, draft="ngram")
    with pytest.raises(torchnative.InvalidArgumentError):
        llm.chat(prompt, draft="prompt_lookup", draft_tokens=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        llm.session().send("hi", draft="prompt_lookup")
