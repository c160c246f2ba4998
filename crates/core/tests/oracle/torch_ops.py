"""Oracle for crates/core/tests/golden.rs: evaluates tensor-op cases with upstream PyTorch.

Usage: torch_ops.py CASES_JSON RESULTS_JSON

Each case: {"op", "inputs": [{"values": [str], "shape", "dtype", "view": [[name, args...]]}],
"kwargs": {...}}. Values are strings so NaN/inf and full int64 survive JSON. Each result is
{"outputs": [{"values", "shape", "dtype"}]} or {"error": message} when torch raised.
"""

import json
import sys

import torch
import torch.nn.functional as F

EXPECTED_TORCH = "2.15.0"

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
    "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}
NAMES = {v: k for k, v in DTYPES.items()}


def parse_scalar(s):
    kind, v = next(iter(s.items()))
    return {"float": float, "int": int, "bool": bool}[kind](v)


def build_input(spec, meta=False):
    dtype = DTYPES[spec["dtype"]]
    if dtype.is_floating_point:
        base = torch.tensor([float(v) for v in spec["values"]], dtype=torch.float64).to(dtype)
    else:
        base = torch.tensor([int(v) for v in spec["values"]], dtype=torch.int64).to(dtype)
    base = base.reshape(spec["shape"])
    if meta:
        base = base.to("meta")
    t = base
    for step in spec.get("view", []):
        name, args = step[0], step[1:]
        if name == "t":
            t = t.t()
        elif name == "transpose":
            t = t.transpose(*args)
        elif name == "permute":
            t = t.permute(*args)
        elif name == "slice":
            dim, start, end, step_ = args
            idx = [slice(None)] * t.dim()
            idx[dim] = slice(start, end, step_)
            t = t[tuple(idx)]
        elif name == "expand":
            t = t.expand(*args[0])
        elif name == "unsqueeze":
            t = t.unsqueeze(args[0])
        else:
            raise ValueError(f"unknown view step {name}")
    return base, t


def encode(t):
    strides = list(t.stride())
    if t.device.type == "meta":
        return {"values": [], "shape": list(t.shape), "dtype": NAMES[t.dtype], "strides": strides, "meta": True}
    t = t.detach().contiguous()
    flat = t.reshape(-1)
    if t.dtype.is_floating_point:
        vals = [repr(float(x)) for x in flat.to(torch.float64).tolist()]
    else:
        vals = [str(int(x)) for x in flat.to(torch.int64).tolist()]
    return {"values": vals, "shape": list(t.shape), "dtype": NAMES[t.dtype], "strides": strides}


def bottom_right_causal(lq, lk, window=None):
    i = torch.arange(lq).unsqueeze(1) + (lk - lq)
    j = torch.arange(lk).unsqueeze(0)
    allowed = j <= i
    if window is not None:
        allowed &= (i - j) < window
    return allowed


