"""Autograd on the face (issue 12, first part): gradients golden-compared with upstream torch on
the same inputs, `torch.autograd.gradcheck` in float64, an MLP's `loss.backward()`, grad mode,
`detach`, `retain_grad`, hooks, `autograd.Function`, upstream's errors, and a self-test: with
every backward formula perturbed (TORCHNATIVE_AUTOGRAD_PERTURB) the comparison must reject every
case."""

import json
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_torch_face import _oracle  # noqa: E402

# Each case: (name, input shapes, positive inputs?, body computing the output from `a`, `b`, ...).
CASES = [
    ("add", [(3, 4), (4,)], False, "a + b"),
    ("add_alpha", [(3, 4), (3, 4)], False, "torch.add(a, b, alpha=2.5)"),
    ("add_scalar", [(3, 4)], False, "a + 1.5"),
    ("sub", [(3, 4), (1, 4)], False, "a - b"),
    ("sub_alpha", [(2, 3), (2, 3)], False, "torch.sub(a, b, alpha=0.5)"),
    ("rsub", [(2, 3)], False, "1.0 - a"),
    ("mul", [(3, 4), (3, 1)], False, "a * b"),
    ("mul_scalar", [(3, 4)], False, "a * 3.0"),
    ("div", [(3, 4), (4,)], True, "a / b"),
    ("div_scalar", [(3, 4)], False, "a / 4.0"),
    ("neg", [(5,)], False, "-a"),
    ("exp", [(3, 4)], False, "a.exp()"),
    ("log", [(3, 4)], True, "a.log()"),
    ("tanh", [(3, 4)], False, "a.tanh()"),
    ("sigmoid", [(3, 4)], False, "torch.sigmoid(a)"),
    ("relu", [(3, 4)], False, "torch.relu(a)"),
    ("pow_scalar", [(3, 4)], False, "a.pow(3)"),
    ("pow_tensor", [(3, 4), (3, 4)], True, "a.pow(b)"),
    ("pow_scalar_base", [(3,)], False, "torch.pow(2.0, a)"),
    ("sum", [(3, 4)], False, "a.sum()"),
    ("sum_dim", [(3, 4, 2)], False, "a.sum(1)"),
    ("sum_dims_keepdim", [(3, 4, 2)], False, "a.sum((0, 2), keepdim=True)"),
    ("mean", [(3, 4)], False, "a.mean()"),
    ("mean_dim", [(3, 4)], False, "a.mean(-1)"),
    ("mm", [(3, 4), (4, 5)], False, "a.mm(b)"),
    ("matmul_2d", [(3, 4), (4, 2)], False, "a @ b"),
    ("matmul_1d_2d", [(4,), (4, 2)], False, "a @ b"),
    ("matmul_2d_1d", [(3, 4), (4,)], False, "a @ b"),
    ("matmul_1d_1d", [(4,), (4,)], False, "a @ b"),
    ("matmul_batched_broadcast", [(2, 3, 4), (4, 5)], False, "torch.matmul(a, b)"),
    ("addmm", [(5,), (3, 4), (4, 5)], False, "torch.addmm(a, b, c, beta=0.5, alpha=2.0)"),
    ("view", [(3, 4)], False, "a.view(2, 6) * torch.arange(12.0, dtype=a.dtype).view(2, 6)"),
    ("reshape", [(3, 4)], False, "a.reshape(4, 3) * torch.arange(12.0, dtype=a.dtype).view(4, 3)"),
    ("t", [(3, 4)], False, "a.t() * torch.arange(12.0, dtype=a.dtype).view(4, 3)"),
    ("transpose", [(2, 3, 4)], False, "a.transpose(0, 2).exp()"),
    ("permute", [(2, 3, 4)], False, "a.permute(2, 0, 1).exp()"),
    ("expand", [(3, 1)], False, "a.expand(3, 4) * torch.arange(12.0, dtype=a.dtype).view(3, 4)"),
    ("unsqueeze", [(3, 4)], False, "a.unsqueeze(1).exp()"),
    ("squeeze", [(3, 1, 4)], False, "a.squeeze().exp()"),
    ("squeeze_dim", [(3, 1, 4)], False, "a.squeeze(1).exp()"),
    ("softmax", [(3, 5)], False, "torch.softmax(a, -1)"),
    ("log_softmax", [(3, 5)], False, "torch.nn.functional.log_softmax(a, dim=0)"),
    ("linear", [(6, 4), (3, 4), (3,)], False, "torch.nn.functional.linear(a, b, c)"),
    ("linear_nobias", [(2, 6, 4), (3, 4)], False, "torch.nn.functional.linear(a, b)"),
    ("chain", [(3, 4), (4, 4)], False, "((a @ b).tanh() * a.sigmoid() - a.exp() / 3).relu().pow(2)"),
    # indexing a tensor that requires grad records upstream's operators (select, slice,
    # unsqueeze, index); list inputs get one gradient per element
    ("getitem_slices", [(4, 5)], False, "a[1:3, ::2].exp()"),
    ("getitem_int_none", [(3, 4, 5)], False, "a[1, None, :, 2:].exp()"),
    ("getitem_ellipsis", [(3, 4, 5)], False, "a[..., -1].exp()"),
    ("getitem_advanced", [(5, 4)], False, "a[torch.tensor([0, 2, 2]), 1:].exp()"),
    ("cat_list", [(2, 3), (4, 3)], False, "torch.cat([a, b.exp()], 0)"),
    ("cat_legacy_empty", [(2, 3)], False, "torch.cat([torch.tensor([], dtype=a.dtype), a], -1).exp()"),
    ("stack_list", [(2, 3), (2, 3)], False, "torch.stack([a, b], -1).exp()"),
    ("sdpa_gqa_causal", [(1, 4, 5, 8), (1, 2, 5, 8), (1, 2, 5, 8)], False,
     "torch.nn.functional.scaled_dot_product_attention(a, b, c, is_causal=True, enable_gqa=True)"),
    ("cross_entropy", [(6, 5)], False,
     "torch.nn.functional.cross_entropy(a, torch.tensor([0, 4, 1, 1, 3, 2]), reduction='none')"),
    ("cross_entropy_label_smoothing", [(6, 5)], False,
     "torch.nn.functional.cross_entropy(a, torch.tensor([0, 4, -100, 1, 3, 2]), "
     "weight=torch.linspace(0.5, 2.0, 5, dtype=a.dtype), label_smoothing=0.2)"),
    ("cross_entropy_probabilities", [(2, 5, 3)], False,
     "torch.nn.functional.cross_entropy(a, torch.softmax(torch.arange(30.0, dtype=a.dtype).view(2, 5, 3).cos(), 1), "
     "label_smoothing=0.1, reduction='none')"),
    ("silu", [(3, 4)], False, "torch.nn.functional.silu(a)"),
    ("flatten", [(2, 3, 4)], False, "a.flatten(1).exp()"),
    ("max_pool2d", [(1, 2, 4, 6)], False, "torch.nn.functional.max_pool2d(a, 2)"),
    ("conv2d", [(2, 3, 6, 5), (4, 3, 3, 2), (4,)], False, "torch.nn.functional.conv2d(a, b, c)"),
    ("conv2d_stride_pad_dilation", [(1, 2, 7, 6), (3, 2, 2, 3)], False,
     "torch.nn.functional.conv2d(a, b, stride=(2, 1), padding=(1, 2), dilation=(2, 1))"),
    ("conv2d_groups", [(2, 4, 5, 5), (6, 2, 3, 3), (6,)], False,
     "torch.nn.functional.conv2d(a, b, c, padding=1, groups=2)"),
    ("conv1d_same_unbatched", [(3, 9), (2, 3, 4)], False, "torch.nn.functional.conv1d(a, b, padding='same')"),
    ("conv_transpose2d", [(2, 4, 3, 4), (4, 3, 3, 2), (6,)], False,
     "torch.nn.functional.conv_transpose2d(a, b, c, stride=2, padding=1, output_padding=1, groups=2)"),
    ("conv_transpose1d_dilated", [(1, 2, 5), (2, 3, 3)], False,
     "torch.nn.functional.conv_transpose1d(a, b, stride=3, padding=2, dilation=2)"),
    ("layer_norm", [(3, 4, 5), (5,), (5,)], False, "torch.nn.functional.layer_norm(a, (5,), b, c)"),
    ("batch_norm_training", [(4, 3, 2, 2), (3,), (3,)], False,
     "torch.nn.functional.batch_norm(a, torch.zeros(3, dtype=a.dtype), torch.ones(3, dtype=a.dtype), b, c, training=True)"),
    ("batch_norm_eval", [(4, 3), (3,), (3,)], False,
     "torch.nn.functional.batch_norm(a, torch.full((3,), 0.5, dtype=a.dtype), torch.full((3,), 2.0, dtype=a.dtype), b, c)"),
    ("rms_norm", [(3, 4, 5), (5,)], False, "torch.nn.functional.rms_norm(a, (5,), b)"),
]

