//! Model files: GGUF, safetensors, Hugging Face configs and cache layout.
