"""Architecture sweep: every causal-LM architecture transformers ships (and the encoder families
BERT, RoBERTa, DistilBERT, ModernBERT, T5 encoder), each as a tiny random model built from its
config (seeded, no download) under upstream, saved with ``save_pretrained``, loaded with
``from_pretrained`` under the face, and run forward on the same ids::

    python3 torch-face/sweep/arch_sweep.py --oracle ORACLE_PY --face FACE_PY \\
        [--only REGEX] [--report FILE] [--json FILE] [--workdir DIR]

Categories per architecture:

* ``agree``: the face's output (logits, or the last hidden state of an encoder) is within
  ``4 * err + 4 ulp(mag)`` of upstream's everywhere, where ``err`` is upstream's own largest
  float32 error against its float64 run of the same model and ``mag`` the largest magnitude
  (the golden harness's rule for accumulating results);
* ``disagree``: outside it (the worst element and how far);
* ``refused``: the face raised NotImplementedError (the operator it names);
* ``face error``: another exception where upstream ran;
* ``unsweepable``: upstream itself could not build or run the tiny model (a config that needs
  more than size fields shrunk, a vision tower, an optional dependency): not judgeable.

Exit status 1 when an architecture disagrees or fails on the face where upstream ran (a bug
to find; refusals by name and unsweepable architectures are counted, not failed), 2 when a
side could not run, else 0.
"""
import argparse
import base64
import json
import math
import os
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIDE = os.path.join(HERE, "arch_side.py")

K, U = 4.0, 4.0


def run_side(label, cmd, mode, models, out, only, timeout, log):
    """Runs arch_side.py until it has written every architecture, restarting after a crash
    (skipping the architecture it died on, which is recorded as a crash)."""
    total, start, crashes = None, 0, 0
    t0 = time.time()
    while True:
        argv = shlex.split(cmd) + [SIDE, "--mode", mode, "--dir", models, "--out", out,
                                   "--start", str(start)]
        if only:
            argv += ["--only", only]
        with open(log, "a") as lf:
            try:
                p = subprocess.run(argv, stdout=lf, stderr=subprocess.STDOUT, timeout=timeout,
                                   env=dict(os.environ, HF_HUB_DISABLE_PROGRESS_BARS="1",
                                            TRANSFORMERS_VERBOSITY="error", HF_HUB_OFFLINE="1"))
                rc = p.returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
        recs = read(out)
        header = next((r for r in recs if r.get("header")), None)
        if header is None:
            return None, "%s: no header (exit %s); see %s" % (label, rc, log)
        total = len(header["archs"])
        done = {r["i"] for r in recs if "i" in r}
        if rc == 0 or len(done) >= total:
            return recs, None
        nxt = max(done) + 1 if done else start
        # the architecture after the last recorded one killed the side
        if nxt < total:
            with open(out, "a") as fh:
                fh.write(json.dumps({"arch": header["archs"][nxt].split("/")[0],
                                     "cls": header["archs"][nxt].split("/")[1], "i": nxt,
                                     "phase": "crash", "exc": {"type": "Crash", "msg": "side exited %s" % rc}}) + "\n")
        crashes += 1
        start = nxt + 1
        if crashes > 50 or start >= total or time.time() - t0 > timeout:
            return read(out), None


def read(path):
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def dec(s, fmt):
    b = base64.b64decode(s)
    n = len(b) // struct.calcsize(fmt)
    return struct.unpack("<%d%s" % (n, fmt), b)


def ulp32(x):
    x = abs(x)
    if x == 0 or not math.isfinite(x):
        return 2.0 ** -149
    e = math.frexp(x)[1]
    return 2.0 ** (e - 24)


