"""Test-time adaptation: a deployed model adapts to the data it serves, and reverts exactly.

    from torchnative_face import adapt

    served = adapt.wrap(model, method=adapt.Tent(), lr=1e-3)
    served.online()                  # every forward now also adapts
    logits = served(input_ids).logits
    served.offline()                 # forwards only
    served.revert()                  # the base weights again, bit for bit

Tent (Wang et al., "Tent: Fully Test-Time Adaptation by Entropy Minimization", ICLR 2021)
minimises the entropy of the model's own predictions over the affine parameters of its
normalisation layers (BatchNorm, LayerNorm, GroupNorm, RMSNorm and transformers' `*RMSNorm` /
`*LayerNorm` classes), one optimizer step per batch, with batch statistics in BatchNorm. Every
other parameter is frozen and never written.

Only upstream `torch` APIs are used, so the same code runs on the face and on upstream PyTorch
(that is how the face's entropy trajectory is checked against upstream's).

`revert()` is exact because adaptation only ever writes the parameters it adapts, and the wrapper
keeps their base values (for SmolLM2-135M: 61 RMSNorm weights, 35,136 floats) beside what it
changed; `delta()` reports the change. `parameter_digest(model)` hashes every parameter and
buffer, so a revert can be checked bit for bit.
"""

import hashlib

import torch

__all__ = ["Tent", "AdaptedModel", "wrap", "entropy", "parameter_digest", "norm_layers"]

_NORM_TYPES = tuple(
    t for t in (
        getattr(torch.nn.modules.batchnorm, "_NormBase", None),
        torch.nn.LayerNorm,
        torch.nn.GroupNorm,
        getattr(torch.nn, "RMSNorm", None),
    ) if t is not None
)


def _is_norm(module):
    if isinstance(module, _NORM_TYPES):
        return True
    # transformers' own normalisation classes (LlamaRMSNorm, Gemma3RMSNorm, T5LayerNorm, ...)
    name = type(module).__name__
    return name.endswith("RMSNorm") or name.endswith("LayerNorm")


def _affine(module):
    """(attribute, parameter) of a module's `weight` and `bias` where they are parameters."""
    return [(p, getattr(module, p)) for p in ("weight", "bias")
            if isinstance(getattr(module, p, None), torch.nn.Parameter)]


def norm_layers(model):
    """(qualified name, module) of every normalisation layer that has an affine parameter."""
    return [(name, module) for name, module in model.named_modules()
            if _is_norm(module) and _affine(module)]


def entropy(logits, mask=None):
    """Mean Shannon entropy (nats) of softmax(logits) over the last dimension, averaged over
    every other position (only where `mask` is nonzero, when given)."""
    logp = torch.log_softmax(logits, dim=-1)
    per_position = -(logp.exp() * logp).sum(dim=-1)
    if mask is None:
        return per_position.mean()
    mask = mask.to(per_position.dtype)
    if mask.shape != per_position.shape:
        raise ValueError(f"entropy: mask shape {tuple(mask.shape)} is not the logits' positions "
                         f"{tuple(per_position.shape)}")
    return (per_position * mask).sum() / mask.sum()


