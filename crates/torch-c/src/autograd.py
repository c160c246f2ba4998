# torch._C's autograd (ours; compiled into the extension, run in the module's namespace after
# surface.py). The door (autograd.rs) calls `_tn_autograd_pre` / `_tn_autograd_post` around an
# operator whose input requires grad; they record a node: the operator's backward formulas,
# read from upstream's derivatives.yaml (torchgen/packaged/autograd/ of the installed tree) and
# translated from their C++ into Python expressions over the face's own operators and the
# helper functions below, the tensors the formulas name (with their version counters) and the
# edges to the inputs' nodes. `_ImperativeEngine.run_backward` (what upstream's
# torch.autograd.backward/grad call) runs the graph. An operator without a formula, or whose
# formula names something not translated here, gets a node that refuses by name when backward
# reaches it.
# flake8: noqa: F821

import builtins as _b
import re as _re
import weakref as _weakref
from math import prod as _prod

_AG = {"table": None, "dont": None,
       # the self-test (torch-face/tests/test_autograd.py): every formula's gradient scaled by
       # 1 + this, which the golden comparison must reject
       "perturb": _b.float(__import__("os").environ.get("TORCHNATIVE_AUTOGRAD_PERTURB") or 0)}


# ----- reading derivatives.yaml ---------------------------------------------------------------

def _ag_torch_dir():
    import torch
    return _os_path_dirname(torch.__file__)


def _os_path_dirname(p):
    import os
    return os.path.dirname(p)


def _ag_parse_yaml(text):
    """The subset of YAML derivatives.yaml is written in: a list of mappings, `dispatch:` with
    nested mappings, quoted scalars over several lines, plain scalars continued on deeper lines."""
    entries, cur, section, key_indent, pending = [], None, None, None, None
    last = None  # (mapping, key) a continuation line extends
    for raw in text.split("\n"):
        stripped = raw.strip()
        if pending is not None:
            mapping, key = pending
            mapping[key] += " " + stripped
            if stripped.endswith('"'):
                mapping[key] = mapping[key][1:-1]
                pending = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        if stripped.startswith("- name:"):
            cur = {"name": stripped[len("- name:"):].strip()}
            entries.append(cur)
            section, last = None, None
            continue
        m = _re.match(r"^([A-Za-z_][A-Za-z0-9_, ]*):(?:\s+(.*))?$", stripped)
        if m and cur is not None and (last is None or indent <= key_indent or section is not None
                                      and indent <= key_indent + 4):
            key, value = m.group(1).strip(), (m.group(2) or "").strip()
            if indent == 2:
                section = None
            if not value:
                if key == "dispatch":
                    cur["dispatch"] = {}
                    section = ("dispatch", None)
                elif section is not None:
                    cur["dispatch"][key] = {}
                    section = ("dispatch", key)
                key_indent = indent
                last = None
                continue
            target = cur if indent == 2 or section is None or section[1] is None else cur["dispatch"][section[1]]
            if not value.startswith('"') and " #" in value:
                value = value.split(" #", 1)[0].rstrip()
            target[key] = value
            key_indent = indent
            last = (target, key)
            if value.startswith('"'):
                if len(value) > 1 and value.endswith('"'):
                    target[key] = value[1:-1]
                else:
                    pending = (target, key)
            continue
        if last is not None:
            last[0][last[1]] += " " + stripped
    return entries


def _ag_camel(name):
    # torchgen's node names: CamelCase, a letter after a digit upper-cased (Log1PBackward0)
    name = "".join(p[:1].upper() + p[1:] for p in name.split("_") if p)
    return _re.sub(r"(?<=\d)([a-z])", lambda m: m.group(1).upper(), name)


def _ag_table():
    """aten::name.overload -> (node class name, {input names: formula}, schema text)."""
    if _AG["table"] is not None:
        return _AG["table"]
    import os
    path = os.path.join(_ag_torch_dir(), "..", "torchgen", "packaged", "autograd", "derivatives.yaml")
    with open(path) as f:
        entries = _ag_parse_yaml(f.read())
    table, counts = {}, {}
    for e in entries:
        sig = e["name"]
        head = sig.split("(", 1)[0]
        base, _, overload = head.partition(".")
        formulas = e.get("dispatch", {}).get("Default") or {
            k: v for k, v in e.items() if k not in ("name", "dispatch")}
        od = e.get("output_differentiability") or formulas.get("output_differentiability")
        # an entry may be a condition (`_to_copy`: "!dtype || isDifferentiableType(*dtype)");
        # the conditions upstream writes are about the output's dtype, which _tn_autograd_post
        # checks on the output itself (only float and complex outputs get a grad_fn)
        od = [x.strip() != "False" for x in od.strip("[]").split(",")] if od else None
        formulas = {k: v for k, v in formulas.items()
                    if k not in ("output_differentiability", "result") and not k.startswith("result")}
        # upstream's node names drop an operator's `_forward` (nll_loss_forward: NllLossBackward0)
        named = base[: -len("_forward")] if base.endswith("_forward") else base
        n = counts.get(named, 0)
        counts[named] = n + 1
        cls = _ag_camel(named) + "Backward" + str(n)
        rets = sig.rsplit("->", 1)[1].strip().strip("()")
        ret_names = [r.strip().split(" ")[-1] for r in rets.split(",")] if " " in rets else []
        table["aten::" + head] = (cls, formulas, sig, ret_names, od)
    _AG["table"] = table
    return table


def _ag_dont_require():
    """Upstream's DONT_REQUIRE_DERIVATIVE (torchgen/packaged/autograd/gen_variable_type.py):
    operators whose result never requires grad."""
    if _AG["dont"] is not None:
        return _AG["dont"]
    import ast
    import os
    path = os.path.join(_ag_torch_dir(), "..", "torchgen", "packaged", "autograd", "gen_variable_type.py")
    names = set()
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "DONT_REQUIRE_DERIVATIVE" for t in node.targets):
            names = set(ast.literal_eval(node.value))
    _AG["dont"] = names
    return names


# ----- translating a formula from C++ to Python -----------------------------------------------

_AG_TOKEN = _re.compile(r"\s*(::|->|&&|\|\||==|!=|<=|>=|[A-Za-z_][A-Za-z0-9_]*|\d+\.\d*(?:e-?\d+)?|\d+|\"[^\"]*\"|.)")


class _AgUntranslatable(Exception):
    pass


def _ag_translate(text):
    # C comments name arguments (`/*rounding_mode=*/"trunc"`); they are not code
    text = _re.sub(r"/\*.*?\*/", " ", text)
    toks = [t for t in _AG_TOKEN.findall(text) if t.strip()]
    out = []
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if nxt == "::" and t in ("at", "c10", "std", "torch", "native"):
            i += 2
            continue
        if t == "GradMode" and toks[i + 1:i + 5] == ["::", "is_enabled", "(", ")"]:
            # grad mode while the formula runs (on only for create_graph)
            out.append("_tn_ag_grad_mode()")
            i += 5
            continue
        if t == "tuple" and nxt == "<":
            # std::tuple<Tensor, ...>(): undefined gradients
            j, depth, commas = i + 1, 0, 0
            while j < len(toks):
                depth += {"<": 1, ">": -1}.get(toks[j], 0)
                commas += toks[j] == "," and depth == 1
                j += 1
                if depth == 0:
                    break
            if toks[j:j + 2] != ["(", ")"]:
                raise _AgUntranslatable(text)
            out.append("(" + "None, " * (commas + 1) + ")")
            i = j + 2
            continue
        if t == "->" and nxt in ("sym_sizes", "sizes") and toks[i + 2:i + 4] == ["(", ")"] and out:
            # an optional tensor's sizes (None when the tensor is absent)
            out[-1] = f"_tn_ag_opt_sizes({out[-1]})"
            i += 4
            continue
        if t == "::" or t == "<" and out and out[-1] in ("vector", "optional", "array"):
            raise _AgUntranslatable(text)
        if t == "&&":
            out.append(" and ")
        elif t == "||":
            out.append(" or ")
        elif t == "!" and nxt != "=":
            out.append(" not ")
        elif t == "true":
            out.append("True")
        elif t == "false":
            out.append("False")
        elif t == "nullopt":
            out.append("None")
        elif t == "{":
            out.append("[")
        elif t == "}":
            out.append("]")
        elif t == "?" or t == ":":
            out.append(t)
        elif t == "." and _re.match(r"[A-Za-z_]", nxt):
            name = nxt
            if name.endswith("_symint"):
                name = name[: -len("_symint")]
            call = i + 2 < len(toks) and toks[i + 2] == "("
            attr = {"sym_sizes": "shape", "sizes": "shape", "scalar_type": "dtype", "layout": "layout",
                    "options": "_tn_ag_options", "sym_strides": "stride", "strides": "stride",
                    "sym_numel": "numel", "sym_size": "size", "defined": "_tn_ag_defined",
                    "new_zeros": "_tn_ag_new_zeros"}.get(name)
            if name == "defined" and call and toks[i + 3] == ")" and out:
                # `weight.defined()`, `grads[1].defined()`: None when absent
                ident = r"^[A-Za-z_][A-Za-z0-9_]*$"
                if _re.match(ident, out[-1]) and (len(out) < 2 or out[-2] != "."):
                    out[-1] = f"({out[-1]} is not None)"
                    i += 4
                    continue
                if (len(out) >= 4 and out[-1] == "]" and out[-3] == "[" and out[-2].isdigit()
                        and _re.match(ident, out[-4]) and (len(out) < 5 or out[-5] != ".")):
                    out[-4:] = [f"({out[-4]}[{out[-2]}] is not None)"]
                    i += 4
                    continue
            if name in ("mH", "mT"):
                attr = name
            if attr in ("shape", "dtype", "layout", "mH", "mT") and call and toks[i + 3] == ")":
                out.append("." + attr)
                i += 4
                continue
            out.append("." + (attr or name))
            i += 2
            continue
        else:
            out.append(t)
        i += 1
    py = " ".join(out)
    py = _ag_ternary(py)
    try:
        compile(py, "<formula>", "eval")
    except SyntaxError:
        raise _AgUntranslatable(text) from None
    return py


def _ag_ternary(s):
    """C's `c ? a : b` (right-associative, lowest precedence) as `(a if c else b)`."""
    depth, q = 0, -1
    for k, ch in enumerate(s):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "?" and depth == 0:
            q = k
            break
    if q < 0:
        # ternaries inside parentheses
        return _ag_ternary_nested(s)
    depth, nest, c = 0, 0, -1
    for k in range(q + 1, len(s)):
        ch = s[k]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "?" and depth == 0:
            nest += 1
        elif ch == ":" and depth == 0:
            if nest == 0:
                c = k
                break
            nest -= 1
    if c < 0:
        raise _AgUntranslatable(s)
    cond, a, b = s[:q], s[q + 1:c], s[c + 1:]
    return f"(({_ag_ternary(a)}) if ({_ag_ternary(cond)}) else ({_ag_ternary(b)}))"


def _ag_ternary_nested(s):
    # find a parenthesised group holding a top-level '?', translate it, repeat
    if "?" not in s:
        return s
    stack = []
    for k, ch in enumerate(s):
        if ch in "([":
            stack.append(k)
        elif ch in ")]":
            start = stack.pop()
            body = s[start + 1:k]
            if "?" in body and _ag_top_level_q(body):
                # a call's arguments: each one is its own expression
                parts = [_ag_ternary(p) if _ag_top_level_q(p) else p for p in _ag_split_args(body)]
                return _ag_ternary_nested(s[:start + 1] + ",".join(parts) + s[k:])
    raise _AgUntranslatable(s)


def _ag_split_args(body):
    parts, depth, last = [], 0, 0
    for k, ch in enumerate(body):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[last:k])
            last = k + 1
    parts.append(body[last:])
    return parts


def _ag_top_level_q(body):
    depth = 0
    for ch in body:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "?" and depth == 0:
            return True
    return False


# ----- the helper functions formulas name (ours, over the face's operators) -------------------

def _tn_ag_torch():
    import torch
    return torch


def _tn_ag_opt_sizes(t):
    return None if t is None else _b.list(t.shape)


class _AgScalarMethods:
    """c10::Scalar's methods, as a formula calls them on a Scalar argument."""
    _tn_floating = False

    def conj(self):
        return self

    def toDouble(self):
        return _b.float(self)

    toFloat = toDouble

    def toLong(self):
        return _b.int(self)

    def isComplex(self):
        return False

    def isFloatingPoint(self):
        return self._tn_floating

    def toComplexDouble(self):
        return _b.complex(self)


class _AgScalar(_AgScalarMethods, _b.float):
    _tn_floating = True


class _AgIntScalar(_AgScalarMethods, _b.int):
    pass


class _AgComplexScalar(_AgScalarMethods, _b.complex):
    def conj(self):
        return _AgComplexScalar(self.conjugate())

    def isComplex(self):
        return True


def _ag_wrap_scalar(v):
    if isinstance(v, _b.bool):
        return v
    if isinstance(v, _b.complex):
        return _AgComplexScalar(v)
    if isinstance(v, _b.int):
        return _AgIntScalar(v)
    if isinstance(v, _b.float):
        return _AgScalar(v)
    return v


def handle_r_to_c(dtype, g):
    if g is None:
        return g
    if not dtype.is_complex and g.is_complex():
        return g.real
    return g


def maybe_multiply(g, s):
    if isinstance(s, (_b.int, _b.float)) and s == 1:
        return g
    return g * s


def sum_to(g, shape):
    shape = _b.tuple(shape)
    if _b.tuple(g.shape) == shape:
        return g
    lead = g.dim() - len(shape)
    if lead > 0:
        g = g.sum(_b.list(_b.range(lead)))
    dims = [i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1]
    if dims:
        g = g.sum(dims, keepdim=True)
    return g


def mul_tensor_backward(grad, other, dtype):
    return handle_r_to_c(dtype, grad * (other.conj() if hasattr(other, "conj") else other))


def div_tensor_self_backward(grad, other, dtype, rounding_mode=None):
    if rounding_mode is not None:
        # floor and trunc division are piecewise constant
        return grad.new_zeros(grad.shape, dtype=dtype)
    return handle_r_to_c(dtype, grad / (other.conj() if hasattr(other, "conj") else other))


def div_tensor_other_backward(grad, self, other, rounding_mode=None):
    if rounding_mode is not None:
        return grad.new_zeros(grad.shape, dtype=other.dtype)
    return handle_r_to_c(other.dtype, -grad * ((self / other) / other).conj())


def mm_mat1_backward(grad, mat2, sizes, strides, layout, alpha):
    return maybe_multiply(grad.mm(mat2.t().conj()), alpha)


def mm_mat2_backward(grad, mat1, sizes, strides, layout, alpha):
    return maybe_multiply(mat1.t().conj().mm(grad), alpha)


def matmul_backward(grad, self, other, mask):
    torch = _tn_ag_torch()
    a, b, g = self, other, grad
    if a.dim() == 1 and b.dim() == 1:
        return (grad * other.conj() if mask[0] else None, grad * self.conj() if mask[1] else None)
    if a.dim() == 1:
        a, g = a.unsqueeze(0), g.unsqueeze(-2)
    if b.dim() == 1:
        b, g = b.unsqueeze(-1), g.unsqueeze(-1)
    ga = gb = None
    if mask[0]:
        ga = sum_to(torch.matmul(g, b.mT.conj()), a.shape)
        ga = ga.squeeze(0) if self.dim() == 1 else ga
        ga = ga.reshape(self.shape)
    if mask[1]:
        gb = sum_to(torch.matmul(a.mT.conj(), g), b.shape)
        gb = gb.reshape(other.shape)
    return ga, gb


def linear_backward(input, grad, weight, mask):
    gi = grad.matmul(weight.conj()) if mask[0] else None
    gw = gb = None
    if mask[1]:
        g2 = grad.reshape(-1, grad.shape[-1]) if grad.dim() > 1 else grad.unsqueeze(0)
        i2 = input.reshape(-1, input.shape[-1]) if input.dim() > 1 else input.unsqueeze(0)
        gw = g2.t().mm(i2.conj())
    if len(mask) > 2 and mask[2]:
        gb = grad.sum(_b.list(_b.range(grad.dim() - 1))) if grad.dim() > 1 else grad
    return gi, gw, gb


def pow_backward(grad, self, exponent):
    torch = _tn_ag_torch()
    if not isinstance(exponent, TensorBase) and exponent == 0:
        return torch.zeros_like(self)
    return grad * (exponent * self.pow(exponent - 1)).conj()


def pow_backward_self(grad, self, exponent):
    torch = _tn_ag_torch()
    return torch.where(exponent == 0.0, torch.zeros((), dtype=grad.dtype),
                       grad * (exponent * torch.pow(self, exponent - 1)).conj())


def pow_backward_exponent(grad, self, exponent, result):
    torch = _tn_ag_torch()
    if not isinstance(self, TensorBase):
        if self == 0:
            cond = exponent >= 0
            return torch.where(cond, torch.zeros((), dtype=grad.dtype),
                               grad * (result * _b.__import__("math").log(self) if self > 0 else result).conj())
        return grad * (result * _b.__import__("math").log(self)).conj()
    cond = (self == 0) & (exponent >= 0)
    out = grad * torch.where(cond, torch.zeros((), dtype=grad.dtype), result * self.log()).conj()
    return sum_to(out, exponent.shape)


def mean_backward(grad, sizes, dim, numel, keepdim):
    if dim is None or len(dim) == 0:
        return grad.expand(sizes) / numel
    n = 1
    nd = len(sizes)
    for d in dim:
        n *= sizes[d % nd]
    return sum_backward(grad, sizes, dim, keepdim) / n


def sum_backward(grad, sizes, dims, keepdim):
    sizes = _b.tuple(sizes)
    if not keepdim and len(sizes) > 0 and dims is not None and len(dims) > 0:
        nd = len(sizes)
        for d in sorted(d % nd for d in dims):
            grad = grad.unsqueeze(d)
    return grad.expand(sizes)


def permute_backwards(grad, dims):
    nd = len(dims)
    inv = [0] * nd
    for i, d in enumerate(dims):
        inv[d % nd] = i
    return grad.permute(inv)


def unsqueeze_to(grad, *args):
    if len(args) == 1:
        sizes = args[0]
        for i, n in enumerate(sizes):
            if n == 1:
                grad = grad.unsqueeze(i)
        return grad
    dims, sizes = args
    dims = [dims] if isinstance(dims, _b.int) else _b.list(dims)
    nd = len(sizes)
    for d in sorted(d % nd if nd else 0 for d in dims):
        if nd and sizes[d] == 1:
            grad = grad.unsqueeze(d)
    return grad


def not_implemented(what, *a):
    raise NotImplementedError(f"the derivative for '{what}' is not implemented.")


def _tn_ag_aten(name):
    """An aten operator as a formula calls it: C++ passes keyword-only arguments by position."""
    torch = _tn_ag_torch()
    packet = getattr(torch.ops.aten, name)

    def call(*args):
        try:
            overloads = [getattr(packet, o) for o in packet.overloads()]
        except Exception:
            overloads = []
        for op in overloads:
            params = op._schema.arguments
            positional = [a for a in params if not a.kwarg_only]
            if len(args) <= len(positional) or len(args) > len(params):
                continue
            kw = {a.name: v for a, v in zip([a for a in params if a.kwarg_only], args[len(positional):])}
            try:
                return _ag_run_or_decompose(op, args[:len(positional)], kw)
            except TypeError:
                continue
        try:
            return packet(*args)
        except NotImplementedError:
            for op in overloads:
                if len(args) <= len(op._schema.arguments):
                    try:
                        return _ag_run_or_decompose(op, args, {})
                    except TypeError:
                        continue
            raise

    return call


def _ag_run_or_decompose(op, args, kwargs):
    """A backward formula's operator: the face's kernel, or, where the face has none, upstream's
    own decomposition of it into operators (torch._decomp, written over aten; not a PrimTorch
    reference)."""
    try:
        return op(*args, **kwargs)
    except NotImplementedError as e:
        if "has no kernel in torchnative" not in _b.str(e):
            raise
        from torch._decomp import decomposition_table
        fn = decomposition_table.get(op)
        inner = fn
        while getattr(inner, "__wrapped__", None) is not None:
            inner = inner.__wrapped__
        if fn is None or (getattr(inner, "__module__", "") or "").startswith("torch._refs"):
            raise
        return fn(*args, **kwargs)


TensorBase._tn_ag_defined = lambda self: True
# C++'s `t.new_zeros(sizes, options)`: the options (a dtype here) go by position
TensorBase._tn_ag_new_zeros = lambda self, size, dtype=None: self.new_zeros(
    _b.list(size), dtype=self.dtype if dtype is None else dtype)
TensorBase._tn_ag_options = lambda self: self.dtype


# ----- nodes -----------------------------------------------------------------------------------

_AG_FREED = object()


