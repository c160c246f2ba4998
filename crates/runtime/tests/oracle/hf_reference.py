"""Test-only reference for the runtime: transformers computes logits for the same model and tokens.

Usage: python hf_reference.py REQUEST.json

The request names a command:
  {"cmd": "logits", "model": {"gguf": PATH} | {"dir": PATH}, "truth": {"dir": PATH}?, "out_dir": DIR,
   "cases": [{"prompt_ids": [...], "decode_steps": N}, ...]}
      For each case i writes, as little-endian f32 row-major files:
        case{i}.prefill.f32 / .prefill64.f32   logits for every prompt position (f32 run / f64 run)
        case{i}.decode.f32 / .decode64.f32     logits of each cached greedy decode step
      and result.json: {"cases": [{"greedy": [ids...], "vocab": V}]}. The greedy path is taken
      from the f32 run; the f64 run is teacher-forced along it so both describe the same tokens.
      The f64 run ("truth") loads `truth` when given: transformers computes GGUF weights in f32
      whatever dtype is asked, so a true f64 run needs the safetensors copy of the same weights.
  {"cmd": "greedy", "model": ..., "out_dir": DIR, "prompts": [[ids...], ...], "max_new_tokens": N}
      transformers' own `generate(do_sample=False)` continuation of each prompt (f32), written to
      result.json as {"continuations": [[ids...], ...]} (stops early only at the model's EOS).
  {"cmd": "generate_logits", "model": ..., "out_dir": DIR, "prompts": [[ids...], ...], "max_new_tokens": N}
      "greedy" with the logits of every step (genI.logits32.f32) and the f64 truth for the same
      tokens (genI.logits64.f32: each step as one uncached call over the sequence so far).
  {"cmd": "model_defaults", "out_dir": DIR, "cases": [{"dir": PATH, "prompt_ids": [...], "generate": bool}]}
      For each model directory (with its generation_config.json): the generation config and
      mode `generate()` resolves when the caller passes nothing, and, when `generate` is true,
      its continuation of the prompt (f32, ids after the prompt). result.json:
      {"cases": [{"mode": "greedy_search"|"sample"|..., "do_sample", "temperature", "top_k",
      "top_p", "min_p", "repetition_penalty", "typical_p", "min_new_tokens", "eos_token_id",
      "continuation": [ids...]?}]}
  {"cmd": "save_safetensors", "model": {"gguf": PATH}, "out_dir": DIR}
      Loads the GGUF (dequantized to f32) and saves a safetensors copy with config and tokenizer.
  {"cmd": "tiny", "arch": "llama"|"mistral"|"qwen2"|"qwen3"|"phi3"|"phi3_longrope"|"gemma2"|"gemma3_text"
   |"llama_dynamic", "seed": S, "out_dir": DIR, "tokenizer_dir": DIR?}
  {"cmd": "tiny", "arch": "phi3_longrope_gguf"|"gemma3_text_gguf"|"gemma2_gguf"|"llama3_gguf", "tokenizer_dir": DIR, "seed": S, "out_dir": DIR}
      The same, with that directory's tokenizer files (tokenizer.json sets the vocabulary size) for
      llama.cpp's converter: a byte-level BPE one gets a GPT-2 tokenizer_config.json, a
      SentencePiece one (with tokenizer.model) its own files.
      Saves a tiny randomly initialised model of that architecture (safetensors + config);
      "llama_dynamic" takes the optional tokenizer_dir the same way (a model `load_llm` can run).
  Every "logits" case and every "greedy" prompt starts from the RoPE state of a freshly loaded
  model: dynamic NTK scaling keeps, in the rotary module, the longest sequence it has seen.
  {"cmd": "spm_tokenizer", "home": H, "vocab_size": N, "out_dir": DIR, "texts_out": PATH}
      A Gemma-style SentencePiece BPE vocabulary (byte fallback, no dummy prefix, digits split,
      <pad> <eos> <bos> <unk> then <mask> <start_of_turn> <end_of_turn> as user-defined pieces) trained
      on the first 60 files of the Brown corpus (bench/serve/run.py caches it under H), saved as
      tokenizer.model and, through transformers' GemmaTokenizer conversion, tokenizer.json and
      tokenizer_config.json (add_bos_token, a Gemma-style chat template, the turn markers
      special and listed in added_tokens_decoder as in Gemma's published files). PATH gets
      {"texts": [...], "ids": [[...]], "decoded": [...], "chat": [messages], "chat_ids": [...]}:
      held-out Brown sentences (files 200..) and edge cases, transformers' ids for each (BOS
      added) and its decoding of them without the BOS; a conversation and the ids of its
      rendering with the generation prompt (`apply_chat_template`).
  {"cmd": "make_lora", "model": ..., "out_dir": DIR, "r": R, "alpha": A, "target_modules": [...],
   "use_rslora": bool, "seed": S, "std": X}
      A PEFT LoRA adapter (adapter_config.json + adapter_model.safetensors) for that model, with
      lora_A and lora_B drawn N(0, std) (PEFT would start B at zero: the delta would vanish).
  "logits" and "greedy" also take "adapters": [{"dir": PATH, "scale": S}, ...]: PEFT loads each
  onto both runs, all active at once, each layer's scaling multiplied by its scale.
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

assert torch.__version__.split("+")[0] == "2.15.0", torch.__version__
assert transformers.__version__ == "5.24.0", transformers.__version__
transformers.utils.logging.disable_progress_bar()
transformers.utils.logging.set_verbosity_error()


def load(model, dtype):
    from transformers import AutoModelForCausalLM

    if "gguf" in model:
        d, f = os.path.split(model["gguf"])
        # Dequantize at load: a plain dense model in the asked dtype (real f64 for the truth run),
        # serializable to safetensors.
        cfg = transformers.GgufConfig(dequantize=True)
        m = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=dtype, quantization_config=cfg)
    else:
        m = AutoModelForCausalLM.from_pretrained(model["dir"], dtype=dtype)
    m.eval()
    return m


def with_adapters(m, adapters, dtype):
    """The model with PEFT adapters loaded, all active, each scaled by its user scale."""
    if not adapters:
        return m
    from peft import PeftModel
    from peft.tuners.lora import LoraLayer

    names = [f"a{i}" for i in range(len(adapters))]
    pm = PeftModel.from_pretrained(m, adapters[0]["dir"], adapter_name=names[0])
    for name, a in zip(names[1:], adapters[1:]):
        pm.load_adapter(a["dir"], adapter_name=name)
    pm.base_model.set_adapter(names)
    for mod in pm.modules():
        if isinstance(mod, LoraLayer):
            for name, a in zip(names, adapters):
                if name in mod.scaling:
                    mod.scaling[name] *= float(a.get("scale", 1.0))
    # PEFT keeps saved adapters in their own dtype and casts the input to it; the f64 run
    # must compute the delta in f64 too (the f32 values convert exactly).
    pm.to(dtype)
    pm.eval()
    return pm


def cmd_make_lora(req):
    from peft import LoraConfig, get_peft_model

    m = load(req["model"], torch.float32)
    cfg = LoraConfig(
        r=req["r"], lora_alpha=req["alpha"], target_modules=req["target_modules"],
        use_rslora=req.get("use_rslora", False), lora_dropout=0.0, bias="none",
        init_lora_weights=False, task_type="CAUSAL_LM",
    )
    pm = get_peft_model(m, cfg)
    g = torch.Generator().manual_seed(req["seed"])
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float32) * req["std"])
    pm.save_pretrained(req["out_dir"])


def fresh_rope_state(m):
    """Dynamic NTK RoPE (`dynamic_rope_update`) recomputes `inv_freq` when a forward call reaches
    past the longest sequence the rotary module has seen and keeps it as the new longest; it
    resets only when a later call is shorter than max_position_embeddings. Put every such module
    back as a freshly loaded model has it (what its own reset does), so each case is a fresh
    model's run rather than depending on the cases before it."""
    for mod in m.modules():
        rope_type = getattr(mod, "rope_type", None)
        if isinstance(rope_type, str) and "dynamic" in rope_type and hasattr(mod, "original_inv_freq"):
            mod.register_buffer("inv_freq", mod.original_inv_freq, persistent=False)
            mod.max_seq_len_cached = mod.original_max_seq_len


