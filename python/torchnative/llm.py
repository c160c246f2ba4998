"""Loading a model and generating text with it: :func:`load_llm`, :class:`LLM`, :class:`Session`,
:class:`Stream` and :class:`Result`."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

from . import _native
from ._native import NativeLlm, NativeSession, NativeStream
from .errors import InvalidArgumentError, ModelLoadError

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

#: A chat message: ``{"role": "user", "content": "Hello"}``.
Message = Mapping[str, str]
#: What :meth:`LLM.generate` accepts: a raw prompt or a conversation.
PromptOrMessages = Union[str, Sequence[Message]]

# Generation keyword arguments, with transformers' names, and the Python types each accepts.
_INT_ARGS = ("max_new_tokens", "min_new_tokens", "top_k", "seed")
_FLOAT_ARGS = (
    "temperature",
    "top_p",
    "min_p",
    "typical_p",
    "repetition_penalty",
    "presence_penalty",
    "frequency_penalty",
)
# Constrained decoding: at most one of these (the output follows it).
_CONSTRAINT_ARGS = ("grammar", "json_schema", "regex", "json_object")
GENERATION_KWARGS = frozenset(
    _INT_ARGS + _FLOAT_ARGS + ("do_sample", "stop", "lora") + _CONSTRAINT_ARGS
)
# Speculative decoding (one-shot requests: LLM.generate, chat and stream).
SPECULATIVE_KWARGS = frozenset(("draft", "draft_tokens"))


def torchnative_home() -> Path:
    """``$TORCHNATIVE_HOME``, by default ``~/.cache/torchnative``."""
    home = os.environ.get("TORCHNATIVE_HOME")
    return Path(home) if home else Path.home() / ".cache" / "torchnative"


def default_model_path() -> Path:
    """Where the default model (SmolLM2-135M-Instruct, GGUF Q4_1) is expected."""
    return torchnative_home() / "models" / DEFAULT_MODEL_FILE


def load_llm(
    model: str | os.PathLike[str] | None = None,
    *,
    dtype: str | None = None,
    n_ctx: int | None = None,
    threads: int | None = None,
) -> LLM:
    """Load a language model.

    Args:
        model: a ``.gguf`` file, a safetensors model directory, or a Hugging Face repo id that is
            already in the local cache (nothing is downloaded). ``None`` loads the default model
            at ``$TORCHNATIVE_HOME/models/SmolLM2-135M-Instruct.Q4_1.gguf``.
        dtype: how weights are computed: ``"native"`` (default: the file's packed types through
            quantized kernels), ``"f32"`` (dequantized once; matches transformers), ``"f16"`` or
            ``"bf16"``.
        n_ctx: most tokens a request or session may hold (prompt + generated). Default: the
            model's context length for one-shot requests, and ``min(model's, 4096)`` for
            sessions.
        threads: kernel threads (default: all cores). This setting is process-wide.

    Raises:
        ModelLoadError: the model is missing, unreadable or malformed.
        UnsupportedModelError: the architecture, a tensor type or ``dtype`` is not supported.
        InvalidArgumentError: ``n_ctx`` or ``threads`` is out of range.
    """
    if model is None:
        path = default_model_path()
        if not path.is_file():
            raise ModelLoadError(
                f"no model given and the default model is not at {path}; fetch it with "
                "`scripts/fetch-model.sh` (from the torchnative repository) or pass a model path"
            )
        spec = str(path)
    elif isinstance(model, (str, os.PathLike)):
        spec = os.fspath(model)
    else:
        raise TypeError(f"model must be a str, a path or None, not {type(model).__name__}")
    if dtype is None:
        dtype = "native"
    elif not isinstance(dtype, str):
        raise TypeError(f"dtype must be a str, not {type(dtype).__name__}")
    n_ctx = _optional_count("n_ctx", n_ctx, minimum=1)
    threads = _optional_count("threads", threads, minimum=1)
    return LLM(_native.load(spec, dtype, threads), n_ctx)


def _optional_count(name: str, value: Any, *, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < minimum:
        raise InvalidArgumentError(f"invalid {name}: {value} must be at least {minimum}")
    return value


def _generation_config(
    method: str, kwargs: dict[str, Any], *, speculative: bool = False
) -> dict[str, Any]:
    """Check generation keyword arguments (names, types, integer ranges) and return the config
    the native layer reads. Float ranges and grammars are checked by the runtime."""
    allowed = GENERATION_KWARGS | SPECULATIVE_KWARGS if speculative else GENERATION_KWARGS
    unknown = sorted(set(kwargs) - allowed)
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        accepted = ", ".join(sorted(allowed))
        raise TypeError(f"{method}() got unexpected keyword argument(s) {names}; accepted: {accepted}")
    given = [k for k in _CONSTRAINT_ARGS if kwargs.get(k) not in (None, False)]
    if len(given) > 1:
        raise InvalidArgumentError(f"invalid constraint: give at most one of {', '.join(given)}")
    config: dict[str, Any] = {}
    for name, value in kwargs.items():
        if value is None:
            continue
        if name in _INT_ARGS:
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, not {type(value).__name__}")
            minimum = 1 if name == "max_new_tokens" else 0
            if value < minimum:
                raise InvalidArgumentError(f"invalid {name}: {value} must be at least {minimum}")
            if value >= 2**64:
                raise InvalidArgumentError(f"invalid {name}: {value} must be below 2**64")
        elif name in _FLOAT_ARGS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name} must be a float, not {type(value).__name__}")
            value = float(value)
        elif name in ("do_sample", "json_object"):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
        elif name == "stop":
            if isinstance(value, str):
                value = [value]
            elif isinstance(value, (list, tuple)) and all(isinstance(s, str) for s in value):
                value = list(value)
            else:
                raise TypeError("stop must be a str or a list of str")
            if any(s == "" for s in value):
                raise InvalidArgumentError("invalid stop: stop strings must not be empty")
        elif name in ("grammar", "regex"):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a str, not {type(value).__name__}")
        elif name == "json_schema":
            if isinstance(value, Mapping):
                # Key order is kept: properties are generated in the order the schema lists them.
                value = json.dumps(value)
            elif not isinstance(value, str):
                raise TypeError(f"json_schema must be a dict or a JSON str, not {type(value).__name__}")
        elif name == "draft":
            if isinstance(value, LLM):
                value = value._native
            elif value != "prompt_lookup":
                raise TypeError('draft must be "prompt_lookup" or a loaded LLM')
        elif name == "lora":
            value = _lora_pairs(value)
        elif name == "draft_tokens":
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"draft_tokens must be an int, not {type(value).__name__}")
            if not 1 <= value <= 32:
                raise InvalidArgumentError(f"invalid draft_tokens: {value} must be 1 to 32")
        config[name] = value
    return config


class LoraAdapter:
    """A LoRA adapter loaded for one model (see :meth:`LLM.load_lora`). The model itself is
    never changed: requests choose adapters with ``lora=``."""

    def __init__(self, native: Any) -> None:
        """Made by :meth:`LLM.load_lora`; not meant to be called directly."""
        self._native = native

    def __repr__(self) -> str:
        return f"LoraAdapter({self.source!r}, rank={self.rank})"

    @property
    def source(self) -> str:
        """Where the adapter was loaded from."""
        return self._native.source

    @property
    def rank(self) -> int:
        """Largest rank of its low-rank pairs."""
        return self._native.rank


def _lora_pairs(value: Any) -> list[tuple[Any, float]]:
    """``lora=``: an adapter, an ``(adapter, scale)`` pair, or a list of either; [] for none."""
    items = value if isinstance(value, list) else [value]
    pairs = []
    for item in items:
        adapter, scale = (item, 1.0) if isinstance(item, LoraAdapter) else (None, None)
        if adapter is None and isinstance(item, tuple) and len(item) == 2:
            adapter, scale = item
        if not isinstance(adapter, LoraAdapter):
            raise TypeError("lora must be a LoraAdapter, an (adapter, scale) pair or a list of them")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)):
            raise TypeError(f"lora scale must be a float, not {type(scale).__name__}")
        pairs.append((adapter._native, float(scale)))
    return pairs


def _message_pairs(messages: Any) -> list[tuple[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError("messages must be a list of {'role': ..., 'content': ...} dicts")
    if not messages:
        raise InvalidArgumentError("invalid messages: the conversation is empty")
    return [_message_pair(m, i) for i, m in enumerate(messages)]


def _message_pair(message: Any, index: int = 0) -> tuple[str, str]:
    if not isinstance(message, Mapping):
        raise TypeError(
            f"message {index} must be a dict with 'role' and 'content', not {type(message).__name__}"
        )
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or not isinstance(content, str):
        raise TypeError(f"message {index} needs str 'role' and 'content' (got {dict(message)!r})")
    return role, content


@dataclass(frozen=True)
class Usage:
    """Token counts of a request."""

    prompt_tokens: int
    completion_tokens: int
    #: Prompt tokens already in the session's cache, not evaluated again.
    cached_prompt_tokens: int = 0


@dataclass(frozen=True)
class Timings:
    """Wall-clock timings of a request."""

    #: Loading the model (the same for every request of an :class:`LLM`).
    load_ms: float
    #: Evaluating the prompt tokens not already in the cache.
    prefill_ms: float
    #: From the start of the request to the first generated token.
    time_to_first_token_ms: float
    #: Generated tokens per second after the first token.
    decode_tokens_per_second: float


@dataclass(frozen=True)
class Result:
    """The outcome of one generation."""

    #: The generated text (stop strings and special tokens not included).
    text: str
    #: Generated token ids (without a final end-of-sequence token).
    tokens: list[int]
    #: ``"stop"`` (end of sequence or stop string), ``"length"`` (``max_new_tokens`` reached)
    #: or ``"cancelled"`` (a stream closed early).
    finish_reason: str
    usage: Usage
    timings: Timings = field(repr=False)
    #: Heap allocations the process made during the token loop (sampling, detokenizing, stop
    #: strings, each token's forward pass); ``None`` if not measured. The extension counts
    #: them with a counting allocator. Process-wide: other threads' allocations in that time
    #: count too, and a :meth:`LLM.stream` adds one per text piece it hands over.
    allocations_in_decode_loop: int | None = field(default=None, repr=False)
    #: Speculative decoding: tokens drafted and verified, and of those, kept (0 without it).
    drafted_tokens: int = field(default=0, repr=False)
    accepted_tokens: int = field(default=0, repr=False)

    @classmethod
    def _from_native(cls, d: dict[str, Any]) -> Result:
        return cls(
            text=d["text"],
            tokens=list(d["tokens"]),
            finish_reason=d["finish_reason"],
            usage=Usage(d["prompt_tokens"], d["completion_tokens"], d["reused_prompt_tokens"]),
            timings=Timings(
                d["load_ms"],
                d["prefill_ms"],
                d["time_to_first_token_ms"],
                d["decode_tokens_per_second"],
            ),
            allocations_in_decode_loop=d.get("allocations_in_decode_loop"),
            drafted_tokens=d.get("drafted_tokens", 0),
            accepted_tokens=d.get("accepted_tokens", 0),
        )

    def __str__(self) -> str:
        return self.text


class Stream:
    """Text pieces of a generation, as they are decoded.

    Decoding runs in a background thread (without the GIL) that stays a few pieces ahead of the
    consumer. Iterate it from any thread; :meth:`close` it (or leave a ``with`` block, or
    ``break`` and drop it) to cancel the generation. After it is exhausted or closed,
    :attr:`result` holds the :class:`Result` (``finish_reason == "cancelled"`` if closed early).
    """

    def __init__(self, native: NativeStream) -> None:
        """Made by :meth:`LLM.stream` / :meth:`Session.stream`; not meant to be called directly."""
        self._native = native

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        piece = self._native.__next__()
        if piece is None:
            raise StopIteration
        return piece

    def close(self) -> None:
        """Cancel the generation if it is still running and wait until it has stopped."""
        self._native.close()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def result(self) -> Result | None:
        """The final :class:`Result` once the stream has ended, else ``None``. Raises the
        generation's error if it failed."""
        d = self._native.result()
        return None if d is None else Result._from_native(d)

    def text(self) -> str:
        """Consume the rest of the stream and return all of its text."""
        return "".join(self)


