"""transformers `generate` on the face beside the same on upstream PyTorch, in one run.

usage: compare.py --face PY --upstream PY --model GGUF [--threads N] [--reps N] [--new N]
                  [--out FILE.json]

Runs gen_time.py under each python, alternating sides per round so that machine noise hits
both, and prints time to first token and decode tokens/s with the ratio face / upstream
(above 1 means the face is faster for tokens/s; for TTFT, upstream's time / the face's).
Standard library only.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(python, args):
    cmd = [python, os.path.join(HERE, "gen_time.py"), args.model, str(args.threads), str(args.reps),
           str(args.new)]
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
    results = {"face": [], "upstream": []}
    for _ in range(args.rounds):
        for side, python in (("upstream", args.upstream), ("face", args.face)):
            results[side].append(run(python, args))
    face, up = results["face"], results["upstream"]
    if face[0]["tokens"] != up[0]["tokens"]:
        print("WARNING: the face generated other tokens than upstream", file=sys.stderr)

    def med(side, key):
        return statistics.median(v for r in side for v in r[key.replace("_s", "_all").replace("_tok_all", "_all")])

    ttft_f, ttft_u = med(face, "ttft_s"), med(up, "ttft_s")
    dec_f, dec_u = med(face, "decode_tok_s"), med(up, "decode_tok_s")
    print("transformers generate, SmolLM2-135M-Instruct (GGUF dequantized to f32), %d prompt tokens, "
          "%d new tokens, %d threads, %d runs per side" % (face[0]["prompt_tokens"], args.new,
                                                           face[0]["threads"], args.reps * args.rounds))
    print("| | upstream torch | face | face vs upstream |")
    print("|---|---:|---:|---:|")
    print("| time to first token | %.1f ms | %.1f ms | %.2fx |" % (ttft_u * 1e3, ttft_f * 1e3, ttft_u / ttft_f))
    print("| decode | %.1f tok/s | %.1f tok/s | %.2fx |" % (dec_u, dec_f, dec_f / dec_u))
    print("same tokens: %s" % (face[0]["tokens"] == up[0]["tokens"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