def run_case(m, prompt_ids, steps, forced=None):
    """Full-prefix logits, then `steps` cached decode steps (greedy unless `forced`)."""
    fresh_rope_state(m)
    ids = torch.tensor([prompt_ids], dtype=torch.long)
    out = m(input_ids=ids, use_cache=True)
    prefill = out.logits[0].float().numpy()
    past = out.past_key_values
    last = out.logits[0, -1]
    decode, greedy = [], []
    for s in range(steps):
        nxt = int(torch.argmax(last)) if forced is None else forced[s]
        greedy.append(nxt)
        out = m(input_ids=torch.tensor([[nxt]]), past_key_values=past, use_cache=True)
        past = out.past_key_values
        last = out.logits[0, -1]
        decode.append(last.float().numpy())
    decode = np.stack(decode) if decode else np.zeros((0, prefill.shape[1]), np.float32)
    return prefill, decode, greedy


def cmd_logits(req):
    out_dir = req["out_dir"]
    torch.manual_seed(0)
    adapters = req.get("adapters", [])
    m32 = with_adapters(load(req["model"], torch.float32), adapters, torch.float32)
    m64 = with_adapters(load(req.get("truth", req["model"]), torch.float64), adapters, torch.float64)
    results = []
    with torch.no_grad():
        for i, case in enumerate(req["cases"]):
            steps = case.get("decode_steps", 0)
            p32, d32, greedy = run_case(m32, case["prompt_ids"], steps)
            p64, d64, _ = run_case(m64, case["prompt_ids"], steps, forced=greedy)
            for name, arr in (("prefill", p32), ("prefill64", p64), ("decode", d32), ("decode64", d64)):
                arr.astype("<f4").tofile(os.path.join(out_dir, f"case{i}.{name}.f32"))
            results.append({"greedy": greedy, "vocab": int(p32.shape[1])})
    with open(os.path.join(out_dir, "result.json"), "w") as f:
        json.dump({"cases": results}, f)


