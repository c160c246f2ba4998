"""torch side of bench/core: times the same shapes as the Rust benchmark and prints one JSON
object on stdout. Usage: torch_bench.py --threads T [--quick]"""
import argparse
import json
import time

import torch


def best_time(fn, min_batch_s):
    """Best per-call time over 7 batches, each long enough to be measurable."""
    fn()
    reps, t0 = 1, time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-7)
    reps = max(1, int(min_batch_s / once))
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        best = min(best, (time.perf_counter() - t0) / reps)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    batch = 0.02 if args.quick else 0.1
    out = {"torch_version": torch.__version__, "threads": torch.get_num_threads()}
    torch.manual_seed(0)
    with torch.inference_mode():
        a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
        t = best_time(lambda: torch.mm(a, b), batch)
        out["matmul_1024_gflops"] = 2 * 1024**3 / t / 1e9
        gemv = {}
        for n, k in [(576, 1536), (1536, 576), (2048, 8192), (8192, 2048), (49152, 576)]:
            for name, dt in [("f32", torch.float32), ("f16", torch.float16), ("bf16", torch.bfloat16)]:
                w = torch.randn(n, k).to(dt)
                # torch has no mixed f32-activation / half-weight linear on CPU: x is cast too.
                x = torch.randn(1, k).to(dt)
                t = best_time(lambda: torch.nn.functional.linear(x, w), batch)
                gemv[f"{n}x{k}_{name}"] = {"us": t * 1e6, "gbps": n * k * w.element_size() / t / 1e9}
        out["gemv"] = gemv
        m, k, n = 64, 576, 1536
        for name, dt in [("f32", torch.float32), ("bf16", torch.bfloat16)]:
            x, w = torch.randn(m, k).to(dt), torch.randn(n, k).to(dt)
            t = best_time(lambda: torch.nn.functional.linear(x, w), batch)
            out[f"prefill_{name}_gflops"] = 2 * m * k * n / t / 1e9
        x = torch.randn(32, 4096)
        w = torch.randn(4096)
        t = best_time(lambda: torch.softmax(x, dim=-1), batch)
        out["softmax_32x4096_us"] = t * 1e6
        t = best_time(lambda: torch.nn.functional.rms_norm(x, (4096,), w, 1e-5), batch)
        out["rms_norm_32x4096_us"] = t * 1e6
    print(json.dumps(out))


if __name__ == "__main__":
    main()