# matmul and linear are CompositeImplicitAutograd upstream: upstream records the operators its
# C++ body runs (MmBackward0, AddmmBackward0, ...); the face records the operator itself with
# derivatives.yaml's formula for it (upstream's nested-tensor path). Their gradients are compared;
# the node names are not.
IMPLICIT = {"matmul_2d", "matmul_1d_2d", "matmul_2d_1d", "matmul_1d_1d", "matmul_batched_broadcast",
            "linear", "linear_nobias", "sdpa_gqa_causal"}

GOLDEN_CODE = r"""
import json, sys, torch
cases = json.loads(sys.argv[1])
dtype = getattr(torch, sys.argv[2])
out = {}
for name, shapes, positive, body in cases:
    torch.manual_seed(len(name))
    xs = [torch.randn(s, dtype=dtype) for s in shapes]
    if positive:
        xs = [x.abs() + 0.5 for x in xs]
    xs = [x.requires_grad_() for x in xs]
    env = dict(zip("abcd", xs), torch=torch)
    y = eval(body, env)
    w = torch.linspace(-1.0, 2.0, y.numel(), dtype=dtype).reshape(y.shape)
    (y * w).sum().backward()
    out[name] = {"y": y.detach().reshape(-1).tolist(), "grads": [x.grad.reshape(-1).tolist() for x in xs],
                 "node": type(y.grad_fn).__name__}
print(json.dumps(out))
"""