class _AgSaved:
    """A tensor a formula reads: another handle on its storage (no grad_fn: no cycle through the
    node), and the original (weakly) with the version it had, for upstream's in-place check."""
    __slots__ = ("data", "ref", "version", "is_output", "node_name", "output_nr", "orig")

    def __init__(self, t, is_output=False, node_name=None, output_nr=0):
        self.data = t.data
        # an input is kept itself (its history serves create_graph); an output only weakly
        self.orig = None if is_output else t
        try:
            self.ref = _weakref.ref(t)
        except TypeError:
            self.ref = None
        self.version = t._version
        self.is_output = is_output
        self.node_name = node_name if is_output else (type(t.grad_fn).__name__ if t.grad_fn is not None else None)
        self.output_nr = output_nr if is_output else t.output_nr

    def unpack(self, check=True):
        t = self.ref() if self.ref is not None else None
        now = t._version if t is not None else self.version
        if check and now != self.version:
            kind = {"torch.float32": "FloatTensor", "torch.float64": "DoubleTensor",
                    "torch.float16": "HalfTensor", "torch.bfloat16": "BFloat16Tensor"}.get(
                        str(self.data.dtype), "Tensor")
            name, nr = self.node_name, self.output_nr
            if not self.is_output and t is not None and t.grad_fn is not None:
                # upstream names the tensor's history as it is now (a write through a view
                # gave it CopySlices)
                name, nr = t.grad_fn.name(), t.output_nr
            where = "" if name is None else f", which is output {nr} of {name},"
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [torch.{kind} [{', '.join(str(n) for n in self.data.shape)}]]"
                f"{where} is at version {now}; expected version {self.version} instead. Hint: enable "
                "anomaly detection to find the operation that failed to compute its gradient, with "
                "torch.autograd.set_detect_anomaly(True, check_nan=False).")
        if _grad_enabled[0]:
            # create_graph: the formula's operators record, through the saved tensors' history
            return t if t is not None else self.orig if self.orig is not None else self.data
        return self.data


# what a translated formula reads of a tensor that is metadata only
_AG_METADATA = ("(?:shape|dtype|dim|numel|stride|size|_tn_ag_options|is_complex|device|layout|"
                "is_floating_point|ndim)")


class _AgHooks(dict):
    """A node's hooks (a dict that RemovableHandle can hold weakly)."""


class _AgNode:
    """A grad_fn. Subclasses are made per formula entry with upstream's names (AddBackward0)."""

    _tn_formulas = None  # [(input names, python expression or None, C++ text)]
    _tn_op = ""

    def __init__(self):
        self._tn_edges = []  # per differentiable input: (node, input_nr) or None
        self._tn_inputs = []  # per edge: the input's name
        self._tn_env = {}
        self._tn_saved_freed = False
        self._tn_hook_dicts = []
        self._tn_hooks = []
        self._tn_prehooks = []
        self._tn_shapes = []

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        return _b.tuple((e[0], e[1]) if e is not None else (None, 0) for e in self._tn_edges)

    @property
    def metadata(self):
        d = self.__dict__.get("_tn_metadata")
        if d is None:
            d = self._tn_metadata = {}
        return d

    def register_hook(self, fn):
        from torch.utils.hooks import RemovableHandle
        d = _AgHooks()
        self._tn_hooks.append(d)
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def register_prehook(self, fn):
        from torch.utils.hooks import RemovableHandle
        d = _AgHooks()
        self._tn_prehooks.append(d)
        h = RemovableHandle(d)
        d[h.id] = fn
        return h

    def _register_hook_dict(self, tensor):
        self._tn_hook_dicts.append(_weakref.ref(tensor))

    def __call__(self, *grads):
        return self._tn_apply(_b.list(grads))

    def _tn_apply(self, grads):
        if self._tn_saved_freed:
            raise RuntimeError(
                "Trying to backward through the graph a second time (or directly access saved "
                "tensors after they have already been freed). Saved intermediate values of the "
                "graph are freed when you call .backward() or autograd.grad(). Specify "
                "retain_graph=True if you need to backward through the graph a second time or if "
                "you need to access saved tensors after calling backward.")
        env = {}
        used = type(self).__dict__.get("_tn_used")
        if used is None:
            # the names the formulas read: only those are unpacked (and version-checked), as
            # upstream saves only what a formula uses; a name read only for its metadata
            # (`self.sym_sizes()`) is saved by upstream as that metadata, so a later write to
            # the tensor is no error
            used, meta = set(), set()
            exprs = " ".join(expr or "" for _, expr, _ in self._tn_formulas)
            used.update(_re.findall(r"[A-Za-z_][A-Za-z0-9_]*", exprs))
            for n in used:
                total = len(_re.findall(r"\b%s\b" % n, exprs))
                info = len(_re.findall(r"\b%s\s*\.\s*%s\b" % (n, _AG_METADATA), exprs))
                if total and total == info:
                    meta.add(n)
            type(self)._tn_used = used
            type(self)._tn_meta = meta
        meta = type(self).__dict__.get("_tn_meta", ())
        for k, v in self._tn_env.items():
            if k not in used:
                continue
            check = k not in meta
            env[k] = v.unpack(check) if isinstance(v, _AgSaved) else (
                [x.unpack(check) if isinstance(x, _AgSaved) else x for x in v] if isinstance(v, _b.list) else v)
        env["grad"] = grads[0]
        env["grads"] = grads
        for k, rn in enumerate(self._tn_ret_names or ()):
            if isinstance(rn, _b.str) and rn:
                env["grad_" + rn] = grads[k] if k < len(grads) else None
        env = _AgEnv(env)
        out = [None] * len(self._tn_edges)
        for names, expr, text in self._tn_formulas:
            wanted = [n for n in names if self._tn_mask.get(n)]
            if not wanted:
                continue
            if expr is None:
                raise NotImplementedError(
                    f"torchnative: backward of {self._tn_op} ({type(self).__name__}): the formula "
                    f"for {', '.join(names)} in derivatives.yaml is not translated: {text}")
            if _b.all(g is None for g in grads):
                continue
            env["grad_input_mask"] = [_b.bool(self._tn_mask.get(n)) for n in names]
            try:
                value = eval(expr, _AG_GLOBALS, env)
            except NameError as e:
                raise NotImplementedError(
                    f"torchnative: backward of {self._tn_op} ({type(self).__name__}): the formula "
                    f"for {', '.join(names)} in derivatives.yaml names {e.args[0]}, which torchnative "
                    f"does not implement: {text}") from None
            values = _b.list(value) if len(names) > 1 else [value]
            for n, v in zip(names, values):
                if n not in self._tn_index or v is None:
                    continue
                where = self._tn_index[n]
                pairs = _b.zip(where, v) if isinstance(where, _b.list) else [(where, v)]
                for k, g in pairs:
                    if k is not None and g is not None:
                        out[k] = g * (1 + _AG["perturb"]) if _AG["perturb"] else g
        return out

    def _tn_free(self):
        self._tn_env = {}
        self._tn_saved_freed = True


class _AgRefusing(_AgNode):
    """The node of an operator whose backward torchnative does not have."""
    _tn_reason = ""

    def _tn_apply(self, grads):
        raise NotImplementedError(self._tn_reason)


class _AgUpstreamNotImplemented(_AgNode):
    """Upstream's node for an operator that derivatives.yaml has no formula for and that is not
    a composite of operators that have one: upstream itself cannot differentiate it."""
    _tn_reason = ""

    def _tn_apply(self, grads):
        raise RuntimeError(self._tn_reason)


_AgUpstreamNotImplemented.__name__ = _AgUpstreamNotImplemented.__qualname__ = "NotImplemented"


def _ag_upstream_lacks_formula(full):
    keys = ("CompositeImplicitAutograd", "Autograd", "AutogradCPU", "AutogradNonFunctional")
    return full.startswith("aten::") and not _b.any(_tn_upstream_has_kernel(full, k) for k in keys)


class _AgAccumulateGrad(_AgNode):
    def __init__(self, variable):
        _AgNode.__init__(self)
        self.variable = variable

    def name(self):
        return "torch::autograd::AccumulateGrad"


_AgAccumulateGrad.__name__ = _AgAccumulateGrad.__qualname__ = "AccumulateGrad"


_AG_CLASSES = {}


# formulas whose C++ (a lambda) the translator does not take: the same expression by hand
_AG_OVERRIDES = {
    ("aten::roll", "self"): "grad.roll([-n for n in reversed(shifts)], list(reversed(dims)))",
    # C++ passes the rounding mode by position; Python's div takes it by keyword only
    ("aten::fmod.Tensor", "other"): "-grad * self.div(other, rounding_mode='trunc')",
    ("aten::remainder.Tensor", "other"): "-grad * self.div(other, rounding_mode='floor')",
    # C++'s int / int
    ("aten::channel_shuffle", "self"): "channel_shuffle(grad, grad.size(1) // groups)",
    # C++'s Tensor::index(indices): an undefined index is a whole dim
    ("aten::index_put", "values"): "grad[tuple(slice(None) if i is None else i for i in indices)]",
}


def _ag_node_class(full):
    """The node class for an overload (translated formulas), or None when it has no entry."""
    if full in _AG_CLASSES:
        return _AG_CLASSES[full]
    entry = _ag_table().get(full)
    cls = None
    if entry is None:
        # a view's `_copy` twin (diagonal_copy) takes the view's formulas, as upstream's
        # generated code does (DiagonalBackward0_copy)
        base, dot, overload = full.partition(".")
        if base.endswith("_copy"):
            view = _ag_table().get(base[: -len("_copy")] + dot + overload)
            if view is not None:
                entry = (view[0] + "_copy",) + _b.tuple(view[1:])
    if entry is not None:
        name, formulas, sig, ret_names, od = entry
        translated = []
        for key, text in formulas.items():
            names = [n.strip() for n in key.split(",")]
            if text.strip() == "non_differentiable":
                translated.append((names, "None" if len(names) == 1 else "(None,)*%d" % len(names), text))
                continue
            try:
                expr = _AG_OVERRIDES.get((full, key)) or _ag_translate(text)
            except _AgUntranslatable:
                expr = None
            translated.append((names, expr, text))
        cls = type(name, (_AgNode,), {"_tn_formulas": translated, "_tn_op": full,
                                      "_tn_ret_names": ret_names, "_tn_out_diff": od})
    _AG_CLASSES[full] = cls
    return cls


class _AgCopyBackwards(_AgNode):
    """`copy_(self, src)`'s node (upstream's handwritten CopyBackwards): no gradient reaches the
    overwritten `self`; `src` gets the gradient in its own dtype, summed to its shape where it
    was broadcast. Nothing is saved but shapes and dtypes."""
    _tn_formulas = [(["self"], None, "zeros_like(grad)"), (["src"], None, "grad.to(src)")]
    _tn_op = "aten::copy_"
    _tn_ret_names = ()
    _tn_out_diff = None

    def _tn_apply(self, grads):
        grad = grads[0]
        out = [None] * len(self._tn_edges)
        if grad is None:
            return out
        k = self._tn_index.get("self")
        if k is not None:
            out[k] = _tn_ag_torch().zeros_like(grad)
        k = self._tn_index.get("src")
        if k is not None:
            shape, dtype = self._tn_shapes[k]
            g = grad if grad.dtype == dtype else (
                grad.real if grad.is_complex() and not dtype.is_complex else grad).to(dtype)
            g = sum_to(g, shape)
            out[k] = g * (1 + _AG["perturb"]) if _AG["perturb"] else g
        return out


_AgCopyBackwards.__name__ = _AgCopyBackwards.__qualname__ = "CopyBackwards"
_AgCopyBackwards.name = lambda self: "torch::autograd::CopyBackwards"


def _ag_strided_zeros(like, geometry):
    sizes, strides = geometry
    torch = _tn_ag_torch()
    return torch.empty_strided(sizes, strides, dtype=like.dtype).zero_()


class _AgCopySlices(_AgNode):
    """An in-place operator written through a view (upstream's CopySlices): the base's node.
    Edge 0 is the base's history before the write, the rest the operator's other inputs. The
    gradient of the base is the incoming one with the view's region replaced by what the
    operator's own node (`fn`) gives its `self`."""
    _tn_formulas = []
    _tn_op = "CopySlices"

    def __init__(self, fn, base_edge, base_geometry, view_geometry):
        _AgNode.__init__(self)
        self._tn_fn = fn
        self._tn_base = base_geometry
        self._tn_view = view_geometry
        self_k = fn._tn_index.get("self")
        self._tn_others = [k for k in range(len(fn._tn_edges)) if k != self_k]
        self._tn_edges = [base_edge] + [fn._tn_edges[k] for k in self._tn_others]

    def _tn_apply(self, grads):
        grad = grads[0]
        out = [None] * len(self._tn_edges)
        if grad is None:
            return out
        result = _ag_strided_zeros(grad, self._tn_base)
        result.copy_(grad)
        sizes, strides, offset = self._tn_view
        grad_slice = result.as_strided(sizes, strides, offset)
        res = self._tn_fn._tn_apply([grad_slice.clone()])
        self_k = self._tn_fn._tn_index.get("self")
        if self_k is not None and res[self_k] is not None:
            grad_slice.copy_(res[self_k])
        else:
            grad_slice.zero_()
        out[0] = result
        for j, k in enumerate(self._tn_others):
            out[1 + j] = res[k]
        return out

    def _tn_free(self):
        self._tn_fn._tn_free()
        _AgNode._tn_free(self)


_AgCopySlices.__name__ = _AgCopySlices.__qualname__ = "CopySlices"
_AgCopySlices.name = lambda self: "torch::autograd::CopySlices"


class _AgAsStridedBackward(_AgNode):
    """The history of a view after its base was written in place (upstream regenerates it as
    AsStridedBackward0 over the base's new node): the view's gradient placed in the base's
    shape, zero elsewhere (views never overlap themselves)."""
    _tn_formulas = []
    _tn_op = "aten::as_strided"

    def __init__(self, base_edge, base_geometry, view_geometry):
        _AgNode.__init__(self)
        self._tn_edges = [base_edge]
        self._tn_base = base_geometry
        self._tn_view = view_geometry

    def _tn_apply(self, grads):
        grad = grads[0]
        if grad is None:
            return [None]
        result = _ag_strided_zeros(grad, self._tn_base)
        sizes, strides, offset = self._tn_view
        result.as_strided(sizes, strides, offset).copy_(grad)
        return [result * (1 + _AG["perturb"]) if _AG["perturb"] else result]


_AgAsStridedBackward.__name__ = _AgAsStridedBackward.__qualname__ = "AsStridedBackward0"


# Bases written in place through a view: id -> (weak reference, how many such writes), and for
# views, the count their history was recorded at; a view whose count is behind gets its history
# regenerated over the base's new node when it is next used (upstream does it when its grad_fn
# is next read).
_AG_WRITTEN_BASES = {}
_AG_VIEW_WRITES = {}


def _ag_tracked(table, t, value=None):
    """Read (value None) or set `t`'s entry of an identity-keyed weak table."""
    key = _b.id(t)
    if value is None:
        e = table.get(key)
        return e[1] if e is not None and e[0]() is t else 0
    try:
        ref = _weakref.ref(t, lambda _r, key=key, table=table: table.pop(key, None))
    except TypeError:
        return None
    table[key] = (ref, value)
    return None


def _ag_geometry(t, base):
    return ((_b.tuple(t.shape), _b.tuple(t.stride()), t.storage_offset() - base.storage_offset()),
            (_b.tuple(base.shape), _b.tuple(base.stride())))


def _ag_refresh_view(t):
    base = t._base
    writes = _ag_tracked(_AG_WRITTEN_BASES, base)
    if not writes or _ag_tracked(_AG_VIEW_WRITES, t) == writes or base.grad_fn is None:
        return
    view, base_geometry = _ag_geometry(t, base)
    node = _AgAsStridedBackward((base.grad_fn, base.output_nr), base_geometry, view)
    t._tn_set_grad_fn(node, 0)
    _ag_tracked(_AG_VIEW_WRITES, t, writes)


def _ag_write_through_view(fn, view):
    """After an in-place operator wrote `view` (fn: its node): the base takes a CopySlices node
    over its history and the view a history regenerated over that node."""
    base = view._base
    view_geometry, base_geometry = _ag_geometry(view, base)
    base_edge = _ag_edge(base)
    cs = _AgCopySlices(fn, base_edge, base_geometry, view_geometry)
    base._tn_set_grad_fn(cs, 0)
    writes = _ag_tracked(_AG_WRITTEN_BASES, base) + 1
    _ag_tracked(_AG_WRITTEN_BASES, base, writes)
    view._tn_set_grad_fn(_AgAsStridedBackward((cs, 0), base_geometry, view_geometry), 0)
    _ag_tracked(_AG_VIEW_WRITES, view, writes)


def _ag_refusing(full, reason, name=None):
    cls = type(name or "NotImplemented", (_AgRefusing,), {"_tn_reason": reason, "_tn_op": full})
    return cls()


def _ag_edge(t):
    if _AG_WRITTEN_BASES and t._base is not None:
        _ag_refresh_view(t)
    if t.grad_fn is not None:
        return (t.grad_fn, t.output_nr)
    if t.requires_grad:
        return (_AgAccumulateGrad(t), 0)
    return None


# ----- what the door calls -----------------------------------------------------------------------

_AG_VIEW_LIKE = ("detach", "detach_")


def _ag_decomposition(full):
    """Upstream's Python decomposition of a CompositeImplicitAutograd operator (so that its
    parts, which have formulas, are recorded), or None."""
    if not _tn_upstream_has_kernel(full, "CompositeImplicitAutograd"):
        return None
    torch = _tn_ag_torch()
    base, _, overload = full[len("aten::"):].partition(".")
    try:
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
    except (AttributeError, RuntimeError):
        return None
    from torch._decomp import decomposition_table
    return decomposition_table.get(op)


def _tn_autograd_pre(full, names, values):
    if not _grad_enabled[0]:
        return None
    written = [n.lstrip("!*") for n in names if n.startswith("!")]
    names = [n.lstrip("!") for n in names]
    base = full[len("aten::"):].split(".")[0]
    if base in _AG_VIEW_LIKE or base in _ag_dont_require():
        return None
    tensors = []
    for n, v in zip(names, values):
        if isinstance(v, TensorBase):
            tensors.append((n, v))
        elif isinstance(v, _b.list):
            tensors.extend((n, x) for x in v if isinstance(x, TensorBase))
    if "out" in names and any(n == "out" for n, _ in tensors):
        if any(t.requires_grad for _, t in tensors):
            raise RuntimeError(
                f"{base}(): functions with out=... arguments don't support automatic "
                "differentiation, but one of the arguments requires grad.")
    cls = _ag_node_class(full)
    inplace = _ag_inplace(full, names, values, written)
    saved_self = None
    if inplace is not None:
        cls, saved_self = inplace
    # upstream's own route under autograd first (max_pool2d records max_pool2d_with_indices on
    # the CPU although derivatives.yaml also has a formula for max_pool2d)
    implicit = _AG_IMPLICIT.get(full) if inplace is None else None
    if implicit is None and cls is None:
        implicit = _ag_decomposition(full)
    if implicit is not None:
        args = [v for n, v in zip(names, values) if not n.startswith("*")]
        kwargs = {n[1:]: v for n, v in zip(names, values) if n.startswith("*")}
        return (None, implicit(*args, **kwargs))
    names = [n.lstrip("*") for n in names]
    return ((full, names, values, cls, written, saved_self), None)


_AG_NO_SAVED_SELF = object()

# in-place operators that change a tensor's shape or layout, not its values
_AG_METADATA_INPLACE = frozenset(("squeeze_", "unsqueeze_", "t_", "transpose_", "as_strided_",
                                  "swapdims_", "swapaxes_", "resize_", "resize_as_", "set_"))


def _ag_inplace(full, names, values, written):
    """An in-place operator that writes `self` (`t.mul_(w)`, `t.exp_()`, `t.copy_(s)`, also
    through a view: `x[0].mul_(2)`): the out-of-place operator's node class (CopyBackwards for
    copy_), and the value `self` had before the write when a formula reads it (upstream's
    generated code saves `original_self` the same way). None when the operator is not such a
    case (several written arguments, no out-of-place formula, a leaf that requires grad)."""
    if written != ["self"]:
        return None
    head = full[len("aten::"):]
    base, dot, overload = head.partition(".")
    if not base.endswith("_") or base.endswith("__"):
        return None
    if base in _AG_METADATA_INPLACE:
        return None
    if base == "copy_":
        cls = _AgCopyBackwards
    else:
        # the in-place entry of derivatives.yaml (zero_, threshold_, ...), else the
        # out-of-place operator's
        cls = _ag_node_class(full) or _ag_node_class("aten::" + base[:-1] + dot + overload)
    if cls is None:
        return None
    plain = [n.lstrip("*") for n in names]
    if "self" not in plain:
        return None
    t = values[plain.index("self")]
    if not isinstance(t, TensorBase):
        return None
    if t.grad_fn is None and t.requires_grad and t._base is None:
        return None  # a leaf: upstream's error, raised after the kernel as before
    view_base = t._base
    if view_base is not None and view_base.grad_fn is None and view_base.requires_grad:
        return None  # a view of a leaf: likewise
    reads_self = _b.any(_re.search(r"\bself\b", text or "") for _, _, text in cls._tn_formulas)
    return cls, (t.detach().clone() if reads_self else _AG_NO_SAVED_SELF)


