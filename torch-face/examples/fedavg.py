"""Federated averaging (FedAvg) of a tiny llama over torch.distributed, or simulated in one process.

Runs under whichever `torch` the interpreter has: the face or upstream PyTorch (the test
`torch-face/tests/test_fedavg.py` runs it under both).

    # W ranks, one process each (tcp:// set-up; or env:// from RANK, WORLD_SIZE, MASTER_ADDR,
    # MASTER_PORT when --rank is not given, as torchrun provides them)
    <python> torch-face/examples/fedavg.py --rank R --world W --init tcp://127.0.0.1:PORT [--out F]
    torchrun --standalone --nproc-per-node W torch-face/examples/fedavg.py [--out DIR/r{rank}.json]
    # the same W clients, one after another in one process, no torch.distributed at all
    <python> torch-face/examples/fedavg.py --central --world W

Options: --rounds R (5), --local-steps K (3), --optimizer adamw|sgd, --lr, --batch, --seq-len,
--shard-seqs, --seed (model), --data-seed, --dtype float32|float64, --values, --out.

Every client (rank) builds the same LlamaForCausalLM (vocab 64, hidden 32, 2 layers, 4 heads,
2 key/value heads) from torch.manual_seed(--seed), in float32, then converts it to --dtype (so a
float64 run starts from the same float32 weights). Each round, every client

1. trains the current global weights for K local steps on its own shard: cross-entropy language
   model loss through the model's `labels=`, with a FRESH optimizer each round (AdamW or SGD;
   classic FedAvg keeps no optimizer state across rounds, every round starts from the averaged
   weights alone);
2. averages: `dist.all_reduce(p, op=SUM)` then `p /= W`, for every parameter, under no_grad.

--central does the same arithmetic in one process: for each round, clients 0..W-1 in turn load
the global weights and run the same K steps on the same shard, then each parameter is averaged
as ((p0 + p1) + p2 ...) / W, rank order left to right, which is what a backend that reduces in
rank order computes (the face's does; gloo's order is its own, so upstream's federated result may
differ from its central one by rounding).

Data: a synthetic, non-IID token stream, independent of torch's random generators (Python's
`random`, so every implementation sees the same tokens). One Markov chain structure shared by all
shards (each of the 64 tokens has 4 possible successors, drawn from --data-seed); each shard draws
its own successor probabilities (exponential weights, normalised) from a generator seeded by
(--data-seed, shard), so the shards' statistics differ. A shard is --shard-seqs training sequences
of --seq-len tokens plus --batch held-out sequences, each started from a random token. Local step
g = round * K + j trains on sequences g*B .. g*B+B-1 (modulo --shard-seqs).

Prints JSON (one object; with --out it goes to the file, `{rank}` replaced, else rank 0 prints):
  losses[c][r]       client c's mean training loss over its K steps of round r
  eval_losses[c][e]  the global model's loss on client c's held-out sequences, before round 1
                     (e = 0) and after each round's averaging
  digest             sha256 of this process's final parameters (names, dtypes, shapes and
                     little-endian values, in named_parameters() order); digests: every rank's
  round_seconds      wall time of each round in this process (average_seconds: of its averaging)
  params             with --values: {name: [float.hex of each value, row-major]}
"""

import argparse
import hashlib
import json
import os
import random
import struct
import sys
import time
from datetime import timedelta

import torch
from transformers import LlamaConfig, LlamaForCausalLM

VOCAB = 64
SUCCESSORS = 4


# -------------------------------------------------------------------------------------- data


def shard_sequences(shard, data_seed, count, seq_len):
    """`count` sequences of `seq_len` token ids from shard `shard`'s Markov chain."""
    structure = random.Random(f"fedavg-structure-{data_seed}")
    successors = [structure.sample(range(VOCAB), SUCCESSORS) for _ in range(VOCAB)]
    rng = random.Random(f"fedavg-shard-{data_seed}-{shard}")
    weights = [[rng.expovariate(1.0) for _ in range(SUCCESSORS)] for _ in range(VOCAB)]
    seqs = []
    for _ in range(count):
        token = rng.randrange(VOCAB)
        seq = [token]
        for _ in range(seq_len - 1):
            token = rng.choices(successors[token], weights=weights[token])[0]
            seq.append(token)
        seqs.append(seq)
    return seqs


class Shard:
    def __init__(self, index, args):
        seqs = shard_sequences(index, args.data_seed, args.shard_seqs + args.batch, args.seq_len)
        self.train = torch.tensor(seqs[: args.shard_seqs])
        self.held_out = torch.tensor(seqs[args.shard_seqs :])
        self.batch = args.batch

    def batch_for(self, step):
        rows = [(step * self.batch + i) % self.train.shape[0] for i in range(self.batch)]
        return self.train[rows]


# ------------------------------------------------------------------------------------- model


def build_model(args):
    torch.manual_seed(args.seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).to(getattr(torch, args.dtype))


