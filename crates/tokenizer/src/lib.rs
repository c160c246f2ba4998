//! Text <-> token ids: tokenizers from tokenizer.json or GGUF metadata, streaming detokenizer, chat templates.