def _ag_softmax(which):
    def body(self, dim, dtype=None):
        torch = _tn_ag_torch()
        x = self if dtype is None else self.to(dtype)
        return getattr(torch.ops.aten, which)(x, dim, False)
    return body


def _ag_reshape(self, shape):
    # upstream's reshape: a view when the strides allow it, else _unsafe_view of a copy
    torch = _tn_ag_torch()
    try:
        return self.view(shape)
    except RuntimeError:
        return torch.ops.aten._unsafe_view(self.clone(memory_format=torch.contiguous_format), shape)


def _ag_nll_loss(self, target, weight=None, reduction=1, ignore_index=-100):
    return _tn_ag_torch().ops.aten.nll_loss_forward(self, target, weight, reduction,
                                                    ignore_index)[0]


def _ag_nll_loss_nd(self, target, weight=None, reduction=1, ignore_index=-100):
    # upstream's nll_loss_nd: 1-D and 2-D inputs as nll_loss, 4-D as nll_loss2d, others
    # reshaped to 4-D
    torch = _tn_ag_torch()
    if self.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {self.dim()})")
    if self.dim() != 1 and self.shape[0] != target.shape[0]:
        raise ValueError(f"Expected input batch_size ({self.shape[0]}) to match target "
                         f"batch_size ({target.shape[0]}).")
    if self.dim() <= 2:
        return _ag_nll_loss(self, target, weight, reduction, ignore_index)
    loss2d = torch.ops.aten.nll_loss2d_forward
    if self.dim() == 4:
        return loss2d(self, target, weight, reduction, ignore_index)[0]
    n, c = self.shape[0], self.shape[1]
    if _b.tuple(target.shape[1:]) != _b.tuple(self.shape[2:]):
        raise ValueError(f"Expected target size {[n] + _b.list(self.shape[2:])}, got "
                         f"{_b.list(target.shape)}")
    x = self.contiguous()
    x = x.view(n, c, 1, -1) if x.numel() > 0 else x.view(n, c, 0, 0)
    t = target.contiguous()
    t = t.view(n, 1, -1) if t.numel() > 0 else t.view(n, 0, 0)
    out = loss2d(x, t, weight, reduction, ignore_index)[0]
    return out if reduction != 0 else out.view((n,) + _b.tuple(self.shape[2:]))


def _ag_cross_entropy(self, target, weight=None, reduction=1, ignore_index=-100,
                      label_smoothing=0.0):
    # upstream's cross_entropy_loss: nll_loss_nd of log_softmax for class indices; its
    # probability-target and label-smoothing bodies otherwise (reduction 0 none, 1 mean, 2 sum)
    torch = _tn_ag_torch()
    class_dim = 0 if self.dim() == 1 else 1
    logp = torch.ops.aten._log_softmax(self, class_dim, False)
    n_classes = self.shape[class_dim]
    weight_ = None
    if weight is not None:
        shape = [1] * self.dim()
        shape[class_dim] = n_classes
        weight_ = weight.view(shape) if self.dim() > 1 else weight
    if _b.tuple(self.shape) == _b.tuple(target.shape) and target.dtype.is_floating_point:
        # probability targets
        t = target * (1 - label_smoothing) + label_smoothing / n_classes if label_smoothing > 0.0 else target
        terms = logp * t if weight_ is None else logp * t * weight_
        if reduction == 0:
            return -terms.sum(class_dim)
        if reduction == 2:
            return -terms.sum()
        # C++'s `tensor / double` is div.Scalar (upstream's node: DivBackward1)
        return torch.ops.aten.div.Scalar(-terms.sum(), self.numel() / n_classes)
    nll = _ag_nll_loss_nd(logp, target, weight, reduction, ignore_index)
    if label_smoothing <= 0.0:
        return nll
    ignore = target == ignore_index
    smooth = -(logp.sum(class_dim) if weight_ is None else (logp * weight_).sum(class_dim))
    smooth = smooth.masked_fill(ignore, 0.0)
    if reduction == 1:
        keep = ignore.logical_not()
        if weight is not None:
            smooth = smooth.sum() / weight.gather(0, target.masked_select(keep).flatten()).sum()
        else:
            smooth = smooth.sum() / keep.sum()
    elif reduction == 2:
        smooth = smooth.sum()
    return (1 - label_smoothing) * nll + smooth * (label_smoothing / n_classes)


def _ag_flatten(self, start_dim=0, end_dim=-1):
    # upstream's flatten.using_ints: a reshape merging start_dim..end_dim (the tensor itself
    # for a 0-dim one or an empty range)
    if self.dim() == 0:
        return self.reshape(1)
    start = start_dim + self.dim() if start_dim < 0 else start_dim
    end = end_dim + self.dim() if end_dim < 0 else end_dim
    if start > end:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if start == end:
        return self
    shape = _b.list(self.shape)
    merged = 1
    for d in shape[start:end + 1]:
        merged *= d
    return self.reshape(shape[:start] + [merged] + shape[end + 1:])


def _ag_max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    # upstream's CPU max_pool2d under autograd: max_pool2d_with_indices, whose formula scatters
    # the gradient to each window's maximum
    return _tn_ag_torch().ops.aten.max_pool2d_with_indices(
        self, kernel_size, stride, padding, dilation, ceil_mode)[0]


def _ag_max_pool3d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return _tn_ag_torch().ops.aten.max_pool3d_with_indices(
        self, kernel_size, stride, padding, dilation, ceil_mode)[0]


def _ag_stride_1d(stride, kernel):
    # an empty stride means the kernel size, as upstream's 1-d pooling bodies take it
    given = _b.list(stride) if isinstance(stride, (_b.list, _b.tuple)) else [stride]
    return _ag_one(given, "stride") if given else kernel


def _ag_one(v, name):
    v = _b.list(v) if isinstance(v, (_b.list, _b.tuple)) else [v]
    if len(v) != 1:
        raise RuntimeError(f"max_pool1d() {name} must be an int or int list of size 1 but got "
                           f"size {len(v)}")
    return v[0]


def _ag_max_pool1d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1,
                                ceil_mode=False):
    # upstream's body: the 2-d kernel over a unit height, squeezed back
    torch = _tn_ag_torch()
    k = _ag_one(kernel_size, "kernel_size")
    s = _ag_stride_1d(stride, k)
    out, idx = torch.ops.aten.max_pool2d_with_indices(
        self.unsqueeze(-2), [1, k], [1, s], [0, _ag_one(padding, "padding")],
        [1, _ag_one(dilation, "dilation")], ceil_mode)
    return out.squeeze(-2), idx.squeeze(-2)


def _ag_avg_pool1d(self, kernel_size, stride=(), padding=0, ceil_mode=False,
                   count_include_pad=True):
    torch = _tn_ag_torch()
    k = _ag_one(kernel_size, "kernel_size")
    s = _ag_stride_1d(stride, k)
    return torch.ops.aten.avg_pool2d(self.unsqueeze(-2), [1, k], [1, s],
                                     [0, _ag_one(padding, "padding")], ceil_mode,
                                     count_include_pad).squeeze(-2)


def _ag_adaptive_avg_pool1d(self, output_size):
    return _tn_ag_torch().ops.aten.adaptive_avg_pool2d(
        self.unsqueeze(-2), [1, _ag_one(output_size, "output_size")]).squeeze(-2)


def _ag_adaptive_max_pool1d(self, output_size):
    out, idx = _tn_ag_torch().ops.aten.adaptive_max_pool2d(
        self.unsqueeze(-2), [1, _ag_one(output_size, "output_size")])
    return out.squeeze(-2), idx.squeeze(-2)


def _ag_adaptive_avg_pool(nd):
    # upstream's adaptive_avg_pool{2,3}d: a mean when every output size is 1, else the kernel
    def body(self, output_size):
        torch = _tn_ag_torch()
        if _b.all(o == 1 for o in output_size):
            return self.mean(_b.list(_b.range(-nd, 0)), True)
        op = torch.ops.aten._adaptive_avg_pool2d if nd == 2 else torch.ops.aten._adaptive_avg_pool3d
        return op(self, output_size)
    return body


def _ag_upsample_vec(name, nd, aligned):
    # upstream's `.vec` overloads: the output size from the scale factors (truncated, as C++'s
    # cast), then the sized operator that carries the derivative formula
    def body(input, output_size, *rest):
        torch = _tn_ag_torch()
        align, scale_factors = rest if aligned else (None, rest[0])
        if output_size is None:
            if scale_factors is None:
                raise RuntimeError("Must specify exactly one of output_size and scale_factors")
            output_size = [_b.int(input.shape[2 + i] * scale_factors[i]) for i in _b.range(nd)]
        scales = [None if scale_factors is None else scale_factors[i] for i in _b.range(nd)]
        args = [input, _b.list(output_size)] + ([align] if aligned else []) + scales
        return getattr(torch.ops.aten, name).default(*args)
    return body


def _ag_rms_norm(input, normalized_shape, weight=None, eps=None):
    # upstream's CPU rms_norm: x * rsqrt(mean(x^2 over the normalized dims) + eps), in the op
    # math type, then times the weight (each step recorded: MulBackward0, ...)
    torch = _tn_ag_torch()
    opmath = torch.float32 if input.dtype in (torch.float16, torch.bfloat16) else input.dtype
    x = input.to(opmath)
    if eps is None:
        eps = torch.finfo(opmath).eps
    dims = [input.dim() - i - 1 for i in _b.range(_b.len(normalized_shape))]
    result = (x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True).add(eps))).type_as(input)
    if weight is not None:
        result = (result * weight).type_as(result)
    return result


def _ag_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    # upstream's layer_norm: native_layer_norm's first result (NativeLayerNormBackward0)
    return _tn_ag_torch().ops.aten.native_layer_norm(input, normalized_shape, weight, bias, eps)[0]


def _ag_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                   cudnn_enabled=True):
    # upstream's CPU batch_norm: native_batch_norm (NativeBatchNormBackward0), which also
    # updates the running statistics in training mode
    return _tn_ag_torch().ops.aten.native_batch_norm(input, weight, bias, running_mean,
                                                     running_var, training, momentum, eps)[0]


def _ag_expand(v, nd):
    # an int or a one-element list stands for the same value in every spatial dimension
    v = _b.list(v) if isinstance(v, (_b.list, _b.tuple)) else [v]
    return v * nd if _b.len(v) == 1 else v


def _ag_on_batch(input, nd, run):
    # upstream's conv*d bodies: an unbatched input runs as a batch of one
    if input.dim() != nd + 1:
        return run(input)
    return run(input.unsqueeze(0)).squeeze(0)


