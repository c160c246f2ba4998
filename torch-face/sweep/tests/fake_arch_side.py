"""A stand-in interpreter for arch_sweep.py's tests: no torch, no transformers.

Used as a command prefix (``--oracle "env FAKE_ROLE=oracle python3 fake_arch_side.py"``): the
driver appends arch_side.py (or oracle_fingerprint.py) and its arguments.

* ``oracle_fingerprint.py``: the real script (``runpy``), reading the fake dist-infos on
  PYTHONPATH.
* ``arch_side.py``: its protocol (--mode list/build/run, --dir, --out, --start, --only,
  --names; a header with ``archs`` and ``all_archs``; one record per architecture, ``i`` its
  index).  build saves a "model" (a weights file derived from the name) under --dir and records
  the values; run loads the weights and records them (so the sides agree), skipping an
  architecture without a saved model, as arch_side.py does.

Every invocation appends a JSON line to ``$FAKE_SIDE_LOG``: role, script, mode, names.
"""
import argparse
import base64
import hashlib
import json
import os
import re
import runpy
import struct
import sys

SWEEP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, SWEEP)
from arch_side import ENCODERS  # noqa: E402  (stdlib only at import time)

DECODERS = ["bart", "deepseek_v3", "gemma", "gemma3", "gemma3_text", "gpt2", "jamba", "llama",
            "mamba", "mistral", "mixtral", "olmo", "opt", "phi", "qwen2", "roberta", "stablelm",
            "starcoder2", "xlm", "zoo_a", "zoo_b", "zoo_c", "zoo_d", "zoo_e"]
ALL = ["%s/%sForCausalLM" % (m, m.capitalize()) for m in DECODERS] + ["%s/%s" % e for e in ENCODERS]


def log(entry):
    path = os.environ.get("FAKE_SIDE_LOG")
    if path:
        entry["role"] = os.environ.get("FAKE_ROLE", "?")
        with open(path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")


def values(name):
    h = hashlib.sha256(name.encode()).digest()
    return [b / 16.0 for b in h[:12]]


def enc(vals, fmt):
    return base64.b64encode(struct.pack("<%d%s" % (len(vals), fmt), *vals)).decode("ascii")


def arch_side(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", required=True)
    ap.add_argument("--dir")
    ap.add_argument("--out", required=True)
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--only")
    ap.add_argument("--names")
    args = ap.parse_args(argv)
    archs = list(ALL)
    if args.names:
        with open(args.names) as fh:
            archs = json.load(fh)
    if args.only:
        archs = [a for a in archs if re.search(args.only, a.split("/")[0])]
    log({"script": "arch_side.py", "pass": args.mode, "names": archs[args.start:]})
    with open(args.out, "a") as fh:
        if args.start == 0:
            fh.write(json.dumps({"header": True, "torch": "fake", "transformers": "fake",
                                 "archs": archs, "all_archs": ALL}) + "\n")
        if args.mode == "list":
            return 0
        for i, name in enumerate(archs):
            if i < args.start:
                continue
            mt, cls = name.split("/", 1)
            path = os.path.join(args.dir, "%s--%s" % (mt, cls))
            rec = {"arch": mt, "cls": cls, "i": i}
            if args.mode == "build":
                os.makedirs(path, exist_ok=True)
                vals = values(name)
                with open(os.path.join(path, "weights.json"), "w") as w:
                    json.dump(vals, w)
                rec["ref64"] = enc(vals, "d")
            else:
                if not os.path.isdir(path):
                    continue
                with open(os.path.join(path, "weights.json")) as w:
                    vals = json.load(w)
            rec["shape"] = [1, len(vals)]
            rec["out"] = enc(vals, "f")
            fh.write(json.dumps(rec) + "\n")
    return 0


def main():
    script, argv = sys.argv[1], sys.argv[2:]
    if os.path.basename(script) == "oracle_fingerprint.py":
        sys.argv = [script] + argv
        runpy.run_path(script, run_name="__main__")
        return 0
    if os.path.basename(script) == "arch_side.py":
        return arch_side(argv)
    print("fake_arch_side: no imitation of %s" % script, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