class LLM:
    """A loaded language model (see :func:`load_llm`).

    Immutable and thread-safe: requests from several threads may run at once. Each
    :meth:`generate`, :meth:`chat` or :meth:`stream` call is independent (a fresh context);
    use :meth:`session` for a multi-turn conversation that reuses its cache. Decoding runs
    without the GIL, and Ctrl-C (``KeyboardInterrupt``) cancels a running generation.

    Generation keyword arguments (transformers' names). An argument not given takes the
    model's default from its ``generation_config.json`` (see :attr:`generation_config`), as in
    transformers' ``generate``; where the model gives none, the built-in default in brackets
    applies (greedy decoding). GGUF files carry no generation defaults (only EOS ids).

    - ``max_new_tokens`` (256): most tokens to generate. When neither the caller nor the model
      gives it but the model gives ``max_length``, that bounds prompt plus new tokens.
    - ``min_new_tokens`` (0): end-of-sequence is suppressed until this many were generated.
    - ``do_sample`` (False): sample instead of taking the most likely token. As in
      transformers, ``temperature``/``top_k``/``top_p``/... only matter when it is True.
    - ``temperature`` (1.0), ``top_k`` (0 = off), ``top_p`` (1.0), ``min_p`` (0.0),
      ``typical_p`` (1.0): the sampling filters.
    - ``repetition_penalty`` (1.0), ``presence_penalty`` (0.0), ``frequency_penalty`` (0.0).
    - ``seed``: seed of the sampler's random generator (reproducible sampling).
    - ``stop``: a string or list of strings; generation stops before the first occurrence.
    - Constrained decoding, at most one of: ``json_schema`` (a dict or JSON text; the subset
      OpenAI's structured outputs accept), ``grammar`` (GBNF text, llama.cpp's format),
      ``regex`` (matched in full), ``json_object=True`` (any JSON object). The output follows
      it with any sampler; generation ends when it is complete. Compiled grammars are cached
      per model.
    - ``lora``: LoRA adapters (:meth:`load_lora`) added to the model for this request: an
      adapter, an ``(adapter, scale)`` pair, or a list of them; in a :class:`Session` the choice
      stays for later turns until another is given (``lora=[]``: the base model).
    - Speculative decoding (:meth:`generate`, :meth:`chat`, :meth:`stream` only): ``draft``
      (``"prompt_lookup"``, or a loaded :class:`LLM` of the same vocabulary) and
      ``draft_tokens`` (3): drafted tokens are verified in one forward pass; the output is
      exactly the plain decoding's (greedy and seeded sampling alike).

    Unknown keyword arguments raise :class:`TypeError`; out-of-range values raise
    :class:`~torchnative.InvalidArgumentError`.
    """

    def __init__(self, native: NativeLlm, n_ctx: int | None = None) -> None:
        """Made by :func:`load_llm`; not meant to be called directly."""
        self._native = native
        self._n_ctx = n_ctx

    def __repr__(self) -> str:
        return f"LLM({self.source!r})"

    @property
    def source(self) -> str:
        """The file or directory the model was loaded from."""
        return self._native.source

    @property
    def context_length(self) -> int:
        """The model's context length in tokens."""
        return self._native.context_length

    @property
    def load_seconds(self) -> float:
        """How long loading took."""
        return self._native.load_seconds

    @property
    def generation_config(self) -> dict[str, Any]:
        """What a request does when no keyword argument is given: the built-in defaults with
        the model's ``generation_config.json`` applied as transformers applies it
        (``do_sample`` false means greedy whatever the sampling values say; ``max_new_tokens``
        takes precedence over ``max_length``). Keys: the keyword arguments' names, plus
        ``max_length`` (``None`` or the bound on prompt plus new tokens) and ``eos_token_ids``."""
        return self._native.generation_config()

    def _prompt_ids(self, prompt_or_messages: PromptOrMessages) -> list[int]:
        if isinstance(prompt_or_messages, str):
            if not prompt_or_messages:
                raise InvalidArgumentError("invalid prompt: is empty (nothing to condition on)")
            return self._native.tokenize(prompt_or_messages)
        return self._native.tokenize_chat(_message_pairs(prompt_or_messages))

    def generate(self, prompt_or_messages: PromptOrMessages, **kwargs: Any) -> Result:
        """Generate a continuation.

        A ``str`` is completed as raw text (no chat template); a list of
        ``{"role", "content"}`` dicts is rendered with the model's chat template and answered.
        See the class docstring for the keyword arguments.

        Raises:
            ContextOverflowError: the prompt plus ``max_new_tokens`` exceed ``n_ctx``.
            InvalidArgumentError: a sampling parameter is out of range.
            TypeError: an unknown keyword argument or a wrongly typed value.
        """
        config = _generation_config("generate", kwargs, speculative=True)
        ids = self._prompt_ids(prompt_or_messages)
        return Result._from_native(self._native.generate(ids, config, self._n_ctx))

    def chat(self, messages: Sequence[Message], **kwargs: Any) -> Result:
        """Answer a conversation (a list of ``{"role", "content"}`` dicts) through the chat
        template. Same keyword arguments as :meth:`generate`."""
        config = _generation_config("chat", kwargs, speculative=True)
        ids = self._native.tokenize_chat(_message_pairs(messages))
        return Result._from_native(self._native.generate(ids, config, self._n_ctx))

    def stream(self, prompt_or_messages: PromptOrMessages, **kwargs: Any) -> Stream:
        """Like :meth:`generate`, but return a :class:`Stream` of text pieces as they are
        decoded. Argument errors raise here; errors during generation raise from the stream."""
        config = _generation_config("stream", kwargs, speculative=True)
        ids = self._prompt_ids(prompt_or_messages)
        return Stream(self._native.stream(ids, config, self._n_ctx))

    def load_lora(self, path: str | os.PathLike[str]) -> LoraAdapter:
        """Load a LoRA adapter for this model: a PEFT directory (``adapter_config.json`` +
        ``adapter_model.safetensors``) or a GGUF LoRA file. Use it with ``lora=adapter``,
        ``lora=(adapter, scale)`` or a list of them (their deltas add up)."""
        return LoraAdapter(self._native.load_lora(os.fspath(path)))

    def session(self, n_ctx: int | None = None) -> Session:
        """Start a multi-turn conversation that keeps its KV cache between turns.

        ``n_ctx`` is its capacity in tokens (default: ``load_llm``'s ``n_ctx``, else
        ``min(model's context, 4096)``).
        """
        n_ctx = _optional_count("n_ctx", n_ctx, minimum=1)
        return Session(self._native.session(n_ctx if n_ctx is not None else self._n_ctx))

    def apply_chat_template(self, messages: Sequence[Message]) -> str:
        """The prompt text of a conversation, ending with the assistant header (as
        transformers' ``apply_chat_template(..., add_generation_prompt=True)``)."""
        return self._native.render_chat(_message_pairs(messages))

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (special tokens added as the model's tokenizer does)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        return self._native.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        """The text of token ids (special tokens included as text)."""
        ids = list(ids)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int):
                raise TypeError(f"token ids must be ints, not {type(i).__name__}")
            if not 0 <= i < 2**32:
                raise InvalidArgumentError(f"invalid token id: {i} is out of range")
        return self._native.detokenize(ids)