def _run(python, code, *args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    out = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=e)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


def _close(a, b, tol):
    return len(a) == len(b) and all(abs(x - y) <= tol * (1 + abs(y)) for x, y in zip(a, b))


def _disagreements(face, upstream, tol):
    bad = []
    for name, want in upstream.items():
        got = face.get(name)
        if got is None or not _close(got["y"], want["y"], tol):
            bad.append((name, "forward"))
        elif got["node"] != want["node"] and name not in IMPLICIT:
            bad.append((name, f"grad_fn {got['node']} != {want['node']}"))
        elif len(got["grads"]) != len(want["grads"]) or not all(
                _close(g, w, tol) for g, w in zip(got["grads"], want["grads"])):
            bad.append((name, "gradient"))
    return bad


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
def test_gradients_match_upstream(dtype, tol):
    oracle = _oracle()
    cases = json.dumps(CASES)
    upstream = _run(oracle, GOLDEN_CODE, cases, dtype)
    face = _run(sys.executable, GOLDEN_CODE, cases, dtype)
    assert len(upstream) == len(CASES)
    assert _disagreements(face, upstream, tol) == []


def test_self_test_perturbed_formulas_are_rejected():
    """Every formula's gradient scaled by 1 + 1e-6: the comparison must reject every case."""
    oracle = _oracle()
    cases = json.dumps(CASES)
    upstream = _run(oracle, GOLDEN_CODE, cases, "float64")
    face = _run(sys.executable, GOLDEN_CODE, cases, "float64",
                env={"TORCHNATIVE_AUTOGRAD_PERTURB": "1e-6"})
    rejected = {name for name, why in _disagreements(face, upstream, 1e-10)}
    assert rejected == {c[0] for c in CASES}


def test_gradcheck_float64():
    import torch

    for name, shapes, positive, body in CASES:
        torch.manual_seed(len(name))
        xs = [torch.randn(s, dtype=torch.float64) for s in shapes]
        if positive:
            xs = [x.abs() + 0.5 for x in xs]
        xs = [x.requires_grad_() for x in xs]

        def f(*args, body=body):
            return eval(body, dict(zip("abcd", args), torch=torch))

        assert torch.autograd.gradcheck(f, tuple(xs)), name