def _ag_conv(nd):
    # upstream's conv{1,2,3}d: convolution (ConvolutionBackward0) on a batched input
    def body(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
        torch = _tn_ag_torch()

        def run(x):
            if isinstance(padding, _b.str):
                k = weight.shape[2:]
                dil = _ag_expand(dilation, nd)
                if padding == "valid":
                    pad = [0] * nd
                elif padding == "same":
                    total = [dil[d] * (k[d] - 1) for d in _b.range(nd)]
                    if _b.any(t % 2 for t in total):
                        # upstream pads the extra element on the right first
                        pads = []
                        for d in _b.reversed(_b.range(nd)):
                            pads += [0, total[d] % 2]
                        x = torch.ops.aten.constant_pad_nd(x, pads, 0)
                    pad = [t // 2 for t in total]
                else:
                    raise ValueError(f"Invalid padding string '{padding}'")
            else:
                pad = _ag_expand(padding, nd)
            return torch.ops.aten.convolution(x, weight, bias, _ag_expand(stride, nd), pad,
                                              _ag_expand(dilation, nd), False, [0] * nd, groups)
        return _ag_on_batch(input, nd, run)
    return body


def _ag_conv_transpose(nd):
    # upstream's conv_transpose{1,2,3}d: convolution with transposed=True on a batched input
    def body(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
        return _ag_on_batch(input, nd, lambda x: _tn_ag_torch().ops.aten.convolution(
            x, weight, bias, _ag_expand(stride, nd), _ag_expand(padding, nd),
            _ag_expand(dilation, nd), True, _ag_expand(output_padding, nd), groups))
    return body


def _ag_contiguous(self, memory_format=None):
    # upstream: the tensor itself when already laid out so, else a clone in that layout
    torch = _tn_ag_torch()
    # the door hands the format over by its name
    name = "contiguous_format" if memory_format is None else _b.str(memory_format).split(".")[-1]
    memory_format = getattr(torch, name)
    if self.is_contiguous(memory_format=memory_format):
        return self
    return self.clone(memory_format=memory_format)


def _ag_masked_scores(scores, is_causal, attn_mask):
    """Attention scores with the causal mask and `attn_mask` (boolean: keep; float: added)."""
    torch = _tn_ag_torch()
    if is_causal:
        keep = torch.ones(scores.shape[-2], scores.shape[-1], dtype=torch.bool).tril()
        scores = scores.masked_fill(keep.logical_not(), _b.float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(attn_mask.logical_not(), _b.float("-inf"))
        else:
            scores = scores + attn_mask
    return scores


def _ag_flash_scores(query, key, is_causal, attn_mask, scale):
    """Scaled, masked attention scores as upstream's CPU flash kernel forms them."""
    torch = _tn_ag_torch()
    s = 1.0 / query.shape[-1] ** 0.5 if scale is None else scale
    scores = torch.matmul(query, key.transpose(-2, -1)) * s
    return _ag_masked_scores(scores, is_causal, attn_mask), s


def _ag_flash_forward(query, key, value, is_causal, attn_mask, scale):
    """`_scaled_dot_product_flash_attention_for_cpu`'s (output, logsumexp)."""
    torch = _tn_ag_torch()
    scores, _ = _ag_flash_scores(query, key, is_causal, attn_mask, scale)
    lse = torch.logsumexp(scores, -1)
    out = torch.matmul((scores - lse.unsqueeze(-1)).exp(), value)
    return out, lse


def _scaled_dot_product_flash_attention_for_cpu_backward(grad_out, query, key, value, out,
                                                         logsumexp, dropout_p, is_causal,
                                                         attn_mask=None, scale=None):
    """The CPU flash kernel's backward over the face's operators: probabilities recomputed from
    the saved logsumexp, then the usual softmax-attention adjoints."""
    scores, s = _ag_flash_scores(query, key, is_causal, attn_mask, scale)
    p = (scores - logsumexp.unsqueeze(-1)).exp()
    grad_value = p.transpose(-2, -1).matmul(grad_out)
    dp = grad_out.matmul(value.transpose(-2, -1))
    ds = p * (dp - (grad_out * out).sum(-1, True))
    return ds.matmul(key) * s, ds.transpose(-2, -1).matmul(query) * s, grad_value


def _ag_flash_ok(query, key, value, attn_mask, dropout_p, enable_gqa):
    """upstream's use_flash_attention_cpp gates (sdp_utils_cpp.cpp) for these inputs."""
    torch = _tn_ag_torch()
    qkv = (query, key, value)
    if dropout_p > 0.0 or _b.any(t.dim() != 4 for t in qkv):
        return False
    if query.dtype not in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        return False
    if _b.any(t.shape[0] != query.shape[0] or t.shape[1] != query.shape[1] for t in qkv):
        return False  # no GQA on the flash path
    if key.shape[-1] != query.shape[-1] or value.shape[-1] != query.shape[-1]:
        return False
    if _b.any(t.shape[-2] == 0 or t.stride(-1) != 1 for t in qkv):
        return False
    if attn_mask is not None and (attn_mask.requires_grad or attn_mask.dim() not in (2, 4)):
        return False
    return True


def _ag_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
             enable_gqa=False):
    # upstream's CPU dispatcher: the flash kernel when its gates pass (recorded as one node,
    # ScaledDotProductFlashAttentionForCpuBackward0), else the math path
    if _ag_flash_ok(query, key, value, attn_mask, dropout_p, enable_gqa):
        full = "aten::_scaled_dot_product_flash_attention_for_cpu"
        before = _grad_enabled[0]
        _grad_enabled[0] = False
        try:
            out, lse = _ag_flash_forward(query, key, value, is_causal, attn_mask, scale)
        finally:
            _grad_enabled[0] = before
        names = ["query", "key", "value", "dropout_p", "is_causal", "attn_mask", "scale"]
        values = [query, key, value, dropout_p, is_causal, attn_mask, scale]
        _tn_autograd_post((full, names, values, _ag_node_class(full), [], None), (out, lse))
        return out
    # upstream's math path (_scaled_dot_product_attention_math): q and k each scaled by the
    # square root of the scale, masked scores, softmax, weighted sum; every step recorded
    torch = _tn_ag_torch()
    if dropout_p > 0.0:
        raise NotImplementedError(
            "torchnative: backward through scaled_dot_product_attention with dropout is not "
            "implemented (autograd: issue 12)")
    d = query.shape[-1]
    factor = (1.0 / d ** 0.5 if scale is None else scale) ** 0.5
    if enable_gqa and key.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        rep = query.shape[-3] // key.shape[-3]

        def repeat(t):
            shape = _b.list(t.shape)
            t = t.unsqueeze(-3).expand(*shape[:-2], rep, *shape[-2:])
            return t.reshape(*shape[:-3], shape[-3] * rep, *shape[-2:])

        key, value = repeat(key), repeat(value)
    scores = torch.matmul(query * factor, (key * factor).transpose(-2, -1))
    scores = _ag_masked_scores(scores, is_causal, attn_mask)
    weights = torch.ops.aten._softmax(scores, -1, False)
    return torch.matmul(weights, value)


def _ag_correction(unbiased):
    return 1 if unbiased is None or unbiased else 0


def _ag_var_dim(which):
    def body(self, dim=None, unbiased=True, keepdim=False):
        return getattr(_tn_ag_torch().ops.aten, which).correction(
            self, dim, correction=_ag_correction(unbiased), keepdim=keepdim)
    return body


def _ag_var_full(which):
    def body(self, unbiased=True):
        return getattr(_tn_ag_torch().ops.aten, which).correction(
            self, None, correction=_ag_correction(unbiased))
    return body


def _ag_narrow(self, dim, start, length):
    if isinstance(start, TensorBase):
        start = _b.int(start.item())
    dim = dim + self.dim() if dim < 0 else dim
    start = start + self.shape[dim] if start < 0 else start
    return _tn_ag_torch().ops.aten.slice.Tensor(self, dim, start, start + length)


def _ag_movedim(self, source, destination):
    src = [source] if isinstance(source, _b.int) else _b.list(source)
    dst = [destination] if isinstance(destination, _b.int) else _b.list(destination)
    n = self.dim()
    src = [d + n if d < 0 else d for d in src]
    dst = [d + n if d < 0 else d for d in dst]
    perm = [-1] * n
    for a, b in zip(src, dst):
        perm[b] = a
    rest = iter(d for d in _b.range(n) if d not in src)
    perm = [p if p != -1 else next(rest) for p in perm]
    return _tn_ag_torch().ops.aten.permute(self, perm)


def _ag_tile(self, dims):
    dims = _b.list(dims)
    if len(dims) < self.dim():
        dims = [1] * (self.dim() - len(dims)) + dims
    return _tn_ag_torch().ops.aten.repeat(self, dims)


def _ag_unflatten(self, dim, sizes):
    dim = dim + self.dim() if dim < 0 else dim
    sizes = _b.list(sizes)
    if -1 in sizes:
        known = _prod(n for n in sizes if n != -1)
        sizes[sizes.index(-1)] = self.shape[dim] // known if known else 0
    shape = _b.list(self.shape[:dim]) + sizes + _b.list(self.shape[dim + 1:])
    return _tn_ag_torch().ops.aten.view(self, shape)


def _ag_outer(self, vec2):
    aten = _tn_ag_torch().ops.aten
    return aten.mul.Tensor(aten.reshape(self, [self.shape[0], 1]), vec2)


def _ag_float_power(self, exponent):
    torch = _tn_ag_torch()
    dtype = torch.complex128 if (isinstance(self, TensorBase) and self.is_complex()) or (
        isinstance(exponent, TensorBase) and exponent.is_complex()) or isinstance(exponent, _b.complex) else torch.float64
    base = self.to(dtype) if isinstance(self, TensorBase) else self
    exp = exponent.to(dtype) if isinstance(exponent, TensorBase) else exponent
    return torch.pow(base, exp)


def _ag_chunk(self, chunks, dim=0):
    aten = _tn_ag_torch().ops.aten
    size = self.shape[dim]
    split = (size + chunks - 1) // chunks
    if split == 0 and size == 0:
        sizes = [split] * chunks
        sizes[-1] = split - (split * chunks - size)
        return aten.split_with_sizes(self, sizes, dim)
    return aten.split.Tensor(self, split, dim)


def _ag_diag(self, diagonal=0):
    aten = _tn_ag_torch().ops.aten
    if self.dim() == 1:
        return aten.diag_embed(self, diagonal)
    return aten.diagonal_copy(self, diagonal)


def _ag_atleast(t, nd):
    aten = _tn_ag_torch().ops.aten
    if t.dim() >= nd:
        return t
    if t.dim() == 0:
        return aten.reshape(t, [1] * nd)
    if nd == 2:
        return aten.unsqueeze(t, 0)
    if t.dim() == 1:
        return aten.unsqueeze(aten.unsqueeze(t, 0), -1)
    return aten.unsqueeze(t, -1)


def _ag_hstack(tensors):
    rep = [_ag_atleast(t, 1) for t in tensors]
    return _tn_ag_torch().ops.aten.cat(rep, 0 if rep[0].dim() == 1 else 1)


def _ag_column_stack(tensors):
    aten = _tn_ag_torch().ops.aten
    rep = [aten.reshape(t, [t.numel(), 1]) if t.dim() <= 1 else t for t in tensors]
    return aten.cat(rep, 1)


def _ag_matmul(tensor1, tensor2):
    """upstream's `_matmul_impl` (aten/src/ATen/native/LinearAlgebra.cpp), so that autograd
    records what upstream's does: mm/mv/bmm with the folds, views and `_unsafe_view`s."""
    aten = _tn_ag_torch().ops.aten
    dim1, dim2 = tensor1.dim(), tensor2.dim()
    if dim1 == 1 and dim2 == 1:
        return aten.dot(tensor1, tensor2)
    if dim1 == 2 and dim2 == 1:
        return aten.mv(tensor1, tensor2)
    if dim1 == 1 and dim2 == 2:
        # upstream squeezes in place (SqueezeBackward4); the face records the functional squeeze
        return aten.squeeze.dim(aten.mm(aten.unsqueeze(tensor1, 0), tensor2), 0)
    if dim1 == 2 and dim2 == 2:
        return aten.mm(tensor1, tensor2)
    if _ag_should_fold(tensor1, tensor2):
        transpose = dim2 > dim1
        t1 = aten.transpose.int(tensor2, -2, -1) if transpose else tensor1
        t2 = (aten.t(tensor1) if dim1 == 2 else tensor1) if transpose else tensor2
        sizes1 = _b.list(t1.shape)
        output_shape = sizes1[:-1]
        folded = _prod(output_shape)
        if t2.dim() == 2:
            output_shape.append(t2.shape[1])
        t1_folded = aten.reshape(t1, [folded, sizes1[-1]])
        if t2.dim() == 2:
            output = aten._unsafe_view(aten.mm(t1_folded, t2), output_shape)
            return aten.contiguous(aten.transpose.int(output, -2, -1)) if transpose else output
        return aten._unsafe_view(aten.mv(t1_folded, t2), output_shape)
    torch = _tn_ag_torch()
    n = tensor1.shape[-2] if dim1 > 1 else 1
    m1 = tensor1.shape[-1]
    batch1 = _b.list(tensor1.shape[:_b.max(dim1 - 2, 0)])
    m2 = tensor2.shape[-2] if dim2 > 1 else tensor2.shape[0]
    p = tensor2.shape[-1] if dim2 > 1 else 1
    batch2 = _b.list(tensor2.shape[:_b.max(dim2 - 2, 0)])
    output_shape = _b.list(torch.broadcast_shapes(_b.tuple(batch1), _b.tuple(batch2)))
    product = _prod(output_shape)
    t1e = aten.reshape(aten.expand(tensor1, output_shape + [n, m1]), [product, n, m1])
    vector_rhs = dim2 == 1
    if vector_rhs:
        t2e = aten.unsqueeze(aten.reshape(aten.expand(tensor2, output_shape + [m2]), [product, m2]), 2)
    else:
        t2e = aten.reshape(aten.expand(tensor2, output_shape + [m2, p]), [product, m2, p])
    if dim1 > 1:
        output_shape.append(n)
    if dim2 > 1:
        output_shape.append(p)
    out = aten.bmm(t1e, t2e)
    if vector_rhs:
        out = aten.squeeze.dim(out, -1)
    return aten._unsafe_view(out, output_shape)


def _ag_should_fold(tensor1, tensor2):
    dim1, dim2 = tensor1.dim(), tensor2.dim()
    larger = dim1 >= dim2
    t1 = tensor1 if larger else tensor2.mT
    dim_t1, dim_t2 = t1.dim(), (dim2 if larger else dim1)
    if not (dim_t1 >= 3 and dim_t2 <= 2):
        return False
    t2_requires_grad = tensor2.requires_grad if larger else tensor1.requires_grad
    if t2_requires_grad:
        return True
    if dim1 == 2:
        return False
    if t1.numel() == 0:
        return True
    shape, strides = t1.shape, t1.stride()
    for i in _b.range(dim_t1 - 2):
        if strides[i] != strides[i + 1] * shape[i + 1]:
            return False
    return True


def _ag_linear(input, weight, bias=None):
    """upstream's `linear` (aten/src/ATen/native/Linear.cpp)."""
    aten = _tn_ag_torch().ops.aten
    if input.dim() == 2 and bias is not None:
        return aten.addmm(bias, input, aten.t(weight))
    if bias is not None:
        if input.is_contiguous():
            # `_flatten_nd_linear`: one addmm over all rows
            out_shape = _b.list(input.shape[:-1]) + [weight.shape[0]]
            flat = aten.reshape(input, [_prod(input.shape[:-1]), input.shape[-1]])
            return aten._unsafe_view(aten.addmm(bias, flat, aten.t(weight)), out_shape)
        return aten.add.Tensor(_ag_matmul(input, aten.t(weight)), bias)
    return _ag_matmul(input, aten.t(weight))


def _ag_pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    innermost = _b.max(x1.dim(), x2.dim()) - 1
    return _tn_ag_torch().ops.aten.norm.ScalarOpt_dim(x1 - x2 + eps, p, [innermost], keepdim)


def _ag_take_along_dim(self, indices, dim=None):
    aten = _tn_ag_torch().ops.aten
    torch = _tn_ag_torch()
    if dim is None:
        return aten.gather(aten.view(self, [-1]), 0, aten.view(indices, [-1]))
    dim = dim + self.dim() if dim < 0 else dim
    sizes = _b.list(self.shape)
    sizes[dim] = indices.shape[dim]
    indices_b = aten.expand(indices, _b.list(torch.broadcast_shapes(_b.tuple(sizes), _b.tuple(indices.shape))))
    isizes = _b.list(indices.shape)
    isizes[dim] = self.shape[dim]
    self_b = aten.expand(self, _b.list(torch.broadcast_shapes(_b.tuple(isizes), _b.tuple(self.shape))))
    return aten.gather(self_b, dim, indices_b)


def _ag_nanmean(self, dim=None, keepdim=False, dtype=None):
    aten = _tn_ag_torch().ops.aten
    factor = aten.sum.dim_IntList(aten.logical_not(aten.isnan(self)), dim, keepdim)
    return aten.div.Tensor(aten.nansum(self, dim, keepdim, dtype=dtype), factor)


def _ag_tensor_split_sections(self, sections, dim=0):
    aten = _tn_ag_torch().ops.aten
    dim = dim + self.dim() if dim < 0 else dim
    size = self.shape[dim]
    base, extra = size // sections, size % sections
    out, start = [], 0
    for k in _b.range(sections):
        n = base + 1 if extra > k else base
        out.append(aten.slice.Tensor(self, dim, start, start + n))
        start += n
    return out


def _ag_repeat_interleave_int(self, repeats, dim=None, output_size=None):
    aten = _tn_ag_torch().ops.aten
    torch = _tn_ag_torch()
    x = self if dim is not None else aten.flatten.using_ints(self, 0, -1)
    dim = 0 if dim is None else (dim + self.dim() if dim < 0 else dim)
    x = aten.unsqueeze(x, dim + 1)
    shape = _b.list(x.shape)
    shape[dim + 1] = repeats
    x = aten.expand(x, shape)
    return aten.flatten.using_ints(aten.clone(x, memory_format=torch.contiguous_format), dim, dim + 1)


def _ag_tensordot(self, other, dims_self, dims_other):
    aten = _tn_ag_torch().ops.aten
    d1 = [d + self.dim() if d < 0 else d for d in dims_self]
    d2 = [d + other.dim() if d < 0 else d for d in dims_other]
    t1, t2, csize = self, other, 1
    for a, b in zip(d1, d2):
        s1, s2 = self.shape[a], other.shape[b]
        if s2 == 1:
            t1 = aten.sum.dim_IntList(t1, [a], True, dtype=t1.dtype)
        elif s1 == 1:
            t2 = aten.sum.dim_IntList(t2, [b], True, dtype=t2.dtype)
        else:
            csize *= s1
    p1, p2, rsizes, size1, size2 = [], [], [], 1, 1
    for i in _b.range(self.dim()):
        if i not in d1:
            p1.append(i)
            size1 *= t1.shape[i]
            rsizes.append(t1.shape[i])
    p1 += d1
    p2 += d2
    for i in _b.range(other.dim()):
        if i not in d2:
            p2.append(i)
            size2 *= t2.shape[i]
            rsizes.append(t2.shape[i])
    t1 = aten.reshape(aten.permute(t1, p1), [size1, csize])
    t2 = aten.reshape(aten.permute(t2, p2), [csize, size2])
    return aten.reshape(aten.mm(t1, t2), rsizes)


def _ag_inner(self, other):
    if self.dim() == 0 or other.dim() == 0:
        return self * other
    return _ag_tensordot(self, other, [-1], [-1])


def _ag_kron(self, other):
    aten = _tn_ag_torch().ops.aten
    maxdim = _b.max(self.dim(), other.dim())
    pad_self, pad_other = maxdim - self.dim(), maxdim - other.dim()
    a_shape, b_shape, r_shape = [], [], []
    for i in _b.range(maxdim):
        sa = self.shape[i - pad_self] if i >= pad_self else 1
        sb = other.shape[i - pad_other] if i >= pad_other else 1
        a_shape += [sa, 1]
        b_shape += [1, sb]
        r_shape.append(sa * sb)
    return aten._unsafe_view(aten.mul.Tensor(aten._unsafe_view(self, a_shape),
                                             aten._unsafe_view(other, b_shape)), r_shape)


def _ag_cosine_similarity(x1, x2, dim=1, eps=1e-8):
    torch = _tn_ag_torch()
    aten = torch.ops.aten
    x1, x2 = _ag_broadcast_tensors([x1, x2])
    n1 = aten.clone(aten.linalg_vector_norm(x1, 2, [dim], True))
    n2 = aten.clone(aten.linalg_vector_norm(x2, 2, [dim], True))
    with torch.no_grad():
        n1.clamp_min_(eps)
        n2.clamp_min_(eps)
    return aten.sum.dim_IntList(aten.mul.Tensor(aten.div.Tensor(x1, n1), aten.div.Tensor(x2, n2)), [dim])


def _ag_multi_dot(tensors):
    aten = _tn_ag_torch().ops.aten
    tensors = _b.list(tensors)
    n = len(tensors)
    if n == 1:
        return aten.clone(tensors[0])
    first_1d, last_1d = tensors[0].dim() == 1, tensors[-1].dim() == 1
    if first_1d:
        tensors[0] = aten.unsqueeze(tensors[0], 0)
    if last_1d:
        tensors[-1] = aten.unsqueeze(tensors[-1], 1)
    if n == 2:
        out = aten.mm(tensors[0], tensors[1])
    elif n == 3:
        a, b = tensors[0].shape[0], tensors[1].shape[0]
        c, d = tensors[2].shape[0], tensors[2].shape[1]
        if (a * c) * (b + d) > (b * d) * (a + c):
            out = aten.mm(tensors[0], aten.mm(tensors[1], tensors[2]))
        else:
            out = aten.mm(aten.mm(tensors[0], tensors[1]), tensors[2])
    else:
        # the cheapest parenthesisation (matrix chain order), as upstream's multi_dot
        p = [t.shape[0] for t in tensors] + [tensors[-1].shape[1]]
        cost = [[0] * n for _ in _b.range(n)]
        order = [[0] * n for _ in _b.range(n)]
        for length in _b.range(1, n):
            for i in _b.range(n - length):
                j = i + length
                cost[i][j] = None
                for k in _b.range(i, j):
                    q = cost[i][k] + cost[k + 1][j] + p[i] * p[k + 1] * p[j + 1]
                    if cost[i][j] is None or q < cost[i][j]:
                        cost[i][j], order[i][j] = q, k

        def chain(i, j):
            if i == j:
                return tensors[i]
            return aten.mm(chain(i, order[i][j]), chain(order[i][j] + 1, j))
        out = chain(0, n - 1)
    # upstream ends with a view to the result's shape (the 1-D ends dropped)
    shape = _b.list(out.shape)
    if last_1d:
        shape = shape[:-1]
    if first_1d:
        shape = shape[1:]
    return aten.view(out, shape)


def _ag_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    aten = _tn_ag_torch().ops.aten
    n, c = input.shape[0], input.shape[1]
    hxw = _prod(input.shape[2:])
    x = aten.contiguous(input)
    gamma = aten.contiguous(weight) if weight is not None else None
    beta = aten.contiguous(bias) if bias is not None else None
    return aten.native_group_norm(x, gamma, beta, n, c, hxw, num_groups, eps)[0]


def cholesky_backward(gL, upper, L):
    torch = _tn_ag_torch()
    if gL is None:
        return None
    if upper:
        L, gL = L.mH, gL.mH
    gA = L.mH.matmul(gL).tril()
    gA = 0.5 * (gA + gA.tril(-1).mH)
    gA = torch.linalg.solve_triangular(L.mH, gA, upper=True, left=True)
    return torch.linalg.solve_triangular(L, gA, upper=False, left=False)


def mvlgamma_backward(grad, self, p):
    torch = _tn_ag_torch()
    args = torch.arange(-p / 2.0 + 0.5, 0.5, 0.5, dtype=self.dtype)
    return grad * (args + self.unsqueeze(-1)).digamma().sum(-1)


def i1_backward(grad, self, result):
    # d/dx I1(x) = I0(x) - I1(x)/x, which is 1/2 at x = 0
    torch = _tn_ag_torch()
    eps = torch.finfo(self.dtype).eps
    not_tiny = self.abs() > eps
    safe = torch.where(not_tiny, self, self.new_full((), eps))
    gradx = safe.i0() - result * safe.reciprocal()
    return grad * torch.where(not_tiny, gradx, self.new_full((), 0.5))


def block_diag_backward(grad, sizes, dtypes):
    out, r, c = [], 0, 0
    for shape, dtype in zip(sizes, dtypes):
        shape = _b.list(shape)
        rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0] if shape else 1)
        part = grad[r:r + rows, c:c + cols]
        if grad.is_complex() and not dtype.is_complex:
            part = part.real
        out.append(part.reshape(shape))
        r, c = r + rows, c + cols
    return out


def scatter_reduce_backward(grad, self, dim, index, src, reduce, include_self, result):
    torch = _tn_ag_torch()
    if reduce == "sum":
        grad_self, grad_src = grad, grad.gather(dim, index)
    elif reduce == "mean":
        n = torch.ones_like(grad) if include_self else torch.zeros_like(grad)
        n = n.scatter_add(dim, index, torch.ones_like(src))
        n = n.masked_fill(n == 0, 1)
        grad_self = grad / n
        grad_src = grad.gather(dim, index) / n.gather(dim, index)
    elif reduce in ("amax", "amin"):
        value = result.gather(dim, index)
        self_is_result = (self == result).to(self.dtype)
        src_is_result = (src == value).to(self.dtype)
        share = grad / self_is_result.scatter_add(dim, index, src_is_result)
        grad_self = self_is_result * share
        grad_src = src_is_result * share.gather(dim, index)
    else:
        raise NotImplementedError(
            f"torchnative: the backward of scatter_reduce with reduce={reduce!r} is not implemented")
    if not include_self:
        grad_self = grad_self.scatter(dim, index, 0)
    return grad_self, grad_src


def cholesky_solve_backward(grad_x, self, input2, result, upper, output_mask):
    torch = _tn_ag_torch()
    if grad_x is None:
        return None, None
    grad_self = torch.cholesky_solve(grad_x, input2, upper=upper)
    common = grad_self.matmul(result.mH)
    common = common + common.mH
    grad_input2 = -input2.matmul(common) if upper else -common.matmul(input2)
    return grad_self, grad_input2


def linalg_solve_triangular_backward(grad, A, X, upper, left, unitriangular, output_mask):
    torch = _tn_ag_torch()
    if grad is None:
        return None, None
    g_b = torch.linalg.solve_triangular(A.mH, grad, upper=not upper, left=left,
                                        unitriangular=unitriangular)
    g_a = None
    if output_mask[0]:
        g_a = -g_b.matmul(X.mH) if left else -X.mH.matmul(g_b)
        g_a = g_a.triu(_b.int(unitriangular)) if upper else g_a.tril(-_b.int(unitriangular))
    return g_a, (g_b if output_mask[1] else None)


def pinv_backward(grad, pinvA, A):
    m, n = A.shape[-2], A.shape[-1]
    pinvAh, gradh = pinvA.mH, grad.mH
    if m <= n:
        K = gradh.matmul(pinvA)
        KpinvAh = K.matmul(pinvAh)
        return (-(pinvA.matmul(K)).mH + KpinvAh - A.matmul(pinvA).matmul(KpinvAh)
                + pinvAh.matmul(pinvA).matmul(gradh - K.matmul(A)))
    K = pinvA.matmul(gradh)
    pinvAhK = pinvAh.matmul(K)
    return (-(K.matmul(pinvA)).mH + (gradh - A.matmul(K)).matmul(pinvA).matmul(pinvAh)
            + pinvAhK - pinvAhK.matmul(pinvA).matmul(A))


def _ag_vector_rhs(A, B):
    return B.dim() == 1 or (B.dim() == A.dim() - 1 and _b.list(B.shape) == _b.list(A.shape[:-1]))


def linalg_lstsq_backward(gX, gL, A, B, X, grad_input_mask):
    torch = _tn_ag_torch()
    if gL is not None and gL.numel() > 0:
        raise NotImplementedError(
            "torchnative: the backward of linalg.lstsq through its residuals is not implemented")
    if gX is None:
        return None, None
    vector = _ag_vector_rhs(A, B)
    if vector:
        gX, B = gX.unsqueeze(-1), B.unsqueeze(-1)
    pinvA = torch.linalg.pinv(A)
    g_a = pinv_backward(gX.matmul(B.mH), pinvA, A) if grad_input_mask[0] else None
    g_b = None
    if grad_input_mask[1]:
        g_b = pinvA.mH.matmul(gX)
        g_b = g_b.squeeze(-1) if vector else g_b
    return g_a, g_b


def linalg_qr_backward(gQ, gR, Q, R, mode):
    torch = _tn_ag_torch()
    if mode == "r":
        raise RuntimeError(
            "The derivative of linalg.qr depends on Q, which is not computed when mode='r'. "
            "Please use linalg.qr(A, mode='reduced') if you are going to differentiate through "
            "linalg.qr.")
    m, n = Q.shape[-2], R.shape[-1]
    if m < n:
        raise NotImplementedError(
            "torchnative: the backward of linalg.qr with more columns than rows is not implemented")
    if gQ is None and gR is None:
        return None
    # M = R gR^H - gQ^H Q; gA = (gQ + Q copyltu(M)) R^{-H}, copyltu mirroring M's lower
    # triangle (m >= n)
    M = torch.zeros_like(R.matmul(R.mH))
    if gR is not None:
        M = M + R.matmul(gR.mH)
    if gQ is not None:
        M = M - gQ.mH.matmul(Q)
    low = M.tril(-1)
    copyltu = low + low.mH + torch.diag_embed(M.diagonal(0, -2, -1))
    b = Q.matmul(copyltu)
    if gQ is not None:
        b = b + gQ
    return torch.linalg.solve_triangular(R.mH, b, upper=False, left=False)


def _ag_lu_solve_adjoint(LU, pivots, B):
    # A^{-H} B from A's LU factorization (a zero pivot nudged to eps, as upstream does, so
    # that a singular A still gets the limit of the gradient)
    torch = _tn_ag_torch()
    eps = torch.finfo(LU.dtype).eps
    d = LU.diagonal(0, -2, -1)
    LU = LU + torch.diag_embed(torch.where(d == 0, d.new_full((), eps), d.new_zeros(())))
    return torch.linalg.lu_solve(LU, pivots, B, left=True, adjoint=True)


def _ag_scaled_identity(c, n):
    torch = _tn_ag_torch()
    return torch.diag_embed(c.unsqueeze(-1).expand(_b.list(c.shape) + [n]))


def linalg_det_backward(grad, det, A, LU, pivots):
    torch = _tn_ag_torch()
    if grad is None:
        return None
    d = _ag_scaled_identity(grad * det.conj(), A.shape[-1])
    if _tn_ag_grad_mode():
        return torch.linalg.solve(A.mH, d)
    return _ag_lu_solve_adjoint(LU, pivots, d)


def slogdet_backward(grad_sign, grad_logabsdet, A, signdet, LU, pivots):
    torch = _tn_ag_torch()
    if A.is_complex() and grad_sign is not None:
        raise NotImplementedError(
            "torchnative: the backward of slogdet through the sign of a complex matrix is not implemented")
    if grad_logabsdet is None:
        return None
    d = _ag_scaled_identity(grad_logabsdet.to(A.dtype), A.shape[-1])
    if _tn_ag_grad_mode():
        return torch.linalg.solve(A.mH, d)
    return _ag_lu_solve_adjoint(LU, pivots, d)


def linalg_solve_backward(gX, X, A, LU, pivots, left, B_requires_grad):
    torch = _tn_ag_torch()
    if gX is None:
        return None, None
    vector = _ag_vector_rhs(A, X) if left else False
    g = gX.unsqueeze(-1) if vector else gX
    Xm = X.unsqueeze(-1) if vector else X
    if _tn_ag_grad_mode() or not left:
        gB = torch.linalg.solve(A.mH, g, left=left)
    else:
        gB = _ag_lu_solve_adjoint(LU, pivots, g)
    gA = -gB.matmul(Xm.mH) if left else -Xm.mH.matmul(gB)
    if vector:
        gB = gB.squeeze(-1)
    return gA, (gB if B_requires_grad else None)


def svd_backward(gU, gS, gVh, U, S, Vh):
    torch = _tn_ag_torch()
    if gS is None and gU is None and gVh is None:
        return None
    m, n = U.shape[-2], Vh.shape[-1]
    if gU is None and gVh is None:
        return U.matmul(gS.unsqueeze(-1) * Vh) if m >= n else (U * gS.unsqueeze(-2)).matmul(Vh)
    if U.is_complex():
        raise NotImplementedError(
            "torchnative: the backward of svd through U or Vh of a complex matrix is not implemented")
    skew = lambda X: X - X.mH  # noqa: E731
    UhgU = skew(U.mH.matmul(gU)) if gU is not None else None
    VhgV = skew(Vh.matmul(gVh.mH)) if gVh is not None else None
    S2 = S * S
    E = S2.unsqueeze(-2) - S2.unsqueeze(-1)
    E = E + torch.diag_embed(torch.ones_like(S))
    if UhgU is not None and VhgV is not None:
        gA = (UhgU * S.unsqueeze(-2) + S.unsqueeze(-1) * VhgV) / E
    elif UhgU is not None:
        gA = (UhgU / E) * S.unsqueeze(-2)
    else:
        gA = S.unsqueeze(-1) * (VhgV / E)
    if gS is not None:
        gA = gA + torch.diag_embed(gS)
    if m > n and gU is not None:
        gA = U.matmul(gA)
        gUSinv = gU / S.unsqueeze(-2)
        gA = gA + gUSinv - U.matmul(U.mH.matmul(gUSinv))
        return gA.matmul(Vh)
    if m < n and gVh is not None:
        gA = gA.matmul(Vh)
        SinvgVh = gVh / S.unsqueeze(-1)
        gA = gA + SinvgVh - SinvgVh.matmul(Vh.mH).matmul(Vh)
        return U.matmul(gA)
    return U.matmul(gA.matmul(Vh)) if m >= n else U.matmul(gA).matmul(Vh)


def linalg_eig_backward(gL, gV, L, V, is_hermitian, symeig_eigenvectors=True):
    torch = _tn_ag_torch()
    if not is_hermitian:
        raise NotImplementedError(
            "torchnative: the backward of a non-Hermitian eigendecomposition is not implemented")
    if gL is None and gV is None:
        return None
    if gV is None:
        return (V * gL.unsqueeze(-2)).matmul(V.mH)
    VhgV = V.mH.matmul(gV)
    VhgV = 0.5 * (VhgV - VhgV.mH)
    E = L.unsqueeze(-2) - L.unsqueeze(-1)
    E = E + torch.diag_embed(torch.ones_like(L))
    gA = VhgV / E
    diag = gL if gL is not None else torch.zeros_like(L)
    gA = gA - torch.diag_embed(gA.diagonal(0, -2, -1)) + torch.diag_embed(diag.to(gA.dtype))
    return V.matmul(gA.matmul(V.mH))


def _ag_multi_margin_backward(grad, self, target, p, margin, weight, reduction):
    torch = _tn_ag_torch()
    p, margin = _b.float(p), _b.float(margin)
    x = self if self.dim() == 2 else self.reshape(1, -1)
    t = target.reshape(-1)
    c = x.shape[1]
    xy = x.gather(1, t.unsqueeze(1))
    z = margin - xy + x
    other = torch.arange(c).unsqueeze(0) != t.unsqueeze(1)
    on = (z > 0).logical_and(other).to(x.dtype)
    h = on if p == 1 else 2 * z * on
    if weight is not None:
        h = h * weight.index_select(0, t).unsqueeze(1)
    g = h - torch.zeros_like(h).scatter(1, t.unsqueeze(1), h.sum(1, True))
    g = g / c
    if reduction == 0:
        g = g * grad.reshape(-1, 1)
    else:
        g = g * grad
        if reduction == 1:
            g = g / x.shape[0]
    return g.reshape(self.shape)


multi_margin_loss_backward = _ag_multi_margin_backward


def _ag_poisson_nll_loss(input, target, log_input, full, eps, reduction):
    torch = _tn_ag_torch()
    if log_input:
        loss = torch.exp(input) - target * input
    else:
        loss = input - target * torch.log(input + eps)
    if full:
        stirling = target * torch.log(target) - target + 0.5 * torch.log(2 * 3.141592653589793 * target)
        loss = loss + stirling.masked_fill(target <= 1, 0)
    return _ag_reduce(loss, reduction)


def _ag_cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=1):
    torch = _tn_ag_torch()
    d = target.dim()
    prod_sum = (input1 * input2).sum(d)
    mag1 = (input1 * input1).sum(d) + 1e-12
    mag2 = (input2 * input2).sum(d) + 1e-12
    cos = prod_sum / (mag1 * mag2).sqrt_()
    zeros = torch.zeros_like(cos)
    pos = 1 - cos
    neg = (cos - margin).clamp_min_(0)
    out = torch.where(target == 1, pos, zeros) + torch.where(target == -1, neg, zeros)
    return _ag_reduce(out, reduction)


