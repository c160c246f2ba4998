"""Federated averaging over `torch.distributed` on the face (examples/fedavg.py): 3 ranks on
127.0.0.1 (tcp:// set-up), each training the same tiny llama on its own shard for 3 local AdamW
steps per round, averaging every parameter with all_reduce(SUM) / 3, for 2 rounds.

* Against the face's own central simulation (--central: one process, no torch.distributed,
  the 3 clients one after another, parameters averaged as ((p0 + p1) + p2) / 3), ELEMENT FOR
  ELEMENT: the local training is the same computation in both (same weights, same data, same
  kernels), and the face's backend reduces every element in rank order, left to right, so the
  federated sum is the central one bit for bit. Any difference means a rank trained on the wrong
  data or weights, or the reduction lost, reordered or corrupted something. Every rank must also
  end with the same parameters (the same sha256), and its losses must be the central ones.
* The run itself must mean something: the shards' losses differ from each other (the shards
  really differ) and every client's loss falls from round to round.
* Against upstream PyTorch with real gloo (TORCHNATIVE_ORACLE_PYTHON), the same 3-rank run:
  losses and final parameters within 4x upstream's own float32 error (its float32 run against its
  float64 run, from the same float32 initial weights; test_training's rule). Upstream is not held
  to exactness against its own central run: gloo does not sum in rank order, so the two may
  differ by rounding; the test checks they agree within the same tolerance and prints by how
  much (pytest -s).

Every process runs under a hard deadline, and all are killed when one fails
(test_distributed's `Processes`).
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_distributed import _env, _free_port, procs  # noqa: E402,F401  (procs: the fixture)
from test_torch_face import _oracle  # noqa: E402
from test_training import _assert_like_upstream  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "fedavg.py")
WORLD, LOCAL_STEPS, ROUNDS = 3, 3, 2
DEADLINE_S = 150  # for each launch, all its processes together (on two shared cores)

_RUNS = {}  # (who, mode, dtype) -> list of reports (one per rank; one for central), module-wide


def _argv(python, dtype, out):
    return [python, EXAMPLE, "--rounds", str(ROUNDS), "--local-steps", str(LOCAL_STEPS),
            "--dtype", dtype, "--values", "--timeout", "60", "--out", out]  # fmt: skip


def _runs(procs, *keys):
    """The reports for each of `keys` = (who, mode, dtype), who in face/upstream, mode in
    federated/central; the missing ones are launched together (interpreter start-up dominates)."""
    missing = [key for key in keys if key not in _RUNS]
    labels, outs = [], {}
    for who, mode, dtype in missing:
        python = sys.executable if who == "face" else _oracle()
        stem = f"{who}-{mode}-{dtype}"
        if mode == "central":
            outs[(who, mode, dtype)] = [procs.tmp / f"{stem}.json"]
            procs.start(stem, _argv(python, dtype, str(outs[(who, mode, dtype)][0])) +
                        ["--central", "--world", str(WORLD)], _env())  # fmt: skip
            labels.append(stem)
            continue
        port = _free_port()
        outs[(who, mode, dtype)] = [procs.tmp / f"{stem}-rank{r}.json" for r in range(WORLD)]
        for rank in range(WORLD):
            argv = _argv(python, dtype, str(procs.tmp / f"{stem}-rank{{rank}}.json"))
            argv += ["--rank", str(rank), "--world", str(WORLD), "--init", f"tcp://127.0.0.1:{port}"]
            procs.start(f"{stem}-r{rank}", argv, _env())
            labels.append(f"{stem}-r{rank}")
    if labels:
        procs.wait(labels, DEADLINE_S, "fedavg " + ", ".join("/".join(k) for k in missing))
    for key, paths in outs.items():
        _RUNS[key] = [json.loads(p.read_text()) for p in paths]
    return [_RUNS[key] for key in keys]


def _flat(report):
    """Losses, held-out losses and every parameter value as flat lists of floats."""
    return {
        "losses": [v for client in report["losses"] for v in client],
        "eval_losses": [v for client in report["eval_losses"] for v in client],
        "params": [float.fromhex(v) for values in report["params"].values() for v in values],
    }


def test_fedavg_on_the_face_equals_central_averaging_exactly(procs):
    ranks, (central,) = _runs(procs, ("face", "federated", "float32"), ("face", "central", "float32"))
    own = [r["digest"] for r in ranks]
    assert own == [own[0]] * WORLD, f"the ranks end with different parameters: {own}"
    for r in ranks:  # what each rank received of the others (all_gather) says the same
        assert r["digests"] == own, (r["rank"], r["digests"], own)

    assert central["digest"] == own[0], "the federated parameters are not the central ones"
    assert list(ranks[0]["params"]) == list(central["params"])
    for name, values in central["params"].items():  # both digests agree; name the first difference
        got = ranks[0]["params"][name]
        diff = next((i for i, (a, b) in enumerate(zip(got, values)) if a != b), None)
        assert got == values, f"{name}[{diff}]: federated {got[diff]}, central {values[diff]}"

    # the same local training: every client's losses, round by round, to the last bit
    for r in ranks:
        assert r["losses"] == central["losses"], (r["rank"], r["losses"], central["losses"])
        assert r["eval_losses"] == central["eval_losses"], (r["rank"], r["eval_losses"])

    losses, evals = central["losses"], central["eval_losses"]
    first = [client[0] for client in losses]
    assert len(set(first)) == WORLD, f"the shards train alike: {first}"
    for c in range(WORLD):
        assert all(b < a for a, b in zip(losses[c], losses[c][1:])), f"client {c}'s loss: {losses[c]}"
        assert all(b < a for a, b in zip(evals[c], evals[c][1:])), f"client {c}'s held-out loss: {evals[c]}"


@pytest.mark.full
def test_fedavg_on_the_face_like_upstream_gloo(procs):
    face, up32, up64, up_central = _runs(
        procs,
        ("face", "federated", "float32"),
        ("upstream", "federated", "float32"),
        ("upstream", "federated", "float64"),
        ("upstream", "central", "float32"),
    )
    for name, run in (("upstream float32", up32), ("upstream float64", up64)):
        digests = [r["digest"] for r in run]
        assert digests == [digests[0]] * WORLD, f"{name}: the ranks end with different parameters"
    f, u32, u64, uc = (_flat(run[0]) for run in (face, up32, up64, up_central))
    _assert_like_upstream(f, u32, u64, ("losses", "eval_losses", "params"), "face vs upstream gloo: ")

    # upstream's own federated vs central (gloo's summation order against rank order): reported,
    # and held to the same tolerance, not to exactness
    _assert_like_upstream(uc, u32, u64, ("losses", "eval_losses", "params"), "upstream central vs gloo: ")
    differing = [abs(a - b) for a, b in zip(u32["params"], uc["params"]) if a != b]
    own = max(abs(a - b) for a, b in zip(u32["params"], u64["params"]))
    face_err = max(abs(a - b) for a, b in zip(f["params"], u32["params"]))
    print(f"\nparams: max |face - upstream| {face_err:.3g}, upstream's own f32-vs-f64 {own:.3g}; "
          f"upstream federated vs central: {len(differing)} of {len(uc['params'])} differ, "
          f"by at most {max(differing, default=0.0):.3g}")  # fmt: skip
