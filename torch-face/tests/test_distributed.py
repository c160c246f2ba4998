"""`torch.distributed` on the face against upstream PyTorch's gloo backend.

dist_collectives.py (one rank of a fixed list of cases: every collective, every dtype, views,
async work, point to point, objects, a subgroup) runs at world sizes 2, 3 and 4 under the face
(this interpreter) and under upstream torch (TORCHNATIVE_ORACLE_PYTHON), each world on its own
port on 127.0.0.1, and every rank's results are compared case by case, element for element.
The inputs are small integers, halves and powers of two, so every sum and product is exact in
any reduction order and the comparison can be exact (NaN-aware: values travel as float.hex).
Nothing is hard-coded: upstream's run is the expectation, except

* where upstream gloo refuses a case (int16, AVG of integers, bitwise ops on floats, uneven
  all_to_all lists, ...): the face must raise the same exception type, or give what
  `_beyond_gloo` says the case means (computed from upstream's results of ops gloo accepts);
* strided views, which upstream gloo reads and writes as if contiguous (pytorch/pytorch#192920):
  the face must give the result of the same op on a contiguous copy, written back.

Also: a peer that dies or stalls makes rank 0's next collective fail, not hang (both under the
face and under upstream); env:// set-up; and a torchrun (torch.distributed.run) launch.
Every subprocess runs under a hard deadline and all are killed when one fails.
"""

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_torch_face import _oracle  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dist_collectives.py")
WORLDS = (2, 3, 4)
DEADLINE_S = 120  # for each launch, all its processes together

INTEGER_DTYPES = {"int8", "uint8", "int16", "int32", "int64"}

# Upstream gloo gets these wrong (it takes a strided view's data pointer as a contiguous buffer);
# the worker's NAME/reference runs the op on a contiguous copy and writes it back.
UPSTREAM_WRONG = {
    "all_reduce/view/step_slice",
    "all_reduce/view/column",
    "broadcast/view/step_slice",
    "broadcast/view/column",
}

# Rank 0's failure when its peer is gone, upstream 2.15.0 with timeout=5 s:
#   exit:  RuntimeError: [.../gloo/transport/tcp/pair.cc:545] Read error [127.0.0.1]:PORT:
#          Connection reset by peer. This is typically caused by a remote worker hanging ...
#   stall: RuntimeError: [.../gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting
#          5000ms for recv operation to complete
PEER_FAILURE_TEXT = re.compile(r"timed out|timeout|connection|peer|closed|reset|broken pipe", re.I)

PEER = r"""
import os, sys, time
from datetime import timedelta
import torch, torch.distributed as dist
rank, port, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2,
                        timeout=timedelta(seconds=5))
print("initialized", flush=True)
if rank == 1:
    if mode == "exit":
        os._exit(0)  # a crash: no clean-up, sockets closed by the kernel
    time.sleep(600)  # alive but never joins the collective
x = torch.ones(4)
dist.all_reduce(x)
print("all_reduce returned", x.tolist(), flush=True)
"""


# ------------------------------------------------------------------------------- processes


_PORTS_GIVEN = set()