class Session:
    """A multi-turn chat with one model (see :meth:`LLM.session`).

    Each :meth:`send` adds a message, answers it and keeps the answer; only the tokens the KV
    cache does not already hold are evaluated. A session serves one request at a time: while a
    :meth:`stream` of it is running, other requests raise
    :class:`~torchnative.InvalidArgumentError`.
    """

    def __init__(self, native: NativeSession) -> None:
        """Made by :meth:`LLM.session`; not meant to be called directly."""
        self._native = native

    def send(self, message: Message | str, **kwargs: Any) -> Result:
        """Add ``message`` (a ``{"role", "content"}`` dict, or a str for a user message), answer
        it and return the answer. Keyword arguments as :meth:`LLM.generate`."""
        config = _generation_config("send", kwargs)
        role, content = _user_message(message)
        return Result._from_native(self._native.send(role, content, config))

    def stream(self, message: Message | str, **kwargs: Any) -> Stream:
        """Like :meth:`send`, returning a :class:`Stream` of the answer's pieces. The answer is
        kept in the conversation when the stream ends (even if closed early)."""
        config = _generation_config("stream", kwargs)
        role, content = _user_message(message)
        return Stream(self._native.stream_send(role, content, config))

    def reset(self) -> None:
        """Forget the conversation (the cache stays allocated)."""
        self._native.reset()

    @property
    def messages(self) -> list[dict[str, str]]:
        """The conversation so far."""
        return [{"role": r, "content": c} for r, c in self._native.messages()]

    @property
    def n_tokens(self) -> int:
        """Tokens currently in the cache."""
        return self._native.n_tokens()

    @property
    def capacity(self) -> int:
        """Context capacity in tokens."""
        return self._native.capacity()