MLP_CODE = r"""
import json, torch
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16), torch.nn.Tanh(),
                        torch.nn.Linear(16, 4))
x = torch.randn(10, 8)
target = torch.randn(10, 4).softmax(-1)
logp = torch.log_softmax(m(x), -1)
loss = -(target * logp).sum(-1).mean() + 0.01 * sum((p * p).sum() for p in m.parameters())
loss.backward()
print(json.dumps({"loss": loss.item(), "grads": {n: p.grad.reshape(-1).tolist() for n, p in m.named_parameters()},
                  "next": [type(f).__name__ for f, _ in loss.grad_fn.next_functions]}))
"""


def test_mlp_backward_matches_upstream():
    oracle = _oracle()
    want = _run(oracle, MLP_CODE)
    got = _run(sys.executable, MLP_CODE)
    assert abs(got["loss"] - want["loss"]) <= 1e-5
    assert got["next"] == want["next"]
    assert got["grads"].keys() == want["grads"].keys()
    for n in want["grads"]:
        assert _close(got["grads"][n], want["grads"][n], 1e-4), n


BEHAVIOUR_CODE = r"""
import json, torch
r = {}
x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
with torch.no_grad():
    y = x * 2
r["no_grad"] = [y.requires_grad, y.grad_fn is None, torch.is_grad_enabled()]
with torch.no_grad():
    with torch.enable_grad():
        z = x * 2
r["enable_grad"] = [z.requires_grad, type(z.grad_fn).__name__]
d = (x * 3).detach()
r["detach"] = [d.requires_grad, d.is_leaf, d.grad_fn is None, x.is_leaf, (x * 3).is_leaf]
h = x * x
h.retain_grad()
(h * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
r["retain_grad"] = [h.grad.tolist(), x.grad.tolist(), h.retains_grad]
x.grad = None
seen = []
x.register_hook(lambda g: seen.append(g.tolist()))
u = x.exp()
u.register_hook(lambda g: g * 10)
u.sum().backward()
r["hooks"] = [seen, x.grad.tolist()]
w = torch.ones(3)
v = x * w
w.add_(1)
try:
    v.sum().backward()
    r["inplace"] = "no error"
except RuntimeError as e:
    r["inplace"] = str(e)
e = x.exp()
f = e.sum()
f.backward()
try:
    f.backward()
    r["twice"] = "no error"
except RuntimeError as err:
    r["twice"] = str(err)
g = x.sigmoid().sum()
g.backward(retain_graph=True)
first = x.grad.clone()
g.backward()
r["retain_graph"] = torch.allclose(x.grad, 2 * first)
try:
    torch.tensor([1.0]).sum().backward()
    r["no_grad_fn"] = "no error"
except RuntimeError as err:
    r["no_grad_fn"] = str(err)
try:
    x.add_(1)
    r["leaf_inplace"] = "no error"
except RuntimeError as err:
    r["leaf_inplace"] = str(err)
a = torch.tensor([0.5, 1.5], requires_grad=True)
ga, = torch.autograd.grad((a * a * a).sum(), a, create_graph=True)
gga, = torch.autograd.grad(ga.sum(), a)
r["grad_create_graph"] = [ga.tolist(), gga.tolist()]
class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t ** 3
    @staticmethod
    def backward(ctx, go):
        t, = ctx.saved_tensors
        return go * 3 * t ** 2
c = torch.tensor([1.0, 2.0], requires_grad=True)
Cube.apply(c * 2).sum().backward()
r["function"] = [c.grad.tolist(), type(Cube.apply(c).grad_fn).__name__]
import threading
# grad mode and inference mode are per thread: another thread's no_grad does not stop this
# thread recording, and a new thread starts with grad mode on whatever its creator's mode
inside, go_on = threading.Event(), threading.Event()
seen_by = {}
def other():
    seen_by["start"] = torch.is_grad_enabled()
    with torch.no_grad():
        inside.set()
        go_on.wait()
t = threading.Thread(target=other)
t.start()
inside.wait()
recorded = (x * 2).sum().grad_fn is not None
go_on.set()
t.join()
with torch.inference_mode():
    u = threading.Thread(target=lambda: seen_by.update(new=[torch.is_grad_enabled(), torch.is_inference_mode_enabled()]))
    u.start()
    u.join()
r["threads"] = [seen_by["start"], recorded, seen_by["new"]]
print(json.dumps(r))
"""


