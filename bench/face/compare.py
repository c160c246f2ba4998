"""transformers `generate` on the face beside the same on upstream PyTorch, in one run.

usage: compare.py --face PY --upstream PY --model GGUF [--threads N] [--reps N] [--new N]
                  [--out FILE.json]

Runs gen_time.py under each python, alternating sides per round so that machine noise hits
both, and prints time to first token and decode tokens/s with the ratio face / upstream
(above 1 means the face is faster for tokens/s; for TTFT, upstream's time / the face's), and
the same model captured from the face by `torchnative_face.capture` (the native runtime over
the module's tensors) with its speed-up over the face's eager `generate`. Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(python, args, capture=False):
    cmd = [python, os.path.join(HERE, "gen_time.py"), args.model, str(args.threads), str(args.reps),
           str(args.new)] + (["capture"] if capture else [])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit("gen_time.py failed under %s:\n%s" % (python, done.stderr[-3000:]))
    return json.loads(done.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--face", required=True)
    p.add_argument("--upstream", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--new", type=int, default=128)
    p.add_argument("--out")
    args = p.parse_args()
    results = {"face": [], "upstream": [], "capture": []}
    for _ in range(args.rounds):
        for side, python, capture in (("upstream", args.upstream, False), ("face", args.face, False),
                                      ("capture", args.face, True)):
            results[side].append(run(python, args, capture))
    face, up, cap = results["face"], results["upstream"], results["capture"]
    if face[0]["tokens"] != up[0]["tokens"]:
        print("WARNING: the face generated other tokens than upstream", file=sys.stderr)

    def med(side, key):
        return statistics.median(v for r in side for v in r[key.replace("_s", "_all").replace("_tok_all", "_all")])

    ttft_f, ttft_u = med(face, "ttft_s"), med(up, "ttft_s")
    dec_f, dec_u = med(face, "decode_tok_s"), med(up, "decode_tok_s")
    ttft_c, dec_c = med(cap, "ttft_s"), med(cap, "decode_tok_s")
    print("transformers generate, SmolLM2-135M-Instruct (GGUF dequantized to f32), %d prompt tokens, "
          "%d new tokens, %d threads, %d runs per side" % (face[0]["prompt_tokens"], args.new,
                                                           face[0]["threads"], args.reps * args.rounds))
    print("| | upstream torch | face | face vs upstream | face, captured | captured vs face |")
    print("|---|---:|---:|---:|---:|---:|")
    print("| time to first token | %.1f ms | %.1f ms | %.2fx | %.1f ms | %.2fx |" % (
        ttft_u * 1e3, ttft_f * 1e3, ttft_u / ttft_f, ttft_c * 1e3, ttft_f / ttft_c))
    print("| decode | %.1f tok/s | %.1f tok/s | %.2fx | %.1f tok/s | %.2fx |" % (
        dec_u, dec_f, dec_f / dec_u, dec_c, dec_c / dec_f))
    eos = face[0]["eos"]

    def until_eos(tokens):
        return tokens[:tokens.index(eos) + 1] if eos in tokens else tokens

    print("same tokens: face vs upstream %s; captured vs face, up to the first EOS, %s" % (
        face[0]["tokens"] == up[0]["tokens"], until_eos(cap[0]["tokens"]) == until_eos(face[0]["tokens"])))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