def _user_message(message: Message | str) -> tuple[str, str]:
    if isinstance(message, str):
        return "user", message
    return _message_pair(message)


class Engine:
    """Many requests over one model at once: continuous batching (each forward pass carries
    every running request's next token and chunks of new prompts) over a paged KV cache with
    prefix caching (a prompt prefix another request already computed is reused, not computed).

    Results do not depend on the load: a request's tokens are the same as if it ran alone.
    ``prompt_lookup=K`` drafts up to K tokens per request from its own history and verifies
    them in the same passes (faster on text that repeats its prompt; same tokens).
    ``kv_cache_dtype="f16"`` stores the KV cache in half precision: twice the positions in the
    same memory and less to read per step; logits move by the rounding, and answers still do
    not depend on the load.

    ::

        engine = torchnative.Engine(llm, max_running=8)
        streams = [engine.submit(q, max_new_tokens=64) for q in questions]
        for s in streams:
            print(s.text())
    """

    def __init__(
        self,
        llm: LLM,
        *,
        max_running: int = 8,
        ctx_per_request: int = 2048,
        batch_tokens: int = 256,
        max_queue: int = 64,
        kv_cache_tokens: int = 8192,
        prompt_lookup: int = 0,
        kv_cache_dtype: str = "f32",
    ) -> None:
        for name, value in [
            ("max_running", max_running),
            ("ctx_per_request", ctx_per_request),
            ("batch_tokens", batch_tokens),
            ("max_queue", max_queue),
            ("kv_cache_tokens", kv_cache_tokens),
        ]:
            _optional_count(name, value, minimum=1)
        _optional_count("prompt_lookup", prompt_lookup, minimum=0)
        if kv_cache_dtype not in ("f32", "f16"):
            raise ValueError(f"kv_cache_dtype must be 'f32' or 'f16', not {kv_cache_dtype!r}")
        ctx = min(ctx_per_request, llm.context_length)
        self._llm = llm
        self._native = _native.NativeEngine(
            llm._native,
            max_running,
            ctx,
            max(batch_tokens, max_running),
            max_queue,
            max(kv_cache_tokens, ctx),
            prompt_lookup,
            kv_cache_dtype,
        )

    @property
    def llm(self) -> LLM:
        return self._llm

    def submit(self, prompt_or_messages: PromptOrMessages, **kwargs: Any) -> Stream:
        """Queue a request (a prompt string, or chat messages) and return its :class:`Stream`.
        Raises :class:`~torchnative.TorchnativeError` at once when the queue is full. Takes
        the generation keyword arguments of :class:`LLM`."""
        config = _generation_config("submit", kwargs)
        ids = self._llm._prompt_ids(prompt_or_messages)
        return Stream(self._native.submit(ids, config))

    def stats(self) -> dict[str, int]:
        """Counters: running and queued requests, prompt and generated tokens, prefix-cache hit
        tokens, preemptions, drafted and accepted tokens (``prompt_lookup``), KV blocks total
        and used."""
        return self._native.stats()


class Server:
    """An OpenAI-compatible HTTP server running in the background (see :func:`serve`)."""

    def __init__(self, native: Any, engine: Engine) -> None:
        self._native = native
        self.engine = engine

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:8080`` (the API is under ``/v1``)."""
        return self._native.url

    def stop(self) -> None:
        """Stop serving (responses in flight finish first)."""
        self._native.stop()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    llm: LLM | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    model_name: str | None = None,
    api_key: str | None = None,
    **engine_options: Any,
) -> Server:
    """Serve ``llm`` (default: the default model) over the OpenAI HTTP API on a background
    thread, for notebooks and tests: ``/v1/chat/completions``, ``/v1/completions``,
    ``/v1/models``, ``/health``, ``/metrics``. ``port=0`` picks a free port (see
    :attr:`Server.url`). ``engine_options`` go to :class:`Engine`.
    """
    if llm is None:
        llm = load_llm()
    engine = Engine(llm, **engine_options)
    name = model_name or Path(llm.source).stem
    return Server(_native.NativeServer(engine._native, host, port, name, api_key), engine)