def test_grad_mode_detach_hooks_and_errors_match_upstream():
    oracle = _oracle()
    want = _run(oracle, BEHAVIOUR_CODE)
    got = _run(sys.executable, BEHAVIOUR_CODE)
    assert "is at version 1; expected version 0 instead" in want["inplace"]
    for key in want:
        assert got[key] == want[key], key


def test_what_autograd_cannot_do_refuses_by_name_at_backward():
    import torch

    x = torch.randn(4, 3, requires_grad=True)
    # an operator upstream itself has no formula for gets upstream's node and error, not ours
    h = torch.heaviside(x, torch.ones(3))
    assert type(h.grad_fn).__name__ == "NotImplemented"
    with pytest.raises(RuntimeError, match=r"^derivative for aten::heaviside is not implemented$"):
        h.sum().backward()
    # upstream's error for a view of a leaf
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad"):
        x[0].mul_(3)


# Node names `depth` deep, for the scripts below (edges of inputs that do not require grad are
# left out: the face does not keep them).
NAMES_CODE = r"""
import json, torch
r = {}
def names(node, depth=3):
    if node is None or depth == 0:
        return None
    return [type(node).__name__,
            [names(n, depth - 1) for n, _ in node.next_functions if n is not None]]
"""

VIEW_WRITES_CODE = NAMES_CODE + r"""
import torch.nn.functional as F
x = torch.arange(1.0, 7.0, dtype=torch.float64).reshape(2, 3).requires_grad_()
w = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
# a formula that reads self (mul by a tensor that requires grad) through a select view
t = x * 1
t[0].mul_(w)
r["mul_view"] = [names(t.grad_fn), type(t[0].grad_fn).__name__]
t.backward(torch.arange(6.0, dtype=torch.float64).reshape(2, 3))
r["mul_view_grads"] = [x.grad.tolist(), w.grad.tolist()]
x.grad = w.grad = None
# two writes through slices, a view made before them and read after (its values changed)
t = x * 2
before = t[:, 1]
t[:, :2].add_(w[:2] * 3)
t[1].copy_(w)
y = (before * torch.tensor([1.0, 10.0], dtype=torch.float64)).sum() + (t * t).sum()
r["chain"] = [names(t.grad_fn, 4), y.item()]
y.backward()
r["chain_grads"] = [x.grad.tolist(), w.grad.tolist()]
x.grad = w.grad = None
# a buffer that does not require grad, filled through views (as pad's circular mode does)
buf = torch.zeros(3, 3, dtype=torch.float64)
buf[:, 1:].copy_(x.t() * 2)
buf[:, 0] = w
r["fill"] = [buf.requires_grad, buf.is_leaf, names(buf.grad_fn)]
(buf * torch.arange(9.0, dtype=torch.float64).reshape(3, 3)).sum().backward()
r["fill_grads"] = [x.grad.tolist(), w.grad.tolist()]
x.grad = w.grad = None
# copy_ of a broadcast float32 source into a float64 tensor with history
z = x * 1
z.copy_(w.float()[None, :] * 1)
r["copy"] = names(z.grad_fn)
z.sum().backward()
r["copy_grads"] = [x.grad.tolist(), w.grad.tolist()]
# assignment through index tensors and masks: index_put_ on the (basic) view
t = x * 1
t[torch.tensor([1, 0]), 1:] = w[:2] * 5
t[t > 8] = 0.0
t[:, torch.tensor([2])] = w[None, :2, None]
r["index_put"] = [names(t.grad_fn), t.tolist()]
t.backward(torch.arange(6.0, dtype=torch.float64).reshape(2, 3))
r["index_put_grads"] = [x.grad.tolist(), w.grad.tolist()]
x.grad = w.grad = None
# one version counter per base: writes through views bump it; a saved base written through a
# view fails backward with upstream's error
a = torch.zeros(2, 3, dtype=torch.float64)
v = a[1]
vs = [a._version, v._version]
v.add_(1.0); vs += [a._version, v._version]
a.mul_(2.0); vs += [a._version, v._version]
a[0] = 3.0; vs += [a._version, v._version]
a.copy_(a + 1); vs += [a._version, v._version]
r["versions"] = vs
t = x * 1
y = (t * w).sum()
t[0].zero_()
try:
    y.backward()
    r["saved_written"] = "no error"
except RuntimeError as e:
    r["saved_written"] = str(e).split(" Hint")[0]
x.grad = w.grad = None
# circular padding, 1-d and 2-d
for k, (shape, pad) in enumerate([((1, 2, 4), (1, 2)), ((1, 1, 3, 4), (2, 1, 1, 3))]):
    a = torch.arange(1.0, 1.0 + torch.Size(shape).numel(), dtype=torch.float64).reshape(shape)
    a.requires_grad_()
    p = F.pad(a, pad, mode="circular")
    p.backward(torch.arange(p.numel(), dtype=torch.float64).reshape(p.shape) % 5)
    r["pad%d" % k] = [p.tolist(), type(p.grad_fn).__name__, a.grad.tolist()]
print(json.dumps(r))
"""


