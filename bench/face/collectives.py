"""torch.distributed collectives on the face (our backend, asked for as "gloo") beside upstream
PyTorch's gloo, in one run, at one world size on 127.0.0.1.

usage: collectives.py --face PY --upstream PY [--world W] [--rounds N] [--out FILE.json]

Each side launches W ranks of the worker below; rank 0 reports the median time of all_reduce
(float32 SUM) at sizes from 1 element to 4M elements, of broadcast at 1M elements, and of
barrier. Sides alternate per round so that machine noise hits both. Printed: milliseconds per
call on each side and upstream's time / the face's (above 1: the face is faster). Standard
library only.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys

WORKER = r"""
import json, sys, time
import torch, torch.distributed as dist
rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)

def timed(fn, reps):
    fn()  # warm-up: first-call set-up is not what is measured
    times = []
    for _ in range(reps):
        dist.barrier()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return sorted(times)[len(times) // 2] * 1e3

out = {}
for n in (1, 1024, 65536, 1 << 20, 1 << 22):
    x = torch.ones(n)
    out[f"all_reduce {n * 4} B"] = timed(lambda: dist.all_reduce(x), 20 if n < (1 << 20) else 7)
y = torch.ones(1 << 20)
out[f"broadcast {(1 << 20) * 4} B"] = timed(lambda: dist.broadcast(y, src=0), 7)
out["barrier"] = timed(dist.barrier, 20)
if rank == 0:
    print(json.dumps(out))
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(python, world):
    port = str(free_port())
    env = dict(os.environ, GLOO_SOCKET_IFNAME="lo", OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([python, "-c", WORKER, str(r), str(world), port], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(world)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_, err) in zip(procs, outs):
        if p.returncode != 0:
            sys.exit(f"a rank failed under {python}:\n{err[-3000:]}")
    return json.loads(outs[0][0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--face", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out")
    args = p.parse_args()
    runs = {"face": [], "upstream": []}
    for _ in range(args.rounds):
        for side in ("face", "upstream"):
            runs[side].append(run(getattr(args, side), args.world))
    rows = {}
    print(f"world {args.world}, median ms per call (best round)        face   upstream   upstream/face")
    for key in runs["face"][0]:
        face = min(r[key] for r in runs["face"])
        up = min(r[key] for r in runs["upstream"])
        rows[key] = {"face_ms": face, "upstream_ms": up, "ratio": up / face}
        print(f"  {key:<40} {face:9.3f} {up:10.3f} {up / face:11.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"world": args.world, "rows": rows, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
