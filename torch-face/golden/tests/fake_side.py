"""A stand-in interpreter for the harness's tests: no torch needed.

Used as a command prefix (``--oracle "env FAKE_ROLE=oracle python3 fake_side.py"``): the
harness appends a side script and its arguments, and this imitates that script's protocol.

* ``oracle_fingerprint.py``: runs the real script (``runpy``), so the fingerprint comes from
  whatever ``torch`` dist-info is on PYTHONPATH (the tests put a fake one there).
* ``run_side.py``: selects the cases with the real ``run_side.selected_cases`` (--module,
  --filter, --names, --ref64/--ref32, --start) and writes the real header and one record per
  case whose value is an int derived from the case's code (so both sides agree), or, for the
  names in ``FAKE_WRONG`` (comma-separated), a different one (a disagreement).  On the case
  named by ``FAKE_CRASH_AT`` (plain pass) the process dies.
* ``opinfo_side.py``: see ``fake_opinfo``.

Every invocation appends one JSON line to ``$FAKE_SIDE_LOG``: the role (``$FAKE_ROLE``), the
script, the pass and the names it ran, so a test can count what the oracle computed.
"""
import hashlib
import json
import os
import runpy
import sys

GOLDEN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, GOLDEN)


def log(entry):
    path = os.environ.get("FAKE_SIDE_LOG")
    if path:
        entry["role"] = os.environ.get("FAKE_ROLE", "?")
        with open(path, "a") as fh:
            fh.write(json.dumps(entry) + "\n")


def value(code, mode):
    return int(hashlib.sha256((mode + code).encode()).hexdigest()[:8], 16)


def fake_run_side(argv):
    import run_side
    args = run_side.build_parser().parse_args(argv)
    try:
        selected = run_side.selected_cases(args)
    except ValueError as e:
        print("fake run_side: %s" % e, file=sys.stderr)
        return 2
    mode = "ref32" if args.ref32 else "ref64" if args.ref64 else "plain"
    wrong = set(filter(None, os.environ.get("FAKE_WRONG", "").split(",")))
    todo = selected[args.start:]
    log({"script": "run_side.py", "pass": mode, "names": [c["name"] for c in todo]})
    with open(args.out, "w", buffering=1) as fh:
        fh.write(json.dumps({"header": True, "python": "fake", "torch": "fake-2.15.0",
                             "ref64": args.ref64, "cases": len(selected), "start": args.start,
                             "import_time": 0.0}) + "\n")
        for c in todo:
            if c["name"] == os.environ.get("FAKE_CRASH_AT") and mode == "plain":
                os._exit(3)  # dies on this case, as a segfaulting side would
            v = value(c["code"], mode) + (1 if c["name"] in wrong else 0)
            fh.write(json.dumps({"name": c["name"], "time": 0.0,
                                 "out": {"t": "int", "v": v}}) + "\n")
    return 0


# A few OpInfo keys, in "op_db order"; each has float32 samples and a tensor result.
OPINFOS = ["abs", "add", "linalg.norm", "mul", "sin", "sum.dim"]


def fake_opinfo(argv):
    """opinfo_side.py's protocol: --role oracle writes an OpInfo line and --samples samples per
    key and dtype (honouring --filter, --keys and the all_keys header field; the first sample
    of the key ``$FAKE_TIMEOUT_AT`` is a timeout skip); --role face answers each runnable
    sample with the oracle's own result."""
    import argparse
    import re
    ap = argparse.ArgumentParser()
    ap.add_argument("--role")
    ap.add_argument("--out")
    ap.add_argument("--inputs")
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--filter")
    ap.add_argument("--keys")
    ap.add_argument("--samples", type=int, default=2)
    ap.add_argument("--dtypes", default="float32")
    ap.add_argument("--sample-timeout", type=float, default=20.0)
    args = ap.parse_args(argv)
    if args.role == "face":
        with open(args.inputs) as fh:
            recs = [json.loads(line) for line in fh if line.strip()]
        recs = [r for r in recs if "inputs" in r and "skip" not in r]
        log({"script": "opinfo_side.py", "pass": "face", "names": [r["name"] for r in recs]})
        with open(args.out, "w", buffering=1) as fh:
            fh.write(json.dumps({"header": True, "role": "face", "torch": "fake",
                                 "cases": len(recs), "start": args.start}) + "\n")
            for r in recs[args.start:]:
                fh.write(json.dumps({"name": r["name"], "time": 0.0, "out": r["out"]}) + "\n")
        return 0
    keys = list(OPINFOS)
    if args.filter:
        keys = [k for k in keys if re.search(args.filter, k)]
    if args.keys:
        with open(args.keys) as fh:
            want = set(json.load(fh))
        keys = [k for k in keys if k in want]
    log({"script": "opinfo_side.py", "pass": "oracle", "names": keys})
    with open(args.out, "w", buffering=1) as fh:
        fh.write(json.dumps({"header": True, "role": "oracle", "torch": "fake-2.15.0",
                             "opinfos": len(keys), "samples": args.samples,
                             "dtypes": args.dtypes, "all_keys": OPINFOS}) + "\n")
        for k in keys:
            fh.write(json.dumps({"opinfo": k, "name": k, "variant": "", "path": "torch." + k,
                                 "why": None, "acc": False, "cls": "UnaryUfuncInfo"}) + "\n")
            for dt in args.dtypes.split(","):
                for i in range(args.samples):
                    if k == os.environ.get("FAKE_TIMEOUT_AT") and i == 0:
                        fh.write(json.dumps({"name": "%s|%s|%d" % (k, dt, i), "op": k,
                                             "dtype": dt, "skip": "upstream ran past %gs" %
                                             args.sample_timeout}) + "\n")
                        continue
                    v = value(k, "%s%d" % (dt, i))
                    fh.write(json.dumps({"name": "%s|%s|%d" % (k, dt, i), "op": k,
                                         "path": "torch." + k, "dtype": dt,
                                         "inputs": {"input": {"t": "int", "v": i}, "args":
                                                    {"t": "tuple", "items": []}, "kwargs": {}},
                                         "out": {"t": "int", "v": v}, "time": 0.0}) + "\n")
    return 0


def main():
    script, argv = sys.argv[1], sys.argv[2:]
    name = os.path.basename(script)
    if name == "oracle_fingerprint.py":
        log({"script": name, "pass": "fingerprint", "names": []})
        sys.argv = [script] + argv
        runpy.run_path(script, run_name="__main__")
        return 0
    if name == "run_side.py":
        return fake_run_side(argv)
    if name == "opinfo_side.py":
        return fake_opinfo(argv)
    print("fake_side: no imitation of %s" % script, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