def _ag_triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
                            swap=False, reduction=1):
    torch = _tn_ag_torch()
    dist_pos = torch.pairwise_distance(anchor, positive, p, eps)
    dist_neg = torch.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dist_neg = torch.min(dist_neg, torch.pairwise_distance(positive, negative, p, eps))
    return _ag_reduce(torch.clamp_min(dist_pos.add(margin) - dist_neg, 0), reduction)


def _ag_instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum,
                      eps, cudnn_enabled=True):
    torch = _tn_ag_torch()
    b, c = input.shape[0], input.shape[1]
    shape = [1, b * c] + _b.list(input.shape[2:])
    rep = lambda t: None if t is None else t.repeat([b])  # noqa: E731
    rm, rv = rep(running_mean), rep(running_var)
    out = _ag_batch_norm(input.contiguous().view(shape), rep(weight), rep(bias), rm, rv,
                         use_input_stats, momentum, eps, cudnn_enabled)
    with torch.no_grad():
        if running_mean is not None:
            running_mean.copy_(rm.view(b, c).mean(0))
        if running_var is not None:
            running_var.copy_(rv.view(b, c).mean(0))
    return out.view(_b.list(input.shape))


def _ag_check_like_face(op, *args, **kwargs):
    """Runs the face's own kernel on detached inputs, for its error (a failed check)."""
    args = [a.detach() if isinstance(a, TensorBase) else a for a in args]
    op(*args, **kwargs)


def _ag_linalg_solve(A, B, left=True):
    torch = _tn_ag_torch()
    return torch.ops.aten._linalg_solve_ex(A, B, left=left, check_errors=True)[0]


def _ag_logdet(A):
    torch = _tn_ag_torch()
    sign, logabsdet = torch.ops.aten._linalg_slogdet(A)[:2]
    if A.is_complex():
        return sign.log() + logabsdet
    return torch.where(sign == -1, logabsdet.new_full((), _b.float("nan")), logabsdet)


def _ag_matrix_power(A, n):
    torch = _tn_ag_torch()
    if n == 0:
        return torch.eye(A.shape[-2], dtype=A.dtype).expand(A.shape).clone()
    if n < 0:
        A, n = torch.linalg.inv(A), -n
    if n == 1:
        return A.clone(memory_format=torch.contiguous_format)
    if n == 2:
        return torch.matmul(A, A)
    if n == 3:
        return torch.matmul(torch.matmul(A, A), A)
    z = result = None
    while n > 0:
        bit, n = n % 2, n // 2
        z = A if z is None else torch.matmul(z, z)
        if bit:
            result = z if result is None else torch.matmul(result, z)
    return result


def _ag_matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, dtype=None):
    torch = _tn_ag_torch()
    nd = A.dim()
    dim = [d % nd if nd else d for d in dim]
    if isinstance(ord, _b.str):
        if ord == "fro":
            return torch.linalg.vector_norm(A, 2, dim, keepdim, dtype=dtype)
        perm = [d for d in _b.range(nd) if d not in dim] + dim
        A_ = A if dtype is None else A.to(dtype)
        r = torch.linalg.svdvals(A_.permute(perm)).sum(-1, keepdim)
        if keepdim:
            inv = [perm.index(i) for i in _b.range(nd)]
            r = r.unsqueeze(-1).permute(inv)
        return r
    ord = _b.float(ord)
    pick = (lambda t, d: t.amax(d, keepdim)) if ord > 0 else (lambda t, d: t.amin(d, keepdim))
    if _b.abs(ord) == 2.0:
        perm = [d for d in _b.range(nd) if d not in dim] + dim
        A_ = A if dtype is None else A.to(dtype)
        r = pick(torch.linalg.svdvals(A_.permute(perm)), -1)
        if keepdim:
            r = r.unsqueeze(-1).unsqueeze(-1)
            inv = [perm.index(i) for i in _b.range(nd)]
            r = r.permute(inv)
        return r
    d0, d1 = dim
    if _b.abs(ord) == _b.float("inf"):
        d0, d1 = d1, d0
    if not keepdim and d0 < d1:
        d1 -= 1
    return pick(torch.linalg.vector_norm(A, 1.0, [d0], keepdim, dtype=dtype), d1)


def _ag_lu_factor(A, pivot=True):
    torch = _tn_ag_torch()
    LU, pivots, info = torch.ops.aten.linalg_lu_factor_ex(A, pivot=pivot)
    if _b.bool((info != 0).any().item()):
        _ag_check_like_face(torch.ops.aten.linalg_lu_factor, A, pivot=pivot)
    return LU, pivots


def lu_factor_ex_backward(grad, LU, pivs, pivot):
    torch = _tn_ag_torch()
    m, n = LU.shape[-2], LU.shape[-1]
    if m != n:
        raise NotImplementedError(
            "torchnative: the backward of lu_factor of a non-square matrix is not implemented")
    P, L, U = torch.lu_unpack(LU, pivs, unpack_data=True, unpack_pivots=pivot)
    gA = L.mH.matmul(grad).tril(-1) + grad.matmul(U.mH).triu()
    gA = torch.linalg.solve_triangular(U.mH, gA, upper=False, left=False)
    gA = torch.linalg.solve_triangular(L.mH, gA, upper=True, left=True, unitriangular=True)
    return P.matmul(gA) if pivot else gA


def _ag_dist_direction(diff, dist, p):
    """d||diff||_p / d diff, with dist = ||diff||_p already reduced and kept broadcastable; zero
    where the distance is zero (upstream's choice at the kink)."""
    torch = _tn_ag_torch()
    p = _b.float(p)
    zero = diff.new_zeros(())
    if p == 0.0:
        return torch.zeros_like(diff)
    if p == 1.0:
        return diff.sign()
    if p == _b.float("inf"):
        return diff.sign() * (diff.abs() == dist).to(diff.dtype)
    if p == 2.0:
        return torch.where(dist == 0, zero, diff / dist)
    if p < 1.0:
        pw = torch.where(diff == 0, zero, diff.abs().pow(p - 1))
    else:
        pw = diff.abs().pow(p - 1)
    return torch.where(dist == 0, zero, diff.sign() * pw / dist.pow(p - 1))


def _cdist_backward(grad, x1, x2, p, cdist):
    # the gradient for x1 of cdist(x1, x2) (upstream calls it with x1, x2 swapped for x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)
    g = (grad.unsqueeze(-1) * _ag_dist_direction(diff, cdist.unsqueeze(-1), p)).sum(-2)
    return g.expand(x1.shape) if _b.list(g.shape) != _b.list(x1.shape) else g


def _euclidean_dist_backward(grad, x1, x2, res):
    if grad is None:
        return None, None
    ratio = (grad / res).masked_fill(res == 0, 0)
    return (x1 * ratio.sum(-1, True) - ratio.matmul(x2),
            x2 * ratio.sum(-2).unsqueeze(-1) - ratio.mT.matmul(x1))


def _pdist_backward(grad, self, p, pdist):
    torch = _tn_ag_torch()
    n = self.shape[0]
    if n < 2 or grad.numel() == 0:
        return torch.zeros_like(self)
    i, j = torch.triu_indices(n, n, 1)
    diff = self.index_select(0, i) - self.index_select(0, j)
    part = grad.unsqueeze(-1) * _ag_dist_direction(diff, pdist.unsqueeze(-1), p)
    return torch.zeros_like(self).index_add(0, i, part).index_add(0, j, -part)


def _ag_bag_members(indices, offsets, nbags, padding_idx):
    """(bag, position) of every index that is not padding_idx, bags given by their offsets."""
    idx = indices.reshape(-1).tolist()
    bounds = offsets.tolist()[:nbags] + [len(idx)]
    return [(b, k) for b in _b.range(nbags)
            for k in _b.range(bounds[b], _b.min(bounds[b + 1], len(idx))) if idx[k] != padding_idx], idx


def _embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, maximum_indices,
                            num_weights, scale_grad_by_freq, mode, sparse, per_sample_weights,
                            padding_idx=-1):
    torch = _tn_ag_torch()
    if sparse:
        raise NotImplementedError("torchnative: sparse gradients of embedding_bag are not implemented")
    if mode == 2:
        raise NotImplementedError(
            "torchnative: the backward of embedding_bag with mode='max' is not implemented")
    members, idx = _ag_bag_members(indices, offsets, grad.shape[0], padding_idx)
    out = grad.new_zeros([num_weights, grad.shape[-1]])
    if not members:
        return out
    i64 = torch.int64
    rows = torch.tensor([idx[k] for _, k in members], dtype=i64)
    bags = torch.tensor([b for b, _ in members], dtype=i64)
    g = grad.index_select(0, bags)
    if per_sample_weights is not None:
        g = g * per_sample_weights.index_select(0, torch.tensor([k for _, k in members], dtype=i64)).unsqueeze(1)
    if mode == 1:
        counts = {}
        for b, _ in members:
            counts[b] = counts.get(b, 0) + 1
        g = g / torch.tensor([counts[b] for b, _ in members], dtype=g.dtype).unsqueeze(1)
    if scale_grad_by_freq:
        freq = {}
        for _, k in members:
            freq[idx[k]] = freq.get(idx[k], 0) + 1
        g = g / torch.tensor([freq[idx[k]] for _, k in members], dtype=g.dtype).unsqueeze(1)
    return out.index_add(0, rows, g)


def _embedding_bag_per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode,
                                               padding_idx=-1):
    torch = _tn_ag_torch()
    if mode != 0:
        raise RuntimeError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    members, idx = _ag_bag_members(indices, offsets, grad.shape[0], padding_idx)
    out = grad.new_zeros([len(idx)])
    if not members:
        return out
    i64 = torch.int64
    rows = weight.index_select(0, torch.tensor([idx[k] for _, k in members], dtype=i64))
    part = (grad.index_select(0, torch.tensor([b for b, _ in members], dtype=i64)) * rows).sum(-1)
    return out.index_copy(0, torch.tensor([k for _, k in members], dtype=i64), part)


def _ag_embedding_bag(weight, indices, offsets, scale_grad_by_freq=False, mode=0, sparse=False,
                      per_sample_weights=None, include_last_offset=False, padding_idx=None):
    # upstream's embedding_bag: the padding index wrapped, then _embedding_bag (which carries
    # the formula) on contiguous indices and offsets
    torch = _tn_ag_torch()
    pad = -1
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise RuntimeError(f"padding_idx must be within the number of embeddings, -{n} "
                               f"through {n - 1}, but got {padding_idx}")
        pad = padding_idx % n
    return _b.tuple(torch.ops.aten._embedding_bag(
        weight, indices.contiguous(), offsets.contiguous(), scale_grad_by_freq, mode, sparse,
        per_sample_weights, include_last_offset, pad))


def TensorGeometry(t):  # noqa: N802 (upstream's name in the formula)
    # the formula only reads the input's sizes, strides and storage offset
    return t


def as_strided_backward(grad, input, size, stride, storage_offset):
    """as_strided's backward, over the storage both geometries index: the output's gradient
    summed into storage positions (an overlapping output adds up), then read back through the
    input's geometry (a position the input itself holds several times shares its gradient
    among them, as upstream does)."""
    torch = _tn_ag_torch()
    i64 = torch.int64
    size, stride = _b.list(size), _b.list(stride)
    offset = input.storage_offset() if storage_offset is None else storage_offset

    def extent(sz, st, off):
        if _b.any(n == 0 for n in sz):
            return off
        return off + _b.sum((n - 1) * s for n, s in zip(sz, st)) + 1

    n = _b.max(extent(size, stride, offset),
               extent(_b.list(input.shape), _b.list(input.stride()), input.storage_offset()))
    cells = torch.arange(n, dtype=i64)
    out_at = cells.as_strided(size, stride, offset).reshape(-1)
    storage = grad.new_zeros([n]).index_add(0, out_at, grad.reshape(-1))
    in_at = cells.as_strided(_b.list(input.shape), _b.list(input.stride()),
                             input.storage_offset()).reshape(-1)
    count = torch.zeros(n, dtype=i64).index_add(0, in_at, torch.ones_like(in_at))
    if _b.bool((count > 1).any().item()):
        storage = storage / count.clamp_min(1).to(storage.dtype)
    return storage.index_select(0, in_at).reshape(_b.list(input.shape))


def wrap_opt_if(t, cond):
    return t if cond else None


def _trilinear_backward(grad, i1, i2, i3, expand1, expand2, expand3, sumdim, grad_mask):
    # the gradient of each input is _trilinear itself with that input's and the output's roles
    # exchanged
    tri = _tn_ag_torch().ops.aten._trilinear
    if grad is None:
        return None, None, None
    return (tri(grad, i2, i3, sumdim, expand2, expand3, expand1) if grad_mask[0] else None,
            tri(i1, grad, i3, expand1, sumdim, expand3, expand2) if grad_mask[1] else None,
            tri(i1, i2, grad, expand1, expand2, sumdim, expand3) if grad_mask[2] else None)


def _ag_bilinear(input1, input2, weight, bias=None):
    # upstream's bilinear: both inputs flattened to 2-d, _trilinear with the weight, reshaped
    torch = _tn_ag_torch()
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and "
                           f"{input2.dim()}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.dim()}")
    out_size = _b.list(input1.shape[:-1]) + [weight.shape[0]]
    a = input1.reshape(-1, input1.shape[-1])
    b = input2.reshape(-1, input2.shape[-1])
    out = torch.ops.aten._trilinear(a, weight, b, [1, 3], [0], [1, 2], [2, 3]).reshape(out_size)
    return out + bias if bias is not None else out


def _ag_prelu(self, weight):
    # upstream's prelu: the weight reshaped to broadcast over the channel dim, then the kernel
    torch = _tn_ag_torch()
    if self.dtype != weight.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {self.dtype} and {weight.dtype}")
    if weight.numel() != 1:
        if self.dim() == 0:
            raise RuntimeError("Not allow zero-dim input tensor.")
        channels = self.shape[1] if self.dim() > 1 else 1
        if channels != weight.numel():
            raise RuntimeError(
                "Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                f"{weight.numel()} and channel size = {channels}.")
    if weight.dim() > 1:
        raise RuntimeError("prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = "
                           f"{weight.dim()}")
    w = weight
    if self.dim() != weight.dim():
        shape = [1] * self.dim()
        if self.dim() > 1:
            shape[1] = weight.numel()
        w = weight.reshape(shape)
    return torch.ops.aten._prelu_kernel(self, w)


def _ag_cdist(x1, x2, p=2.0, compute_mode=None):
    # upstream's cdist: _cdist_forward, except p=2 over more than 25 rows (or mode 1), which
    # takes the matrix-product form through _euclidean_dist
    torch = _tn_ag_torch()
    aten = torch.ops.aten
    r1, r2 = x1.shape[-2], x2.shape[-2]
    mode = 0 if compute_mode is None else compute_mode
    if x1.numel() == 0 or x2.numel() == 0 or not (
            p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25)))):
        return aten._cdist_forward(x1, x2, p, compute_mode)
    batch = _b.list(torch.broadcast_shapes(_b.tuple(x1.shape[:-2]), _b.tuple(x2.shape[:-2])))
    nb = _prod(batch)
    a = x1.expand(batch + _b.list(x1.shape[-2:])).reshape(nb, r1, x1.shape[-1])
    b = x2.expand(batch + _b.list(x2.shape[-2:])).reshape(nb, r2, x2.shape[-1])
    return aten._euclidean_dist(a, b).view(batch + [r1, r2])


