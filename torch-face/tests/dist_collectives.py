"""One rank of a fixed, deterministic run of every `torch.distributed` collective, for comparing
the face's process groups with upstream PyTorch's gloo backend (test_distributed.py runs it under
both interpreters and compares the JSON files element for element).

    python dist_collectives.py --rank R --world W --init tcp://127.0.0.1:PORT --out FILE
    torchrun --standalone --nproc-per-node W dist_collectives.py --out DIR/rank{rank}.json

Without --rank the rank and world size come from RANK and WORLD_SIZE and the group is set up
from env:// (MASTER_ADDR, MASTER_PORT), as torchrun and other launchers provide them. `{rank}` in
--out is replaced by the rank. --only NAME runs the cases whose names start with NAME.

Every input is a function of (rank, case) built from explicit integers, so any implementation
sees the same bits. Values reduced across ranks are small integers or halves (sums), or
products of 0, +-0.5, +-1, +-2 and 3, so every partial result is exact in every dtype, including
bfloat16: gloo's reduction order is not rank order, and the results are compared exactly.

The output is {"meta": {...}, "cases": {name: record}}, a record being {"result": value} or,
where the call raised, {"error": {"type": ..., "message": ...}}. A tensor value is
{"dtype", "shape", "values"} with the values flattened in row-major order, floats written with
float.hex (exact; "nan", "inf" and "-0x0.0p+0" survive JSON). Cases named NAME/reference compute
what NAME should give through operations gloo does accept (where gloo refuses NAME, or for the
strided views upstream gloo gets wrong); the test uses them only there (it derives int16 and
integer AVG references itself, from the int32 and SUM cases).
"""

import argparse
import json
import math
import os
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64]
# every dtype offered to every op: where gloo refuses one (int16 everywhere, AVG on integers,
# bitwise ops on floats, ...) the refusal is the upstream result
DTYPES = FLOATS + INTS + [torch.bool, torch.complex64]
OPS = ["SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR"]
N = 8  # elements per rank in most cases


def dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------- inputs


# small integers in -4..4 for reduction inputs, row = rank: a fixed table rather than a formula,
# so that sums over 3 ranks are not all multiples of 3 (AVG then rounds)
REDUCTION_TABLE = [
    [0, 1, 4, -4, 3, -1, -4, -2],
    [-3, 1, 3, -1, 2, 4, -3, -1],
    [-4, -1, 2, 0, -2, 2, -2, -3],
    [-2, 3, -2, -2, -4, -4, -1, -1],
    [-2, -2, 0, 1, -1, 4, -1, -2],
    [-1, 2, 0, -4, 1, 2, -2, -2],
    [0, -3, 1, 0, -4, 1, -3, 0],
    [1, 0, 3, 1, -2, 3, 3, -2],
]