def parameter_digest(model):
    """sha256 over every parameter's and buffer's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
        t = tensor.detach().contiguous().reshape(-1)
        h.update(f"{name}|{t.dtype}|{tuple(tensor.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


class Tent:
    """Entropy minimisation over normalisation layers' affine parameters.

    `steps`: optimizer steps per batch (the paper takes 1). `episodic`: revert before every
    batch, so each batch adapts from the base model alone."""

    def __init__(self, steps=1, episodic=False):
        if not isinstance(steps, int) or steps < 1:
            raise ValueError(f"Tent: steps must be a positive integer, got {steps!r}")
        self.steps = steps
        self.episodic = episodic

    def parameters(self, model):
        """The (qualified name, parameter) pairs Tent adapts."""
        chosen = [(f"{name}.{p}" if name else p, param)
                  for name, module in norm_layers(model) for p, param in _affine(module)]
        if not chosen:
            raise ValueError(f"Tent: {type(model).__name__} has no normalisation layer with an "
                             f"affine parameter to adapt")
        return chosen

    def loss(self, outputs, kwargs):
        logits = outputs.logits if hasattr(outputs, "logits") else outputs
        if not isinstance(logits, torch.Tensor):
            raise TypeError(f"Tent: the model returned {type(outputs).__name__}, which has no "
                            f"logits tensor to take the entropy of")
        mask = kwargs.get("attention_mask")
        return entropy(logits, mask if mask is not None and logits.dim() == 3 else None)


def _make_optimizer(optimizer, params, lr):
    if callable(optimizer):
        return optimizer(params)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.999))
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=0.9)
    raise ValueError(f"adapt: unknown optimizer {optimizer!r} (use 'adam', 'sgd' or a callable "
                     f"that takes the parameters)")


class AdaptedModel:
    """A model under test-time adaptation. Calls go to the model; attributes the wrapper does
    not have are the model's (so `generate`, `config`, ... work as before)."""

    def __init__(self, model, method, lr, optimizer):
        self.module = model
        self.method = method
        self._adapted = method.parameters(model)
        ids = {id(p) for _, p in self._adapted}
        self._base = {name: p.detach().clone() for name, p in self._adapted}
        # What configure changes, to be put back by revert: modes, grad flags, BatchNorm stats.
        self._training = [(m, m.training) for m in model.modules()]
        self._requires_grad = [(p, p.requires_grad) for p in model.parameters()]
        self._batchnorm = [
            (m, m.track_running_stats, m.running_mean, m.running_var, getattr(m, "num_batches_tracked", None))
            for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        self._frozen = [p for p in model.parameters() if id(p) not in ids]
        self._lr, self._optimizer_spec = lr, optimizer
        self.optimizer = _make_optimizer(optimizer, [p for _, p in self._adapted], lr)
        self.is_online = False
        #: Entropy (the loss before each update) of every adapting step since the last revert.
        self.entropies = []

    # -- modes -------------------------------------------------------------------------------

    def online(self):
        """Every forward adapts: Tent's configuration (train mode, batch statistics in
        BatchNorm, gradients for the adapted parameters only)."""
        model = self.module
        model.train()
        for p in self._frozen:
            p.requires_grad_(False)
        for _, p in self._adapted:
            p.requires_grad_(True)
        for m, *_ in self._batchnorm:
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
        self.is_online = True
        return self

    def offline(self):
        """Forwards only, with the adapted parameters as they are now (the model's own modes)."""
        self._restore_configuration()
        self.is_online = False
        return self

    def revert(self):
        """The base model again, bit for bit: every adapted parameter gets its base value back,
        the optimizer forgets its state, modes and flags are restored."""
        with torch.no_grad():
            for name, p in self._adapted:
                p.copy_(self._base[name])
                p.grad = None
        self.optimizer = _make_optimizer(self._optimizer_spec, [p for _, p in self._adapted], self._lr)
        self.entropies = []
        was_online = self.is_online
        self._restore_configuration()
        self.is_online = False
        if was_online:
            self.online()
        return self

    def _restore_configuration(self):
        for m, training in self._training:
            m.training = training
        for p, flag in self._requires_grad:
            p.requires_grad_(flag)
        for m, track, mean, var, count in self._batchnorm:
            m.track_running_stats = track
            m.running_mean, m.running_var = mean, var
            if count is not None:
                m.num_batches_tracked = count

    # -- use ---------------------------------------------------------------------------------

    def __call__(self, *args, **kwargs):
        if not self.is_online:
            return self.module(*args, **kwargs)
        if self.method.episodic:
            self.revert()
        outputs = None
        for _ in range(self.method.steps):
            outputs = self.adapt_step(*args, **kwargs)
        return outputs

    def adapt_step(self, *args, **kwargs):
        """One Tent step on this batch: forward, entropy, backward, update. Returns the outputs
        of the forward (computed before the update), detached."""
        if not self.is_online:
            raise RuntimeError("adapt: adapt_step needs online() first")
        with torch.enable_grad():
            outputs = self.module(*args, **kwargs)
            loss = self.method.loss(outputs, kwargs)
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
            self.optimizer.step()
        self.entropies.append(loss.item())
        return _detach(outputs)

    def delta(self):
        """{parameter name: current value - base value} of every adapted parameter."""
        with torch.no_grad():
            return {name: p.detach() - self._base[name] for name, p in self._adapted}

    @property
    def adapted_parameter_names(self):
        return [name for name, _ in self._adapted]

    def __getattr__(self, name):
        # only reached for names the wrapper itself does not define
        module = self.__dict__.get("module")
        if module is None:
            raise AttributeError(name)
        return getattr(module, name)


def _detach(outputs):
    if isinstance(outputs, torch.Tensor):
        return outputs.detach()
    if hasattr(outputs, "logits") and isinstance(outputs.logits, torch.Tensor):
        outputs.logits = outputs.logits.detach()
    return outputs


def wrap(model, method=None, lr=1e-3, optimizer="adam"):
    """Puts `model` under test-time adaptation with `method` (default `Tent()`); `optimizer` is
    'adam' (Tent's choice), 'sgd' (momentum 0.9) or a callable taking the parameters. The model
    is adapted in place; nothing happens until `online()`."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"adapt.wrap: expected a torch.nn.Module, got {type(model).__name__}")
    if not (isinstance(lr, (int, float)) and lr > 0):
        raise ValueError(f"adapt.wrap: lr must be a positive number, got {lr!r}")
    return AdaptedModel(model, method if method is not None else Tent(), lr, optimizer)