def test_writes_through_views_take_upstreams_copyslices():
    """In-place writes through views of tensors with history, or that make a buffer part of
    the graph: upstream's CopySlices on the base, the view's regenerated history, gradients
    equal to upstream's; copy_ (CopyBackwards) and circular padding, which upstream builds from
    such writes."""
    want = _run(_oracle(), VIEW_WRITES_CODE)
    got = _run(sys.executable, VIEW_WRITES_CODE)
    for key in want:
        assert got[key] == want[key], key


EINSUM_CODE = NAMES_CODE + r"""
g = torch.Generator().manual_seed(0)
def leaf(*shape):
    return torch.randn(*shape, generator=g, dtype=torch.float64).requires_grad_()
cases = [
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 2)]), ("ij,j->i", [(4, 3), (3,)]),
    ("ii,j->j", [(3, 3), (4,)]), ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->", [(2, 3)]),
    ("ij,jk", [(2, 3), (3, 5)]), ("i,j->ij", [(3,), (4,)]), ("i,i->", [(5,), (5,)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 4), (1, 2, 5, 4)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]), ("a...,...b->ab", [(2, 3, 4), (3, 4, 5)]),
    ("iij,kj->ik", [(3, 3, 2), (4, 2)]), ("ji,kj", [(3, 2), (4, 3)]), ("Ab,bC->CA", [(2, 3), (3, 4)]),
]
for eq, shapes in cases:
    xs = [leaf(*s) for s in shapes]
    y = torch.einsum(eq, *xs)
    gy = torch.arange(y.numel(), dtype=torch.float64).reshape(y.shape) % 3 - 1
    y.backward(gy)
    r[eq] = [y.tolist(), names(y.grad_fn, 4), [x.grad.tolist() for x in xs]]
x, w = leaf(2, 3), leaf(3, 4)
r["path"] = torch.einsum("ij,jk,kl->il", x, w, leaf(4, 2)).shape[0]
for bad in [("ij,jk->ik", [(2, 3), (4, 5)]), ("ij->i", [(2, 3, 4)]), ("ij,j->k", [(2, 3), (3,)])]:
    try:
        torch.einsum(bad[0], *[leaf(*s) for s in bad[1]])
        r[bad[0]] = "no error"
    except RuntimeError as e:
        r[bad[0]] = type(e).__name__
print(json.dumps(r))
"""


def _close_nested(a, b, tol=1e-12):
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_close_nested(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float):
        return isinstance(b, float) and abs(a - b) <= tol * (1 + abs(b))
    return a == b


def test_einsum_records_upstreams_decomposition():
    """einsum under autograd as upstream's CompositeImplicitAutograd body: the same recorded
    nodes (permute, bmm, view, diagonal, sum), values and gradients, for batched, broadcast,
    ellipsis, implicit-output, repeated-label and three-operand equations; bad ones raise."""
    want = _run(_oracle(), EINSUM_CODE)
    got = _run(sys.executable, EINSUM_CODE)
    for key in want:
        assert _close_nested(got[key], want[key]), (key, got[key], want[key])