def rope_ref(x, pos, theta, style, rotary_dim):
    d = x.shape[-1]
    rd = rotary_dim or d
    inv_freq = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.int64).float() / rd))
    ang = pos.float().unsqueeze(-1) * inv_freq
    if pos.dim() == 2 and x.dim() == 4:
        ang = ang.unsqueeze(1)
    cos, sin = ang.cos(), ang.sin()
    xf = x.float() if x.dtype != torch.float64 else x
    rot, rest = xf[..., :rd], xf[..., rd:]
    if style == "half":
        a, b = rot[..., : rd // 2], rot[..., rd // 2:]
        out = torch.cat([a * cos - b * sin, b * cos + a * sin], -1)
    else:
        a, b = rot[..., 0::2], rot[..., 1::2]
        out = torch.stack([a * cos - b * sin, b * cos + a * sin], -1).flatten(-2)
    return torch.cat([out, rest], -1).to(x.dtype)


def run(op, bases, xs, kw):
    x = xs[0] if xs else None
    other = parse_scalar(kw["scalar"]) if "scalar" in kw else (xs[1] if len(xs) > 1 else None)
    binary = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "pow": torch.pow,
              "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne,
              "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge,
              "logical_and": torch.logical_and, "logical_or": torch.logical_or,
              "logical_xor": torch.logical_xor, "remainder": torch.remainder, "fmod": torch.fmod,
              "atan2": torch.atan2, "bitwise_and": torch.bitwise_and, "bitwise_or": torch.bitwise_or,
              "bitwise_xor": torch.bitwise_xor}
    if op in binary:
        return [binary[op](x, other)]
    if op == "div":
        return [torch.div(x, other, rounding_mode=kw.get("rounding_mode"))]
    unary = {"neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log,
             "log1p": torch.log1p, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin,
             "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu,
             "relu": torch.relu, "floor": torch.floor, "ceil": torch.ceil, "round": torch.round,
             "isnan": torch.isnan, "isinf": torch.isinf, "logical_not": torch.logical_not,
             "contiguous": lambda t: t.contiguous(), "clone": lambda t: t.clone(),
             "erf": torch.erf, "reciprocal": torch.reciprocal, "log2": torch.log2, "log10": torch.log10,
             "exp2": torch.exp2, "expm1": torch.expm1, "tan": torch.tan, "atan": torch.atan,
             "asin": torch.asin, "acos": torch.acos, "sinh": torch.sinh, "cosh": torch.cosh,
             "trunc": torch.trunc, "sign": torch.sign, "bitwise_not": torch.bitwise_not}
    if op in unary:
        return [unary[op](x)]
    if op == "gelu":
        return [F.gelu(x, approximate=kw["approximate"])]
    if op == "clamp":
        lo = parse_scalar(kw["min"]) if "min" in kw else None
        hi = parse_scalar(kw["max"]) if "max" in kw else None
        return [torch.clamp(x, lo, hi)]
    if op == "clamp_t":
        return [torch.clamp(xs[0], xs[1], xs[2])]
    if op == "rsub":
        return [parse_scalar(kw["scalar"]) - x]
    if op == "rdiv":
        return [parse_scalar(kw["scalar"]) / x]
    if op == "where":
        return [torch.where(xs[0], xs[1], xs[2])]
    if op == "to":
        return [x.to(DTYPES[kw["dtype"]])]
    if op == "result_type":
        return [torch.empty(0, dtype=torch.result_type(x, other))]
    if op in ("amax", "amin"):
        return [getattr(torch, op)(x, dim=kw.get("dims", []), keepdim=kw.get("keepdim", False))]
    if op in ("sum", "prod", "mean", "logsumexp", "any", "all"):
        dims = kw.get("dims", [])
        keep = kw.get("keepdim", False)
        if op == "prod":
            r = x
            if not dims:
                return [torch.prod(x)] if not keep else [torch.prod(x).reshape([1] * x.dim())]
            for d in sorted([d % x.dim() for d in dims], reverse=True):
                r = torch.prod(r, d, keepdim=keep)
            return [r]
        if op in ("any", "all"):
            fn = getattr(torch, op)
            return [fn(x, dim=tuple(dims), keepdim=keep) if dims else (fn(x) if not keep else fn(x, dim=tuple(range(x.dim())), keepdim=True))]
        fn = getattr(torch, op)
        if op == "logsumexp":
            return [fn(x, dim=tuple(dims) if dims else tuple(range(x.dim())), keepdim=keep)]
        return [fn(x, dim=tuple(dims), keepdim=keep)]
    if op in ("var", "std"):
        fn = getattr(torch, op)
        dims = kw.get("dims", []) or None
        return [fn(x, dim=dims, correction=kw["correction"], keepdim=kw.get("keepdim", False))]
    if op in ("max_dim", "min_dim"):
        r = (torch.max if op == "max_dim" else torch.min)(x, kw["dim"], keepdim=kw.get("keepdim", False))
        return [r.values, r.indices]
    if op in ("max", "min"):
        return [getattr(torch, op)(x)]
    if op in ("argmax", "argmin"):
        return [getattr(torch, op)(x, dim=kw.get("dim"), keepdim=kw.get("keepdim", False))]
    if op == "cumsum":
        return [torch.cumsum(x, kw["dim"])]
    if op == "softmax":
        return [torch.softmax(x, kw["dim"])]
    if op == "log_softmax":
        return [torch.log_softmax(x, kw["dim"])]
    if op in ("matmul", "mm", "bmm"):
        return [getattr(torch, op)(xs[0], xs[1])]
    if op == "linear":
        return [F.linear(xs[0], xs[1], xs[2] if len(xs) > 2 else None)]
    if op in ("addmm", "baddbmm"):
        return [getattr(torch, op)(xs[0], xs[1], xs[2], beta=kw["beta"], alpha=kw["alpha"])]
    if op == "index_select":
        return [torch.index_select(x, kw["dim"], xs[1])]
    if op == "gather":
        return [torch.gather(x, kw["dim"], xs[1])]
    if op == "scatter":
        if "value" in kw:
            return [torch.scatter(x, kw["dim"], xs[1], parse_scalar(kw["value"]))]
        return [torch.scatter(x, kw["dim"], xs[1], xs[2])]
    if op == "scatter_add":
        return [torch.scatter_add(x, kw["dim"], xs[1], xs[2])]
    if op == "embedding":
        return [F.embedding(xs[0], xs[1])]
    if op == "masked_select":
        return [torch.masked_select(x, xs[1])]
    if op == "cat":
        return [torch.cat(xs, kw["dim"])]
    if op == "stack":
        return [torch.stack(xs, kw["dim"])]
    if op == "split":
        return list(torch.split(x, kw["size"], kw["dim"]))
    if op == "chunk":
        return list(torch.chunk(x, kw["chunks"], kw["dim"]))
    if op in ("tril", "triu"):
        return [getattr(torch, op)(x, kw["diagonal"])]
    if op == "topk":
        r = torch.topk(x, kw["k"], kw["dim"], largest=kw["largest"])
        return [r.values, r.indices]
    if op == "sort":
        r = torch.sort(x, dim=kw["dim"], descending=kw["descending"], stable=True)
        return [r.values, r.indices]
    if op == "argsort":
        return [torch.argsort(x, dim=kw["dim"], descending=kw["descending"], stable=True)]
    if op == "repeat":
        return [x.repeat(*kw["repeats"])]
    if op == "repeat_interleave":
        if len(xs) > 1:
            return [torch.repeat_interleave(x, xs[1], dim=kw.get("dim"))]
        return [torch.repeat_interleave(x, kw["repeats"], dim=kw.get("dim"))]
    if op == "flip":
        return [torch.flip(x, kw["dims"])]
    if op == "roll":
        return [torch.roll(x, kw["shifts"], kw["dims"])]
    if op == "pad":
        return [F.pad(x, kw["pads"], value=parse_scalar(kw["value"]))]
    if op == "index":
        return [x[tuple(xs[1:])]]
    if op == "nonzero":
        return [torch.nonzero(x)]
    if op == "arange":
        d = DTYPES[kw["dtype"]] if "dtype" in kw else None
        return [torch.arange(parse_scalar(kw["start"]), parse_scalar(kw["end"]), parse_scalar(kw["step"]), dtype=d)]
    if op == "linspace":
        return [torch.linspace(kw["start"], kw["end"], kw["steps"], dtype=DTYPES[kw["dtype"]])]
    if op == "eye":
        if kw["m"] is None:
            return [torch.eye(kw["n"], dtype=DTYPES[kw["dtype"]])]
        return [torch.eye(kw["n"], kw["m"], dtype=DTYPES[kw["dtype"]])]
    if op == "full":
        d = DTYPES[kw["dtype"]] if "dtype" in kw else None
        return [torch.full(kw["shape"], parse_scalar(kw["value"]), dtype=d)]
    # Views: results are read back contiguously.
    if op == "view":
        return [x.view(kw["shape"])]
    if op == "reshape":
        return [x.reshape(kw["shape"])]
    if op == "diagonal":
        return [torch.diagonal(x, kw["offset"], kw["dim1"], kw["dim2"])]
    if op == "as_strided":
        return [torch.as_strided(x, kw["size"], kw["stride"], kw["offset"])]
    if op == "flatten":
        return [x.flatten(kw["start"], kw["end"])]
    if op == "unflatten":
        return [x.unflatten(kw["dim"], kw["sizes"])]
    if op == "narrow":
        return [x.narrow(kw["dim"], kw["start"], kw["length"])]
    if op == "select":
        return [x.select(kw["dim"], kw["index"])]
    if op == "unsqueeze_view":
        return [x.unsqueeze(kw["dim"])]
    if op == "squeeze":
        return [x.squeeze(kw["dims"]) if "dims" in kw else x.squeeze()]
    # In-place ops act on the (possibly strided) view and report the base and the view.
    if op == "add_":
        x.add_(other)
        return [bases[0], x]
    if op == "mul_":
        x.mul_(other)
        return [bases[0], x]
    if op == "copy_":
        x.copy_(xs[1])
        return [bases[0], x]
    if op == "fill_":
        x.fill_(parse_scalar(kw["value"]))
        return [bases[0], x]
    if op == "masked_fill_":
        x.masked_fill_(xs[1], parse_scalar(kw["value"]))
        return [bases[0], x]
    if op == "index_copy_":
        x.index_copy_(kw["dim"], xs[1], xs[2])
        return [bases[0], x]
    if op == "index_put_":
        x.index_put_(tuple(xs[1:-1]), xs[-1], accumulate=kw["accumulate"])
        return [bases[0], x]
    if op == "alias":
        a, name = x, kw["case"]
        if name == "copy_t":
            a.copy_(a.t())
        elif name == "add_self":
            a.add_(a)
        elif name == "slice_add":
            a.view(-1)[1:].add_(a.view(-1)[:-1])
        elif name == "row_col":
            a[0].add_(a[:, 0])
        elif name == "mul_disjoint":
            a[0:2].mul_(a[2:4])
        elif name == "t_view_fill":
            a.t()[0].fill_(7)
        elif name == "copy_disjoint_t":
            a[0:2].copy_(a[2:4].t()[0:2])
        return [a]
    if op == "rms_norm":
        w = xs[1] if len(xs) > 1 else None
        return [F.rms_norm(x, kw["shape"], w, eps=kw.get("eps"))]
    if op == "layer_norm":
        w = xs[1] if len(xs) > 1 else None
        b = xs[2] if len(xs) > 2 else None
        return [F.layer_norm(x, kw["shape"], w, b, eps=kw["eps"])]
    if op == "rope":
        return [rope_ref(xs[0], xs[1], kw["theta"], kw["style"], kw.get("rotary_dim"))]
    if op == "sdpa":
        q, k, v = xs[0], xs[1], xs[2]
        lq, lk = q.shape[-2], k.shape[-2]
        mask = xs[3] if len(xs) > 3 else None
        if kw.get("is_causal") or kw.get("window") is not None:
            structural = bottom_right_causal(lq, lk, kw.get("window")) if kw.get("is_causal") else \
                (torch.arange(lq).unsqueeze(1) + (lk - lq) - torch.arange(lk).unsqueeze(0)) < kw["window"]
            if mask is None:
                mask = structural
            elif mask.dtype == torch.bool:
                mask = mask & structural
            else:
                mask = mask.masked_fill(~structural, float("-inf"))
        return [F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=kw.get("scale"),
                                               enable_gqa=q.shape[-3] != k.shape[-3] if q.dim() >= 3 else False)]
    raise ValueError(f"unknown op {op}")


def main():
    base_version = torch.__version__.split("+")[0]
    if base_version != EXPECTED_TORCH:
        sys.exit(f"torch {torch.__version__} found, oracle expects {EXPECTED_TORCH}")
    cases = json.load(open(sys.argv[1]))
    results = []
    for case in cases:
        try:
            built = [build_input(s, case.get("meta", False)) for s in case["inputs"]]
            bases = [b for b, _ in built]
            xs = [t for _, t in built]
            outs = run(case["op"], bases, xs, case.get("kwargs", {}))
            results.append({"outputs": [encode(o) for o in outs]})
        except Exception as e:  # torch refusing an input is a result to compare, too
            results.append({"error": f"{type(e).__name__}: {e}"})
    json.dump(results, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