def judge(o, f):
    """(category, detail) for one architecture."""
    if o is None or "exc" in o:
        why = (o or {}).get("exc", {}).get("msg", "no upstream result")
        return "unsweepable", "upstream %s: %s" % ((o or {}).get("phase", "?"), why[:160])
    if f is None:
        return "face error", "no face result"
    if "exc" in f:
        e = f["exc"]
        if e["type"] == "NotImplementedError":
            m = re.search(r"operator (\S+) has no kernel", e["msg"])
            return "refused", (m.group(1) if m else e["msg"][:160])
        return "face error", "%s in %s: %s" % (e["type"], f.get("phase", "?"), e["msg"][:200])
    if f["shape"] != o["shape"]:
        return "disagree", "shape %s vs upstream %s" % (f["shape"], o["shape"])
    up, ref, face = dec(o["out"], "f"), dec(o["ref64"], "d"), dec(f["out"], "f")
    err = max((abs(u - r) for u, r in zip(up, ref) if math.isfinite(u) and math.isfinite(r)),
              default=0.0)
    mag = max((abs(u) for u in up if math.isfinite(u)), default=0.0)
    tol = K * err + U * ulp32(mag)
    worst, wi = 0.0, -1
    for i, (u, v) in enumerate(zip(up, face)):
        if math.isnan(u) or math.isnan(v):
            if math.isnan(u) != math.isnan(v):
                return "disagree", "NaN at %d (face %r, upstream %r)" % (i, v, u)
            continue
        d = abs(u - v)
        if d > worst:
            worst, wi = d, i
    if worst > tol:
        return "disagree", "max |diff| %.3g at %d (tolerance %.3g; upstream's float32 error %.3g, " \
                           "magnitude %.3g)" % (worst, wi, tol, err, mag)
    return "agree", "max |diff| %.3g (tolerance %.3g)" % (worst, tol)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle", required=True, help="command prefix of upstream's python")
    ap.add_argument("--face", required=True, help="command prefix of the face's python")
    ap.add_argument("--only", default=None, help="regex on model types")
    ap.add_argument("--report", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per side")
    ap.add_argument("--reuse-oracle", action="store_true",
                    help="keep --workdir's upstream side (models and results) from an earlier run")
    args = ap.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="arch-sweep-")
    models = os.path.join(work, "models")
    os.makedirs(models, exist_ok=True)
    t0 = time.time()
    oracle_out = os.path.join(work, "oracle.jsonl")
    if args.reuse_oracle and any(r.get("header") for r in read(oracle_out)):
        orecs, err = read(oracle_out), None
    else:
        for stale in (oracle_out, os.path.join(work, "face.jsonl")):
            if os.path.exists(stale):
                os.remove(stale)
        orecs, err = run_side("oracle", args.oracle, "build", models, oracle_out,
                              args.only, args.timeout, os.path.join(work, "oracle.log"))
    if err:
        print("arch sweep: " + err, file=sys.stderr)
        return 2
    t1 = time.time()
    if os.path.exists(os.path.join(work, "face.jsonl")):
        os.remove(os.path.join(work, "face.jsonl"))
    frecs, err = run_side("face", args.face, "run", models, os.path.join(work, "face.jsonl"),
                          args.only, args.timeout, os.path.join(work, "face.log"))
    if err:
        print("arch sweep: " + err, file=sys.stderr)
        return 2
    t2 = time.time()
    oh = next(r for r in orecs if r.get("header"))
    fh = next(r for r in frecs if r.get("header"))
    by_o = {r["i"]: r for r in orecs if "i" in r}
    by_f = {r["i"]: r for r in frecs if "i" in r}
    rows = []
    for i, name in enumerate(oh["archs"]):
        cat, why = judge(by_o.get(i), by_f.get(i))
        rows.append({"arch": name, "category": cat, "detail": why})
    counts = {}
    for r in rows:
        counts[r["category"]] = counts.get(r["category"], 0) + 1
    swept = len(rows)
    ran = sum(1 for r in rows if r["category"] in ("agree", "disagree"))
    judgeable = swept - counts.get("unsweepable", 0)
    print("arch sweep: %d architectures (upstream torch %s, transformers %s; face torch %s)" % (
        swept, oh["torch"], oh["transformers"], fh["torch"]))
    for c in ("agree", "disagree", "refused", "face error", "unsweepable"):
        print("  %-12s %4d" % (c, counts.get(c, 0)))
    print("  forward runs on the face: %d; agree %d of %d judgeable; time: upstream %.0fs, face %.0fs"
          % (ran, counts.get("agree", 0), judgeable, t1 - t0, t2 - t1))
    refused_ops = {}
    for r in rows:
        if r["category"] == "refused":
            refused_ops[r["detail"]] = refused_ops.get(r["detail"], 0) + 1
    for r in rows:
        if r["category"] in ("disagree", "face error"):
            print("  %-10s %s: %s" % (r["category"].upper(), r["arch"], r["detail"]))
    if refused_ops:
        print("  refused by: " + ", ".join("%s (%d)" % kv for kv in
                                           sorted(refused_ops.items(), key=lambda kv: -kv[1])))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"counts": counts, "rows": rows, "upstream": oh, "face_torch": fh["torch"]},
                      f, indent=1)
    if args.report:
        lines = ["### Architecture sweep (`torch-face/sweep/arch_sweep.py`)", "",
                 "%d architectures: %s; %d forward runs on the face, %d of %d judgeable agree." % (
                     swept, ", ".join("%s %d" % (c, counts.get(c, 0)) for c in
                                      ("agree", "disagree", "refused", "face error", "unsweepable")),
                     ran, counts.get("agree", 0), judgeable), "",
                 "| Architecture | Category | Detail |", "|---|---|---|"]
        for r in rows:
            lines.append("| `%s` | %s | %s |" % (r["arch"], r["category"],
                                                 r["detail"].replace("|", "\\|").replace("\n", " ")))
        with open(args.report, "w") as f:
            f.write("\n".join(lines) + "\n")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts.get("disagree", 0) or counts.get("face error", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
