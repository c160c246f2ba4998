"""Reference tokenizer results from transformers, for torchnative-tokenizer's parity tests.

Usage: python tokenizer_oracle.py REQUEST.json RESPONSE.json WORKDIR

The request is a list of jobs; the response has one result per job, in order. Jobs:

  {"kind": "encode_gguf", "gguf_dir", "gguf_file", "pre_override", "texts", "save_to"?}
      AutoTokenizer.from_pretrained(gguf_dir, gguf_file=...) then, per text, ids for every
      (add_special_tokens, split_special_tokens) pair, plus decodes of the ids. "pre_override":
      "smollm" replaces the pre-tokenizer by llama.cpp's smollm split (see below) and also
      returns the untouched transformers ids as "plain".
  {"kind": "write_gguf_and_encode", "metadata": {...}, "copy_vocab_from"?, "file_name", "texts",
   "save_to"?}
      Writes a GGUF holding only the given tokenizer metadata (optionally starting from another
      GGUF's byte-level vocabulary) with the `gguf` package, loads it through AutoTokenizer
      (transformers' own GGUF converter) and encodes/decodes as above.
  {"kind": "chat", "gguf_dir", "gguf_file", "template", "conversations", "bos_token"?, ...}
      apply_chat_template(conv, tokenize=False, add_generation_prompt=g) for g in (False, True);
      a raised exception is returned as {"error": message}.
"""

import json
import os
import sys

from tokenizers import pre_tokenizers
from transformers import AutoTokenizer

MODES = [(add, split) for add in (False, True) for split in (False, True)]


def smollm_pre_tokenizer():
    # llama.cpp (llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_SMOLLM) splits "\p{N}" first, then applies
    # GPT-2's regex; SmolLM's own tokenizer.json writes the same as Digits(individual_digits=True)
    # followed by ByteLevel. transformers' GGUF loader has no "smollm" entry and keeps plain
    # ByteLevel, which differs on a whitespace run before a digit.
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )


def skipped_ids(tok):
    """Ids that decode(skip_special_tokens=True) drops: the special tokens as decoding sees them."""
    candidates = set(tok.added_tokens_decoder) | set(tok.all_special_ids)
    return sorted(i for i in candidates if tok.decode([i], skip_special_tokens=True) == "")


def encode_all(tok, texts):
    out = []
    for text in texts:
        entry = {}
        for add, split in MODES:
            ids = tok.encode(text, add_special_tokens=add, split_special_tokens=split)
            entry[f"ids_add{int(add)}_split{int(split)}"] = ids
        ids = entry["ids_add1_split0"]
        entry["decode_keep"] = tok.decode(ids, skip_special_tokens=False)
        entry["decode_skip"] = tok.decode(ids, skip_special_tokens=True)
        out.append(entry)
    return out


def encode_gguf(job):
    tok = AutoTokenizer.from_pretrained(job["gguf_dir"], gguf_file=job["gguf_file"])
    result = {}
    if job.get("pre_override") == "smollm":
        result["plain"] = [tok.encode(t, add_special_tokens=False) for t in job["texts"]]
        tok.backend_tokenizer.pre_tokenizer = smollm_pre_tokenizer()
    result["texts"] = encode_all(tok, job["texts"])
    result["vocab_size"] = len(tok)
    result["bos_token_id"] = tok.bos_token_id
    result["eos_token_id"] = tok.eos_token_id
    result["pad_token_id"] = tok.pad_token_id
    result["special_ids"] = skipped_ids(tok)
    if job.get("save_to"):
        tok.save_pretrained(job["save_to"])
    return result


def read_vocab(path):
    """The byte-level vocabulary of an existing GGUF (tokens, merges, types, special ids)."""
    import gguf

    reader = gguf.GGUFReader(path)
    fields = reader.fields
    meta = {
        "model": fields["tokenizer.ggml.model"].contents(),
        "tokens": fields["tokenizer.ggml.tokens"].contents(),
        "merges": fields["tokenizer.ggml.merges"].contents(),
        "token_types": fields["tokenizer.ggml.token_type"].contents(),
    }
    for key, name in [("bos_id", "bos_token_id"), ("eos_id", "eos_token_id"), ("unk_id", "unknown_token_id"), ("pad_id", "padding_token_id")]:
        field = fields.get(f"tokenizer.ggml.{name}")
        if field is not None:
            meta[key] = field.contents()
    return meta


def write_gguf_and_encode(job, workdir):
    import gguf

    meta = dict(job.get("metadata", {}))
    if job.get("copy_vocab_from"):
        meta.update(read_vocab(job["copy_vocab_from"]))
        meta.update(job.get("metadata", {}))
    path = os.path.join(workdir, job.get("file_name", "vocab.gguf"))
    writer = gguf.GGUFWriter(path, arch="llama")
    writer.add_tokenizer_model(meta["model"])
    if meta.get("pre") is not None:
        writer.add_tokenizer_pre(meta["pre"])
    writer.add_token_list(meta["tokens"])
    if meta.get("scores") is not None:
        writer.add_token_scores(meta["scores"])
    if meta.get("token_types") is not None:
        writer.add_token_types(meta["token_types"])
    if meta.get("merges") is not None:
        writer.add_token_merges(meta["merges"])
    for key, add in [
        ("bos_id", writer.add_bos_token_id),
        ("eos_id", writer.add_eos_token_id),
        ("unk_id", writer.add_unk_token_id),
        ("pad_id", writer.add_pad_token_id),
    ]:
        if meta.get(key) is not None:
            add(meta[key])
    if meta.get("add_bos") is not None:
        writer.add_add_bos_token(meta["add_bos"])
    if meta.get("add_eos") is not None:
        writer.add_add_eos_token(meta["add_eos"])
    if meta.get("add_space_prefix") is not None:
        writer.add_add_space_prefix(meta["add_space_prefix"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    tok = AutoTokenizer.from_pretrained(workdir, gguf_file=os.path.basename(path))
    if job.get("save_to"):
        tok.save_pretrained(job["save_to"])
    return {
        "gguf_path": path,
        "texts": encode_all(tok, job["texts"]),
        "vocab_size": len(tok),
        "special_ids": skipped_ids(tok),
    }


def chat(job):
    tok = AutoTokenizer.from_pretrained(job["gguf_dir"], gguf_file=job["gguf_file"])
    results = []
    for conversation in job["conversations"]:
        # The request's JSON objects arrive with sorted keys; callers write role first.
        conversation = [{"role": m["role"], "content": m["content"]} for m in conversation]
        entry = {}
        for generation in (False, True):
            key = f"gen{int(generation)}"
            try:
                entry[key] = tok.apply_chat_template(
                    conversation,
                    chat_template=job["template"],
                    tokenize=False,
                    add_generation_prompt=generation,
                    **json.loads(job.get("extra_json", "{}")),
                )
            except Exception as error:  # the template's own raise_exception, or a Jinja error
                entry[key] = {"error": str(error), "type": type(error).__name__}
        results.append(entry)
    return {"renders": results, "bos_token": tok.bos_token, "eos_token": tok.eos_token}


def main():
    request_path, response_path, workdir = sys.argv[1:4]
    with open(request_path, encoding="utf-8") as f:
        jobs = json.load(f)
    results = []
    for job in jobs:
        kind = job["kind"]
        if kind == "encode_gguf":
            results.append(encode_gguf(job))
        elif kind == "write_gguf_and_encode":
            results.append(write_gguf_and_encode(job, workdir))
        elif kind == "chat":
            results.append(chat(job))
        else:
            raise ValueError(f"unknown job kind {kind!r}")
    with open(response_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
