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

All model work runs with the GIL released. Errors derive from :class:`TorchnativeError`
(see :mod:`torchnative.errors`).
"""

from __future__ import annotations

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
    Message,
    PromptOrMessages,
    Result,
    Session,
    Stream,
    Timings,
    Usage,
    default_model_path,
    load_llm,
    torchnative_home,
)

__all__ = [
    "load_llm",
    "LLM",
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