def _free_port():
    """A port free on 127.0.0.1 now, and not handed out before in this session (two worlds
    start at once; the kernel may offer a just-closed port again)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _PORTS_GIVEN:
            _PORTS_GIVEN.add(port)
            return port


def _env(**extra):
    env = dict(os.environ)
    # gloo binds the interface of the host name unless told; keep everything on loopback.
    # One OpenMP thread: up to 8 ranks share two cores.
    env.update(GLOO_SOCKET_IFNAME="lo", MASTER_ADDR="127.0.0.1", OMP_NUM_THREADS="1")
    env.update(extra)
    return env


class Processes:
    """The subprocesses of one test. Each gets its own session, so killing one takes its children
    (torchrun's workers) with it; everything still running is killed at the end of the test."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.running = {}  # label -> Popen
        self.returncodes = {}

    def start(self, label, argv, env):
        out, err = open(self.tmp / f"{label}.stdout", "w"), open(self.tmp / f"{label}.stderr", "w")
        with out, err:
            self.running[label] = subprocess.Popen(
                argv, env=env, cwd=HERE, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                start_new_session=True,
            )  # fmt: skip

    def output(self, label, stream="stderr", tail=2500):
        text = (self.tmp / f"{label}.{stream}").read_text(errors="replace")
        return text[-tail:]

    def kill(self, label):
        p = self.running.pop(label, None)
        if p is not None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()

    def kill_all(self):
        for label in list(self.running):
            self.kill(label)

    def wait(self, labels, deadline_s, what):
        """Wait for `labels` to exit 0. The first failure or the deadline kills every process of
        the test and fails it with the stderr of each process that did not succeed."""
        end = time.monotonic() + deadline_s
        pending = set(labels)
        while pending:
            for label in sorted(pending):
                rc = self.running[label].poll()
                if rc is None:
                    continue
                pending.discard(label)
                self.running.pop(label)
                self.returncodes[label] = rc
                if rc != 0:
                    self.kill_all()
                    self.fail(labels, f"{what}: {label} exited with {rc}")
            if pending and time.monotonic() > end:
                self.kill_all()
                self.fail(labels, f"{what}: {sorted(pending)} still running after {deadline_s} s")
            time.sleep(0.05)

    def wait_exit(self, label, deadline_s):
        """`label`'s return code, or None if it is still running after `deadline_s`."""
        try:
            rc = self.running[label].wait(timeout=deadline_s)
        except subprocess.TimeoutExpired:
            return None
        self.running.pop(label)
        return rc

    def fail(self, labels, message):
        parts = [message]
        for label in labels:
            rc = self.returncodes.get(label, "killed")
            if rc != 0:  # stderr ends with the case it was in (the worker names each case there)
                parts.append(f"--- {label} (rc {rc}) stderr:\n{self.output(label)}")
        pytest.fail("\n".join(parts), pytrace=False)


@pytest.fixture
def procs(tmp_path):
    p = Processes(tmp_path)
    yield p
    p.kill_all()


def _start_world(procs, label, python, world):
    """Start `world` ranks of the worker with tcp:// set-up; their labels."""
    port = _free_port()
    labels = []
    for rank in range(world):
        lab = f"{label}-w{world}-r{rank}"
        out = str(procs.tmp / f"{label}-w{world}-rank{{rank}}.json")
        argv = [python, WORKER, "--rank", str(rank), "--world", str(world),
                "--init", f"tcp://127.0.0.1:{port}", "--out", out]  # fmt: skip
        procs.start(lab, argv, _env())
        labels.append(lab)
    return labels


def _read_world(procs, label, world):
    return [_read(procs.tmp / f"{label}-w{world}-rank{rank}.json") for rank in range(world)]


def _read(path):
    return json.loads(path.read_text())


_UPSTREAM = {}  # world -> upstream's per-rank results, shared by the tests of this module


def _upstream(procs, world):
    if world not in _UPSTREAM:
        labels = _start_world(procs, "upstream", _oracle(), world)
        procs.wait(labels, DEADLINE_S, f"upstream (oracle) at world {world}")
        _UPSTREAM[world] = _read_world(procs, "upstream", world)
    return _UPSTREAM[world]


# ------------------------------------------------------------------------------ comparison


def _retyped(record, dtype):
    """`record` with every tensor's dtype renamed (the values are the same small integers)."""
    if isinstance(record, dict):
        return {k: (dtype if k == "dtype" else _retyped(v, dtype)) for k, v in record.items()}
    if isinstance(record, list):
        return [_retyped(v, dtype) for v in record]
    return record


def _trunc_div(value, world):
    return -(-value // world) if value < 0 else value // world


def _beyond_gloo(name, upstream, world):
    """The record the face may give for `name` where upstream gloo refuses it, or None where the
    face must refuse too. From upstream's results of ops gloo accepts:
    * NAME/reference, where the worker has one (same data through an op gloo takes);
    * int16 (gloo has no int16 at all): the int32 case, the same small integers;
    * all_reduce AVG of integers: SUM divided by the world size, truncated, as NCCL and C do."""
    if name + "/reference" in upstream:
        return upstream[name + "/reference"]
    *head, dtype = name.split("/")
    if dtype == "int16":
        same = _upstream_or_beyond("/".join(head + ["int32"]), upstream, world)
        return _retyped(same, "int16") if same is not None else None
    if head == ["all_reduce", "AVG"] and dtype in INTEGER_DTYPES:
        total = upstream[f"all_reduce/SUM/{dtype}"]["result"]
        return {"result": {**total, "values": [_trunc_div(v, world) for v in total["values"]]}}
    return None


def _upstream_or_beyond(name, upstream, world):
    record = upstream[name]
    return record if "result" in record else _beyond_gloo(name, upstream, world)


def _short(record):
    text = json.dumps(record)
    return text if len(text) <= 400 else text[:400] + "..."


def _mismatches(face, upstream, world):
    """Differences, one line each, between the face's and upstream's per-rank results."""
    found = []
    for rank, (f_run, u_run) in enumerate(zip(face, upstream)):
        # the harness checking itself (the "face" is upstream) expects upstream's strided-view bugs
        strict_views = f_run["meta"]["implementation"] != "upstream"
        f_cases, u_cases = f_run["cases"], u_run["cases"]
        for key in ("rank", "world", "initialized_after_destroy"):
            if f_run["meta"][key] != u_run["meta"][key]:
                found.append(f"rank {rank} meta {key}: face {f_run['meta'][key]!r}, "
                             f"upstream {u_run['meta'][key]!r}")  # fmt: skip
        for name in sorted(set(f_cases) ^ set(u_cases)):
            found.append(f"rank {rank} {name}: only in {'face' if name in f_cases else 'upstream'}")
        for name in sorted(set(f_cases) & set(u_cases)):
            got, want = f_cases[name], u_cases[name]
            where = f"rank {rank} {name}"
            if name in UPSTREAM_WRONG and strict_views:
                want = u_cases[name + "/reference"]
                if got != want:
                    found.append(f"{where} (strided view; upstream gloo is wrong): face {_short(got)}, "
                                 f"contiguous reference {_short(want)}")  # fmt: skip
            elif "error" in want:
                if "error" in got:
                    if got["error"]["type"] != want["error"]["type"]:
                        found.append(f"{where}: face raised {_short(got)}, upstream {_short(want)}")
                    continue
                beyond = _beyond_gloo(name, u_cases, world)
                if beyond is None:
                    found.append(f"{where}: upstream raised {_short(want)}, face returned {_short(got)}")
                elif got != beyond:
                    refusal = want["error"]["message"]
                    found.append(f"{where}: upstream gloo refuses ({refusal!r}); the face's "
                                 f"{_short(got)} is not the reference {_short(beyond)}")  # fmt: skip
            elif got != want:
                found.append(f"{where}: face {_short(got)}, upstream {_short(want)}")
    return found


def _assert_same(face, upstream, world, what):
    found = _mismatches(face, upstream, world)
    shown = "\n".join(found[:40]) + (f"\n... and {len(found) - 40} more" if len(found) > 40 else "")
    if found:
        pytest.fail(f"{what}: {len(found)} differences from upstream gloo\n{shown}", pytrace=False)


# ----------------------------------------------------------------------------------- tests


# The gate keeps world 2; --full runs 3 and 4 too.
@pytest.mark.parametrize("world", [pytest.param(w, marks=() if w == 2 else pytest.mark.full) for w in WORLDS])
def test_collectives_match_upstream_gloo(procs, world):
    oracle = _oracle()
    # both runs at once: the interpreters' start-up dominates
    face_labels = _start_world(procs, "face", sys.executable, world)
    up_labels = [] if world in _UPSTREAM else _start_world(procs, "upstream", oracle, world)
    procs.wait(face_labels + up_labels, DEADLINE_S, f"world {world}")
    if up_labels:
        _UPSTREAM[world] = _read_world(procs, "upstream", world)
    face = _read_world(procs, "face", world)
    _assert_same(face, _UPSTREAM[world], world, f"world {world}")


@pytest.mark.parametrize("mode", ["exit", "stall"])
def test_failed_peer_is_an_error_not_a_hang(procs, mode):
    """World 2, timeout 5 s: rank 1 dies (exit) or never joins (stall) after init_process_group;
    rank 0's all_reduce must fail within 60 s naming the timeout or the connection. Upstream
    is held to the same, which keeps the assertion honest."""
    interpreters = {"face": sys.executable, "upstream": _oracle()}
    for who, python in interpreters.items():
        port = str(_free_port())
        for rank in (1, 0):
            procs.start(f"{who}-r{rank}", [python, "-c", PEER, str(rank), port, mode], _env())
    problems = []
    for who in interpreters:
        rc = procs.wait_exit(f"{who}-r0", 60)
        stdout, stderr = procs.output(f"{who}-r0", "stdout"), procs.output(f"{who}-r0")
        if rc is None:
            problems.append(f"{who}: rank 0 still running after 60 s (hangs on a {mode}ed peer)")
        elif rc == 0:
            problems.append(f"{who}: rank 0's all_reduce returned without its peer:\n{stdout}")
        elif "initialized" not in stdout:
            problems.append(f"{who}: rank 0 failed before its collective (rc {rc}):\n{stderr}")
        elif not PEER_FAILURE_TEXT.search(stderr):
            problems.append(f"{who}: rank 0 failed (rc {rc}) naming no timeout or connection:\n{stderr}")
    assert not problems, "\n".join(problems)


def test_env_init(procs):
    """env:// set-up (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), one all_reduce."""
    upstream = _upstream(procs, 2)
    case = "all_reduce/SUM/float32"
    port = str(_free_port())
    labels = []
    for rank in range(2):
        labels.append(f"env-r{rank}")
        argv = [sys.executable, WORKER, "--only", case, "--out", str(procs.tmp / "env-rank{rank}.json")]
        procs.start(labels[-1], argv, _env(MASTER_PORT=port, RANK=str(rank), WORLD_SIZE="2"))
    procs.wait(labels, DEADLINE_S, "env:// init")
    for rank in range(2):
        run = _read(procs.tmp / f"env-rank{rank}.json")
        assert run["meta"]["init"] == "env://" and list(run["cases"]) == [case]
        assert run["cases"][case] == upstream[rank]["cases"][case]


def test_file_init(procs):
    """file:// set-up (a FileStore both ranks open), one all_reduce and a monitored_barrier."""
    upstream = _upstream(procs, 2)
    init = f"file://{procs.tmp / 'rendezvous'}"
    labels = []
    for rank in range(2):
        labels.append(f"file-r{rank}")
        argv = [sys.executable, WORKER, "--rank", str(rank), "--world", "2", "--init", init,
                "--only", "all_reduce/SUM/float32", "--out", str(procs.tmp / "file-rank{rank}.json")]  # fmt: skip
        procs.start(labels[-1], argv, _env())
    procs.wait(labels, DEADLINE_S, "file:// init")
    for rank in range(2):
        run = _read(procs.tmp / f"file-rank{rank}.json")
        case = "all_reduce/SUM/float32"
        assert run["meta"]["init"] == init and run["cases"][case] == upstream[rank]["cases"][case]


MONITORED = r"""
import sys, time
from datetime import timedelta
import torch.distributed as dist
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                        timeout=timedelta(seconds=20))
dist.monitored_barrier(timeout=timedelta(seconds=10))  # everyone comes
if rank in (1, 2):
    time.sleep(30)  # these two miss the next one
    sys.exit(0)
try:
    dist.monitored_barrier(timeout=timedelta(seconds=2), wait_all_ranks=rank == 0)
    print("passed")
except RuntimeError as e:
    print(type(e).__name__, e)
"""


def test_monitored_barrier_names_the_ranks_that_did_not_come(procs):
    """World 4: all pass one monitored_barrier; then ranks 1 and 2 stay away. Rank 0 with
    wait_all_ranks must name both, as upstream's does; its message is compared with upstream's."""
    said = {}
    for who, python in (("face", sys.executable), ("upstream", _oracle())):
        port = str(_free_port())
        labels = [f"{who}-mb{rank}" for rank in range(4)]
        for rank, label in enumerate(labels):
            procs.start(label, [python, "-c", MONITORED, str(rank), "4", port], _env())
        rc = procs.wait_exit(labels[0], 60)
        assert rc == 0, procs.output(labels[0])
        said[who] = procs.output(labels[0], "stdout").strip().splitlines()[-1]
        procs.kill_all()
    assert "Ranks 1, 2 failed to pass monitoredBarrier in 2000 ms" in said["upstream"], said
    assert said["face"].split(":", 1)[1] == said["upstream"].split(":", 1)[1], said


def test_torchrun_launch(procs):
    """`python -m torch.distributed.run --standalone --nproc-per-node 2 dist_collectives.py`:
    the launcher's rendezvous (a TCPStore), then env:// in the workers, then every case."""
    upstream = _upstream(procs, 2)
    out = str(procs.tmp / "torchrun-rank{rank}.json")
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
            WORKER, "--out", out]  # fmt: skip
    procs.start("torchrun", argv, _env())
    procs.wait(["torchrun"], DEADLINE_S, "torchrun (torch.distributed.run --standalone) on the face")
    face = [_read(procs.tmp / f"torchrun-rank{rank}.json") for rank in range(2)]
    assert [run["meta"]["init"] for run in face] == ["env://"] * 2
    _assert_same(face, upstream, 2, "under torchrun")


def test_our_backend_by_its_own_name(procs):
    """`init_process_group("torchnative")`: upstream's Backend finds our backend through the
    face's `torch.distributed.backends` entry point; every case then agrees with upstream gloo
    as the gloo-named run does, and the group reports its backend as "torchnative"."""
    upstream = _upstream(procs, 2)
    port = _free_port()
    labels = []
    for rank in range(2):
        labels.append(f"own-r{rank}")
        argv = [sys.executable, WORKER, "--rank", str(rank), "--world", "2", "--init", f"tcp://127.0.0.1:{port}",
                "--backend", "torchnative", "--out", str(procs.tmp / "own-rank{rank}.json")]  # fmt: skip
        procs.start(labels[-1], argv, _env())
    procs.wait(labels, DEADLINE_S, "backend 'torchnative'")
    face = [_read(procs.tmp / f"own-rank{rank}.json") for rank in range(2)]
    named = 0
    for run in face:  # the cases that name the backend differ by design; the rest must not
        for name, record in run["cases"].items():
            for pair in record.get("result", {}).get("dict", []) if isinstance(record.get("result"), dict) else []:
                if pair[0] == "backend":
                    assert pair[1] == "torchnative", (name, record)
                    pair[1] = "gloo"
                    named += 1
    assert named == 4  # info and the subgroup's, on each rank
    _assert_same(face, upstream, 2, "backend 'torchnative'")