def test_in_place_operators_on_graph_tensors_record_the_out_of_place_formula():
    import torch

    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = torch.tensor([3.0, 0.25, -2.0], requires_grad=True)
    z = x * 2
    z.mul_(w)  # the formula for w reads z as it was before the write
    assert type(z.grad_fn).__name__ == "MulBackward0"
    z.exp_()
    assert type(z.grad_fn).__name__ == "ExpBackward0"
    z.sum().backward()
    e = (2 * x.detach() * w.detach()).exp()
    assert torch.allclose(x.grad, e * 2 * w.detach())
    assert torch.allclose(w.grad, e * 2 * x.detach())
    # a tensor a formula saved, then written in place: upstream's error at backward
    a = x.exp()
    a.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        a.sum().backward()


def test_leaf_gradients_follow_upstreams_layout_contract_and_are_not_aliased():
    import torch

    # .grad has the leaf's own strides (here a transposed leaf), not the incoming gradient's
    x = torch.randn(4, 3).t().detach().requires_grad_()
    x.sum().backward()
    assert x.grad.stride() == x.stride() and x.grad.tolist() == [[1.0] * 4] * 3
    # the caller's gradient is copied, not kept: changing it later does not change .grad
    y = torch.randn(2, 3, requires_grad=True)
    g = torch.ones(2, 3)
    (y + 0).backward(g)
    g.mul_(5)
    assert y.grad.tolist() == [[1.0] * 3] * 2
    # one gradient reaching two leaves gives each its own tensor
    a = torch.randn(3, requires_grad=True)
    b = torch.randn(3, requires_grad=True)
    (a + b).sum().backward()
    a.grad.zero_()
    assert b.grad.tolist() == [1.0, 1.0, 1.0]
    # a second backward accumulates into the same .grad tensor, as upstream's does
    held = b.grad
    (a + b).sum().backward()
    assert b.grad is held and held.tolist() == [2.0, 2.0, 2.0]



def test_formulas_come_from_derivatives_yaml():
    import torch

    table = torch._C._ag_table()
    assert len(table) > 600
    name, formulas, sig, _, _ = table["aten::mul.Tensor"]
    assert name == "MulBackward0" and formulas["self"] == "mul_tensor_backward(grad, other, self.scalar_type())"
    # C++ to Python: namespaces, ternaries, braces, std::tuple
    py = torch._C._ag_translate("at::where(x > 0, {x, 1}, std::tuple<Tensor, Tensor>()) ? !flag && x > 1 : false")
    assert eval(py, {"where": lambda *a: a, "x": 2, "flag": False}) is True
    # output_differentiability: [False] (view.dtype): the result is out of the graph, as upstream's
    v = (torch.ones(4, requires_grad=True) * 2).view(torch.bfloat16)
    assert v.requires_grad is False and v.grad_fn is None
    # upstream's numbering: the n-th entry of the same operator name (mul.Tensor, mul.Scalar)
    assert type(torch.ops.aten.mul.Scalar(torch.ones(2, requires_grad=True), 2).grad_fn).__name__ == "MulBackward1"


MODULE_HOOK_CODE = r"""
import json, torch
torch.manual_seed(0)
m = torch.nn.Linear(3, 2)
got = []
m.register_full_backward_hook(lambda mod, gi, go: got.append([gi[0].reshape(-1).tolist(), go[0].reshape(-1).tolist()]))
pre = []
m.register_full_backward_pre_hook(lambda mod, go: pre.append(go[0].reshape(-1).tolist()))
x = torch.randn(4, 3, requires_grad=True)
m(x).pow(2).sum().backward()
print(json.dumps({"hook": got, "pre": pre, "x": x.grad.reshape(-1).tolist(), "w": m.weight.grad.reshape(-1).tolist()}))
"""


def test_module_backward_hooks_match_upstream():
    oracle = _oracle()
    want = _run(oracle, MODULE_HOOK_CODE)
    got = _run(sys.executable, MODULE_HOOK_CODE)
    assert len(got["hook"]) == len(want["hook"]) == 1 and len(got["pre"]) == len(want["pre"]) == 1
    for g, w in zip(got["hook"][0] + got["pre"] + [got["x"], got["w"]],
                    want["hook"][0] + want["pre"] + [want["x"], want["w"]]):
        assert _close(g, w, 1e-5)