def local_training(model, shard, round_index, args):
    """K steps from the model's current weights; the mean of their losses. The optimizer is made
    here, so no state survives the round (classic FedAvg)."""
    if args.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    losses = []
    for j in range(args.local_steps):
        ids = shard.batch_for(round_index * args.local_steps + j)
        opt.zero_grad()
        loss = model(ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return sum(losses) / len(losses)


def held_out_loss(model, shard):
    with torch.no_grad():
        return model(shard.held_out, labels=shard.held_out).loss.item()


def digest(model):
    """sha256 over names, dtypes, shapes and the values' little-endian bytes (struct, not numpy:
    numpy is optional on the face)."""
    h = hashlib.sha256()
    for name, p in model.named_parameters():
        t = p.detach()
        values = t.reshape(-1).tolist()
        h.update(f"{name}:{t.dtype}:{list(t.shape)}\n".encode())
        h.update(struct.pack(f"<{len(values)}{'d' if t.dtype == torch.float64 else 'f'}", *values))
    return h.hexdigest()


def values(model):
    return {name: [v.hex() for v in p.detach().reshape(-1).tolist()] for name, p in model.named_parameters()}


# ------------------------------------------------------------------------------------- modes


def federated(args):
    import torch.distributed as dist

    rank = args.rank if args.rank is not None else int(os.environ["RANK"])
    world = args.world if args.world is not None else int(os.environ["WORLD_SIZE"])
    init = args.init or "env://"
    dist.init_process_group(args.backend, init_method=init, rank=rank, world_size=world,
                            timeout=timedelta(seconds=args.timeout))
    model = build_model(args)
    shard = Shard(rank, args)
    losses, evals, round_s, average_s = [], [held_out_loss(model, shard)], [], []
    for r in range(args.rounds):
        start = time.perf_counter()
        losses.append(local_training(model, shard, r, args))
        averaging = time.perf_counter()
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p, op=dist.ReduceOp.SUM)
                p.div_(world)
        now = time.perf_counter()
        round_s.append(now - start)
        average_s.append(now - averaging)
        evals.append(held_out_loss(model, shard))

    # every rank's losses and digest, so that any rank's report shows all of them (float64 holds
    # the Python floats exactly)
    mine = torch.tensor(losses + evals, dtype=torch.float64)
    gathered = [torch.zeros_like(mine) for _ in range(world)]
    dist.all_gather(gathered, mine)
    own = digest(model)
    digest_bytes = torch.tensor(list(bytes.fromhex(own)), dtype=torch.uint8)
    digests = [torch.zeros_like(digest_bytes) for _ in range(world)]
    dist.all_gather(digests, digest_bytes)
    dist.destroy_process_group()

    rounds = args.rounds
    report = {
        "mode": "federated", "rank": rank, "world": world, "init": init,
        "losses": [g[:rounds].tolist() for g in gathered],
        "eval_losses": [g[rounds:].tolist() for g in gathered],
        "digest": own,
        "digests": [bytes(d.tolist()).hex() for d in digests],
        "round_seconds": round_s, "average_seconds": average_s,
    }  # fmt: skip
    return rank, report, model


def central(args):
    world = args.world
    if world is None:
        raise SystemExit("fedavg: --central needs --world (the number of clients)")
    model = build_model(args)
    params = list(model.parameters())
    shards = [Shard(c, args) for c in range(world)]
    global_weights = [p.detach().clone() for p in params]

    def load(weights):
        with torch.no_grad():
            for p, w in zip(params, weights):
                p.copy_(w)

    losses = [[] for _ in range(world)]
    evals = [[held_out_loss(model, s)] for s in shards]
    round_s, average_s = [], []
    for r in range(args.rounds):
        start = time.perf_counter()
        clients = []
        for c in range(world):
            load(global_weights)
            losses[c].append(local_training(model, shards[c], r, args))
            clients.append([p.detach().clone() for p in params])
        averaging = time.perf_counter()
        with torch.no_grad():
            for i in range(len(params)):
                total = clients[0][i]
                for c in range(1, world):  # rank order, left to right
                    total = torch.add(total, clients[c][i])
                total.div_(world)  # the same in-place division the ranks do after all_reduce
                global_weights[i] = total
        now = time.perf_counter()
        round_s.append(now - start)
        average_s.append(now - averaging)
        load(global_weights)
        for c in range(world):
            evals[c].append(held_out_loss(model, shards[c]))

    report = {
        "mode": "central", "rank": None, "world": world,
        "losses": losses, "eval_losses": evals,
        "digest": digest(model),
        "round_seconds": round_s, "average_seconds": average_s,
    }  # fmt: skip
    return 0, report, model


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--central", action="store_true", help="simulate the W clients in one process")
    ap.add_argument("--rank", type=int, help="default: $RANK (then --init defaults to env://)")
    ap.add_argument("--world", type=int, help="default: $WORLD_SIZE; with --central, the clients")
    ap.add_argument("--init", help="init_method, e.g. tcp://127.0.0.1:PORT (default env://)")
    ap.add_argument("--backend", default="gloo")
    ap.add_argument("--timeout", type=float, default=120.0, help="process group timeout, s")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--local-steps", type=int, default=3)
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--lr", type=float, help="default 1e-2 for adamw, 0.5 for sgd")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=16)
    ap.add_argument("--shard-seqs", type=int, default=32, help="training sequences per shard")
    ap.add_argument("--seed", type=int, default=0, help="the model's initial weights")
    ap.add_argument("--data-seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    ap.add_argument("--values", action="store_true", help="also print every parameter value")
    ap.add_argument("--out", help="JSON file, {rank} replaced by the rank (default: rank 0 prints)")
    args = ap.parse_args()
    if args.lr is None:
        args.lr = 1e-2 if args.optimizer == "adamw" else 0.5

    rank, report, model = central(args) if args.central else federated(args)
    report.update({
        "implementation": "face" if hasattr(torch._C, "_tn_registry_names") else "upstream",
        "torch": torch.__version__, "dtype": args.dtype, "rounds": args.rounds,
        "local_steps": args.local_steps, "optimizer": args.optimizer, "lr": args.lr,
        "batch": args.batch, "seq_len": args.seq_len,
    })  # fmt: skip
    if args.values:
        report["params"] = values(model)
    text = json.dumps(report)
    if args.out:
        with open(args.out.replace("{rank}", str(rank)), "w") as f:
            f.write(text + "\n")
    elif rank == 0:
        print(text, flush=True)


if __name__ == "__main__":
    sys.exit(main())