def replication_pad_backward(grad, self, padding):
    """replication_pad{1,2,3}d's backward: each output position's gradient goes to the input
    position it copied (the nearest one inside), one padded dim at a time."""
    torch = _tn_ag_torch()
    g = grad
    nd = len(padding) // 2
    for k in _b.range(nd):
        dim = self.dim() - 1 - k
        left = padding[2 * k]
        size_in, size_out = self.shape[dim], g.shape[dim]
        idx = (torch.arange(size_out) - left).clamp(0, size_in - 1)
        shape = _b.list(g.shape)
        shape[dim] = size_in
        g = g.new_zeros(shape).index_add(dim, idx, g)
    return g


replication_pad1d_backward = replication_pad2d_backward = replication_pad3d_backward = \
    replication_pad_backward


def _ag_hinge_embedding_loss(self, target, margin=1.0, reduction=1):
    torch = _tn_ag_torch()
    zeros = torch.zeros_like(self)
    margin_clamp = (margin - self).clamp_min(0)
    output_margin = torch.where(target != 1, margin_clamp, zeros)
    output_self = torch.where(target != -1, self, zeros)
    return _ag_reduce(output_margin + output_self, reduction)


def _ag_reduce(out, reduction):
    return out.mean() if reduction == 1 else out.sum() if reduction == 2 else out


def _ag_l1_loss(self, target, reduction=1):
    return _ag_reduce((self - target).abs(), reduction)


def _ag_kl_div(self, target, reduction=1, log_target=False):
    torch = _tn_ag_torch()
    if log_target:
        out = torch.exp(target) * (target - self)
    else:
        out = torch.xlogy(target, target) - target * self
    return _ag_reduce(out, reduction)


def _ag_broadcast_tensors(tensors):
    torch = _tn_ag_torch()
    shape = _b.list(torch.broadcast_shapes(*[_b.tuple(t.shape) for t in tensors]))
    return [t if _b.list(t.shape) == shape else torch.ops.aten.expand(t, shape) for t in tensors]


def _ag_to_dtype(self, dtype, non_blocking=False, copy=False, memory_format=None):
    torch = _tn_ag_torch()
    if dtype == self.dtype and not copy and memory_format in (None, torch.preserve_format):
        return self
    return torch.ops.aten._to_copy(self, dtype=dtype, memory_format=memory_format)


def _ag_pad(self, pad, mode="constant", value=None):
    aten = _tn_ag_torch().ops.aten
    if mode == "constant":
        return aten.constant_pad_nd(self, _b.list(pad), 0 if value is None else value)
    n = len(pad) // 2
    if mode == "reflect":
        return getattr(aten, "reflection_pad%dd" % n)(self, _b.list(pad))
    if mode == "replicate":
        return getattr(aten, "replication_pad%dd" % n)(self, _b.list(pad))
    if mode == "circular":
        return aten._pad_circular(self, _b.list(pad))
    raise NotImplementedError(f"torchnative: backward through pad with mode {mode!r} is not implemented")


def _ag_pad_circular(self, pad):
    """upstream's `_pad_circular` body (PadNd.cpp): the input copied into the middle of a new
    tensor, then each padded dim's borders copied from the far side of the result itself, so
    that its history is CopySlices over slices."""
    aten = _tn_ag_torch().ops.aten
    pad = _b.list(pad)
    in_shape = _b.list(self.shape)
    ndim_padded = len(pad) // 2
    ndim_nonpadded = len(in_shape) - ndim_padded
    out_shape = in_shape[:ndim_nonpadded]
    for i in range(ndim_padded):
        pad_l, pad_r = pad[2 * (ndim_padded - i - 1)], pad[2 * (ndim_padded - i - 1) + 1]
        size = in_shape[ndim_nonpadded + i]
        if pad_l > size or pad_r > size:
            raise RuntimeError("Padding value causes wrapping around more than once.")
        out_shape.append(size + pad_l + pad_r)
    out = self.new_empty(out_shape)
    out_slice, in_slice = out, self
    for i in range(ndim_padded):
        dim = ndim_padded - i + ndim_nonpadded - 1
        pad_l, pad_r = pad[2 * i], pad[2 * i + 1]
        out_slice = aten.slice(out_slice, dim, _b.max(pad_l, 0), out_shape[dim] - _b.max(pad_r, 0))
        in_slice = aten.slice(in_slice, dim, _b.max(-pad_l, 0), in_shape[dim] - _b.max(-pad_r, 0))
    out_slice.copy_(in_slice)
    for i in range(ndim_padded):
        dim = ndim_padded - i + ndim_nonpadded - 1
        pad_l, pad_r = pad[2 * i], pad[2 * i + 1]
        if pad_l > 0:
            out_slice = aten.slice(out, dim, 0, pad_l)
            in_slice = aten.slice(out, dim, out_shape[dim] - pad_l - _b.max(pad_r, 0),
                                  out_shape[dim] - _b.max(pad_r, 0))
            out_slice.copy_(in_slice)
        if pad_r > 0:
            out_slice = aten.slice(out, dim, out_shape[dim] - pad_r, out_shape[dim])
            in_slice = aten.slice(out, dim, _b.max(pad_l, 0), _b.max(pad_l, 0) + pad_r)
            out_slice.copy_(in_slice)
    return out


def _ag_sumproduct_pair(left, right, sum_dims, keepdim):
    """upstream's sumproduct_pair (Linear.cpp): `(left * right).sum(sum_dims)` for operands of
    equal rank as permute, reshape, bmm, view and permute, so that autograd records those."""
    torch = _tn_ag_torch()
    if not sum_dims:
        return torch.mul(left, right)
    ndim = left.dim()
    summed = set(sum_dims)
    lro, lo, ro = [], [], []
    lro_size = lo_size = ro_size = sum_size = 1
    for i in range(ndim):
        sl, sr = left.shape[i] != 1, right.shape[i] != 1
        if i in summed:
            if sl and sr:
                if left.shape[i] != right.shape[i]:
                    raise RuntimeError("non-broadcast dimensions must match")
                sum_size *= left.shape[i]
            elif sl:
                left = left.sum(i, True)
            elif sr:
                right = right.sum(i, True)
        elif sl and sr:
            if left.shape[i] != right.shape[i]:
                raise RuntimeError("non-broadcast dimensions must match")
            lro.append(i)
            lro_size *= left.shape[i]
        elif sl:
            lo.append(i)
            lo_size *= left.shape[i]
        else:
            ro.append(i)
            ro_size *= right.shape[i]
    # bmm writes the result in output order directly when every right-only dim comes first
    if lo and ro and ro[-1] < lo[0]:
        left, right, lo, ro, lo_size, ro_size = right, left, ro, lo, ro_size, lo_size
    out_size = ([left.shape[d] for d in lro] + [left.shape[d] for d in lo]
                + [1] * len(sum_dims) + [right.shape[d] for d in ro])
    lperm = lro + lo + _b.list(sum_dims) + ro
    rperm = lro + _b.list(sum_dims) + ro + lo
    operm = [-1] * len(out_size)
    for i, d in enumerate(lro + lo + _b.list(sum_dims) + ro):
        operm[d] = i
    left = left.permute(lperm).reshape(lro_size, lo_size, sum_size)
    right = right.permute(rperm).reshape(lro_size, sum_size, ro_size)
    result = torch.bmm(left, right).view(out_size).permute(operm)
    if not keepdim:
        result = result.view([n for i, n in enumerate(result.shape) if i not in summed])
    return result


def _ag_einsum(equation, tensors, path=None):
    """upstream's einsum (Linear.cpp, CompositeImplicitAutograd) over the face's operators:
    labels aligned to output + contraction dims (diagonals for repeated labels, unsqueezes for
    missing ones, one permute per operand), contracted pairwise left to right (or along
    `path`) by sumproduct_pair, the contraction dims then viewed (or summed) away."""
    ops_in = _b.list(tensors)
    if not ops_in:
        raise RuntimeError("einsum(): must provide at least one operand")
    ELL = "..."
    arrow = equation.find("->")
    lhs = equation if arrow < 0 else equation[:arrow]
    op_labels = []
    for term in lhs.replace(" ", "").split(","):
        labels, k = [], 0
        while k < len(term):
            if term.startswith(ELL, k):
                labels.append(ELL)
                k += 3
                continue
            if not term[k].isalpha():
                raise RuntimeError(
                    f"einsum(): invalid subscript given at index {k} in the equation string, "
                    "subscripts must be in [a-zA-Z]")
            labels.append(term[k])
            k += 1
        op_labels.append(labels)
    if len(op_labels) < len(ops_in):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    if len(op_labels) > len(ops_in):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    # upstream orders labels A-Z then a-z
    order = lambda c: (0, c) if c.isupper() else (1, c)  # noqa: E731
    count, ell_dims = {}, 0
    for i, (t, labels) in enumerate(zip(ops_in, op_labels)):
        n = len([c for c in labels if c != ELL])
        has_ell = ELL in labels
        if has_ell:
            ell_dims = _b.max(ell_dims, t.dim() - n)
        for c in labels:
            if c != ELL:
                count[c] = count.get(c, 0) + 1
        if (n > t.dim()) if has_ell else (n != t.dim()):
            raise RuntimeError(
                f"einsum(): the number of subscripts in the equation ({n}) "
                + ("is more than the number of dimensions (" if has_ell
                   else "does not match the number of dimensions (")
                + f"{t.dim()}) for operand {i}" + ("" if has_ell else " and no ellipsis was given"))
    perm_of, perm, ell_index, ell_out = {}, 0, 0, False
    if arrow < 0:
        perm, ell_out = ell_dims, True
        for c in _b.sorted(count, key=order):
            if count[c] == 1:
                perm_of[c] = perm
                perm += 1
    else:
        rhs = equation[arrow + 2:].replace(" ", "")
        k = 0
        while k < len(rhs):
            if rhs.startswith(ELL, k):
                ell_index, ell_out = perm, True
                perm += ell_dims
                k += 3
                continue
            c = rhs[k]
            if c not in count or c in perm_of:
                raise RuntimeError(
                    f"einsum(): output subscript {c}" + (" appears more than once in the output"
                    if c in perm_of else " does not appear in the equation for any input operand"))
            perm_of[c] = perm
            perm += 1
            k += 1
    out_dims = perm
    if not ell_out:
        ell_index = perm
        perm += ell_dims
    for c in _b.sorted(count, key=order):
        if c not in perm_of:
            perm_of[c] = perm
            perm += 1
    dim_counts = [0] * perm
    ops = []
    for i, (op, labels) in enumerate(zip(ops_in, op_labels)):
        permutation = [-1] * perm
        d = 0
        for c in labels:
            if c == ELL:
                covered = op.dim() - (len(labels) - 1)
                for j in range(ell_dims - covered, ell_dims):
                    if op.shape[d] != 1:
                        dim_counts[ell_index + j] += 1
                    permutation[ell_index + j] = d
                    d += 1
            elif permutation[perm_of[c]] == -1:
                if op.shape[d] != 1:
                    dim_counts[perm_of[c]] += 1
                permutation[perm_of[c]] = d
                d += 1
            else:
                prev = permutation[perm_of[c]]
                if op.shape[d] != op.shape[prev]:
                    raise RuntimeError(
                        f"einsum(): subscript {c} is repeated for operand {i} but the sizes "
                        f"don't match, {op.shape[d]} != {op.shape[prev]}")
                op = op.diagonal(0, prev, d).movedim(-1, prev)
        for k, v in enumerate(permutation):
            if v == -1:
                op = op.unsqueeze(d)
                permutation[k] = d
                d += 1
        ops.append(op.permute(permutation))
    steps = _b.list(path) if path is not None else None
    while len(ops) > 1:
        i, j = 0, 1
        if steps is not None:
            i, j = steps.pop(0), steps.pop(0)
            if j < i:
                i, j = j, i
        a, b = ops[i], ops[j]
        del ops[j]
        del ops[i]
        sum_dims, a_sum, b_sum = [], [], []
        for d in range(out_dims, perm):
            sa, sb = a.shape[d] != 1, b.shape[d] != 1
            if sa and sb:
                dim_counts[d] -= 1
                if dim_counts[d] == 1:
                    sum_dims.append(d)
                    dim_counts[d] = 0
            elif dim_counts[d] == 1:
                if sa:
                    a_sum.append(d)
                    dim_counts[d] = 0
                elif sb:
                    b_sum.append(d)
                    dim_counts[d] = 0
        if a_sum:
            a = a.sum(a_sum, True)
        if b_sum:
            b = b.sum(b_sum, True)
        r = _ag_sumproduct_pair(a, b, sum_dims, True)
        if steps is not None:
            ops.append(r)
        else:
            ops.insert(0, r)
    if perm - out_dims > 0:
        if len(ops_in) > 1:
            return ops[0].view(_b.list(ops[0].shape[:out_dims]))
        return ops[0].sum(_b.list(range(out_dims, perm)))
    return ops[0]


# CompositeImplicitAutograd operators that torch._decomp has no decomposition of: upstream's
# C++ bodies (aliases of an operator with a formula; not formulas).
_AG_IMPLICIT = {"aten::chunk": _ag_chunk, "aten::diag": _ag_diag,
                "aten::log_sigmoid": lambda self: _tn_ag_torch().ops.aten.log_sigmoid_forward(self)[0],
                "aten::hstack": _ag_hstack,
                "aten::vstack": lambda tensors: _tn_ag_torch().ops.aten.cat([_ag_atleast(t, 2) for t in tensors], 0),
                "aten::dstack": lambda tensors: _tn_ag_torch().ops.aten.cat([_ag_atleast(t, 3) for t in tensors], 2),
                "aten::column_stack": _ag_column_stack,
                "aten::l1_loss": _ag_l1_loss, "aten::kl_div": _ag_kl_div,
                "aten::hinge_embedding_loss": _ag_hinge_embedding_loss,
                "aten::matmul": _ag_matmul, "aten::linear": _ag_linear,
                "aten::msort": lambda self: _tn_ag_torch().ops.aten.sort(self, 0)[0],
                "aten::take_along_dim": _ag_take_along_dim, "aten::nanmean": _ag_nanmean,
                "aten::tensor_split.sections": _ag_tensor_split_sections,
                "aten::diagflat": lambda self, offset=0: _ag_diag(
                    _tn_ag_torch().ops.aten.view(_tn_ag_torch().ops.aten.contiguous(self), [-1]), offset),
                "aten::repeat_interleave.self_int": _ag_repeat_interleave_int,
                "aten::tensordot": _ag_tensordot, "aten::inner": _ag_inner, "aten::kron": _ag_kron,
                "aten::cosine_similarity": _ag_cosine_similarity,
                "aten::linalg_multi_dot": _ag_multi_dot,
                "aten::chain_matmul": _ag_multi_dot,
                "aten::group_norm": _ag_group_norm,
                "aten::linalg_inv": lambda A: _tn_ag_torch().ops.aten.linalg_inv_ex(A)[0],
                "aten::inverse": lambda A: _tn_ag_torch().ops.aten.linalg_inv_ex(A)[0],
                "aten::linalg_cholesky": lambda A, upper=False: _tn_ag_torch().ops.aten.linalg_cholesky_ex(A, upper=upper)[0],
                "aten::selu": lambda self: _tn_ag_torch().ops.aten.elu(
                    self, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946),
                "aten::pairwise_distance": _ag_pairwise_distance,
                "aten::broadcast_tensors": _ag_broadcast_tensors,
                "aten::to.dtype": _ag_to_dtype, "aten::pad": _ag_pad,
                "aten::_pad_circular": _ag_pad_circular,
                "aten::einsum": _ag_einsum,
                "aten::var.dim": _ag_var_dim("var"), "aten::std.dim": _ag_var_dim("std"),
                "aten::var_mean.dim": _ag_var_dim("var_mean"),
                "aten::std_mean.dim": _ag_var_dim("std_mean"),
                "aten::var": _ag_var_full("var"), "aten::std": _ag_var_full("std"),
                "aten::var_mean": _ag_var_full("var_mean"), "aten::std_mean": _ag_var_full("std_mean"),
                "aten::square": lambda self: _tn_ag_torch().ops.aten.pow.Tensor_Scalar(self, 2),
                "aten::clip": lambda self, min=None, max=None: _tn_ag_torch().ops.aten.clamp(self, min, max),
                "aten::clip.Tensor": lambda self, min=None, max=None: _tn_ag_torch().ops.aten.clamp.Tensor(self, min, max),
                "aten::narrow": _ag_narrow, "aten::narrow.Tensor": _ag_narrow,
                "aten::movedim.int": _ag_movedim, "aten::movedim.intlist": _ag_movedim,
                "aten::moveaxis.int": _ag_movedim, "aten::moveaxis.intlist": _ag_movedim,
                "aten::expand_as": lambda self, other: _tn_ag_torch().ops.aten.expand(self, _b.list(other.shape)),
                "aten::broadcast_to": lambda self, size: _tn_ag_torch().ops.aten.expand(self, _b.list(size)),
                "aten::fliplr": lambda self: _tn_ag_torch().ops.aten.flip(self, [1]),
                "aten::flipud": lambda self: _tn_ag_torch().ops.aten.flip(self, [0]),
                "aten::tile": _ag_tile, "aten::unflatten.int": _ag_unflatten,
                "aten::outer": _ag_outer, "aten::ger": _ag_outer,
                "aten::float_power.Tensor_Scalar": _ag_float_power,
                "aten::float_power.Tensor_Tensor": _ag_float_power,
                "aten::float_power.Scalar": _ag_float_power,
                "aten::softmax.int": _ag_softmax("_softmax"),
                "aten::log_softmax.int": _ag_softmax("_log_softmax"),
                "aten::reshape": _ag_reshape,
                "aten::cross_entropy_loss": _ag_cross_entropy,
                "aten::nll_loss_nd": _ag_nll_loss_nd,
                "aten::nll_loss": _ag_nll_loss,
                "aten::scaled_dot_product_attention": _ag_sdpa,
                "aten::contiguous": _ag_contiguous,
                "aten::flatten.using_ints": _ag_flatten,
                "aten::max_pool2d": _ag_max_pool2d,
                "aten::max_pool3d": _ag_max_pool3d,
                "aten::cdist": _ag_cdist,
                "aten::prelu": _ag_prelu,
                "aten::bilinear": _ag_bilinear,
                "aten::embedding_bag.padding_idx": _ag_embedding_bag,
                "aten::embedding_bag": _ag_embedding_bag,
                "aten::pdist": lambda self, p=2.0: _tn_ag_torch().ops.aten._pdist_forward(
                    self.contiguous(), p),
                "aten::poisson_nll_loss": _ag_poisson_nll_loss,
                "aten::cosine_embedding_loss": _ag_cosine_embedding_loss,
                "aten::triplet_margin_loss": _ag_triplet_margin_loss,
                "aten::instance_norm": _ag_instance_norm,
                "aten::linalg_det": lambda A: _tn_ag_torch().ops.aten._linalg_det(A)[0],
                "aten::det": lambda A: _tn_ag_torch().ops.aten._linalg_det(A)[0],
                "aten::linalg_slogdet": lambda A: _b.tuple(_tn_ag_torch().ops.aten._linalg_slogdet(A)[:2]),
                "aten::slogdet": lambda A: _b.tuple(_tn_ag_torch().ops.aten._linalg_slogdet(A)[:2]),
                "aten::logdet": _ag_logdet,
                "aten::linalg_solve": _ag_linalg_solve,
                "aten::linalg_svdvals": lambda A, driver=None: _tn_ag_torch().ops.aten._linalg_svd(
                    A, False, True, driver=driver)[1],
                "aten::linalg_eigvalsh": lambda A, UPLO="L": _tn_ag_torch().ops.aten._linalg_eigh(
                    A, UPLO, True)[0],
                "aten::linalg_matrix_power": _ag_matrix_power,
                "aten::matrix_power": _ag_matrix_power,
                "aten::linalg_matrix_norm": _ag_matrix_norm,
                "aten::linalg_matrix_norm.str_ord": _ag_matrix_norm,
                "aten::linalg_lu_factor": _ag_lu_factor,
                "aten::max_pool1d": lambda *a, **k: _ag_max_pool1d_with_indices(*a, **k)[0],
                "aten::max_pool1d_with_indices": _ag_max_pool1d_with_indices,
                "aten::avg_pool1d": _ag_avg_pool1d,
                "aten::adaptive_avg_pool1d": _ag_adaptive_avg_pool1d,
                "aten::adaptive_max_pool1d": _ag_adaptive_max_pool1d,
                "aten::adaptive_avg_pool2d": _ag_adaptive_avg_pool(2),
                "aten::adaptive_avg_pool3d": _ag_adaptive_avg_pool(3),
                "aten::upsample_nearest1d.vec": _ag_upsample_vec("upsample_nearest1d", 1, False),
                "aten::upsample_nearest2d.vec": _ag_upsample_vec("upsample_nearest2d", 2, False),
                "aten::upsample_nearest3d.vec": _ag_upsample_vec("upsample_nearest3d", 3, False),
                "aten::_upsample_nearest_exact1d.vec": _ag_upsample_vec("_upsample_nearest_exact1d", 1, False),
                "aten::_upsample_nearest_exact2d.vec": _ag_upsample_vec("_upsample_nearest_exact2d", 2, False),
                "aten::_upsample_nearest_exact3d.vec": _ag_upsample_vec("_upsample_nearest_exact3d", 3, False),
                "aten::upsample_linear1d.vec": _ag_upsample_vec("upsample_linear1d", 1, True),
                "aten::upsample_bilinear2d.vec": _ag_upsample_vec("upsample_bilinear2d", 2, True),
                "aten::upsample_trilinear3d.vec": _ag_upsample_vec("upsample_trilinear3d", 3, True),
                "aten::upsample_bicubic2d.vec": _ag_upsample_vec("upsample_bicubic2d", 2, True),
                "aten::rms_norm": _ag_rms_norm,
                "aten::layer_norm": _ag_layer_norm,
                "aten::batch_norm": _ag_batch_norm,
                "aten::conv1d": _ag_conv(1), "aten::conv2d": _ag_conv(2), "aten::conv3d": _ag_conv(3),
                "aten::conv1d.padding": _ag_conv(1), "aten::conv2d.padding": _ag_conv(2),
                "aten::conv3d.padding": _ag_conv(3),
                "aten::conv_transpose1d": _ag_conv_transpose(1),
                "aten::conv_transpose2d.input": _ag_conv_transpose(2),
                "aten::conv_transpose3d.input": _ag_conv_transpose(3)}


