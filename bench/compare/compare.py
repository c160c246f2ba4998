"""Run llama-bench and `torchnative bench` on the same GGUF files and tabulate ours / llama.cpp.

Called by run.sh, which builds both engines. Standard library only (the transformers column
runs hf_time.py under the oracle venv's python).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

MODEL_NAME = "SmolLM2-135M-Instruct"
DERIVED_TYPES = ["Q8_0", "Q4_K_M", "Q4_0"]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_json(cmd):
    log("$ " + " ".join(str(c) for c in cmd))
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if out.returncode != 0:
        return None, (out.stderr.strip().splitlines() or ["exit %d" % out.returncode])[-1]
    try:
        return json.loads(out.stdout), None
    except json.JSONDecodeError as e:
        return None, "output is not JSON (%s): %s" % (e, out.stdout[:200])


def derive_models(llama_bin, source, derived_dir):
    """F16 copy of the Q4_1 file, then each type quantized from that F16 (not from Q4_1, so each
    file is as good as its type allows; the weights are still Q4_1's dequantized values)."""
    derived_dir.mkdir(parents=True, exist_ok=True)
    quantize = llama_bin / "llama-quantize"
    f16 = derived_dir / ("%s.F16-from-Q4_1.gguf" % MODEL_NAME)
    files = {"Q4_1": source}
    jobs = [(source, f16, "F16")] + [
        (f16, derived_dir / ("%s.%s-from-Q4_1.gguf" % (MODEL_NAME, t)), t) for t in DERIVED_TYPES
    ]
    for src, dst, qtype in jobs:
        if not dst.is_file():
            tmp = dst.with_suffix(".tmp-%d" % os.getpid())
            cmd = [quantize, "--allow-requantize", src, tmp, qtype]
            log("$ " + " ".join(str(c) for c in cmd))
            subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            tmp.rename(dst)
        if qtype != "F16":
            files[qtype] = dst
    return files


def weight_types(torchnative, path):
    info, err = run_json([torchnative, "info", path, "--json"])
    if info is None:
        return "? (%s)" % err
    return ", ".join("%s x%d" % (w["type"], w["matrices"]) for w in info.get("weight_types", []))


def cpu_has_amx():
    try:
        with open("/proc/cpuinfo") as f:
            return " amx_int8" in f.read()
    except OSError:
        return False


def llama_bench(llama_bin, path, threads, reps):
    cmd = [llama_bin / "llama-bench", "-m", path, "-p", 512, "-n", 128, "-t", threads, "-r", reps, "-o", "json"]
    if cpu_has_amx():
        # llama.cpp's AMX repacked buffers crash (SIGSEGV in ggml_backend_amx_mul_mat) on AMX CPUs
        # in this sandbox; without repacking it runs its AVX-512 kernels. Noted in the output.
        cmd += ["--repack", 0]
    rows, err = run_json(cmd)
    if rows is None:
        return {}, err
    out = {}
    for r in rows:
        test = "pp%d" % r["n_prompt"] if r["n_prompt"] else "tg%d" % r["n_gen"]
        out[test] = {"tokens_per_second": r["avg_ts"], "stddev": r["stddev_ts"]}
    return out, None


def ours_bench(torchnative, path, threads, reps, dtype="native"):
    rows, err = run_json([torchnative, "bench", path, "-p", 512, "-n", 128, "-t", threads, "-r", reps,
                          "--dtype", dtype, "--json"])
    if rows is None:
        return {}, err
    return {r["test"]: {"tokens_per_second": r["tokens_per_second"], "stddev": r["stddev"],
                        "peak_rss_bytes": r.get("peak_rss_bytes")} for r in rows}, None


def rss_budget(torchnative, path):
    """The issue's memory target for `bench -p 512 -n 128`: file + KV cache (641 positions) + 64 MiB."""
    info, _ = run_json([torchnative, "info", path, "--json"])
    if info is None:
        return None
    return info["file_bytes"] + (512 + 128 + 1) * info["kv_cache_bytes_per_token"] + 64 * 2**20


def transformers_bench(oracle_python, home, threads, reps):
    model_dir = home / "derived" / ("%s.Q4_1.safetensors-f32" % MODEL_NAME)
    if not (model_dir / "done").is_file():
        return {}, "no f32 safetensors copy at %s (the runtime parity tests make it)" % model_dir
    script = Path(__file__).with_name("hf_time.py")
    return run_json([oracle_python, "-W", "ignore", script, model_dir, threads, reps])


def fmt_rate(r):
    return "%8.1f ±%5.1f" % (r["tokens_per_second"], r["stddev"]) if r else "%14s" % "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-bin", type=Path, required=True)
    ap.add_argument("--torchnative", type=Path, required=True)
    ap.add_argument("--home", type=Path, required=True)
    ap.add_argument("--oracle-python", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--transformers", action="store_true", help="add transformers f32 (Q4_1 dequantized)")
    ap.add_argument("--runtime", action="store_true",
                    help="add ours with f32 and bf16 weights (Q4_1 dequantized at load) at 1 and --threads "
                         "threads beside transformers f32 at the same thread counts (needs the oracle)")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--llama-bench-bin", type=Path,
                    help="llama-bench's dir when it is another build than --llama-bin's (whose "
                         "llama-quantize makes the derived files)")
    ap.add_argument("--isa", help="TORCHNATIVE_ISA for ours (e.g. avx2, beside a llama.cpp built "
                                  "without AVX-512)")
    a = ap.parse_args()
    if a.isa:
        # Inherited by every `torchnative` subprocess: the core and the packed kernels both obey it.
        os.environ["TORCHNATIVE_ISA"] = a.isa
    bench_bin = a.llama_bench_bin or a.llama_bin

    source = Path(os.environ.get("TORCHNATIVE_MODEL", a.home / "models" / ("%s.Q4_1.gguf" % MODEL_NAME)))
    files = derive_models(a.llama_bin, source, a.home / "models" / "derived")
    load_before = os.getloadavg()
    results = {}
    for qtype, path in files.items():
        # Interleaved per file so background load on a shared machine hits both engines alike.
        peer, peer_err = llama_bench(bench_bin, path, a.threads, a.reps)
        ours, ours_err = ours_bench(a.torchnative, path, a.threads, a.reps)
        results[qtype] = {
            "file": str(path),
            "weight_types": weight_types(a.torchnative, path),
            "rss_budget_bytes": rss_budget(a.torchnative, path),
            "llama_cpp": peer,
            "llama_cpp_error": peer_err,
            "torchnative": ours,
            "torchnative_error": ours_err,
        }
    runtime = {}
    if a.runtime and a.oracle_python:
        # One row per (threads, engine): the dense-weight runtime against transformers f32 on the
        # same Q4_1-dequantized weights.
        for threads in sorted({1, a.threads}):
            reps = max(1, a.reps // 2)
            row = {}
            for dtype in ("f32", "bf16"):
                r, err = ours_bench(a.torchnative, source, threads, reps, dtype)
                row["torchnative_" + dtype] = r if r else {"error": err}
            h, err = transformers_bench(a.oracle_python, a.home, threads, reps)
            row["transformers_f32"] = h if h else {"error": err}
            runtime[threads] = row
    hf = None
    if a.transformers and a.oracle_python:
        hf, hf_err = transformers_bench(a.oracle_python, a.home, a.threads, max(1, a.reps // 2))
        if hf is None:
            log("transformers: " + hf_err)
    load_after = os.getloadavg()

    header = "%-7s %-6s %14s %14s %7s" % ("file", "test", "llama.cpp t/s", "ours t/s", "ratio")
    if hf:
        header += " %14s %9s" % ("hf f32 t/s", "ours/hf")
    print(header)
    for qtype, r in results.items():
        for test in ("pp512", "tg128"):
            p, o = r["llama_cpp"].get(test), r["torchnative"].get(test)
            ratio = "%7.2f" % (o["tokens_per_second"] / p["tokens_per_second"]) if p and o else "%7s" % "-"
            line = "%-7s %-6s %14s %14s %s" % (qtype, test, fmt_rate(p), fmt_rate(o), ratio)
            if hf and qtype == "Q4_1":
                h = hf.get(test)
                line += " %14s %9s" % (fmt_rate(h), "%.2f" % (o["tokens_per_second"] / h["tokens_per_second"]) if h and o else "-")
            print(line)
        for who in ("llama_cpp", "torchnative"):
            if r[who + "_error"]:
                print("  %s on %s failed: %s" % (who, qtype, r[who + "_error"]))
        print("  %s weights: %s" % (qtype, r["weight_types"]))
        rss = max((t.get("peak_rss_bytes") or 0 for t in r["torchnative"].values()), default=0)
        if rss and r["rss_budget_bytes"]:
            print("  %s peak RSS %.1f MiB, budget (file + KV + 64 MiB) %.1f MiB: %s" % (
                qtype, rss / 2**20, r["rss_budget_bytes"] / 2**20,
                "within" if rss <= r["rss_budget_bytes"] else "OVER"))
    if runtime:
        print()
        print("%-8s %-6s %14s %14s %14s %9s %9s" % (
            "threads", "test", "ours f32 t/s", "ours bf16 t/s", "hf f32 t/s", "f32/hf", "bf16/hf"))
        for threads, row in runtime.items():
            for test in ("pp512", "tg128"):
                f, b, h = (row[k].get(test) for k in ("torchnative_f32", "torchnative_bf16", "transformers_f32"))
                rel = lambda o: "%.2f" % (o["tokens_per_second"] / h["tokens_per_second"]) if o and h else "-"
                print("%-8d %-6s %14s %14s %14s %9s %9s" % (threads, test, fmt_rate(f), fmt_rate(b), fmt_rate(h),
                                                            rel(f), rel(b)))
            for k, v in row.items():
                if "error" in v:
                    print("  %s at %d threads failed: %s" % (k, threads, v["error"]))
    print("threads %d, reps %d, load average before %.1f after %.1f (%d CPUs)%s" % (
        a.threads, a.reps, load_before[0], load_after[0], os.cpu_count(),
        ", ours with TORCHNATIVE_ISA=%s, llama-bench from %s" % (a.isa, bench_bin) if a.isa else ""))
    if max(load_before[0], load_after[0]) > os.cpu_count():
        # Seen here: at load 6 on 2 CPUs llama.cpp's tg128 fell from ~135 to ~6 tokens/s while
        # ours (rayon workers that sleep) lost far less; such ratios say nothing about kernels.
        print("WARNING: the machine was busy; llama.cpp's spinning thread barriers suffer most "
              "from that, so these ratios are not a fair comparison. Rerun when it is idle.")

    out = a.out or a.home / "bench" / ("compare-%s.json" % time.strftime("%Y%m%dT%H%M%S"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "threads": a.threads,
        "reps": a.reps,
        "torchnative_isa": a.isa,
        "llama_bench_bin": str(bench_bin),
        "host": platform.node(),
        "load_average": [load_before, load_after],
        "results": results,
        "transformers_f32_q4_1": hf,
        "runtime_dense_weights": runtime,
    }, indent=2))
    print("results: %s" % out)


if __name__ == "__main__":
    main()
