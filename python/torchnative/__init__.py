"""torchnative: run Hugging Face / GGUF language models natively on the CPU.

Quick start::

    import torchnative

    llm = torchnative.load_llm()          # the default model (SmolLM2-135M-Instruct, Q4_1)
    print(llm.chat([{"role": "user", "content": "What is the capital of France?"}]).text)

    for piece in llm.stream("Once upon a time", max_new_tokens=40):
        print(piece, end="", flush=True)

    chat = llm.session()
    chat.send("Hi! My name is Ada.")
    print(chat.send("What is my name?").text)

    engine = torchnative.Engine(llm)          # many requests at once (continuous batching)
    streams = [engine.submit(q, max_new_tokens=32) for q in ["Hi!", "Name a colour."]]
    print([s.text() for s in streams])

    server = torchnative.serve(llm, port=8080)  # the OpenAI HTTP API, in the background

    embedder = torchnative.load_embedder()   # all-MiniLM-L6-v2 (scripts/fetch-encoder.sh)
    vectors = embedder.embed(["A sentence.", "Another one."])   # 2 x 384, normalised

All model work runs with the GIL released. Errors derive from :class:`TorchnativeError`
(see :mod:`torchnative.errors`).
"""

from __future__ import annotations

from .embed import Embedder, Reranker, default_embedder_path, embed, load_embedder, load_reranker
from .errors import (
    ContextOverflowError,
    InvalidArgumentError,
    ModelLoadError,
    TorchnativeError,
    UnsupportedModelError,
)
from .llm import (
    GENERATION_KWARGS,
    LLM,
    Engine,
    LoraAdapter,
    Server,
    Message,
    PromptOrMessages,
    Result,
    Session,
    Stream,
    Timings,
    Usage,
    default_model_path,
    load_llm,
    serve,
    torchnative_home,
)

__all__ = [
    "load_llm",
    "LLM",
    "LoraAdapter",
    "load_embedder",
    "Embedder",
    "embed",
    "default_embedder_path",
    "load_reranker",
    "Reranker",
    "Engine",
    "serve",
    "Server",
    "Session",
    "Stream",
    "Result",
    "Usage",
    "Timings",
    "Message",
    "PromptOrMessages",
    "GENERATION_KWARGS",
    "default_model_path",
    "torchnative_home",
    "TorchnativeError",
    "ModelLoadError",
    "UnsupportedModelError",
    "ContextOverflowError",
    "InvalidArgumentError",
]