def _ag_is_float_tensor(t):
    return isinstance(t, TensorBase) and (t.dtype.is_floating_point or t.dtype.is_complex)


def _tn_autograd_post(token, result):
    full, names, values, cls, written, saved_self = token
    outs = _b.list(result) if isinstance(result, (_b.tuple, _b.list)) else [result]
    diff = [(i, o) for i, o in enumerate(outs) if _ag_is_float_tensor(o)]
    od = cls._tn_out_diff if cls is not None else None
    if od is not None:
        # derivatives.yaml's output_differentiability
        diff = [(i, o) for i, o in diff if i < len(od) and od[i]]
    if not diff:
        return
    mutated = [v for n, v in zip(names, values) if n in written and isinstance(v, TensorBase)]
    # an operator that hands back an input itself (conj of a real tensor) keeps its history
    inputs = [v for v in values if isinstance(v, TensorBase)]
    diff = [(i, o) for i, o in diff if mutated or not _b.any(o is v for v in inputs)]
    if not diff:
        return
    for t in mutated:
        if t.grad_fn is None and t.requires_grad:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation.")
        base = t._base
        if base is not None and base.grad_fn is None and base.requires_grad:
            raise RuntimeError(
                "a view of a leaf Variable that requires grad is being used in an in-place "
                "operation.")
    if mutated and saved_self is None:
        node = _ag_refusing(full, f"torchnative: backward through the in-place operator {full} "
                                  "is not implemented (autograd: issue 12)")
        # writing through a view changes its base too: the base's history must refuse as well,
        # not silently miss the write
        for t in mutated:
            base = t._base
            if base is not None and (base.requires_grad or diff):
                base_node = _ag_refusing(
                    full, f"torchnative: backward through the in-place operator {full} on a view "
                          "is not implemented (autograd: issue 12)")
                base_node._tn_edges.append(_ag_edge(base))
                for n, v in zip(names, values):
                    if isinstance(v, TensorBase) and v.requires_grad and v is not t:
                        base_node._tn_edges.append(_ag_edge(v))
                base._tn_set_grad_fn(base_node, 0)
    elif cls is None and _ag_upstream_lacks_formula(full):
        # upstream records the same: a NotImplemented node whose backward raises
        node = _AgUpstreamNotImplemented()
        node._tn_reason = f"derivative for {full.partition('.')[0]} is not implemented"
    elif cls is None:
        node = _ag_refusing(full, f"torchnative: {full} has no derivative formula in "
                                  "derivatives.yaml that torchnative runs; backward through it "
                                  "is not implemented")
    else:
        node = cls()
        env, index, mask = {}, {}, {}
        result_names = ["result"] if len(outs) == 1 else [f"result{i}" for i in range(len(outs))]
        for n, v in zip(names, values):
            if isinstance(v, TensorBase):
                env[n] = _AgSaved(v)
                if v.requires_grad:
                    index[n] = len(node._tn_edges)
                    node._tn_edges.append(_ag_edge(v))
                    node._tn_shapes.append((_b.tuple(v.shape), v.dtype))
                    mask[n] = True
                else:
                    mask[n] = False
            elif isinstance(v, _b.list) and v and isinstance(v[0], TensorBase):
                env[n] = [_AgSaved(x) for x in v]
                # a list input (cat, stack): one edge per element that requires grad; the
                # formula gives a list of gradients, element by element
                wants = [isinstance(x, TensorBase) and x.requires_grad for x in v]
                mask[n] = _b.any(wants)
                if mask[n]:
                    index[n] = []
                    for x, w in zip(v, wants):
                        index[n].append(len(node._tn_edges) if w else None)
                        if w:
                            node._tn_edges.append(_ag_edge(x))
                            node._tn_shapes.append((_b.tuple(x.shape), x.dtype))
            else:
                env[n] = _ag_wrap_scalar(v)
                mask[n] = False
        for rn, (i, o) in zip(result_names, enumerate(outs)):
            if isinstance(o, TensorBase):
                env[rn] = _AgSaved(o, True, type(node).__name__, i)
        if len(outs) == 1:
            env["result"] = env.get("result0", env.get("result"))
        for rn, o in zip(cls._tn_ret_names, outs):
            env.setdefault(rn, _AgSaved(o, True, type(node).__name__, 0) if isinstance(o, TensorBase) else o)
        if saved_self is not None and saved_self is not _AG_NO_SAVED_SELF:
            # the formulas read `self` as it was before the write
            env["self"] = _AgSaved(saved_self)
        node._tn_env, node._tn_index = env, index
        node._tn_nouts = len(outs)
        node._tn_mask = {k: mask.get(k, False) for k in mask}
        # an input that requires grad but that no formula names: upstream's error at forward
        for n, on in mask.items():
            if on and not _b.any(n in names_ for names_, _, _ in cls._tn_formulas):
                raise RuntimeError(
                    f"The function '{type(node).__name__[:-len('Backward0')] or full}' is not "
                    f"differentiable with respect to argument '{n}'. This input cannot have "
                    "requires_grad True.")
    if not isinstance(node, _AgNode) or not node._tn_edges:
        # refusing nodes and nodes of operators with no differentiable input still link
        for n, v in zip(names, values):
            if isinstance(v, TensorBase) and v.requires_grad and not _b.any(o is v for o in outs):
                node._tn_edges.append(_ag_edge(v))
    if mutated and saved_self is not None and mutated[0]._base is not None:
        _ag_write_through_view(node, mutated[0])
        return
    for i, o in diff:
        o._tn_set_grad_fn(node, i)
        if _AG_WRITTEN_BASES and o._base is not None:
            # a view made after its base was written: its history already includes the write
            _ag_tracked(_AG_VIEW_WRITES, o, _ag_tracked(_AG_WRITTEN_BASES, o._base))


# ----- the engine ------------------------------------------------------------------------------

def _ag_add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return a + b


def _ag_run_hooks(tensor, grad):
    hooks = getattr(tensor, "_backward_hooks", None)
    if hooks:
        for h in _b.list(hooks.values()):
            r = h(grad)
            if r is not None:
                grad = r
    return grad


class _ImperativeEngine:
    def queue_callback(self, cb):
        self.__dict__.setdefault("_callbacks", []).append(cb)

    def is_checkpoint_valid(self):
        return True

    def run_backward(self, tensors, grad_tensors, keep_graph, create_graph, inputs=(),
                     allow_unreachable=False, accumulate_grad=True):
        tensors = _b.list(tensors)
        roots = []
        for i, t in enumerate(tensors):
            if t.grad_fn is None and not t.requires_grad:
                raise RuntimeError(
                    f"element {i} of tensors does not require grad and does not have a grad_fn")
            roots.append(_ag_edge(t))
        inputs = _b.list(inputs or ())
        # graph: every node reachable from the roots, in an order where a node comes after
        # every node that feeds it
        order, seen = [], set()
        leaf_nodes = {}

        def visit(node):
            stack = [(node, False)]
            while stack:
                n, done = stack.pop()
                if done:
                    order.append(n)
                    continue
                if id(n) in seen:
                    continue
                seen.add(id(n))
                stack.append((n, True))
                for e in n._tn_edges:
                    if e is not None and id(e[0]) not in seen:
                        stack.append((e[0], False))

        for node, _ in roots:
            visit(node)
        order.reverse()
        # where to capture gradients for `inputs` (autograd.grad) / which leaves to fill
        capture = {}
        for k, t in enumerate(inputs):
            if t.grad_fn is not None:
                capture.setdefault((id(t.grad_fn), t.output_nr), []).append(k)
            else:
                capture.setdefault(("leaf", id(t)), []).append(k)
        captured = [None] * len(inputs)
        buffers = {}
        # gradients a leaf's .grad may take over as they are (upstream steals a gradient nobody
        # else holds); the caller's own grad_tensors and one handed to another leaf are copied
        handed = {id(g) for g in grad_tensors if g is not None}
        for (node, nr), g in zip(roots, grad_tensors):
            buffers.setdefault(id(node), {})
            buffers[id(node)][nr] = _ag_add(buffers[id(node)].get(nr), g)
        prev_mode = _grad_enabled[0]
        _grad_enabled[0] = _b.bool(create_graph)
        try:
            for node in order:
                buf = buffers.pop(id(node), None)
                if buf is None:
                    continue
                if isinstance(node, _AgAccumulateGrad):
                    t = node.variable
                    g = _ag_run_hooks(t, buf.get(0))
                    for k in capture.get(("leaf", id(t)), ()):
                        captured[k] = _ag_add(captured[k], g)
                    if accumulate_grad and (not inputs or ("leaf", id(t)) in capture) and g is not None:
                        if t.grad is None:
                            if create_graph:
                                t.grad = g
                            elif id(g) in handed or not _ag_obeys_layout(g, t):
                                t.grad = _ag_clone_obeying_layout(g.detach(), t)
                            else:
                                t.grad = g.detach()
                            handed.add(id(g))
                        elif create_graph:
                            t.grad = t.grad + g
                        else:
                            # upstream accumulates into the existing .grad in place
                            t.grad.add_(g.detach())
                    continue
                # every output has a slot (None where no gradient came), as formulas index
                # grads[k] by output
                nouts = _b.max(_b.max(buf.keys()) + 1 if buf else 1, getattr(node, "_tn_nouts", 0))
                grads = [buf.get(i) for i in _b.range(nouts)]
                for ref in node._tn_hook_dicts:
                    t = ref()
                    if t is not None and t.output_nr < len(grads):
                        grads[t.output_nr] = _ag_run_hooks(t, grads[t.output_nr])
                        if getattr(t, "_tn_retains_grad", False) and grads[t.output_nr] is not None:
                            g = grads[t.output_nr]
                            t.grad = g.detach() if t.grad is None else (t.grad + g).detach()
                for i, g in enumerate(grads):
                    for k in capture.get((id(node), i), ()):
                        captured[k] = _ag_add(captured[k], g)
                for d in node._tn_prehooks:
                    for h in _b.list(d.values()):
                        r = h(_b.tuple(grads))
                        if r is not None:
                            grads = _b.list(r)
                if inputs and not accumulate_grad and not self._tn_needed(node, capture):
                    continue
                outs = node._tn_apply(grads)
                for d in node._tn_hooks:
                    for h in _b.list(d.values()):
                        r = h(_b.tuple(outs), _b.tuple(grads))
                        if r is not None:
                            outs = _b.list(r)
                if not keep_graph:
                    node._tn_free()
                for k, (e, g) in enumerate(zip(node._tn_edges, outs)):
                    if e is None or g is None:
                        continue
                    if k < len(node._tn_shapes):
                        # upstream's validate_outputs: a broadcast input's gradient is summed
                        # back to its shape and cast to its dtype
                        shape, dtype = node._tn_shapes[k]
                        if _b.tuple(g.shape) != shape:
                            g = sum_to(g, shape)
                        if g.dtype != dtype:
                            g = g.to(dtype)
                    nb = buffers.setdefault(id(e[0]), {})
                    nb[e[1]] = _ag_add(nb.get(e[1]), g)
        finally:
            _grad_enabled[0] = prev_mode
            cbs = self.__dict__.pop("_callbacks", [])
        for cb in cbs:
            cb()
        if inputs and not accumulate_grad:
            for k, (t, g) in enumerate(zip(inputs, captured)):
                if g is None and not allow_unreachable:
                    raise RuntimeError(
                        "One of the differentiated Tensors appears to not have been used in the "
                        "graph. Set allow_unused=True if this is the desired behavior.")
            return _b.tuple(captured)
        return ()

    def _tn_needed(self, node, capture):
        # does any input to capture lie below this node?
        stack, seen = [node], set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            if isinstance(n, _AgAccumulateGrad):
                if ("leaf", id(n.variable)) in capture:
                    return True
                continue
            if _b.any(k[0] == id(n) for k in capture if k[0] != "leaf"):
                if n is not node:
                    return True
            stack.extend(e[0] for e in n._tn_edges if e is not None)
        return False


def _ag_dense_strides(t):
    """Whether t's elements tile its storage span exactly (no gaps, no overlap)."""
    dims = sorted((st, n) for st, n in zip(t.stride(), t.shape) if n != 1)
    expected = 1
    for st, n in dims:
        if st != expected:
            return False
        expected *= n
    return True


def _ag_obeys_layout(g, t):
    """upstream's gradient layout contract: a dense variable's .grad has its strides, any
    other variable's .grad is contiguous."""
    if _ag_dense_strides(t):
        return _b.tuple(g.stride()) == _b.tuple(t.stride())
    return g.is_contiguous()


def _ag_clone_obeying_layout(g, t):
    if _ag_dense_strides(t):
        return g.new_empty_strided(_b.tuple(t.shape), _b.tuple(t.stride())).copy_(g)
    return g.clone(memory_format=_tn_ag_torch().contiguous_format)


def _tn_retain_grad(self):
    if self.grad_fn is None:
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        return
    if not getattr(self, "_tn_retains_grad", False):
        self._tn_retains_grad = True
        self.grad_fn._register_hook_dict(self)


TensorBase.retain_grad = _tn_retain_grad
TensorBase.retains_grad = property(lambda self: _b.bool(getattr(self, "_tn_retains_grad", False)))
TensorBase._grad_fn = property(lambda self: self.grad_fn)


class _FunctionBase:
    """torch.autograd.Function's C base: `apply` runs forward with a context and, when grad mode
    is on and an input requires grad, records a node whose backward is the Function's."""

    @classmethod
    def apply(cls, *args, **kwargs):
        from torch.autograd.function import _is_setup_context_defined

        backward_cls = getattr(cls, "_backward_cls", None)
        ctx = backward_cls() if backward_cls is not None else _FunctionBase()
        tensor_args = [a for a in args if isinstance(a, TensorBase)]
        recording = _grad_enabled[0] and _b.any(a.requires_grad for a in tensor_args)
        ctx.needs_input_grad = _b.tuple(isinstance(a, TensorBase) and a.requires_grad and recording
                                        for a in args)
        ctx._tn_args = args
        prev = _grad_enabled[0]
        _grad_enabled[0] = False
        try:
            if _is_setup_context_defined(cls.setup_context):
                outputs = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, outputs)
            else:
                outputs = cls.forward(ctx, *args, **kwargs)
        finally:
            _grad_enabled[0] = prev
        if not recording:
            return outputs
        node = ctx
        _AgNode.__init__(node)
        node._tn_fn_cls = cls
        node._tn_arg_edges = []
        for a in args:
            if isinstance(a, TensorBase) and a.requires_grad:
                node._tn_arg_edges.append(len(node._tn_edges))
                node._tn_edges.append(_ag_edge(a))
            else:
                node._tn_arg_edges.append(None)
        outs = outputs if isinstance(outputs, _b.tuple) else (outputs,)
        for i, o in enumerate(outs):
            if _ag_is_float_tensor(o):
                o._tn_set_grad_fn(node, i)
        return outputs

    def _tn_apply(self, grads):
        result = self._tn_fn_cls.backward(self, *grads)
        if not isinstance(result, _b.tuple):
            result = (result,)
        out = [None] * len(self._tn_edges)
        for k, e in enumerate(self._tn_arg_edges):
            if e is not None and k < len(result):
                out[e] = result[k]
        return out

    def _tn_free(self):
        self._tn_saved_freed = True

    @property
    def saved_tensors(self):
        return _b.tuple(getattr(self, "to_save", ()) or ())

    def name(self):
        return type(self).__name__


_FunctionBase._tn_hooks = ()
_FunctionBase._tn_prehooks = ()
_FunctionBase._tn_hook_dicts = ()
for _n in ("next_functions", "register_hook", "register_prehook", "_register_hook_dict", "metadata"):
    setattr(_FunctionBase, _n, getattr(_AgNode, _n))

def _tn_ag_grad_mode():
    return _grad_enabled[0]


def to_args_sizes(tensors):
    return [_b.list(t.shape) for t in tensors]


to_args_sizes_symint = to_args_sizes


def to_args_scalartypes(tensors):
    return [t.dtype for t in tensors]


def slice_backward_wrapper(grad, input_sizes, dim, start, end, step):
    # upstream's FunctionsManual: open bounds become 0 and INT64_MAX
    start = 0 if start is None else start
    end = 2 ** 63 - 1 if end is None else end
    return _tn_ag_aten("slice_backward")(grad, _b.list(input_sizes), dim, start, end, step)


def constant_pad_nd_backward(grad, pad):
    # padding by the negated amounts cuts the padded border off again
    return _tn_ag_torch().ops.aten.constant_pad_nd(grad, [-p for p in pad], 0)


def index_backward(zeros_like_self, indices, grad):
    # upstream's FunctionsManual: the gradient accumulated into zeros at the indexed places
    return zeros_like_self.index_put(indices, grad, True)


def stack_tensors_backward(grad, dim, dtypes):
    # upstream's FunctionsManual: input i's gradient is the slice i of the stacked dim
    if grad is None:
        return [None] * len(dtypes)
    out = []
    for i, dtype in enumerate(dtypes):
        g = grad.select(dim, i)
        out.append(g.real if grad.is_complex() and not dtype.is_complex else g)
    return out


def cat_tensors_backward(grad, sizes, dtypes, dim):
    # upstream's FunctionsManual: the gradient narrowed back into each input's extent (a
    # legacy empty 1-D input gets an empty gradient; complex grads give real inputs their
    # real part)
    if grad is None:
        return [None] * len(sizes)
    shaped = [s for s in sizes if not (len(s) == 1 and s[0] == 0)]
    rank = len(shaped[0]) if shaped else 1
    dim = dim + rank if dim < 0 else dim
    out, at = [], 0
    for shape, dtype in zip(sizes, dtypes):
        g = grad.real if grad.is_complex() and not dtype.is_complex else grad
        if len(shape) == 1 and shape[0] == 0:
            out.append(g.new_zeros((0,)))
            continue
        out.append(g.narrow(dim, at, shape[dim]))
        at += shape[dim]
    return out


def infinitely_differentiable_silu_backward(grad_output, input):
    # upstream's FunctionsManual: differentiable again (create_graph)
    sigmoid = input.sigmoid()
    return grad_output * sigmoid * (1.0 + input * (1.0 - sigmoid))


# upstream's CPU kernel scales by `scalar_t one_sixth(1.0f / 6.0f)`: 1/6 rounded to float32 even
# for float64 (-0.0833333358 for a gradient of -0.5, not -1/12)
_AG_ONE_SIXTH_F32 = __import__("struct").unpack("f", __import__("struct").pack("f", 1.0 / 6.0))[0]


def hardsigmoid_backward(grad_output, self):
    """aten::hardsigmoid_backward as upstream's CPU kernel computes it (the face has no kernel
    for it, and torch._decomp's divides by 6 exactly)."""
    inside = (self > -3.0) & (self < 3.0)
    return _tn_ag_torch().where(inside, grad_output * _AG_ONE_SIXTH_F32,
                                grad_output.new_zeros(()))


# ----- more of upstream's FunctionsManual, rewritten over the face's operators --------------------

def _ag_wrap_dims(dims, ndim):
    if dims is None:
        return []
    if isinstance(dims, _b.int):
        dims = [dims]
    return sorted((d + ndim if d < 0 else d) for d in dims)


def unsqueeze_multiple(t, dims, n_dims):
    for d in _ag_wrap_dims(dims, n_dims):
        t = t.unsqueeze(d)
    return t


def restore_reduced_dims(output, dims, keepdim):
    if keepdim:
        return output
    total = output.dim() + len(dims)
    target = [0] * total
    for d in dims:
        target[d + total if d < 0 else d] = 1
    j = 0
    for i in _b.range(total):
        if target[i] == 0:
            target[i] = output.shape[j]
            j += 1
    return output.reshape(target)


def scale_grad_by_count(grad, mask, dims):
    return (grad / mask.sum(_b.list(dims), True)) * mask


def evenly_distribute_backward(grad, input, value):
    mask = input.isnan() if _b.bool(value.isnan().item()) else input == value
    return grad.new_zeros(input.shape, dtype=input.dtype).masked_fill_(mask, grad / mask.sum())


