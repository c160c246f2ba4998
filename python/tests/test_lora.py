"""LoRA adapters from Python: load_lora, lora= per request, per session and in the engine,
refusals."""

from __future__ import annotations

import json
import struct

import pytest

import torchnative

HIDDEN, KV = 576, 192  # SmolLM2-135M, the default model: hidden size, kv heads x head dim


def _write_adapter(directory) -> None:
    """A PEFT adapter on layer 0's v_proj (rank 2), written without numpy."""
    directory.mkdir()
    (directory / "adapter_config.json").write_text(
        json.dumps({"peft_type": "LORA", "r": 2, "lora_alpha": 4, "target_modules": ["v_proj"]})
    )
    base = "base_model.model.model.layers.0.self_attn.v_proj"
    tensors = [(f"{base}.lora_A.weight", [2, HIDDEN], 1), (f"{base}.lora_B.weight", [KV, 2], 2)]
    header, data = {}, b""
    for name, shape, k in tensors:
        n = shape[0] * shape[1]
        vals = [(((i * 7919 + k) % 1000) / 1000.0 - 0.5) * 0.5 for i in range(n)]
        start = len(data)
        data += struct.pack(f"<{n}f", *vals)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [start, len(data)]}
    h = json.dumps(header).encode()
    (directory / "adapter_model.safetensors").write_bytes(struct.pack("<Q", len(h)) + h + data)


@pytest.fixture
def adapter(llm, tmp_path):
    _write_adapter(tmp_path / "adapter")
    return llm.load_lora(tmp_path / "adapter")


PROMPT = "Name a colour."


def test_lora_scales_change_the_answer_and_scale_zero_does_not(llm, adapter):
    assert isinstance(adapter, torchnative.LoraAdapter) and adapter.rank == 2
    plain = llm.generate(PROMPT, max_new_tokens=12)
    assert llm.generate(PROMPT, max_new_tokens=12, lora=(adapter, 0.0)).tokens == plain.tokens
    strong = llm.generate(PROMPT, max_new_tokens=12, lora=(adapter, 8.0))
    assert strong.tokens != plain.tokens
    # A list of adapters: their deltas add up.
    halves = llm.generate(PROMPT, max_new_tokens=12, lora=[(adapter, 4.0), (adapter, 4.0)])
    assert halves.tokens == strong.tokens
    # The model is unchanged for requests without an adapter.
    assert llm.generate(PROMPT, max_new_tokens=12).tokens == plain.tokens


def test_a_session_keeps_its_adapter_until_told_otherwise(llm, adapter):
    message = {"role": "user", "content": PROMPT}
    plain = llm.chat([message], max_new_tokens=10)
    strong = llm.chat([message], max_new_tokens=10, lora=(adapter, 8.0))
    session = llm.session()
    assert session.send(PROMPT, max_new_tokens=10, lora=(adapter, 8.0)).tokens == strong.tokens
    session.reset()
    assert session.send(PROMPT, max_new_tokens=10).tokens == strong.tokens  # still chosen
    session.reset()
    assert session.send(PROMPT, max_new_tokens=10, lora=[]).tokens == plain.tokens


def test_bad_lora_arguments_are_refused(llm, adapter, tmp_path):
    with pytest.raises(TypeError, match="lora"):
        llm.generate(PROMPT, lora="adapter")
    with pytest.raises(TypeError, match="scale"):
        llm.generate(PROMPT, lora=(adapter, "x"))
    with pytest.raises(torchnative.InvalidArgumentError, match="adapter_config.json"):
        llm.load_lora(tmp_path / "missing")


def test_the_engine_runs_each_request_with_its_adapter(llm, adapter):
    engine = torchnative.Engine(llm, max_running=2)
    choices = [None, (adapter, 8.0), (adapter, 0.0), [(adapter, 4.0), (adapter, 4.0)]]
    kw = [{} if c is None else {"lora": c} for c in choices]
    streams = [engine.submit(PROMPT, max_new_tokens=12, **k) for k in kw]
    texts = [s.text() for s in streams]
    assert texts == [llm.generate(PROMPT, max_new_tokens=12, **k).text for k in kw]
    assert texts[1] != texts[0] and texts[2] == texts[0] and texts[3] == texts[1]
