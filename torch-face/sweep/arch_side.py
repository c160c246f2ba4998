"""One side of the architecture sweep (arch_sweep.py drives it; not normally run by hand).

``--mode build`` (upstream torch + transformers): for every architecture, build a tiny random
model from its config (seeded, no download), save it with ``save_pretrained`` under ``--dir``,
run a forward on fixed ids in float32 and again in float64 (the tolerance reference), and
record both outputs.  ``--mode run`` (the face): load each saved model with
``from_pretrained`` and run the same forward.  One JSON line per architecture:

    {"arch": ..., "cls": ..., "shape": [...], "out": base64 float32, "ref64": base64 float64}
    {"arch": ..., "cls": ..., "exc": {"type": ..., "msg": ...}, "phase": "config"|"build"|...}

``--start N`` skips the first N architectures (the driver restarts a side after a crash).
"""
import argparse
import base64
import json
import os
import struct
import sys
import time
import traceback
import warnings

# Decoders: every model type transformers maps to a causal-LM class.  Encoders: the families the
# issue names, compared on their last hidden state.
ENCODERS = [
    ("bert", "BertModel"),
    ("roberta", "RobertaModel"),
    ("distilbert", "DistilBertModel"),
    ("modernbert", "ModernBertModel"),
    ("t5", "T5EncoderModel"),
]

# Small values for the size fields configs name differently; only fields a config already has
# are set.
TINY = {
    "vocab_size": 512,
    "hidden_size": 32, "d_model": 32, "n_embd": 32, "dim": 32, "embed_dim": 32, "emb_dim": 32,
    "word_embed_proj_dim": 32, "embedding_size": 32,
    "num_hidden_layers": 2, "n_layer": 2, "num_layers": 2, "n_layers": 2, "num_decoder_layers": 2,
    "decoder_layers": 2, "encoder_layers": 2,
    "num_attention_heads": 4, "n_head": 4, "n_heads": 4, "num_heads": 4, "decoder_attention_heads": 4,
    "encoder_attention_heads": 4,
    "num_key_value_heads": 2, "num_kv_heads": 2, "n_kv_heads": 2, "multi_query_group_num": 2,
    "intermediate_size": 64, "ffn_dim": 64, "n_inner": 64, "d_ff": 64, "hidden_dim": 64,
    "decoder_ffn_dim": 64, "encoder_ffn_dim": 64, "ffn_hidden_size": 64,
    "head_dim": 8, "d_kv": 8, "kv_channels": 8, "attention_head_size": 8,
    "max_position_embeddings": 128, "n_positions": 128, "max_sequence_length": 128, "n_ctx": 128,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "moe_num_experts": 4,
    "num_experts_per_tok": 2, "moe_topk": 2, "top_k": 2, "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32, "n_shared_experts": 1,
    "first_k_dense_replace": 1, "num_dense_layers": 1,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8,
    "v_head_dim": 8,
    "sliding_window": 16, "attention_window_size": 16,
    "mamba_d_state": 8, "mamba_n_heads": 4, "mamba_d_head": 16, "mamba_expand": 2,
    "ssm_state_size": 8, "state_size": 8, "conv_kernel": 4, "time_step_rank": 4,
    "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 8,
    "linear_value_head_dim": 8,
    "rotary_dim": 8, "rotary_emb_base_dim": 8,
}

# Size fields whose default is None (derived) but that some models read directly.
TINY_IF_NONE = {"head_dim": 8}

IDS = [[1, 5, 9, 14, 3, 7, 2, 11, 30, 4]]


# Attempts, in order, until upstream builds and runs the model: the plain shrink; without
# grouped key/value heads (multi-query and latent-attention layouts want their own); with 4 and
# then 8 layers (hybrids place an attention layer every few layers).
ATTEMPTS = [dict(layers=2, kv=True), dict(layers=2, kv=False), dict(layers=4, kv=True),
            dict(layers=8, kv=True), dict(layers=8, kv=False)]
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "num_decoder_layers",
              "decoder_layers", "encoder_layers")
KV_KEYS = ("num_key_value_heads", "num_kv_heads", "n_kv_heads", "multi_query_group_num")
TOKEN_KEYS = ("pad_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id",
              "sep_token_id", "cls_token_id", "mask_token_id", "unk_token_id")


PER_LAYER_LISTS = ("layer_types", "mlp_layer_types", "layers_block_type", "layer_block_types",
                   "block_types", "attn_layer_indices", "full_attn_idxs", "intermediate_size",
                   "moe_layer_freq", "layer_types_pattern", "sliding_window_pattern_list",
                   "no_rope_layers", "swa_layers")


def shrink_layer_list(v, layers):
    """A per-layer list for `layers` layers that keeps every kind the full one has (so a hybrid
    keeps an attention layer); index lists keep the indices that still exist."""
    if all(isinstance(x, int) and not isinstance(x, bool) for x in v) and len(set(v)) == len(v) \
            and max(v) > 1:
        kept = [x for x in v if x < layers]
        return kept or [layers - 1]
    out = list(v[:layers])
    missing = [x for x in dict.fromkeys(v) if x not in out]
    for i, x in enumerate(missing[:layers]):
        out[layers - 1 - i] = x
    return out


