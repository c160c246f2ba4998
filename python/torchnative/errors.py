"""The exceptions torchnative raises.

Every error the runtime reports is a :class:`TorchnativeError`; the subclasses say what kind of
problem it is. The message is the runtime's, naming the thing, the value and the reason::

    TorchnativeError
    ├── ModelLoadError          the model file or directory cannot be read or is malformed
    ├── UnsupportedModelError   the model needs something this build does not support
    ├── ContextOverflowError    prompt + max_new_tokens do not fit in the context
    └── InvalidArgumentError    an argument is out of range (also a ValueError)

Wrong argument *types* and unknown keyword arguments raise the built-in :class:`TypeError`.
"""

from __future__ import annotations


class TorchnativeError(Exception):
    """Base class of every error raised by the torchnative runtime."""


class ModelLoadError(TorchnativeError):
    """A model could not be loaded: missing file, unreadable or malformed checkpoint."""


class UnsupportedModelError(TorchnativeError):
    """The model (architecture, tensor type, option, dtype) is not supported by this build."""


class ContextOverflowError(TorchnativeError):
    """The prompt plus the requested new tokens exceed the context capacity.

    Attributes ``prompt_tokens``, ``max_new_tokens`` and ``capacity`` give the numbers (``None``
    when unknown).
    """

    prompt_tokens: int | None = None
    max_new_tokens: int | None = None
    capacity: int | None = None


class InvalidArgumentError(TorchnativeError, ValueError):
    """An argument has a value outside its valid range (e.g. ``top_p=0``, an empty prompt)."""


__all__ = [
    "TorchnativeError",
    "ModelLoadError",
    "UnsupportedModelError",
    "ContextOverflowError",
    "InvalidArgumentError",
]