def value_selecting_reduction_backward(grad, dim, indices, sizes, keepdim):
    # the gradient goes to the element each output value was selected from
    if not keepdim and len(sizes) > 0:
        grad = grad.unsqueeze(dim)
        indices = indices.unsqueeze(dim)
    return grad.new_zeros(_b.list(sizes)).scatter(dim, indices, grad)


def cummaxmin_backward(grad, input, indices, dim):
    if input.numel() == 0:
        return input
    return input.new_zeros(input.shape).scatter_add(dim, indices, grad)


def gather_backward(grad, self, dim, index, sparse_grad=False):
    return grad.new_zeros(self.shape).scatter_add(dim, index, grad)


def index_select_backward(grad, self_sizes, dim, index):
    if len(self_sizes) == 0:
        return grad.new_zeros(()).index_add(0, index, grad.reshape(-1)).reshape(())
    return grad.new_zeros(_b.list(self_sizes)).index_add(dim, index, grad)


def trace_backward(grad, sizes):
    torch = _tn_ag_torch()
    n, m = sizes[0], sizes[1]
    flat = grad.new_zeros((n * m,))
    diag = torch.arange(0, n * m, m + 1)[:_b.min(n, m)]
    return flat.index_fill(0, diag, grad).view(n, m)


def masked_select_backward(grad, input, mask):
    torch = _tn_ag_torch()
    shape = torch.broadcast_shapes(_b.tuple(input.shape), _b.tuple(mask.shape))
    return grad.new_zeros(shape, dtype=input.dtype).masked_scatter(mask, grad)


def masked_scatter_backward(grad, mask, sizes):
    torch = _tn_ag_torch()
    selected = grad.masked_select(mask)
    missing = _prod(sizes) - selected.numel()
    if missing > 0:
        selected = torch.cat([selected, selected.new_zeros((missing,))])
    return selected.view(_b.list(sizes))


def masked_fill_backward(grad, mask):
    return grad.masked_select(mask).sum()


def masked_fill_inplace_if_safe(t, mask, value):
    return t.masked_fill(mask, value)


def take_backward(grad, self, indices):
    n = self.numel()
    flat_index = indices.reshape(-1) % _b.max(n, 1)
    return self.new_zeros((n,)).index_add(0, flat_index, grad.reshape(-1)).view(self.shape)


def repeat_backward(grad, repeats, input_shape):
    repeats, input_shape = _b.list(repeats), _b.list(input_shape)
    if 0 in repeats:
        return grad.new_zeros(input_shape)
    lead = grad.dim() - len(input_shape)
    for _ in _b.range(lead):
        grad = grad.sum(0)
    size, sum_dims = [], []
    for d, n in enumerate(input_shape):
        r = repeats[d + lead]
        if r == 1:
            size.append(n)
            continue
        size.append(r)
        sum_dims.append(len(size) - 1)
        size.append(n)
    grad = grad.reshape(size)
    return grad.sum(sum_dims) if sum_dims else grad


def clamp_backward(grad, self, min=None, max=None):
    # measured on upstream 2.15's CPU: an element at a bound gets no gradient
    torch = _tn_ag_torch()
    zero = grad.new_zeros(())
    if min is not None and max is not None:
        return torch.where((self > min).logical_and(self < max), grad, zero)
    if min is not None:
        return torch.where(self > min, grad, zero)
    if max is not None:
        return torch.where(self < max, grad, zero)
    return grad


def _ag_prod_safe_zeros_backward(grad, inp, dim):
    torch = _tn_ag_torch()
    if inp.numel() == 0:
        return grad.expand_as(inp)
    if inp.shape[dim] == 1:
        return grad
    ones_size = _b.list(inp.shape)
    ones_size[dim] = 1
    ones = grad.new_ones(ones_size)
    n = inp.shape[dim]
    exclusive_normal = torch.cat([ones, inp.narrow(dim, 0, n - 1)], dim).cumprod(dim)
    exclusive_reverse = torch.cat([ones, inp.narrow(dim, 1, n - 1).flip(dim)], dim).cumprod(dim).flip(dim)
    return grad * (exclusive_normal * exclusive_reverse).conj()


def prod_backward(grad, input, result, dim=None, keepdim=False):
    if input.dim() == 0:
        return grad
    if dim is None:
        if not _b.bool((input == 0).any().item()):
            return grad * (result / input).conj()
        return _ag_prod_safe_zeros_backward(grad, input.contiguous().view(-1), 0).view_as(input)
    dim = dim + input.dim() if dim < 0 else dim
    if not keepdim:
        grad = grad.unsqueeze(dim)
        result = result.unsqueeze(dim)
    if not _b.bool((input == 0).any().item()):
        return grad * (result / input).conj()
    return _ag_prod_safe_zeros_backward(grad, input, dim)


def _ag_reversed_cumsum(x, dim):
    return x.flip(dim).cumsum(dim).flip(dim)


def cumsum_backward(grad, dim):
    if grad.numel() <= 1 or grad.shape[dim] == 1:
        return grad
    return _ag_reversed_cumsum(grad, dim)


def log1p_backward(grad, self):
    return grad / (self + 1).conj()


def deg2rad_backward(grad):
    return grad * 0.017453292519943295


def rad2deg_backward(grad):
    return grad * 57.29577951308232


def sinc_backward(grad, self):
    torch = _tn_ag_torch()
    self_pi = self * _AG_MATH["M_PI"]
    self_squared_pi = self * self * _AG_MATH["M_PI"]
    out = grad * ((self_pi * self_pi.cos() - self_pi.sin()) / self_squared_pi).conj()
    return torch.where(self_squared_pi == 0.0, grad.new_zeros(()), out)


def angle_backward(grad, self):
    if self.is_complex():
        raise NotImplementedError("torchnative: the backward of angle on a complex tensor is not implemented")
    return self.new_zeros(self.shape)


def copysign_tensor_self_backward(grad, self, result):
    ratio = result / self
    ratio = ratio.masked_fill(self == 0, 0)
    return grad * ratio


def atan2_backward(grad, self, other, output_mask):
    if grad is None:
        return (None, None)
    recip = (self * self + other * other).reciprocal()
    return (grad * other * recip if output_mask[0] else None,
            grad * -self * recip if output_mask[1] else None)


def logsumexp_backward(grad, self, result, dim, keepdim):
    if not keepdim and self.dim() != 0:
        grad = unsqueeze_multiple(grad, dim, self.dim())
        result = unsqueeze_multiple(result, dim, self.dim())
    return grad * (self - result).exp().conj()


def norm_backward(grad, self, p, norm, dim=(), keepdim=False):
    p = 2.0 if p is None else _b.float(p)
    dim = _b.list(dim)
    if not dim and not keepdim and self.dim() != 0:
        dim = _b.list(_b.range(self.dim()))
    if not keepdim and self.dim() != 0:
        grad = unsqueeze_multiple(grad, dim, self.dim())
        norm = unsqueeze_multiple(norm, dim, self.dim())
    if p == 0.0:
        return self.new_zeros(self.shape)
    if p == 1.0:
        return self.sgn() * grad
    if p == 2.0:
        return grad * (self / norm).masked_fill(norm == 0, 0)
    if p in (_b.float("inf"), -_b.float("inf")):
        both_nan = self.isnan().logical_and(norm.isnan())
        is_eq_max = (self.abs() == norm).logical_or(both_nan).type_as(norm)
        self_scaled = self.sign() * is_eq_max
        nb_max = is_eq_max.count_nonzero(dim if dim else None)
        if self.dim() != 0:
            nb_max = unsqueeze_multiple(nb_max, dim if dim else _b.list(_b.range(self.dim())), self.dim())
        return self_scaled * (grad / nb_max)
    if p < 1.0:
        self_scaled = self.sgn() * self.abs().pow(p - 1).masked_fill(self == 0, 0)
        return self_scaled * grad * norm.pow(1 - p)
    if p < 2.0:
        self_scaled = self.sgn() * self.abs().pow(p - 1)
    else:
        self_scaled = self * self.abs().pow(p - 2)
    scale_v = (grad / norm.pow(p - 1)).masked_fill(norm == 0, 0)
    return self_scaled * scale_v


def linalg_vector_norm_backward(grad, self, ord, result, dim, keepdim):
    return norm_backward(grad, self, ord, result, _b.list(dim) if dim is not None else [], keepdim)


def var_backward(grad, self, dim, correction, keepdim):
    torch = _tn_ag_torch()
    correction = 1.0 if correction is None else _b.float(correction)
    if self.dim() == 0 or dim is None:
        dof = self.numel() - correction
        if dof <= 0:
            return grad * torch.where(self == self.mean(), _b.float("nan"), _b.float("inf"))
        return (2.0 / dof) * grad * (self - self.mean())
    dim = _b.list(dim) if not isinstance(dim, _b.int) else [dim]
    if not keepdim and self.dim() > 1:
        grad = unsqueeze_multiple(grad, dim, self.dim())
    n = _prod(self.shape[d] for d in (dim or _b.range(self.dim())))
    return (2.0 / (n - correction)) * grad * (self - self.mean(dim or None, True)).conj()


def std_backward(result, grad, self, dim, correction, keepdim):
    grad_var = (grad / (result * 2)).masked_fill(result == 0, 0)
    return var_backward(grad_var, self, dim, correction, keepdim)


def _ag_plus_mean_part(gself, gmean, self, dim, keepdim):
    """The mean output's share of var_mean's / std_mean's gradient, added to `gself`."""
    if gmean is None:
        return gself
    aux = mean_backward(gmean, _b.list(self.shape), _b.list(dim) if dim is not None else [],
                        self.numel(), keepdim)
    return aux if gself is None else gself + aux


def var_mean_backward(gvar, gmean, self, dim, correction, keepdim):
    gself = None if gvar is None else var_backward(gvar, self, dim, correction, keepdim)
    return _ag_plus_mean_part(gself, gmean, self, dim, keepdim)


def std_mean_backward(gstd, gmean, self, std, dim, correction, keepdim):
    gself = None if gstd is None else std_backward(std, gstd, self, dim, correction, keepdim)
    return _ag_plus_mean_part(gself, gmean, self, dim, keepdim)


def hardshrink_backward(grad_out, self, lambd):
    torch = _tn_ag_torch()
    return torch.where((self >= -lambd).logical_and(self <= lambd), grad_out.new_zeros(()), grad_out)


softshrink_backward = hardshrink_backward


def nansum_backward(grad, self, dims, keepdim):
    if not keepdim and self.dim() != 0:
        grad = unsqueeze_multiple(grad, dims if dims else _b.list(_b.range(self.dim())), self.dim())
    return grad.expand(self.shape) * self.isnan().logical_not()


def split_with_sizes_backward(grads, split_sizes, dim, sizes, dtype):
    torch = _tn_ag_torch()
    sizes = _b.list(sizes)
    dim = dim + len(sizes) if dim < 0 else dim
    parts = []
    for g, n in zip(grads, split_sizes):
        if g is None:
            shape = _b.list(sizes)
            shape[dim] = n
            g = torch.zeros(shape, dtype=dtype)
        parts.append(g)
    return torch.cat(parts, dim)


def split_backward(grads, split_size, dim, sizes, dtype):
    sizes = _b.list(sizes)
    dim = dim + len(sizes) if dim < 0 else dim
    n = len(grads)
    split_sizes = [split_size] * n
    split_sizes[-1] = split_size - (split_size * n - sizes[dim])
    return split_with_sizes_backward(grads, split_sizes, dim, sizes, dtype)


def unbind_backward(grads, dim):
    torch = _tn_ag_torch()
    like = next(g for g in grads if g is not None)
    filled = [g if g is not None else like.new_zeros(()).expand(like.shape) for g in grads]
    return torch.stack(filled, dim)


def aminmax_backward(self, dim, keepdim, grad_min, grad_max, min, max):
    dims = [] if dim is None else [dim]
    out = None
    for g, v in ((grad_min, min), (grad_max, max)):
        if g is None:
            continue
        part = scale_grad_by_count(restore_reduced_dims(g, dims, keepdim),
                                   restore_reduced_dims(v, dims, keepdim) == self, dims)
        out = part if out is None else out + part
    return out


def cumprod_backward(grad, input, dim, output):
    if input.numel() <= 1:
        return grad
    dim = dim + input.dim() if dim < 0 else dim
    if _b.bool((input == 0).any().item()):
        raise NotImplementedError(
            "torchnative: the backward of cumprod over an input with zeros is not implemented")
    return _ag_reversed_cumsum(grad * output, dim) / input


def logcumsumexp_backward(grad, self, result, dim):
    torch = _tn_ag_torch()
    if grad.dim() == 0 or grad.numel() == 0:
        return grad
    if grad.is_complex():
        raise NotImplementedError(
            "torchnative: the backward of logcumsumexp on complex tensors is not implemented")

    def reverse_logcumsumexp(x):
        return x.flip(dim).logcumsumexp(dim).flip(dim)
    lowest = grad.new_full((), torch.finfo(grad.dtype).min)
    log_abs_grad = grad.abs().log()
    log_grad_positive = torch.where(grad > 0, log_abs_grad, lowest)
    log_grad_negative = torch.where(grad < 0, log_abs_grad, lowest)
    output_pos = (reverse_logcumsumexp(log_grad_positive - result) + self).exp()
    output_neg = (reverse_logcumsumexp(log_grad_negative - result) + self).exp()
    return output_pos - output_neg


def clamp_backward_min_max(grad, self, min, max, grad_input_mask):
    # the formula asks for (min, max)
    torch = _tn_ag_torch()
    g_min = g_max = None
    if grad is None:
        return (g_min, g_max)
    zero = grad.new_zeros(())
    want_min, want_max = (_b.list(grad_input_mask) + [False, False])[:2]
    if max is not None and min is not None:
        if want_min:
            g_min = torch.where((self < min).logical_and(min < max), grad, zero)
        if want_max:
            g_max = torch.where((self > max).logical_or(max < min), grad, zero)
    elif min is not None:
        if want_min:
            g_min = torch.where(self < min, grad, zero)
    elif max is not None:
        if want_max:
            g_max = torch.where(self > max, grad, zero)
    return (g_min, g_max)


def binary_cross_entropy_target_backward(grad, self, target, weight, reduction):
    grad_target = self.logit().neg() * grad
    if weight is not None:
        grad_target = grad_target * weight
    if reduction == 1:
        grad_target = grad_target / target.numel()
    return grad_target


def binary_cross_entropy_with_logits_backward(grad, input, target, weight, pos_weight, reduction):
    if pos_weight is not None:
        t = pos_weight.mul(target)
        grad_input = t.add(1).sub(target).mul(input.sigmoid()).sub(t)
    else:
        grad_input = input.sigmoid().sub(target)
    grad_input = grad_input.mul(grad)
    if weight is not None:
        grad_input = grad_input.mul(weight)
    if reduction == 1:
        grad_input = grad_input.div(input.numel())
    return grad_input


def binary_cross_entropy_with_logits_target_backward(grad, self, target, weight, pos_weight,
                                                     reduction):
    F = _tn_ag_torch().nn.functional
    if pos_weight is not None:
        grad_target = F.logsigmoid(-self).sub(F.logsigmoid(self).mul(pos_weight)).mul(grad)
    else:
        grad_target = -self * grad
    if weight is not None:
        grad_target = grad_target * weight
    if reduction == 1:
        grad_target = grad_target.div(target.numel())
    return grad_target


_AG_MATH = {"M_PI": 3.141592653589793, "M_PI_2": 1.5707963267948966, "M_PI_4": 0.7853981633974483,
            "M_LN2": 0.6931471805599453, "M_LN10": 2.302585092994046, "M_2_SQRTPI": 1.1283791670955126,
            "M_SQRT1_2": 0.7071067811865476, "M_SQRT2": 1.4142135623730951, "M_2_PI": 0.6366197723675814,
            "M_1_PI": 0.3183098861837907, "M_E": 2.718281828459045}


def _to_copy_backward(grad, dtype):
    if grad.is_complex() and not dtype.is_complex:
        grad = grad.real
    return grad.to(dtype)


_AG_GLOBALS = {"__builtins__": _b, "reversed": _b.reversed, "tuple": _b.tuple, "list": _b.list,
               "slice": _b.slice, "_to_copy_backward": _to_copy_backward}
_AG_GLOBALS.update(_AG_MATH)
for _n in ("unsqueeze_multiple", "restore_reduced_dims", "scale_grad_by_count",
           "evenly_distribute_backward", "value_selecting_reduction_backward", "cummaxmin_backward",
           "gather_backward", "index_select_backward", "trace_backward", "masked_select_backward",
           "masked_scatter_backward", "masked_fill_backward", "masked_fill_inplace_if_safe", "take_backward", "repeat_backward",
           "clamp_backward", "prod_backward", "cumsum_backward", "log1p_backward", "deg2rad_backward",
           "rad2deg_backward", "sinc_backward", "angle_backward", "copysign_tensor_self_backward",
           "atan2_backward", "logsumexp_backward", "norm_backward", "linalg_vector_norm_backward",
           "var_backward", "std_backward", "var_mean_backward", "std_mean_backward",
           "hardshrink_backward", "softshrink_backward", "nansum_backward",
           "split_with_sizes_backward", "split_backward", "unbind_backward", "aminmax_backward",
           "cumprod_backward", "logcumsumexp_backward", "clamp_backward_min_max",
           "binary_cross_entropy_target_backward", "binary_cross_entropy_with_logits_backward",
           "binary_cross_entropy_with_logits_target_backward", "cholesky_backward",
           "mvlgamma_backward", "i1_backward", "block_diag_backward", "scatter_reduce_backward",
           "cholesky_solve_backward", "linalg_solve_triangular_backward", "pinv_backward",
           "linalg_lstsq_backward", "linalg_qr_backward", "linalg_det_backward",
           "slogdet_backward", "linalg_solve_backward", "svd_backward", "linalg_eig_backward",
           "multi_margin_loss_backward", "lu_factor_ex_backward", "_cdist_backward",
           "_euclidean_dist_backward", "_pdist_backward", "replication_pad1d_backward",
           "replication_pad2d_backward", "replication_pad3d_backward",
           "_embedding_bag_backward", "_embedding_bag_per_sample_weights_backward",
           "wrap_opt_if", "_trilinear_backward", "TensorGeometry", "as_strided_backward"):
    _AG_GLOBALS[_n] = globals()[_n]
for _n in ("_tn_ag_grad_mode", "infinitely_differentiable_silu_backward", "hardsigmoid_backward",
           "_scaled_dot_product_flash_attention_for_cpu_backward",
           "to_args_sizes",
           "to_args_sizes_symint", "to_args_scalartypes", "cat_tensors_backward", "stack_tensors_backward",
           "slice_backward_wrapper", "index_backward", "_tn_ag_opt_sizes",
           "constant_pad_nd_backward",
           "handle_r_to_c", "maybe_multiply", "sum_to", "mul_tensor_backward",
           "div_tensor_self_backward", "div_tensor_other_backward", "mm_mat1_backward",
           "mm_mat2_backward", "matmul_backward", "linear_backward", "pow_backward",
           "pow_backward_self", "pow_backward_exponent", "mean_backward", "sum_backward",
           "permute_backwards", "unsqueeze_to", "not_implemented"):
    _AG_GLOBALS[_n] = globals()[_n]


class _AgEnv(dict):
    """A formula's names: its operator's arguments, grad(s), result(s), then our helpers, then
    the face's own aten operators (e.g. sigmoid_backward)."""

    def __missing__(self, key):
        if key in _AG_GLOBALS:
            return _AG_GLOBALS[key]
        # C++'s `foo_symint` is the operator `foo` (symbolic sizes are plain ints here)
        name = key[: -len("_symint")] if key.endswith("_symint") else key
        if name in _AG_GLOBALS:
            return _AG_GLOBALS[name]
        try:
            return _tn_ag_aten(name)
        except (AttributeError, RuntimeError):
            raise NameError(key) from None


# upstream keeps Python objects in the autograd engine's thread-local state
_AG_TLS = __import__("threading").local()


def _ag_tls():
    d = getattr(_AG_TLS, "objs", None)
    if d is None:
        d = _AG_TLS.objs = {}
    return d


def _stash_obj_in_tls(key, value):
    _ag_tls()[key] = value


def _remove_obj_from_tls(key):
    _ag_tls().pop(key, None)


def _get_obj_in_tls(key):
    return _ag_tls()[key]


def _is_key_in_tls(key):
    return key in _ag_tls()


class _AgUndefinedGradBackward(_AgNode):
    def _tn_apply(self, grads):
        return [None] * len(self._tn_edges)


_AgUndefinedGradBackward.__name__ = _AgUndefinedGradBackward.__qualname__ = "UndefinedGradBackward"


class _AgUndefinedGrad:
    """torch._C._functions.UndefinedGrad: an alias whose backward passes undefined gradients."""

    def __call__(self, *tensors):
        outs = []
        for t in tensors:
            r = t.detach()
            if t.requires_grad:
                node = _AgUndefinedGradBackward()
                node._tn_edges.append(_ag_edge(t))
                r._tn_set_grad_fn(node, 0)
            outs.append(r)
        return outs[0] if len(outs) == 1 else _b.tuple(outs)


class _functions:
    UndefinedGrad = _AgUndefinedGrad
    AccumulateGrad = _AgAccumulateGrad