def tiny_config(AutoConfig, model_type, layers=2, kv=True):
    base = AutoConfig.for_model(model_type)
    have = base.to_dict()

    def overrides(d):
        o = {}
        for k, v in TINY.items():
            if k in d and (isinstance(d[k], int) and not isinstance(d[k], bool)):
                if k in KV_KEYS and not kv:
                    continue
                o[k] = layers if k in LAYER_KEYS else v
        for k, v in TINY_IF_NONE.items():
            if k in d and d[k] is None:
                o[k] = v
        # per-layer lists and tables follow the new layer count
        for k, v in d.items():
            if k in PER_LAYER_LISTS and isinstance(v, list) and v:
                o[k] = shrink_layer_list(v, layers)
            elif k == "per_layer_config" and isinstance(v, dict):
                o[k] = {i: c for i, c in v.items() if int(i) < layers}
        # special token ids must fall inside the small vocabulary
        for k in TOKEN_KEYS:
            t = d.get(k)
            if isinstance(t, int) and not isinstance(t, bool) and t >= TINY["vocab_size"]:
                o[k] = TINY["vocab_size"] - 1 - TOKEN_KEYS.index(k)
            elif isinstance(t, list) and any(isinstance(x, int) and x >= TINY["vocab_size"] for x in t):
                o[k] = [TINY["vocab_size"] - 1]
        return o

    over = overrides(have)
    for sub in ("text_config", "decoder", "language_config", "llm_config"):
        if isinstance(have.get(sub), dict):
            over[sub] = dict(have[sub], **overrides(have[sub]))
    try:
        return AutoConfig.for_model(model_type, **over)
    except Exception:
        # some configs reject None for the derived lists: keep theirs
        over = {k: v for k, v in over.items() if v is not None}
        return AutoConfig.for_model(model_type, **over)


def build(torch, AutoConfig, cls, mt, attempt):
    """Model, float32 output and ids for one shrink attempt (raises when upstream cannot)."""
    cfg = tiny_config(AutoConfig, mt, **attempt)
    want = getattr(cls, "config_class", None)
    if want is not None and not isinstance(cfg, want):
        # a causal-LM class of a composite model takes the text part of the config
        for sub in ("text_config", "language_config", "llm_config"):
            if isinstance(getattr(cfg, sub, None), want):
                cfg = getattr(cfg, sub)
                break
    vocab = getattr(cfg, "vocab_size", None) or getattr(
        getattr(cfg, "text_config", None), "vocab_size", None) or TINY["vocab_size"]
    ids = torch.tensor(IDS) % vocab
    torch.manual_seed(0)
    model = cls._from_config(cfg, dtype=torch.float32) if hasattr(cls, "_from_config") else cls(cfg)
    model.eval()
    with torch.no_grad():
        out = output_tensor(model(input_ids=ids))
    return model, out, ids


def enc(values, fmt):
    return base64.b64encode(struct.pack("<%d%s" % (len(values), fmt), *values)).decode("ascii")


def output_tensor(out):
    for name in ("logits", "last_hidden_state"):
        t = getattr(out, name, None)
        if t is not None:
            return t
    if isinstance(out, (tuple, list)):
        return out[0]
    raise TypeError("no logits or last_hidden_state in %s" % type(out).__name__)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("build", "run"), required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--only", default=None, help="regex on model types")
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import re
    import torch
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    transformers.logging.set_verbosity_error()
    archs = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()) + ENCODERS
    if args.only:
        rx = re.compile(args.only)
        archs = [a for a in archs if rx.search(a[0])]
    torch.set_num_threads(1)
    with open(args.out, "a", buffering=1) as fh:
        if args.start == 0:
            fh.write(json.dumps({"header": True, "torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "archs": [a[0] + "/" + a[1] for a in archs]}) + "\n")
        for i, (mt, cls_name) in enumerate(archs):
            if i < args.start:
                continue
            rec = {"arch": mt, "cls": cls_name, "i": i}
            phase = "class"
            t0 = time.time()
            try:
                cls = getattr(transformers, cls_name)
                path = os.path.join(args.dir, "%s--%s" % (mt, cls_name))
                ids = torch.tensor(IDS)
                if args.mode == "build":
                    first = None
                    for attempt in ATTEMPTS:
                        try:
                            model, out, ids = build(torch, AutoConfig, cls, mt, attempt)
                            rec["attempt"] = attempt
                            break
                        except Exception as e:  # noqa: BLE001 - try the next shrink
                            first = first or e
                    else:
                        phase = "build"
                        raise first
                    phase = "save"
                    model.save_pretrained(path)
                    with open(os.path.join(path, "ids.json"), "w") as f:
                        json.dump(ids.tolist(), f)
                    phase = "ref64"
                    model = model.double()
                    if hasattr(model, "set_experts_implementation"):
                        # grouped_mm has no float64 kernel; the loop over experts computes the same
                        try:
                            model.set_experts_implementation("eager")
                        except Exception:  # noqa: BLE001 - models without experts
                            pass
                    with torch.no_grad():
                        ref = output_tensor(model(input_ids=ids))
                    rec["ref64"] = enc(ref.detach().reshape(-1).tolist(), "d")
                else:
                    if not os.path.isdir(path):
                        continue
                    with open(os.path.join(path, "ids.json")) as f:
                        ids = torch.tensor(json.load(f))
                    phase = "load"
                    model = cls.from_pretrained(path, dtype=torch.float32)
                    model.eval()
                    phase = "forward"
                    with torch.no_grad():
                        out = output_tensor(model(input_ids=ids))
                out = out.detach().float()
                rec["shape"] = list(out.shape)
                rec["out"] = enc(out.reshape(-1).tolist(), "f")
            except BaseException as e:  # noqa: BLE001 - every failure is a result
                if isinstance(e, KeyboardInterrupt):
                    raise
                rec["phase"] = phase
                rec["exc"] = {"type": type(e).__name__, "msg": str(e)[:600],
                              "where": traceback.format_exc().splitlines()[-3:-1]}
            rec["secs"] = round(time.time() - t0, 2)
            fh.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