def cmd_greedy(req):
    m = load(req["model"], torch.float32)
    outs = []
    with torch.no_grad():
        for ids in req["prompts"]:
            fresh_rope_state(m)
            inp = torch.tensor([ids], dtype=torch.long)
            out = m.generate(
                input_ids=inp,
                attention_mask=torch.ones_like(inp),
                max_new_tokens=req["max_new_tokens"],
                do_sample=False,
            )
            outs.append([int(t) for t in out[0, len(ids):]])
    with open(os.path.join(req["out_dir"], "result.json"), "w") as f:
        json.dump({"continuations": outs}, f)


def cmd_generate_logits(req):
    """transformers' own greedy `generate` (f32, cached, through the model's own
    `prepare_inputs_for_generation`: Phi-3's cache drop at the LongRoPE crossing included) with
    the logits of every step, and beside them the f64 truth for the same tokens: each step's
    logits from one uncached forward call over the sequence so far. With Phi-3's recompute the
    two compute the same thing: before the crossing every cached key and call is on the short
    factors, after it every one on the long factors."""
    m32 = load(req["model"], torch.float32)
    m64 = load(req["model"], torch.float64)
    outs = []
    with torch.no_grad():
        for i, ids in enumerate(req["prompts"]):
            fresh_rope_state(m32)
            inp = torch.tensor([ids], dtype=torch.long)
            out = m32.generate(
                input_ids=inp, attention_mask=torch.ones_like(inp),
                max_new_tokens=req["max_new_tokens"], do_sample=False,
                output_logits=True, return_dict_in_generate=True,
            )
            seq = [int(t) for t in out.sequences[0]]
            logits32 = torch.cat([l.float() for l in out.logits]).numpy()
            truth = []
            for n in range(len(ids), len(seq)):
                fresh_rope_state(m64)
                full = m64(input_ids=torch.tensor([seq[:n]]), use_cache=False).logits[0, -1]
                truth.append(full.float().numpy())
            np.stack(truth).astype("<f4").tofile(os.path.join(req["out_dir"], f"gen{i}.logits64.f32"))
            logits32.astype("<f4").tofile(os.path.join(req["out_dir"], f"gen{i}.logits32.f32"))
            outs.append(seq[len(ids):])
    with open(os.path.join(req["out_dir"], "result.json"), "w") as f:
        json.dump({"continuations": outs}, f)


def cmd_model_defaults(req):
    results = []
    for case in req["cases"]:
        m = load({"dir": case["dir"]}, torch.float32)
        # What generate() resolves from the model's generation_config with no caller arguments.
        resolved, _ = m._prepare_generation_config(None)
        out = {"mode": str(resolved.get_generation_mode().value)}
        for k in ("do_sample", "temperature", "top_k", "top_p", "min_p", "repetition_penalty", "typical_p",
                  "min_new_tokens", "eos_token_id"):
            out[k] = getattr(resolved, k)
        if case.get("generate"):
            ids = case["prompt_ids"]
            inp = torch.tensor([ids], dtype=torch.long)
            with torch.no_grad():
                seq = m.generate(input_ids=inp, attention_mask=torch.ones_like(inp))
            out["continuation"] = [int(t) for t in seq[0, len(ids):]]
        results.append(out)
    with open(os.path.join(req["out_dir"], "result.json"), "w") as f:
        json.dump({"cases": results}, f)


