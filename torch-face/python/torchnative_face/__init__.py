"""torchnative's own additions to the torch face (ours, not upstream's).

`capture(model)` hands a live transformers decoder running on the face to torchnative's native
runtime: one forward pass is traced through the face's operator door and must be the decoder
pattern the runtime implements, the runtime builds its decoder over the module's own tensors
(f32 matrices are read where they lie: shared, not copied), and its logits on the traced input
must agree with the module's. `generate` then runs at the native runtime's speed while the user
keeps the same `nn.Module`.
"""

import torch

__all__ = ["capture", "CapturedModel"]

# transformers model types whose layer structure the runtime's decoder implements.
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3")

_PROBE_IDS = [1, 2, 3, 4, 5, 6, 7, 8]


def _count(trace, name):
    return sum(1 for op in trace if op == name or op.startswith(name + "."))


def _check_pattern(trace, layers, model_type):
    """The decoder's operator pattern: seven projections per layer and the lm head, one
    attention per layer (fused SDPA, or eager matmul + softmax), one embedding lookup."""
    linear = _count(trace, "aten::linear")
    sdpa = _count(trace, "aten::scaled_dot_product_attention")
    eager = min(_count(trace, "aten::matmul") // 2, _count(trace, "aten::softmax"))
    embedding = _count(trace, "aten::embedding")
    problems = []
    if linear != 7 * layers + 1:
        problems.append(f"{linear} linear ops (the pattern has {7 * layers + 1})")
    if sdpa != layers and eager < layers:
        problems.append(f"{sdpa} attention ops (the pattern has {layers})")
    if embedding != 1:
        problems.append(f"{embedding} embedding lookups (the pattern has 1)")
    if problems:
        raise NotImplementedError(
            f"capture: the traced forward of this {model_type} model is not the decoder pattern "
            f"torchnative's runtime implements: {', '.join(problems)}")


class CapturedModel:
    """A transformers decoder on the face with the native runtime behind `generate`."""

    def __init__(self, module, native, probe_error):
        self.module = module
        self.native = native
        #: Largest |logit| difference between the runtime and the module on the probe input.
        self.probe_error = probe_error

    @property
    def shared_weight_bytes(self):
        """Bytes of the module's weights the runtime reads in place."""
        return self.native.shared_weight_bytes

    @property
    def owned_weight_bytes(self):
        """Bytes the runtime holds copies of (norm weights and biases)."""
        return self.native.owned_weight_bytes

    def logits(self, input_ids):
        """Logits of every position, `[len, vocab]`, computed by the runtime."""
        return self.native.logits(_ids(input_ids))

    def generate(self, input_ids, max_new_tokens=20, eos_token_id=None, **kwargs):
        """Greedy generation like `model.generate(input_ids, do_sample=False, ...)`: returns
        the prompt and the new tokens as a `[1, n]` tensor. Sampling is refused by name."""
        if kwargs.get("do_sample"):
            raise NotImplementedError("CapturedModel.generate: sampling is not implemented; greedy only")
        kwargs.pop("do_sample", None)
        kwargs.pop("attention_mask", None)
        if kwargs:
            raise TypeError(f"CapturedModel.generate: unsupported arguments {sorted(kwargs)}")
        prompt = _ids(input_ids)
        if eos_token_id is None:
            eos_token_id = getattr(self.module.generation_config, "eos_token_id", None)
        eos = [] if eos_token_id is None else (
            [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id))
        new = self.native.generate(prompt, max_new_tokens, eos)
        return torch.tensor([prompt + new], dtype=torch.long)


def _ids(input_ids):
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 2:
            if input_ids.shape[0] != 1:
                raise ValueError("capture: one sequence at a time (batch size 1)")
            input_ids = input_ids[0]
        return [int(i) for i in input_ids.tolist()]
    return [int(i) for i in input_ids]


def capture(model):
    """Hands `model` (a transformers `*ForCausalLM` on the face, float32) to the native
    runtime; returns a `CapturedModel`. Refuses by name what the runtime does not implement."""
    config = model.config
    model_type = getattr(config, "model_type", None)
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise NotImplementedError(
            f"capture: architecture '{model_type}' is not implemented by torchnative's runtime "
            f"(it runs {', '.join(SUPPORTED_MODEL_TYPES)})")
    params = list(model.parameters())
    if any(p.dtype != torch.float32 for p in params):
        raise NotImplementedError("capture: only float32 models are captured (load with dtype=torch.float32)")
    probe = torch.tensor([[i % config.vocab_size for i in _PROBE_IDS]])
    torch._C._tn_trace_start()
    try:
        with torch.no_grad():
            expected = model(probe, use_cache=False).logits[0]
    finally:
        trace = torch._C._tn_trace_stop()
    _check_pattern(trace, config.num_hidden_layers, model_type)
    native = torch._C._tn_capture(config.to_json_string(), dict(model.state_dict()))
    got = native.logits(probe[0].tolist())
    error = (got - expected).abs().max().item()
    scale = expected.abs().max().item()
    if not error <= 1e-4 * max(scale, 1.0):
        raise NotImplementedError(
            f"capture: the runtime's logits differ from the module's forward by {error:.3g} "
            f"(largest logit {scale:.3g}); this {model_type} model is not what the runtime implements")
    return CapturedModel(model, native, error)
