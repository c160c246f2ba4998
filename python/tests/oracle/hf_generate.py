"""Test-only reference for the Python package: what transformers does with the same model.

Usage: python hf_generate.py REQUEST.json RESULT.json

REQUEST: {"gguf": PATH, "max_new_tokens": N,
          "raw_prompts": [str, ...], "conversations": [[{"role", "content"}, ...], ...]}
RESULT:  {"raw": [{"prompt_ids": [...], "greedy": [...]}, ...],
          "chat": [{"text": str, "prompt_ids": [...], "greedy": [...]}, ...]}

The GGUF is dequantized to f32 by transformers; `greedy` is `generate(do_sample=False)`'s new
tokens, stopping at end-of-sequence (not included) or after N tokens.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


def greedy(model, tok, prompt_ids, max_new_tokens):
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    out = model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        do_sample=False,
        max_new_tokens=max_new_tokens,
        pad_token_id=tok.eos_token_id,
    )
    new = out[0, len(prompt_ids):].tolist()
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    for i, t in enumerate(new):
        if t in eos:
            return new[:i]
    return new


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    d, name = os.path.split(req["gguf"])
    tok = AutoTokenizer.from_pretrained(d, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        d, gguf_file=name, dtype=torch.float32,
        quantization_config=transformers.GgufConfig(dequantize=True),
    )
    model.eval()
    n = req["max_new_tokens"]
    result = {"raw": [], "chat": []}
    with torch.no_grad():
        for prompt in req["raw_prompts"]:
            ids = tok(prompt).input_ids
            result["raw"].append({"prompt_ids": ids, "greedy": greedy(model, tok, ids, n)})
        for conv in req["conversations"]:
            text = tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True)
            ids = tok(text, add_special_tokens=False).input_ids
            result["chat"].append({"text": text, "prompt_ids": ids, "greedy": greedy(model, tok, ids, n)})
    with open(sys.argv[2], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
