"""A user's own `nn.Module`s on the face, against upstream torch: a small CNN and a small
transformer block written here, seeded the same way, must get upstream's initial weights
(the same Generator stream through upstream's `reset_parameters`) and upstream's outputs
within a tolerance derived from upstream's own float32 error; state dicts cross between the
two through `torch.save` / `torch.load` in both directions; `DataLoader` gives upstream's
batches with `num_workers=0` and `2` (worker processes pass batches through shared memory).
"""
import os
import subprocess
import sys

import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_torch_face import _oracle  # noqa: E402

MODULES = r'''
import torch
from torch import nn
import torch.nn.functional as F


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.pool = nn.AdaptiveAvgPool2d((2, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.gelu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1)).log_softmax(-1)


class Block(nn.Module):
    """A pre-norm transformer block: causal multi-head attention and a SwiGLU MLP."""

    def __init__(self, dim=32, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.RMSNorm(dim)
        self.gate = nn.Linear(dim, 2 * dim, bias=False)
        self.up = nn.Linear(dim, 2 * dim, bias=False)
        self.down = nn.Linear(2 * dim, dim, bias=False)
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        a = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        h = self.norm2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        m, _ = self.mha(x, x, x, attn_mask=mask, need_weights=False)
        return x + m


def build(dtype):
    torch.manual_seed(0)
    cnn, block = SmallCNN().eval(), Block().eval()
    # Non-trivial running statistics, so eval-mode batch norm does real work.
    cnn.bn1.running_mean.uniform_(-0.5, 0.5)
    cnn.bn1.running_var.uniform_(0.5, 1.5)
    images = torch.randn(2, 3, 16, 16)
    tokens = torch.randn(2, 7, 32)
    return cnn.to(dtype), block.to(dtype), images.to(dtype), tokens.to(dtype)


def run(dtype, out):
    cnn, block, images, tokens = build(dtype)
    with torch.no_grad():
        result = {"cnn": cnn(images), "block": block(tokens)}
    state = {f"cnn.{k}": v for k, v in cnn.state_dict().items()}
    state.update({f"block.{k}": v for k, v in block.state_dict().items()})
    torch.save({"outputs": result, "state": state}, out)


def run_loaded(path, out):
    """Loads the other side's state dicts into fresh modules and runs them."""
    cnn, block, images, tokens = build(torch.float32)
    saved = torch.load(path)["state"]
    cnn.load_state_dict({k[4:]: v for k, v in saved.items() if k.startswith("cnn.")})
    block.load_state_dict({k[6:]: v for k, v in saved.items() if k.startswith("block.")})
    with torch.no_grad():
        torch.save({"cnn": cnn(images), "block": block(tokens)}, out)
'''

LOADER = r'''
import sys
import torch
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    """Samples computed in the worker: a tensor, a label and a dict."""

    def __len__(self):
        return 23

    def __getitem__(self, i):
        x = torch.arange(6, dtype=torch.float32).view(2, 3) * i
        # Exact arithmetic: this compares batching, not rounding (upstream's vectorised sqrt
        # is not correctly rounded on every CPU).
        return x * 0.25 + 1, i % 3, {"id": torch.tensor(i), "mask": x > 10}


out, workers = sys.argv[1], int(sys.argv[2])
g = torch.Generator().manual_seed(7)
loader = DataLoader(Squares(), batch_size=4, shuffle=True, generator=g, num_workers=workers)
batches = []
for x, label, extra in loader:
    batches.append([x, label, extra["id"], extra["mask"]])
torch.save(batches, out)
'''


