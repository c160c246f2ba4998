"""Upstream PyTorch's f32 `linear` on SmolLM2-135M's projection shapes (GFLOP/s), the peer of
`cargo run --profile ci -p torchnative-core --example linear_tiles [THREADS]`: same shapes, same
row counts, same repetition rule, median of 9.

usage: ORACLE_PYTHON bench/face/linear_upstream.py [THREADS]
"""

import sys
import time

import torch


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    torch.set_num_threads(threads)
    print("upstream torch %s, cpu capability %s, %d threads" % (
        torch.__version__, torch.backends.cpu.get_cpu_capability(), threads))
    gen = torch.Generator().manual_seed(1)
    for k, n in [(576, 576), (576, 192), (576, 1536), (1536, 576)]:
        for m in (16, 75, 256):
            x = torch.rand(m, k, generator=gen) - 0.5
            w = torch.rand(n, k, generator=gen) - 0.5
            reps = max(3, min(200, 20_000_000 // (m * k * n)))
            times = []
            for _ in range(9):
                t = time.perf_counter()
                for _ in range(reps):
                    torch.nn.functional.linear(x, w)
                times.append((time.perf_counter() - t) / reps * 1e6)
            us = sorted(times)[4]
            print("k=%5d n=%5d m=%4d: %8.1f us %6.1f GFLOP/s" % (k, n, m, us, 2 * m * k * n / us / 1e3))


if __name__ == "__main__":
    main()
