"""One side of the architecture sweep (arch_sweep.py drives it; not normally run by hand).

``--mode build`` (upstream torch + transformers): for every architecture, build a tiny random
model from its config (seeded, no download), save it with ``save_pretrained`` under ``--dir``,
run a forward on fixed ids in float32 and again in float64 (the tolerance reference), and
record both outputs.  ``--mode run`` (the face): load each saved model with
``from_pretrained`` and run the same forward.  One JSON line per architecture:

    {"arch": ..., "cls": ..., "shape": [...], "out": base64 float32, "ref64": base64 float64}
    {"arch": ..., "cls": ..., "exc": {"type": ..., "msg": ...}, "phase": "config"|"build"|...}

``--start N`` skips the first N architectures (the driver restarts a side after a crash).
``--names FILE`` (a JSON list of ``model_type/Class`` names) runs those, in that order, instead
of every architecture (``--only``'s regex on model types narrows that list); arch_sweep.py
passes a ``--slice`` and, for upstream, the architectures its oracle cache lacks.  ``--mode
list`` writes the header only.  The header lists the architectures run (``archs``, which
records' ``i`` index) and every one there is (``all_archs``).
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

# Per-model-type fixes applied over the shrink, for configs whose fields must stay consistent
# beyond the size fields (a dict value merges into a sub-config; a callable gets the layer count).
_MLA = {"num_key_value_heads": 4,  # latent attention: one key/value head per query head
        "n_group": 1, "topk_group": 1}  # expert groups must divide the 4 experts
_GEMMA3N = {"num_kv_shared_layers": 0,  # sharing needs more layers than the shrink keeps
            "vocab_size_per_layer_input": 512, "hidden_size_per_layer_input": 8,  # 134M otherwise
            "activation_sparsity_pattern": lambda n: [0.95] + [0.0] * (n - 1)}  # one per layer
_QWEN4_EXP = {  # its indexed attention needs the token indexer's sizes (default None)
    "indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 8, "indexer_budget": 8,
    "indexer_compress_ratio": 4, "hc_lowrank": 8,
    "layer_types": lambda n: ["linear_attention"] * (n - 1) + ["indexed_attention"]}
_BLT_PART = {"num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
             "intermediate_size": 64, "max_position_embeddings": 128}
# The assistants validate that their text model has none of these, and share every layer's keys
# and values (0: all); their forward still needs the main model's shared key/value states.
_GEMMA4_ASSISTANT = {"hidden_size_per_layer_input": 0, "vocab_size_per_layer_input": 0,
                     "enable_moe_block": False, "use_double_wide_mlp": False,
                     "num_kv_shared_layers": 0}
FIX = {
    "axk1": _MLA,
    "bailing_hybrid": dict(_MLA, num_experts_per_tok=2, layer_group_size=2),  # attention every 2nd
    "bamba": {"attn_layer_indices": lambda n: [n - 1]},  # default None: no attention layer
    "beam": {"n_group": 1, "topk_group": 1},  # expert groups must divide the 4 experts
    "blt": {"vocab_size": 260,  # bytes; its parts keep 260
            "use_cache": False,  # upstream's cache cannot read this config's layer count
            "encoder_hash_byte_group_vocab": 512, "encoder_hash_byte_group_size": [3, 4],
            # its parts are sub-configs the shrink does not reach (the defaults need >20 GB);
            # the global width is the encoder's times cross_attn_k
            "patcher_config": dict(_BLT_PART, hidden_size=32, head_dim=8),
            "encoder_config": dict(_BLT_PART, hidden_size=32, head_dim=8, hidden_size_global=64),
            "decoder_config": dict(_BLT_PART, hidden_size=32, head_dim=8, hidden_size_global=64),
            "global_config": dict(_BLT_PART, hidden_size=64, head_dim=16)},
    "cohere_compass_text": {"rope_parameters": {  # default empty; each layer type looks its own up
        t: {"rope_type": "default", "rope_theta": 10000.0}
        for t in ("full_attention", "sliding_attention")}},
    "dbrx": {"attn_config": {"rope_theta": 10000.0,  # the attention reads it from here
                             "kv_n_heads": 2,
                             "clip_qkv": 8.0},  # with None, clamp(None, None) raises upstream
             "ffn_config": {"ffn_hidden_size": 64, "moe_num_experts": 4, "moe_top_k": 2}},
    "deepseek_v2": dict(_MLA, num_experts_per_tok=2),  # its default is None (no routing)
    "deepseek_v3": _MLA,
    "deepseek_v32": _MLA,
    "dots1": {"n_routed_experts": 4, "num_experts_per_tok": 2,  # defaults are None
              "n_shared_experts": 1},
    "dots3_note": {"text_config": dict(_MLA, head_dim=16),  # head_dim == nope + rope head dims
                   # the adapters project into the (shrunk) text width
                   "vision_config": {"adapter_out_dim": 32},
                   "audio_config": {"adapter_out_dim": 32}},
    "dots3_note_text": dict(_MLA, head_dim=16),  # head_dim == nope + rope head dims
    "ernie4_5_moe": {"moe_k": 2},  # top-k must not exceed the 4 experts
    "falcon_h1": {"mamba_d_ssm": 64, "mamba_d_head": 16},  # heads * head == d_ssm (4 * 16)
    "gemma3n": {"text_config": _GEMMA3N},
    "gemma3n_text": _GEMMA3N,
    "gemma4_assistant": {"text_config": _GEMMA4_ASSISTANT},
    "gemma4_unified_assistant": {"text_config": _GEMMA4_ASSISTANT},
    "gpt_neo": {"attention_types": lambda n: [[["global", "local"], n // 2]]},  # one per layer
    "granitemoehybrid": {  # default None: no attention layer
        "layer_types": lambda n: ["linear_attention"] * (n - 1) + ["full_attention"]},
    "inkling2_loop_text": {"unpadded_vocab_size": 500},  # must not exceed the shrunk vocabulary
    "inkling2_text": {"unpadded_vocab_size": 500},  # must not exceed the shrunk vocabulary
    "kimi_linear": dict(_MLA, num_experts_per_tok=2, linear_head_dim=8, linear_num_heads=4,
                        # default: attention from the 5th layer on
                        layer_types=lambda n: ["linear_attention"] * (n - 1) + ["full_attention"]),
    "lfm2_moe": {"layer_types": lambda n: ["conv"] * (n - 1) + ["full_attention"]},  # default None
    "mamba2": {"head_dim": 16, "n_groups": 1},  # hidden*expand == heads*head_dim; groups | heads
    "musicgen": {"decoder": {"num_codebooks": 1}},  # the ids are (batch * codebooks, length)
    "musicgen_melody": {"decoder": {"num_codebooks": 1}},  # the ids are (batch * codebooks, length)
    "nemotron": {"num_key_value_heads": 2},  # its default None breaks the attention
    "qwen4_exp": {"text_config": _QWEN4_EXP},
    "qwen4_exp_text": _QWEN4_EXP,
    "reformer": {"is_decoder": True,  # the LM head model requires it
                 "attn_layers": ["local", "lsh"],  # its layer count is this list's length
                 "axial_pos_shape": [8, 16],  # multiplies to the 128 positions
                 "axial_pos_embds_dim": [16, 16],  # sums to the 32 width
                 "feed_forward_size": 64},
    "xlstm": {"hidden_size": 64, "qk_dim_factor": 1.0},  # its dims round up to multiples of 64
    "xmod": {"default_language": "en_XX"},  # the forward needs a language adapter
    "zaya": {"num_experts_per_tok": 1},  # the only routing it supports
}

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
    def fixed(v):
        if isinstance(v, dict):
            return {k: fixed(x) for k, x in v.items()}
        return v(layers) if callable(v) else v

    try:
        base = AutoConfig.for_model(model_type)
    except Exception:  # noqa: BLE001 - a default config its own validation rejects
        base = AutoConfig.for_model(model_type, **fixed(FIX.get(model_type, {})))
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
    for k, v in fixed(FIX.get(model_type, {})).items():
        base_v = over.get(k, have.get(k))
        over[k] = dict(base_v, **v) if isinstance(v, dict) and isinstance(base_v, dict) else v
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
        for sub in ("text_config", "language_config", "llm_config", "decoder"):
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


def ref64(torch, cls, model, ids):
    """The same model's output in float64 (the tolerance reference)."""
    def run(m):
        if hasattr(m, "set_experts_implementation"):
            # grouped_mm has no float64 kernel; the loop over experts computes the same
            try:
                m.set_experts_implementation("eager")
            except Exception:  # noqa: BLE001 - models without experts
                pass
        m.eval()
        with torch.no_grad():
            return output_tensor(m(input_ids=ids))

    state = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        return run(model.double())
    except Exception:  # noqa: BLE001 - retry the way upstream builds a float64 model
        pass
    # Built in float64, a model keeps the parameters it pins to float32 (inkling2's router casts
    # its input to float32), and with float64 the default dtype its constants are float64 too
    # (xglm's mask floor, finfo(float64).min, overflows a float32 tensor).
    m = cls._from_config(model.config, dtype=torch.float64) if hasattr(cls, "_from_config") \
        else cls(model.config).double()
    m.load_state_dict(state)
    torch.set_default_dtype(torch.float64)
    try:
        return run(m)
    finally:
        torch.set_default_dtype(torch.float32)


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
    ap.add_argument("--mode", choices=("build", "run", "list"), required=True)
    ap.add_argument("--dir", default=None, help="(build, run) the saved models")
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--only", default=None, help="regex on model types")
    ap.add_argument("--names", default=None,
                    help="JSON file with a list of model_type/Class names: only those, in order")
    args = ap.parse_args()
    if args.mode != "list" and not args.dir:
        ap.error("--mode %s needs --dir" % args.mode)
    warnings.simplefilter("ignore")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import re
    import torch
    import transformers
    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES
    transformers.logging.set_verbosity_error()
    all_archs = sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.items()) + ENCODERS
    archs = all_archs
    if args.names:
        with open(args.names) as f:
            archs = [tuple(n.split("/", 1)) for n in json.load(f)]
    if args.only:
        rx = re.compile(args.only)
        archs = [a for a in archs if rx.search(a[0])]
    torch.set_num_threads(1)
    with open(args.out, "a", buffering=1) as fh:
        if args.start == 0:
            fh.write(json.dumps({"header": True, "torch": torch.__version__,
                                 "transformers": transformers.__version__,
                                 "archs": [a[0] + "/" + a[1] for a in archs],
                                 "all_archs": [a[0] + "/" + a[1] for a in all_archs]}) + "\n")
        if args.mode == "list":
            return 0
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
                    ref = ref64(torch, cls, model, ids)
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