def _side(python, code, *args, cwd):
    done = subprocess.run([python, "-c", code, *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def _run_modules(python, tmp_path, call):
    (tmp_path / "modules.py").write_text(MODULES)
    _side(python, f"import sys, torch; sys.path.insert(0, '.'); import modules; modules.{call}", cwd=tmp_path)


def _tolerance_error(face, up32, up64):
    """How far the face is from upstream's float32 result, against upstream's own float32
    error (its distance from its float64 run)."""
    ours = (face.double() - up32.double()).abs().max().item()
    upstream_error = (up32.double() - up64.double()).abs().max().item()
    return ours, upstream_error


def test_user_modules_match_upstream_weights_and_outputs(tmp_path):
    oracle = _oracle()
    _run_modules(oracle, tmp_path, "run(torch.float32, 'up32.pt')")
    _run_modules(oracle, tmp_path, "run(torch.float64, 'up64.pt')")
    _run_modules(sys.executable, tmp_path, "run(torch.float32, 'face.pt')")
    up32, up64, face = (torch.load(tmp_path / n) for n in ("up32.pt", "up64.pt", "face.pt"))
    # Same seed, same initialisers: bit-identical weights and buffers.
    assert face["state"].keys() == up32["state"].keys()
    for name, value in up32["state"].items():
        assert face["state"][name].dtype == value.dtype, name
        assert torch.equal(face["state"][name], value), name
    for name in ("cnn", "block"):
        ours, upstream_error = _tolerance_error(face["outputs"][name], up32["outputs"][name],
                                                up64["outputs"][name])
        # Two float32 computations, each about upstream_error from the exact result.
        assert ours <= 4 * max(upstream_error, 1e-7), (name, ours, upstream_error)


def test_state_dicts_cross_between_face_and_upstream(tmp_path):
    oracle = _oracle()
    _run_modules(oracle, tmp_path, "run(torch.float32, 'up.pt')")
    _run_modules(sys.executable, tmp_path, "run(torch.float32, 'face.pt')")
    # Perturb the face's weights, so loading them is observable, and save them from the face.
    state = torch.load(tmp_path / "face.pt")["state"]
    state = {k: (v * 1.5 if v.is_floating_point() else v) for k, v in state.items()}
    torch.save({"state": state}, tmp_path / "face_state.pt")
    # Upstream loads the face's file; the face loads the file upstream wrote back.
    _run_modules(oracle, tmp_path, "run_loaded('face_state.pt', 'up_loaded.pt')")
    _side(oracle, "import torch, sys; s = torch.load('face_state.pt'); torch.save(s, 'up_state.pt')",
          cwd=tmp_path)
    _run_modules(sys.executable, tmp_path, "run_loaded('up_state.pt', 'face_loaded.pt')")
    resaved = torch.load(tmp_path / "up_state.pt")["state"]
    for name, value in state.items():
        assert torch.equal(resaved[name], value), name
    up, face = torch.load(tmp_path / "up_loaded.pt"), torch.load(tmp_path / "face_loaded.pt")
    before = torch.load(tmp_path / "up.pt")["outputs"]
    for name in ("cnn", "block"):
        assert not torch.allclose(up[name], before[name]), "the loaded weights were not used"
        assert torch.allclose(face[name], up[name], rtol=1e-4, atol=1e-5), name


@pytest.mark.parametrize("workers", [0, 2])
def test_dataloader_batches_match_upstream(tmp_path, workers):
    oracle = _oracle()
    _side(oracle, LOADER, "up.pt", workers, cwd=tmp_path)
    _side(sys.executable, LOADER, "face.pt", workers, cwd=tmp_path)
    up, face = torch.load(tmp_path / "up.pt"), torch.load(tmp_path / "face.pt")
    assert len(face) == len(up) == 6
    for fb, ub in zip(face, up):
        for f, u in zip(fb, ub):
            assert f.dtype == u.dtype and torch.equal(f, u)


def _child_writes(t, q, received):
    t.add_(1)
    q.put(torch.full((3,), 5.0))
    # The queued tensor's descriptor is served by this process until the parent has it.
    received.wait(60)


def test_shared_memory_tensors_cross_processes():
    import torch.multiprocessing as mp

    t = torch.zeros(4)
    assert not t.is_shared()
    t.share_memory_()
    assert t.is_shared() and t.tolist() == [0.0] * 4
    ctx = mp.get_context("fork")
    q, done = ctx.Queue(), ctx.Event()
    p = ctx.Process(target=_child_writes, args=(t, q, done))
    p.start()
    received = q.get(timeout=60)
    done.set()
    p.join(timeout=60)
    assert p.exitcode == 0
    # The child's in-place write lands in the parent's memory; the queued tensor arrives.
    assert t.tolist() == [1.0] * 4
    assert received.tolist() == [5.0] * 3 and received.is_shared()