def cmd_save_safetensors(req):
    from transformers import AutoTokenizer

    m = load(req["model"], torch.float32)
    m.save_pretrained(req["out_dir"], safe_serialization=True)
    d, f = os.path.split(req["model"]["gguf"])
    AutoTokenizer.from_pretrained(d, gguf_file=f).save_pretrained(req["out_dir"])


def tokenizer_vocab_size(tokenizer_dir):
    with open(os.path.join(tokenizer_dir, "tokenizer.json")) as f:
        return len(json.load(f)["model"]["vocab"])


GEMMA_STYLE_CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "{{ '<start_of_turn>' + role + '\\n' + m['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


def brown_sentences(home, files):
    import pathlib

    here = pathlib.Path(__file__).resolve()
    sys.path.insert(0, str(here.parents[4] / "bench" / "serve"))
    import run as serve_bench  # bench/serve/run.py: fetch_corpus, load_corpus, detag

    pkg = serve_bench.fetch_corpus(pathlib.Path(home))
    names = [name for name, _genre, _paras in serve_bench.load_corpus(pkg)]
    out = []
    for name in names[files]:
        for line in (pkg / name).read_text(encoding="latin-1").splitlines():
            if line.strip():
                out.append(serve_bench.detag(line.strip()))
    return out


def cmd_spm_tokenizer(req):
    import io
    import shutil

    import sentencepiece as spm
    from transformers import AutoTokenizer

    out = req["out_dir"]
    os.makedirs(out, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(brown_sentences(req["home"], slice(0, 60))), model_writer=model,
        vocab_size=req["vocab_size"], model_type="bpe", byte_fallback=True,
        add_dummy_prefix=False, normalization_rule_name="identity",
        remove_extra_whitespaces=False, split_digits=True, allow_whitespace_only_pieces=True,
        character_coverage=1.0, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=["<mask>", "<start_of_turn>", "<end_of_turn>"], minloglevel=2,
        num_threads=1,
    )
    # transformers converts tokenizer.model to tokenizer.json (GemmaConverter) when that is all
    # the directory has.
    raw = os.path.join(out, "raw")
    os.makedirs(raw, exist_ok=True)
    with open(os.path.join(raw, "tokenizer.model"), "wb") as f:
        f.write(model.getvalue())
    with open(os.path.join(raw, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "GemmaTokenizer", "add_bos_token": True,
                   "add_eos_token": False, "chat_template": GEMMA_STYLE_CHAT_TEMPLATE}, f)
    AutoTokenizer.from_pretrained(raw).save_pretrained(out)
    shutil.copy(os.path.join(raw, "tokenizer.model"), out)
    shutil.rmtree(raw)
    # As in Gemma's published files: the turn markers are special tokens, and
    # tokenizer_config.json lists the added tokens (`added_tokens_decoder`, which llama.cpp's
    # converter reads to mark them control tokens; transformers 5 no longer writes it).
    with open(os.path.join(out, "tokenizer.json")) as f:
        tj = json.load(f)
    for t in tj["added_tokens"]:
        if t["content"] in ("<start_of_turn>", "<end_of_turn>"):
            t["special"] = True
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False)
    with open(os.path.join(out, "tokenizer_config.json")) as f:
        tc = json.load(f)
    tc.pop("vocab_file", None)
    tc["added_tokens_decoder"] = {
        str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                         "single_word", "special")}
        for t in tj["added_tokens"]
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    tok = AutoTokenizer.from_pretrained(out)
    held_out = brown_sentences(req["home"], slice(200, None))
    texts = held_out[:: max(1, len(held_out) // 300)][:300] + [
        "  two leading spaces", "trailing spaces   ", "tabs\tand\nnew\n\nlines",
        "digits 3.14159 and 1,000,000", "caf\u00e9 na\u00efve \u00fcber \u20ac5 \u65e5\u672c\u8a9e \U0001f600",
        "<start_of_turn>user\nhi<end_of_turn>\n", "<bos> and <eos> as text", " ", "x",
    ]
    ids = [tok(t)["input_ids"] for t in texts]
    assert all(i[0] == tok.bos_token_id for i in ids), "the tokenizer does not add <bos>"
    decoded = [tok.decode(i[1:]) for i in ids]
    chat = [
        {"role": "user", "content": "What did the jury say about the election?"},
        {"role": "assistant", "content": " It praised the City Executive Committee. "},
        {"role": "user", "content": "Why?"},
    ]
    chat_ids = tok.apply_chat_template(chat, add_generation_prompt=True, tokenize=True)
    if not isinstance(chat_ids, list):
        chat_ids = chat_ids["input_ids"]
    with open(req["texts_out"], "w") as f:
        json.dump({"texts": texts, "ids": ids, "decoded": decoded, "chat": chat,
                   "chat_ids": chat_ids}, f)


def cmd_tiny(req):
    from transformers import AutoModelForCausalLM

    common = dict(
        vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
        rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2, tie_word_embeddings=False,
    )
    arch = req["arch"]
    if arch == "llama":
        cfg = transformers.LlamaConfig(**common, rope_theta=10000.0)
    elif arch == "mistral":
        cfg = transformers.MistralConfig(**common, rope_theta=10000.0, sliding_window=8)
    elif arch == "qwen2":
        cfg = transformers.Qwen2Config(**common, rope_theta=10000.0)
    elif arch == "qwen3":
        cfg = transformers.Qwen3Config(**common, head_dim=16, rope_theta=10000.0)
    elif arch == "phi3":
        # Fused qkv_proj / gate_up_proj, default RoPE, no sliding window.
        cfg = transformers.Phi3Config(**common, rope_theta=10000.0, pad_token_id=0)
    elif arch == "phi3_longrope":
        # LongRoPE over 12 of 16 head dims, trained context 16 of 256: prompts longer than 16
        # take the long factors, and the attention factor is sqrt(1 + ln 16 / ln 16).
        rot_half = 6
        cfg = transformers.Phi3Config(
            **{**common, "max_position_embeddings": 256}, pad_token_id=0,
            original_max_position_embeddings=16,
            rope_parameters={
                "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                "short_factor": [1.0 + 0.1 * i for i in range(rot_half)],
                "long_factor": [1.5 + 2.0 * i for i in range(rot_half)],
            },
        )
    elif arch == "llama_dynamic":
        # Dynamic NTK scaling, factor 4 over max_position_embeddings 32 (head_dim 16): calls
        # reaching past 32 positions recompute the base for their length. With tokenizer_dir
        # the vocabulary is that tokenizer's (so that `load_llm` can run it).
        vocab = tokenizer_vocab_size(req["tokenizer_dir"]) if "tokenizer_dir" in req else 320
        cfg = transformers.LlamaConfig(
            **{**common, "vocab_size": vocab, "max_position_embeddings": 32},
            rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0},
        )
    elif arch == "phi3_longrope_gguf":
        # phi3_longrope with the vocabulary of the tokenizer in req["tokenizer_dir"] (byte-level
        # BPE, copied in), so that llama.cpp's converter can write a GGUF of it.
        vocab = tokenizer_vocab_size(req["tokenizer_dir"])
        cfg = transformers.Phi3Config(
            **{**common, "vocab_size": vocab}, pad_token_id=0, original_max_position_embeddings=16,
            rope_parameters={
                "rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                "short_factor": [1.0 + 0.1 * i for i in range(6)],
                "long_factor": [1.5 + 2.0 * i for i in range(6)],
            },
        )
    elif arch == "llama3_gguf":
        # Llama 3.1 RoPE scaling (context 32 extended 8x) with the vocabulary of
        # req["tokenizer_dir"]: llama.cpp's converter bakes the scaling into rope_freqs.weight.
        # With head_dim 16 the 8 frequencies span all three regimes (kept, smoothed, divided).
        vocab = tokenizer_vocab_size(req["tokenizer_dir"])
        cfg = transformers.LlamaConfig(
            **{**common, "vocab_size": vocab},
            rope_parameters={
                "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 32,
            },
        )
    elif arch == "gemma3_text_gguf":
        # For llama.cpp's converter: the tokenizer of req["tokenizer_dir"], the layer pattern and
        # local base llama.cpp assumes (every 6th layer global, 10000), query_pre_attn_scalar =
        # head_dim as llama.cpp scales.
        vocab = tokenizer_vocab_size(req["tokenizer_dir"])
        cfg = transformers.Gemma3TextConfig(
            **{**common, "vocab_size": vocab, "num_hidden_layers": 6, "tie_word_embeddings": True},
            pad_token_id=0, head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
            },
            final_logit_softcapping=3.0,
        )
    elif arch == "gemma2_gguf":
        # gemma2 below with the vocabulary of req["tokenizer_dir"] (a SentencePiece one: llama.cpp
        # converts Gemma 2's vocabulary only from tokenizer.model) and the scale llama.cpp uses
        # (query_pre_attn_scalar = head_dim).
        vocab = tokenizer_vocab_size(req["tokenizer_dir"])
        cfg = transformers.Gemma2Config(
            **{**common, "vocab_size": vocab, "num_hidden_layers": 3, "tie_word_embeddings": True},
            pad_token_id=0, head_dim=16, query_pre_attn_scalar=16,
            sliding_window=8, rope_theta=10000.0, attn_logit_softcapping=2.0,
            final_logit_softcapping=3.0, hidden_activation="gelu_pytorch_tanh",
        )
    elif arch == "gemma2":
        # Window 8 on even layers, attention and final logit softcaps small enough to bite,
        # query_pre_attn_scalar different from head_dim.
        cfg = transformers.Gemma2Config(
            **{**common, "num_hidden_layers": 3, "tie_word_embeddings": True}, pad_token_id=0,
            head_dim=16, query_pre_attn_scalar=24, sliding_window=8, rope_theta=10000.0,
            attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
            hidden_activation="gelu_pytorch_tanh",
        )
    elif arch == "gemma3_text":
        # Layers sliding, sliding, full (window 8); local RoPE base 10000, global base 1e6 with
        # linear scaling; q/k norms; final logit softcap.
        cfg = transformers.Gemma3TextConfig(
            **{**common, "num_hidden_layers": 3, "tie_word_embeddings": True}, pad_token_id=0,
            head_dim=16, query_pre_attn_scalar=16, sliding_window=8,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
            rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
            },
            final_logit_softcapping=3.0,
        )
    else:
        raise SystemExit(f"unknown arch {arch}")
    if "tokenizer_dir" in req and os.path.exists(os.path.join(req["tokenizer_dir"], "tokenizer.model")):
        # Gemma's ids in the SentencePiece vocabularies of "spm_tokenizer".
        cfg.bos_token_id, cfg.eos_token_id = 2, 1
    torch.manual_seed(req.get("seed", 0))
    m = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    if arch.startswith(("gemma", "phi3", "llama3", "llama_dynamic")):
        # Weights of std 0.02 leave attention nearly uniform and logits far below the softcaps;
        # larger weights make the caps, GeGLU's curvature, the windows and RoPE factors matter.
        with torch.no_grad():
            for name, p in m.named_parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 0.15)
    # Random init leaves norms at 1 and biases at 0; perturb them so a test can see if they are
    # ignored.
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.randn_like(p) * 0.1)
            elif name.endswith(".bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    m.save_pretrained(req["out_dir"], safe_serialization=True)
    if "tokenizer_dir" in req:
        import shutil

        src = req["tokenizer_dir"]
        if os.path.exists(os.path.join(src, "tokenizer.model")):
            for name in os.listdir(src):
                shutil.copy(os.path.join(src, name), req["out_dir"])
        else:
            shutil.copy(os.path.join(src, "tokenizer.json"), req["out_dir"])
            # The converters read a byte-level BPE vocabulary when the class says GPT-2 (Phi-3)
            # or when there is no SentencePiece model (Gemma 3).
            with open(os.path.join(req["out_dir"], "tokenizer_config.json"), "w") as f:
                json.dump({"tokenizer_class": "GPT2Tokenizer"}, f)


def main():
    with open(sys.argv[1]) as f:
        req = json.load(f)
    {
        "logits": cmd_logits,
        "greedy": cmd_greedy,
        "generate_logits": cmd_generate_logits,
        "model_defaults": cmd_model_defaults,
        "save_safetensors": cmd_save_safetensors,
        "tiny": cmd_tiny,
        "make_lora": cmd_make_lora,
        "spm_tokenizer": cmd_spm_tokenizer,
    }[req["cmd"]](req)


if __name__ == "__main__":
    main()