def reduction_input(dtype, rank, n=N):
    """Values in -4..4 (0..8 for uint8), halved for floating dtypes: sums over <= 8 ranks and their
    partial sums stay exact in every dtype, and MIN/MAX see negative values."""
    k = [REDUCTION_TABLE[(rank + i // 8) % 8][i % 8] for i in range(n)]
    if dtype == torch.bool:
        return torch.tensor([v > 0 for v in k])
    if dtype == torch.uint8:
        return torch.tensor([v + 4 for v in k], dtype=dtype)
    if dtype.is_floating_point or dtype.is_complex:
        return torch.tensor([v / 2 for v in k], dtype=dtype)
    return torch.tensor(k, dtype=dtype)


def product_input(dtype, rank, n=N):
    """Factors whose products over any subset of ranks are exact (powers of two, one factor 3 at
    most per element, zeros giving signed zeros)."""
    if dtype == torch.bool:
        palette = [True, True, False, True, True, True, True, False]
    elif dtype == torch.uint8:
        palette = [1, 2, 1, 3, 1, 0, 1, 2]
    elif dtype.is_floating_point or dtype.is_complex:
        palette = [1.0, 2.0, -1.0, 0.5, -2.0, 0.0, -0.5, 1.0]
    else:
        palette = [1, 2, -1, 3, -2, 0, -1, 1]
    # a 3 appears at one rank only per element (index 3 is hit once over ranks 0..7)
    return torch.tensor([palette[(i + 3 * rank) % 8] for i in range(n)], dtype=dtype)


def special_sum_input(dtype, rank, world):
    """inf, inf + -inf, nan, -0.0 + -0.0, overflow to inf and subnormals: each sum is the same
    in every order."""
    info = torch.finfo(dtype)
    last = rank == world - 1
    values = [
        math.inf if rank == 0 else 1.0,
        math.inf if rank == 0 else (-math.inf if last else 1.0),
        math.nan if last else 2.0,
        -0.0,
        info.max,
        info.tiny / 2,  # subnormal: must not be flushed to zero
    ]
    return torch.tensor(values, dtype=dtype)


def special_minmax_input(dtype, rank, world):
    """Infinities, extremes and subnormals for MIN and MAX (no nan, no signed zeros: those give
    order-dependent results)."""
    info = torch.finfo(dtype)
    return torch.tensor(
        [
            math.inf if rank == 0 else float(rank),
            -math.inf if rank == world - 1 else float(-rank),
            info.max if rank % 2 else info.min,
            info.tiny / 2 * (rank + 1),
        ],
        dtype=dtype,
    )


def movement_input(dtype, rank, n=N, offset=0):
    """Distinct values per (rank, position) for n <= 32, so a misrouted element shows; below 120
    for worlds up to 4 (int8), and exact in bfloat16."""
    k = [32 * rank + i + offset for i in range(n)]
    if dtype == torch.bool:
        return torch.tensor([(v * 7 + rank) % 3 == 0 for v in k])
    if dtype.is_complex:
        return torch.tensor([complex(v + 0.5, -i) for i, v in enumerate(k)], dtype=dtype)
    if dtype.is_floating_point:
        return torch.tensor([v + 0.5 for v in k], dtype=dtype)
    return torch.tensor(k, dtype=dtype)


def sentinel(shape, dtype):
    """Output buffers start as a recognisable value, so an unwritten element shows."""
    return torch.full(shape, True if dtype == torch.bool else 127, dtype=dtype)


# -------------------------------------------------------------------------------- encoding


def encode(x):
    if isinstance(x, torch.Tensor):
        t = x.detach()
        if t.dtype.is_complex:
            values = [[v.real.hex(), v.imag.hex()] for v in t.reshape(-1).tolist()]
        elif t.dtype.is_floating_point:
            values = [float(v).hex() for v in t.reshape(-1).tolist()]
        else:
            values = t.reshape(-1).tolist()
        return {"dtype": dtype_name(t.dtype), "shape": list(t.shape), "values": values}
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return {"float": x.hex()}
    if isinstance(x, (list, tuple)):
        return {type(x).__name__: [encode(v) for v in x]}
    if isinstance(x, dict):
        return {"dict": [[encode(k), encode(v)] for k, v in x.items()]}
    return {"repr": repr(x)}


UNSPECIFIED = "unspecified"  # what a rank records for a buffer the op leaves undefined there


# ------------------------------------------------------------------------------------ cases


def build_cases(rank, world):
    """[(name, thunk)]; every rank builds the same names in the same order (each case's
    collectives run in this order on every rank)."""
    cases = []
    last = world - 1

    def case(name):
        def register(fn):
            cases.append((name, fn))
            return fn

        return register

    @case("info")
    def _():
        return {
            "rank": dist.get_rank(),
            "world_size": dist.get_world_size(),
            "backend": dist.get_backend(),
            "is_initialized": dist.is_initialized(),
            "is_available": dist.is_available(),
        }

    # ---- all_reduce, every op on every dtype
    for dtype in DTYPES:
        for op in OPS:
            make = product_input if op == "PRODUCT" else reduction_input
            name = f"all_reduce/{op}/{dtype_name(dtype)}"

            @case(name)
            def _(dtype=dtype, op=op, make=make):
                x = make(dtype, rank)
                dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
                return x

    for dtype in FLOATS:

        @case(f"all_reduce/SUM/special/{dtype_name(dtype)}")
        def _(dtype=dtype):
            x = special_sum_input(dtype, rank, world)
            dist.all_reduce(x)
            return x

        for op in ["MIN", "MAX"]:

            @case(f"all_reduce/{op}/special/{dtype_name(dtype)}")
            def _(dtype=dtype, op=op):
                x = special_minmax_input(dtype, rank, world)
                dist.all_reduce(x, op=getattr(dist.ReduceOp, op))
                return x

    # ---- all_reduce on views, written back in place; the base is recorded
    @case("all_reduce/view/transposed")
    def _():
        # non-contiguous but dense: gloo reduces the storage, which is elementwise the same
        base = torch.arange(12.0).view(3, 4) + rank
        dist.all_reduce(base.t())
        return base

    @case("all_reduce/view/offset")
    def _():
        base = torch.zeros(8)
        base[2:5] += torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
        dist.all_reduce(base[2:5])
        return base

    @case("all_reduce/view/batch_of_2d")
    def _():
        base = torch.arange(24.0).view(2, 3, 4) * (rank + 1)
        dist.all_reduce(base[1])  # contiguous view with a storage offset, 2-d
        return base

    # Strided (non-dense) views: upstream gloo reads and writes `numel` contiguous elements from
    # the view's data pointer (pytorch/pytorch#192920, #24836), so its results are wrong; the
    # references do the op on a contiguous copy and write it back.
    def step_slice():
        base = torch.zeros(8)
        base[::2] += torch.tensor([1.0, 2.0, 3.0, 4.0]) * (rank + 1)
        return base, base[::2]

    def column():
        base = torch.arange(12.0).view(3, 4) * (rank + 1)
        return base, base[:, 1]

    for view_name, make_view in [("step_slice", step_slice), ("column", column)]:

        @case(f"all_reduce/view/{view_name}")
        def _(make_view=make_view):
            base, view = make_view()
            dist.all_reduce(view)
            return base

        @case(f"all_reduce/view/{view_name}/reference")
        def _(make_view=make_view):
            base, view = make_view()
            dense = view.contiguous()
            dist.all_reduce(dense)
            view.copy_(dense)
            return base

        @case(f"broadcast/view/{view_name}")
        def _(make_view=make_view):
            base, view = make_view()
            dist.broadcast(view, src=0)
            return base

        @case(f"broadcast/view/{view_name}/reference")
        def _(make_view=make_view):
            base, view = make_view()
            dense = view.contiguous()
            dist.broadcast(dense, src=0)
            view.copy_(dense)
            return base

    @case("all_reduce/zero_dim")
    def _():
        x = torch.tensor(1.5 * (rank + 1))
        dist.all_reduce(x)
        return x

    @case("all_reduce/empty")
    def _():
        x = torch.zeros(0, 3)
        dist.all_reduce(x)
        return x

    @case("all_reduce/async")
    def _():
        x = reduction_input(torch.float32, rank)
        work = dist.all_reduce(x, async_op=True)
        work.wait()
        return [x, work.is_completed()]

    # ---- broadcast
    for dtype in DTYPES:
        for src in sorted({0, last}):

            @case(f"broadcast/src{src}/{dtype_name(dtype)}")
            def _(dtype=dtype, src=src):
                x = movement_input(dtype, rank).view(2, 4)
                dist.broadcast(x, src=src)
                return x

    @case("broadcast/async")
    def _():
        x = movement_input(torch.float32, rank)
        work = dist.broadcast(x, src=last, async_op=True)
        work.wait()
        return x

    # ---- reduce: only the destination's buffer is defined (gloo leaves partial sums on others)
    for dtype in DTYPES:
        for op in ["SUM", "MAX", "PRODUCT"]:
            for dst in sorted({0, last}):
                make = product_input if op == "PRODUCT" else reduction_input

                @case(f"reduce/{op}/dst{dst}/{dtype_name(dtype)}")
                def _(dtype=dtype, op=op, dst=dst, make=make):
                    x = make(dtype, rank)
                    dist.reduce(x, dst=dst, op=getattr(dist.ReduceOp, op))
                    return x if rank == dst else UNSPECIFIED

    # ---- all_gather (list), all_gather_into_tensor
    for dtype in DTYPES:

        @case(f"all_gather/{dtype_name(dtype)}")
        def _(dtype=dtype):
            out = [sentinel((2, 3), dtype) for _ in range(world)]
            dist.all_gather(out, movement_input(dtype, rank, 6).view(2, 3))
            return out

        @case(f"all_gather_into_tensor/{dtype_name(dtype)}")
        def _(dtype=dtype):
            out = sentinel((world * 5,), dtype)
            dist.all_gather_into_tensor(out, movement_input(dtype, rank, 5))
            return out

    @case("all_gather_into_tensor/rows")
    def _():
        out = sentinel((world * 2, 3), torch.float32)
        dist.all_gather_into_tensor(out, movement_input(torch.float32, rank, 6).view(2, 3))
        return out

    # output stacked as (world, n): upstream gloo refuses the shape (NCCL takes it)
    @case("all_gather_into_tensor/stacked")
    def _():
        out = sentinel((world, 5), torch.float32)
        dist.all_gather_into_tensor(out, movement_input(torch.float32, rank, 5))
        return out

    @case("all_gather_into_tensor/stacked/reference")
    def _():
        out = sentinel((world * 5,), torch.float32)
        dist.all_gather_into_tensor(out, movement_input(torch.float32, rank, 5))
        return out.view(world, 5)

    @case("all_gather/strided")
    def _():
        out = [sentinel((6,), torch.float32)[::2] for _ in range(world)]
        dist.all_gather(out, movement_input(torch.float32, rank, 6)[1::2])
        return out

    @case("all_gather/async")
    def _():
        out = [sentinel((3,), torch.int64) for _ in range(world)]
        work = dist.all_gather(out, movement_input(torch.int64, rank, 3), async_op=True)
        work.wait()
        return out

    # ---- reduce_scatter (list input), reduce_scatter_tensor
    for dtype in DTYPES:
        for op in ["SUM", "MAX"]:

            @case(f"reduce_scatter/{op}/{dtype_name(dtype)}")
            def _(dtype=dtype, op=op):
                chunks = reduction_input(dtype, rank, 3 * world).view(world, 3)
                out = sentinel((3,), dtype)
                dist.reduce_scatter(out, list(chunks.unbind(0)), op=getattr(dist.ReduceOp, op))
                return out

            @case(f"reduce_scatter_tensor/{op}/{dtype_name(dtype)}")
            def _(dtype=dtype, op=op):
                out = sentinel((3,), dtype)
                dist.reduce_scatter_tensor(
                    out, reduction_input(dtype, rank, 3 * world), op=getattr(dist.ReduceOp, op)
                )
                return out

    # ---- gather, scatter
    for dtype in DTYPES:
        for root in sorted({0, last}):

            @case(f"gather/dst{root}/{dtype_name(dtype)}")
            def _(dtype=dtype, root=root):
                out = [sentinel((2, 2), dtype) for _ in range(world)] if rank == root else None
                dist.gather(movement_input(dtype, rank, 4).view(2, 2), out, dst=root)
                return out

            if dtype.is_complex:
                # upstream gloo's gather refuses complex (its other ops take them as real pairs)
                @case(f"gather/dst{root}/{dtype_name(dtype)}/reference")
                def _(dtype=dtype, root=root):
                    out = None
                    if rank == root:
                        out = [torch.view_as_real(sentinel((2, 2), dtype)) for _ in range(world)]
                    x = torch.view_as_real(movement_input(dtype, rank, 4).view(2, 2))
                    dist.gather(x, out, dst=root)
                    return [torch.view_as_complex(t) for t in out] if out is not None else None

            @case(f"scatter/src{root}/{dtype_name(dtype)}")
            def _(dtype=dtype, root=root):
                chunks = None
                if rank == root:
                    chunks = [movement_input(dtype, i, 4, offset=4).view(2, 2) for i in range(world)]
                out = sentinel((2, 2), dtype)
                dist.scatter(out, chunks, src=root)
                return out

    # ---- all_to_all (list) and all_to_all_single
    def send_count(src, dst):  # elements rank src sends to rank dst: uneven, 1..3
        return 1 + (src + 2 * dst) % 3

    for dtype in DTYPES:

        @case(f"all_to_all/{dtype_name(dtype)}")
        def _(dtype=dtype):
            chunks = movement_input(dtype, rank, 2 * world).view(world, 2)
            out = [sentinel((2,), dtype) for _ in range(world)]
            dist.all_to_all(out, list(chunks.unbind(0)))
            return out

        @case(f"all_to_all_single/even/{dtype_name(dtype)}")
        def _(dtype=dtype):
            out = sentinel((world, 3), dtype)
            dist.all_to_all_single(out, movement_input(dtype, rank, 3 * world).view(world, 3))
            return out

        @case(f"all_to_all_single/splits/{dtype_name(dtype)}")
        def _(dtype=dtype):
            ins = [send_count(rank, j) for j in range(world)]
            outs = [send_count(j, rank) for j in range(world)]
            out = sentinel((sum(outs), 2), dtype)
            inp = movement_input(dtype, rank, 2 * sum(ins)).view(sum(ins), 2)
            dist.all_to_all_single(out, inp, output_split_sizes=outs, input_split_sizes=ins)
            return out

    # uneven list: upstream gloo wants equal sizes; the reference moves the same elements
    @case("all_to_all/uneven")
    def _():
        inp = movement_input(torch.float32, rank, sum(send_count(rank, j) for j in range(world)))
        out = [sentinel((send_count(j, rank),), torch.float32) for j in range(world)]
        dist.all_to_all(out, list(inp.split([send_count(rank, j) for j in range(world)])))
        return out

    @case("all_to_all/uneven/reference")
    def _():
        ins = [send_count(rank, j) for j in range(world)]
        outs = [send_count(j, rank) for j in range(world)]
        out = sentinel((sum(outs),), torch.float32)
        dist.all_to_all_single(out, movement_input(torch.float32, rank, sum(ins)), outs, ins)
        return list(out.split(outs))

    # ---- barrier
    @case("barrier")
    def _():
        return dist.barrier()

    @case("barrier/async")
    def _():
        work = dist.barrier(async_op=True)
        work.wait()
        return work.is_completed()

    @case("monitored_barrier")
    def _():
        return dist.monitored_barrier(timeout=timedelta(seconds=30))

    # ---- point to point: a ring, even ranks sending first so blocking calls cannot deadlock
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    for dtype in [torch.float32, torch.int64, torch.bfloat16, torch.bool, torch.complex64]:

        @case(f"send_recv/ring/{dtype_name(dtype)}")
        def _(dtype=dtype):
            out = sentinel((2, 3), dtype)
            x = movement_input(dtype, rank, 6).view(2, 3)
            if rank % 2 == 0:
                dist.send(x, nxt)
                dist.recv(out, prv)
            else:
                dist.recv(out, prv)
                dist.send(x, nxt)
            return out

    @case("send_recv/any_source")
    def _():
        # recv without src returns the sender's rank
        if rank == 0:
            out = sentinel((3,), torch.float32)
            sender = dist.recv(out)
            return [sender, out]
        if rank == last:
            dist.send(movement_input(torch.float32, rank, 3), 0)
        return None

    @case("send_recv/tag")
    def _():
        if rank == 0:
            out = sentinel((2,), torch.int64)
            dist.recv(out, last, tag=7)
            return out
        if rank == last:
            dist.send(movement_input(torch.int64, rank, 2), 0, tag=7)
        return None

    @case("isend_irecv/ring")
    def _():
        out = sentinel((4,), torch.float64)
        requests = [dist.isend(movement_input(torch.float64, rank, 4), nxt), dist.irecv(out, prv)]
        for request in requests:
            request.wait()
        return out

    @case("batch_isend_irecv/ring")
    def _():
        out = sentinel((4,), torch.int32)
        ops = [
            dist.P2POp(dist.isend, movement_input(torch.int32, rank, 4), nxt),
            dist.P2POp(dist.irecv, out, prv),
        ]
        for request in dist.batch_isend_irecv(ops):
            request.wait()
        return out

    # ---- objects (pickled and moved through byte tensors)
    def payload(r):
        return {"rank": r, "text": "x" * r, "nested": (1.5, [r] * r, None),
                "t": movement_input(torch.int64, r, 3)}  # fmt: skip

    for src in sorted({0, last}):

        @case(f"broadcast_object_list/src{src}")
        def _(src=src):
            objects = [payload(rank), "second", 3.25] if rank == src else [None, None, None]
            dist.broadcast_object_list(objects, src=src)
            return objects

    @case("all_gather_object")
    def _():
        out = [None] * world
        dist.all_gather_object(out, payload(rank))
        return out

    @case("gather_object")
    def _():
        out = [None] * world if rank == 0 else None
        dist.gather_object(payload(rank), out, dst=0)
        return out

    @case("scatter_object_list")
    def _():
        out = [None]
        objects = [payload(100 + i) for i in range(world)] if rank == 0 else None
        dist.scatter_object_list(out, objects, src=0)
        return out

    # ---- a subgroup of the first and last ranks (every rank must call new_group)
    @case("new_group/first_last")
    def _():
        group = dist.new_group([0, last])
        if group == dist.GroupMember.NON_GROUP_MEMBER:
            return {"member": False, "group_rank": dist.get_rank(group)}
        x = reduction_input(torch.float32, rank)
        dist.all_reduce(x, group=group)
        y = movement_input(torch.int64, rank, 3)
        dist.broadcast(y, src=last, group=group)
        return {
            "member": True,
            "group_rank": dist.get_rank(group),
            "group_size": dist.get_world_size(group),
            "backend": dist.get_backend(group),
            "ranks": dist.get_process_group_ranks(group),
            "all_reduce": x,
            "broadcast": y,
        }

    return cases


# -------------------------------------------------------------------------------------- main


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, help="default: $RANK (then --init defaults to env://)")
    parser.add_argument("--world", type=int, help="default: $WORLD_SIZE")
    parser.add_argument("--init", help="init_method, e.g. tcp://127.0.0.1:PORT (default env://)")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--timeout", type=float, default=60.0, help="process group timeout, s")
    parser.add_argument("--only", default="", help="run only the cases whose names start with this")
    parser.add_argument("--out", required=True, help="JSON file; {rank} is replaced by the rank")
    args = parser.parse_args()

    rank = args.rank if args.rank is not None else int(os.environ["RANK"])
    world = args.world if args.world is not None else int(os.environ["WORLD_SIZE"])
    init = args.init or "env://"
    timeout = timedelta(seconds=args.timeout)
    dist.init_process_group(args.backend, init_method=init, rank=rank, world_size=world, timeout=timeout)

    results = {}
    for name, thunk in build_cases(rank, world):
        if not name.startswith(args.only):
            continue
        # progress on stderr: a hang or a crash names its case
        print(f"[rank {rank}] {name}", file=sys.stderr, flush=True)
        try:
            results[name] = {"result": encode(thunk())}
        except Exception as e:  # noqa: BLE001 - a refusal is a result to compare
            message = str(e).strip().splitlines()[0] if str(e).strip() else ""
            results[name] = {"error": {"type": type(e).__name__, "message": message}}

    dist.destroy_process_group()
    meta = {
        "rank": rank,
        "world": world,
        "init": init,
        "torch": torch.__version__,
        # the face's torch._C has the registry hook; upstream's does not
        "implementation": "face" if hasattr(torch._C, "_tn_registry_names") else "upstream",
        "initialized_after_destroy": dist.is_initialized(),
    }
    with open(args.out.replace("{rank}", str(rank)), "w") as f:
        json.dump({"meta": meta, "cases": results}, f, indent=0)


if __name__ == "__main__":
    main()
