"""A model's generation_config.json sets what a request does when no keyword argument is given,
and results report the token loop's allocations."""

from __future__ import annotations

from pathlib import Path

import pytest

import torchnative
from conftest import RAW_PROMPTS


def test_gguf_has_only_built_in_defaults(llm):
    cfg = llm.generation_config
    assert cfg["do_sample"] is False
    assert cfg["max_new_tokens"] == 256 and cfg["max_length"] is None
    assert 2 in cfg["eos_token_ids"]


def _model_dir(tmp_path: Path, name: str, generation_config: str) -> Path:
    copy = (
        torchnative.torchnative_home()
        / "derived"
        / f"{Path(torchnative.default_model_path()).stem}.safetensors-f32"
    )
    if not (copy / "done").is_file():
        pytest.skip(f"no safetensors copy of the default model at {copy} (made by cargo test)")
    d = tmp_path / name
    d.mkdir()
    for f in copy.iterdir():
        if f.is_file() and f.name != "generation_config.json":
            (d / f.name).symlink_to(f)
    (d / "generation_config.json").write_text(generation_config)
    return d


def test_model_defaults_apply_when_no_argument_is_given(tmp_path):
    d = _model_dir(
        tmp_path,
        "greedy",
        '{"eos_token_id": 2, "do_sample": false, "temperature": 0.6, "max_new_tokens": 6}',
    )
    llm = torchnative.load_llm(d)
    cfg = llm.generation_config
    assert cfg["do_sample"] is False and cfg["max_new_tokens"] == 6
    assert cfg["temperature"] == pytest.approx(0.6)
    r = llm.generate(RAW_PROMPTS[0])
    assert 1 <= len(r.tokens) <= 6
    # The same as saying it explicitly; a caller's argument overrides the model's.
    assert r.tokens == llm.generate(RAW_PROMPTS[0], max_new_tokens=6, do_sample=False).tokens
    assert len(llm.generate(RAW_PROMPTS[0], max_new_tokens=2).tokens) <= 2


def test_model_max_length_bounds_prompt_plus_new_tokens(tmp_path):
    probe = torchnative.load_llm(_model_dir(tmp_path, "probe", "{}"))
    n_prompt = len(probe.tokenize(RAW_PROMPTS[0]))
    d = _model_dir(tmp_path, "bounded", f'{{"max_length": {n_prompt + 4}}}')
    llm = torchnative.load_llm(d)
    assert llm.generation_config["max_length"] == n_prompt + 4
    assert len(llm.generate(RAW_PROMPTS[0], min_new_tokens=4).tokens) == 4
    # A caller's max_new_tokens takes precedence over the model's max_length.
    assert len(llm.generate(RAW_PROMPTS[0], max_new_tokens=6, min_new_tokens=6).tokens) == 6


def test_result_reports_decode_loop_allocations(llm):
    r = llm.generate(RAW_PROMPTS[0], max_new_tokens=32, min_new_tokens=32)
    n = r.allocations_in_decode_loop
    assert isinstance(n, int)
    # Only rayon's job queue may allocate: one block per 63 forward passes.
    assert n <= 1, n
