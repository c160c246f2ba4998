"""transformers f32 speed on the same workload as llama-bench: pp512 (one forward over 512
tokens) and tg128 (128 cached single-token steps after one token).

usage: hf_time.py MODEL_DIR THREADS REPS   -> JSON {"pp512": {...}, "tg128": {...}} on stdout
"""

import json
import statistics
import sys
import time

import torch
from transformers import AutoModelForCausalLM


def rate_stats(rates):
    return {
        "tokens_per_second": statistics.mean(rates),
        "stddev": statistics.stdev(rates) if len(rates) > 1 else 0.0,
    }


def main():
    model_dir, threads, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32).eval()
    vocab = model.config.vocab_size
    # The same deterministic ids torchnative's bench uses (any ids do: the cost is shape-bound).
    ids = torch.tensor([[(i * 2654435761 + 17) % vocab for i in range(512)]])
    pp, tg = [], []
    with torch.inference_mode():
        model(ids[:, :8])  # warm-up
        for _ in range(reps):
            t = time.perf_counter()
            model(ids, use_cache=False)
            pp.append(512 / (time.perf_counter() - t))
        for _ in range(reps):
            out = model(ids[:, :1], use_cache=True)
            past = out.past_key_values
            t = time.perf_counter()
            for i in range(128):
                out = model(ids[:, i + 1 : i + 2], past_key_values=past, use_cache=True)
                past = out.past_key_values
            tg.append(128 / (time.perf_counter() - t))
    print(json.dumps({"pp512": rate_stats(pp), "tg128": rate_stats(tg)}))


if __name__ == "__main__":
    main()
