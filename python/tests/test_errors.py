"""Each failure raises the documented class with the runtime's message."""

from __future__ import annotations

import inspect

import pytest

import torchnative
from torchnative import (
    ContextOverflowError,
    InvalidArgumentError,
    ModelLoadError,
    TorchnativeError,
    UnsupportedModelError,
)


def test_hierarchy():
    for cls in (ModelLoadError, UnsupportedModelError, ContextOverflowError, InvalidArgumentError):
        assert issubclass(cls, TorchnativeError)
    assert issubclass(InvalidArgumentError, ValueError)


def test_missing_file_is_a_model_load_error(tmp_path):
    missing = tmp_path / "nope.gguf"
    with pytest.raises(ModelLoadError, match="nope.gguf"):
        torchnative.load_llm(missing)


def test_malformed_file_is_a_model_load_error(tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF\x03\x00\x00\x00" + b"\xff" * 40)
    with pytest.raises(ModelLoadError, match="bad.gguf"):
        torchnative.load_llm(bad)


def test_missing_default_model_names_path_and_fetch_script(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHNATIVE_HOME", str(tmp_path))
    with pytest.raises(ModelLoadError) as info:
        torchnative.load_llm()
    message = str(info.value)
    assert str(tmp_path / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf") in message
    assert "scripts/fetch-model.sh" in message


def test_unknown_dtype_is_unsupported(model_file):
    with pytest.raises(UnsupportedModelError, match="q7"):
        torchnative.load_llm(model_file, dtype="q7")


def test_context_overflow(llm):
    with pytest.raises(ContextOverflowError) as info:
        llm.generate("Hello", max_new_tokens=llm.context_length + 1)
    assert info.value.capacity == llm.context_length
    assert info.value.max_new_tokens == llm.context_length + 1
    assert "context" in str(info.value)
    session = llm.session(n_ctx=16)
    with pytest.raises(ContextOverflowError):
        session.send("Tell me a long story about a dragon.", max_new_tokens=8)
    # The failed turn is not kept.
    assert session.messages == []


def test_context_overflow_from_load_n_ctx(model_file):
    small = torchnative.load_llm(model_file, n_ctx=8)
    with pytest.raises(ContextOverflowError):
        small.generate("The capital of France is", max_new_tokens=8)


def test_context_overflow_in_a_stream_raises_from_iteration(llm):
    stream = llm.stream("Hello", max_new_tokens=llm.context_length + 1)
    with pytest.raises(ContextOverflowError):
        next(stream)
    with pytest.raises(ContextOverflowError):
        stream.result


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(top_p=0.0), "top_p"),
        (dict(top_p=1.5), "top_p"),
        (dict(temperature=-1.0), "temperature"),
        (dict(min_p=2.0), "min_p"),
        (dict(typical_p=0.0), "typical_p"),
        (dict(repetition_penalty=0.0), "repetition_penalty"),
        (dict(max_new_tokens=0), "max_new_tokens"),
        (dict(top_k=-1), "top_k"),
        (dict(seed=-3), "seed"),
        (dict(stop=""), "stop"),
    ],
)
def test_bad_values_are_invalid_arguments(llm, kwargs, name):
    with pytest.raises(InvalidArgumentError, match=name):
        llm.generate("Hello", do_sample=True, **kwargs)


def test_unknown_kwargs_are_type_errors_naming_them(llm):
    with pytest.raises(TypeError, match="'max_tokens'.*'topp'|'topp'.*'max_tokens'"):
        llm.generate("Hello", max_tokens=5, topp=0.5)
    with pytest.raises(TypeError, match="'bogus'"):
        llm.chat([{"role": "user", "content": "Hi"}], bogus=1)
    with pytest.raises(TypeError, match="'bogus'"):
        llm.stream("Hi", bogus=1)
    with pytest.raises(TypeError, match="'bogus'"):
        llm.session().send("Hi", bogus=1)


def test_wrong_types_are_type_errors(llm):
    with pytest.raises(TypeError):
        llm.generate("Hello", max_new_tokens="5")
    with pytest.raises(TypeError):
        llm.generate("Hello", do_sample=1)
    with pytest.raises(TypeError):
        llm.generate("Hello", stop=[1])
    with pytest.raises(TypeError):
        llm.chat([{"role": "user"}])
    with pytest.raises(TypeError):
        llm.generate(42)


def test_empty_inputs(llm):
    with pytest.raises(InvalidArgumentError, match="prompt"):
        llm.generate("")
    with pytest.raises(InvalidArgumentError, match="messages"):
        llm.chat([])


def test_detokenize_out_of_range(llm):
    with pytest.raises(InvalidArgumentError, match="out of range"):
        llm.detokenize([10**9])
    with pytest.raises(InvalidArgumentError):
        llm.detokenize([-1])


def test_public_api_is_documented():
    for name in torchnative.__all__:
        obj = getattr(torchnative, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__doc__ and obj.__doc__.strip(), name
    for cls in (torchnative.LLM, torchnative.Session, torchnative.Stream):
        for attr, member in vars(cls).items():
            if not attr.startswith("_"):
                assert member.__doc__ and member.__doc__.strip(), f"{cls.__name__}.{attr}"
