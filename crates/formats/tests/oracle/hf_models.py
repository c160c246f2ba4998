"""transformers' view of config.json files, plus real checkpoints saved from them.

usage: hf_models.py OUT_DIR CONFIG_JSON...
For each CONFIG_JSON (named <case>.json): loads it with AutoConfig as from_pretrained would,
builds the model from it with random weights, and save_pretrained()s it to OUT_DIR/<case>/
(sharded into small files when the case name contains "sharded"; configs with
hidden_size > 256 are only normalized, not built). Prints JSON on stdout:
{case: {"config": normalized fields, "tensors": {name: [dtype, shape, hex bytes]}}}.
Also writes OUT_DIR/dtypes.safetensors with one tensor per supported dtype and reports it
under "dtypes".
"""
import json
import os
import shutil
import sys
import tempfile

import torch
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM

out_dir = sys.argv[1]
result = {}


def effective_sliding_window(c):
    types = getattr(c, "layer_types", None)
    if types:
        if all(t == "full_attention" for t in types):
            return None
        if all(t == "sliding_attention" for t in types):
            return c.sliding_window
        return "mixed"
    return getattr(c, "sliding_window", None)


def rope_dim(c, head_dim):
    params = c.rope_parameters or {}
    return int(head_dim * params.get("partial_rotary_factor", 1.0))


def longrope_attention_factor(c):
    params = c.rope_parameters or {}
    if params.get("rope_type") != "longrope":
        return None
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    return ROPE_INIT_FUNCTIONS["longrope"](c)[1]


def as_list(v):
    if v is None:
        return []
    return list(v) if isinstance(v, (list, tuple)) else [v]


for path in sys.argv[2:]:
    case = os.path.basename(path)[: -len(".json")]
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(path, os.path.join(tmp, "config.json"))
        c = AutoConfig.from_pretrained(tmp)
    heads = c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // heads
    config = {
        "model_type": c.model_type,
        "n_layers": c.num_hidden_layers,
        "hidden_size": c.hidden_size,
        "n_heads": heads,
        "n_kv_heads": c.num_key_value_heads,
        "head_dim": head_dim,
        "intermediate_size": c.intermediate_size,
        "vocab_size": c.vocab_size,
        "context_length": c.max_position_embeddings,
        "rope_parameters": c.rope_parameters,
        "norm_eps": c.rms_norm_eps,
        "tie_word_embeddings": c.tie_word_embeddings,
        "sliding_window": effective_sliding_window(c),
        "bos_token_id": c.bos_token_id,
        "eos_token_ids": as_list(c.eos_token_id),
        "pad_token_id": c.pad_token_id,
        # Per-layer windows (Gemma), the rotated dims, Gemma's scalars and caps as the model
        # classes read them (Gemma 3's attention takes no softcap), LongRoPE's attention factor.
        "layer_types": getattr(c, "layer_types", None),
        "window": getattr(c, "sliding_window", None),
        "rope_dim": rope_dim(c, head_dim),
        "query_pre_attn_scalar": getattr(c, "query_pre_attn_scalar", None),
        "attn_logit_softcapping": getattr(c, "attn_logit_softcapping", None)
        if c.model_type == "gemma2" else None,
        "final_logit_softcapping": getattr(c, "final_logit_softcapping", None),
        "activation": getattr(c, "hidden_activation", None) or getattr(c, "hidden_act", None),
        "longrope_attention_factor": longrope_attention_factor(c),
    }
    if c.hidden_size > 256:  # full-size configs: compare the config only
        result[case] = {"config": config, "tensors": None}
        continue
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(c, dtype=torch.float32)
    target = os.path.join(out_dir, case)
    shard = "40KB" if "sharded" in case else "1GB"
    model.save_pretrained(target, max_shard_size=shard)
    tensors = {}
    for name, t in model.state_dict().items():
        t = t.detach().contiguous()
        tensors[name] = ["F32", list(t.shape), t.numpy().tobytes().hex()]
    result[case] = {"config": config, "tensors": tensors}

dtypes = {
    "f32": torch.tensor([1.5, -2.0, 3.25], dtype=torch.float32),
    "f16": torch.tensor([[0.5, -1.0], [65504.0, 1e-4]], dtype=torch.float16),
    "bf16": torch.tensor([1.0, -0.0078125, 3e38], dtype=torch.bfloat16),
    "i64": torch.tensor([-(2**62), 7], dtype=torch.int64),
    "i32": torch.tensor([[-5], [2**31 - 1]], dtype=torch.int32),
    "u8": torch.arange(0, 250, 10, dtype=torch.uint8),
    "bool": torch.tensor([True, False, True]),
    "empty": torch.zeros((0, 3), dtype=torch.float32),
}
names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
         torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
save_file(dtypes, os.path.join(out_dir, "dtypes.safetensors"), metadata={"format": "pt"})
result["dtypes"] = {
    k: [names[t.dtype], list(t.shape), t.contiguous().view(torch.uint8).numpy().tobytes().hex()]
    for k, t in dtypes.items()
}
json.dump(result, sys.stdout)
