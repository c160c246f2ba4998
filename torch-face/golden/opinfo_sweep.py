"""OpInfo sweep: PyTorch's own OpInfo sample inputs, through upstream and through the face.

Why: a second opinion on the face next to our golden cases.  ``op_db``
(``torch.testing._internal.common_methods_invocations``) lists ~700 OpInfos with CPU sample
inputs written by PyTorch's authors.  For every OpInfo whose op the face can find by path,
its samples run under upstream (the oracle) and under the face, and every sample is judged with
the golden harness's rule (``judge.py``: exact metadata, integers and exceptions; floats within
4x upstream's own float64-reference error plus a few ulp; for float64 samples, which have no
wider reference, upstream's error is estimated from a float32 run scaled by the ratio of the
epsilons, at least 2**-46 of the value (about 64 ulp): see ``ref_from32``).  This is a measurement, not a gate.

Usage::

    python3 torch-face/golden/opinfo_sweep.py --oracle PY --face PY [--filter REGEX]
        [--samples N] [--dtypes float32,float64,int64,bool] [--report FILE] [--json FILE]
        [--oracle-cache DIR | --no-oracle-cache] [--workdir DIR] [--reuse-oracle]
        [--sample-timeout S] [--case-timeout S] [--fail-on-disagree] [--show N]

``--oracle`` / ``--face`` are command prefixes (shlex-split), as for compare.py:
``--face "env PYTHONPATH=/path/to/face python3"``.  ``--filter`` is a regex searched in the
OpInfo key ``name[.variant_test_name]``.  Defaults: 8 samples per OpInfo and dtype, dtypes
float32, float64, int64, bool (those the OpInfo supports on CPU).  Measured on 2 shared cores
(2026-12): oracle 65s (with its float64 reference calls), oracle-as-face 16s, 12.6k samples.

The oracle cache (``oracle_cache.py``; ``--oracle-cache DIR``, default
``$TORCHNATIVE_HOME/oracle-cache/opinfo`` when TORCHNATIVE_HOME is set, else off;
``--no-oracle-cache``): upstream's lines are kept per OpInfo, keyed by the oracle's fingerprint,
opinfo_side.py's source (and run_side.py's and judge.py's, which it imports), the OpInfo key,
``--dtypes``, ``--samples`` and ``--sample-timeout``, plus the list of every op_db key; only
the OpInfos it lacks run on the oracle (``opinfo_side.py --keys``), and one line says how many
came from it.  An OpInfo with a call that ran past its timeout is not cached.  The face is
never cached.  ``--reuse-oracle`` (with ``--workdir``) is the older spelling of
``--oracle-cache WORKDIR/oracle-cache``.

How (see opinfo_side.py): the oracle process enumerates op_db, encodes each sample's inputs,
upstream's result and upstream's result on float64-upcast inputs (the tolerance reference),
one JSON line per sample.  Then the face process rebuilds those inputs as face tensors (same
dtype, shape, strides, storage offset, values), calls the op by path and encodes its result.
The face runs under compare.py's ``SideRun``: a sample that crashes or stalls the face
(``--case-timeout`` seconds without progress) is an error and the face restarts after it.

Per sample: agree / disagree / refused (the face raised NotImplementedError, or lacks the
function) / error (crash, stall, unencodable face result, inputs the face could not rebuild).
Float results of pointwise OpInfos (UnaryUfuncInfo, BinaryUfuncInfo) are judged element by
element; every other OpInfo (reductions, matmuls, linalg, convolutions, norms, ...) as an
accumulating result (the tensor's largest error and magnitude for every element).  Ops whose
result values are uninitialized memory (``empty*``, ``new_empty*``, ``resize_*``) are compared
on metadata.

Per OpInfo: **pass** (every sample agrees), **fail** (some sample disagrees or errs; the first
reason is listed), **partial** (no disagreement, some samples refused), **refused** (every
sample refused), **unresolvable** (the op is a lambda or a test-tree helper with no path),
**unencodable** (no sample could be encoded or generated for the chosen dtypes).

Exit status: 0 (a measurement) unless the harness itself fails (2); with
``--fail-on-disagree``, 1 when some OpInfo fails.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import judge as J  # noqa: E402
from compare import SideRun  # noqa: E402
import oracle_cache  # noqa: E402
from opinfo_side import read_lines, runnable  # noqa: E402

SIDE = os.path.join(HERE, "opinfo_side.py")
PASS, FAIL, PARTIAL, REFUSED_OP, UNRESOLVABLE, UNENCODABLE = (
    "pass", "fail", "partial", "refused", "unresolvable", "unencodable")
ORDER = [FAIL, PARTIAL, REFUSED_OP, PASS, UNENCODABLE, UNRESOLVABLE]
# results whose values are uninitialized memory: compare metadata only
NO_VALUES = re.compile(r"^(empty|empty_like|empty_strided|empty_permuted|new_empty|"
                       r"new_empty_strided|resize_|resize_as_)(\.|$)")
MISSING_OP = re.compile(r"aten::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?")


def _groups(lines):
    """{OpInfo key: its lines (the OpInfo line, then its sample and skip lines)} of an oracle
    output, and the keys in the order they appear."""
    groups, order = {}, []
    for r in lines:
        if r.get("header"):
            continue
        k = r["opinfo"] if r.get("opinfo") is not None else r.get("op")
        if k not in groups:
            groups[k] = []
            order.append(k)
        groups[k].append(r)
    return groups, order


def _cacheable(group):
    """Whether an OpInfo's oracle lines are a result: not when a call or the sample generation
    ran past its timeout (a loaded machine, not upstream's behaviour)."""
    return not any(r.get("ref_timeout") or "ran past" in (r.get("skip") or "") for r in group)


def _entry_key(store, args, key):
    return store.key("opinfo", key, args.dtypes, args.samples, args.sample_timeout)


def run_oracle(args, workdir, store=None):
    """The oracle's lines for the selected OpInfos, from ``store`` (an oracle_cache.Store) where
    it has them and from one oracle run over the rest; (lines, header, wall, file, cached,
    computed), the lines also written to ``file`` for the face.  Raises SystemExit(2) when the
    oracle fails."""
    out = os.path.join(workdir, "oracle.jsonl")
    index = store.get(store.key("opinfo-index")) if store is not None else None
    keys, cached, missing = None, {}, None
    if index is not None:
        filt = re.compile(args.filter) if args.filter else None
        keys = list(dict.fromkeys(k for k in index["all_keys"] if filt is None or filt.search(k)))
        for k in keys:
            g = store.get(_entry_key(store, args, k))
            if g is not None:
                cached[k] = g
        missing = [k for k in keys if k not in cached]
    groups, wall, header = {}, 0.0, index["header"] if index is not None else None
    if index is None or missing:
        raw = os.path.join(workdir, "oracle.raw.jsonl")
        argv = shlex.split(args.oracle) + [SIDE, "--role", "oracle", "--out", raw,
                                           "--samples", str(args.samples), "--dtypes", args.dtypes,
                                           "--sample-timeout", str(args.sample_timeout)]
        if args.filter:
            argv += ["--filter", args.filter]
        if missing:
            kf = os.path.join(workdir, "oracle.keys.json")
            with open(kf, "w") as fh:
                json.dump(missing, fh)
            argv += ["--keys", kf]
        log = os.path.join(workdir, "oracle.log")
        t0 = time.time()
        with open(log, "w") as lf:
            lf.write("$ %s\n" % " ".join(shlex.quote(a) for a in argv))
            lf.flush()
            try:
                rc = subprocess.call(argv, stdout=lf, stderr=subprocess.STDOUT)
            except OSError as e:
                print("opinfo: cannot start the oracle: %s" % e, file=sys.stderr)
                raise SystemExit(2)
        wall = time.time() - t0
        lines = read_lines(raw) if os.path.exists(raw) else []
        if rc != 0 or not lines or not lines[0].get("header"):
            tail = open(log).read()[-2000:]
            last = next((r.get("opinfo") or r.get("op") for r in reversed(lines)
                         if r.get("opinfo") or r.get("op")), None)
            print("opinfo: the oracle failed (rc=%s, last OpInfo %s); log %s:\n%s" % (
                rc, last, log, tail), file=sys.stderr)
            raise SystemExit(2)
        header = {k: v for k, v in lines[0].items() if k != "all_keys"}
        groups, order = _groups(lines)
        if keys is None:
            keys = order
        if store is not None:
            store.put(store.key("opinfo-index"), {"all_keys": lines[0].get("all_keys", order),
                                                  "header": header})
            for k, g in groups.items():
                if _cacheable(g):
                    store.put(_entry_key(store, args, k), g)
            store.save()
    merged = [dict(header, opinfos=len(keys))]
    for k in keys:
        merged.extend(cached.get(k) or groups.get(k) or [])
    with open(out, "w") as fh:
        for r in merged:
            fh.write(json.dumps(r) + "\n")
    return merged, merged[0], wall, out, len(cached), len(keys) - len(cached)


def _strip_data(enc):
    if isinstance(enc, dict):
        enc = dict(enc)
        if enc.get("t") == "tensor":
            enc["data"] = ""
        if "items" in enc:
            enc["items"] = [_strip_data(e) for e in enc["items"]]
    return enc


def judge_sample(info, orec, frec):
    """(category, reason) for one sample."""
    if frec is not None and frec.get("phase") in ("inputs", "resolve"):
        e = frec["exc"]
        what = "the face cannot build the inputs" if frec["phase"] == "inputs" else \
            "the face has no %s" % orec.get("path")
        if e["type"] in ("NotImplementedError", "AttributeError"):
            return J.REFUSED, "%s: %s: %s" % (what, e["type"], e["msg"][:200])
        return J.ERROR, "%s: %s: %s" % (what, e["type"], e["msg"][:200])
    rrec = None
    if "ref" in orec:
        rrec = {"out": orec["ref"]}
    elif "ref32" in orec and "out" in orec:
        ref = J.ref_from32(orec["out"], orec["ref32"])
        rrec = {"out": ref} if ref is not None else None
    if NO_VALUES.search(info["opinfo"]) and frec is not None:
        orec = dict(orec, out=_strip_data(orec["out"])) if "out" in orec else orec
        frec = dict(frec, out=_strip_data(frec["out"])) if "out" in frec else frec
        rrec = None
    return J.judge({"acc": info["acc"]}, orec, frec, rrec)


def aggregate(lines, face_results):
    """Per OpInfo rows, in op_db order."""
    rows, infos = [], {}
    for r in lines:
        if r.get("opinfo") is not None:
            row = {"opinfo": r["opinfo"], "path": r["path"], "acc": r["acc"], "cls": r["cls"],
                   "samples": 0, J.AGREE: 0, J.DISAGREE: 0, J.REFUSED: 0, J.ERROR: 0,
                   "skipped": 0, "first": "", "first_skip": "", "missing": [],
                   "status": None, "why": r.get("why") or ""}
            infos[r["opinfo"]] = row
            rows.append(row)
    for r in lines:
        if r.get("header") or r.get("opinfo") is not None:
            continue
        row = infos[r["op"]]
        if "skip" in r:
            row["skipped"] += 1
            row["first_skip"] = row["first_skip"] or r["skip"]
            continue
        cat, why = judge_sample(row, r, face_results.get(r["name"]))
        row["samples"] += 1
        row[cat] += 1
        if cat == J.REFUSED:
            m = MISSING_OP.search(why)
            if m and m.group(0) not in row["missing"]:
                row["missing"].append(m.group(0))
        if cat != J.AGREE and (not row["first"] or (row["first_cat"] == J.REFUSED
                                                    and cat != J.REFUSED)):
            row["first"] = "%s [%s]: %s" % (r["name"], cat, why)
            row["first_cat"] = cat
    for row in rows:
        if row["path"] is None:
            row["status"] = UNRESOLVABLE
            row["first"] = row["why"]
        elif row["samples"] == 0:
            row["status"] = UNENCODABLE
            row["first"] = row["first_skip"] or "no sample inputs for the chosen dtypes"
        elif row[J.DISAGREE] or row[J.ERROR]:
            row["status"] = FAIL
        elif row[J.REFUSED] == row["samples"]:
            row["status"] = REFUSED_OP
        elif row[J.REFUSED]:
            row["status"] = PARTIAL
        else:
            row["status"] = PASS
        row.pop("first_cat", None)
    return rows


def totals(rows):
    tot = dict.fromkeys(ORDER, 0)
    for row in rows:
        tot[row["status"]] += 1
    samp = {k: sum(r[k] for r in rows) for k in ("samples", J.AGREE, J.DISAGREE, J.REFUSED,
                                                   J.ERROR, "skipped")}
    missing = {}
    for row in rows:
        for m in row["missing"]:
            missing[m] = missing.get(m, 0) + 1
    return tot, samp, missing


def _cell(s, n=220):
    return s.replace("|", "\\|").replace("\n", " ")[:n]


def write_report(path, args, rows, oh, fh_, times):
    tot, samp, missing = totals(rows)
    L = []
    L.append("### OpInfo sweep (`torch-face/golden/opinfo_sweep.py`)")
    L.append("")
    L.append("`python3 torch-face/golden/opinfo_sweep.py --oracle %s --face %s --samples %d "
             "--dtypes %s%s` (%s): upstream's `op_db` (torch %s) CPU samples through upstream "
             "and through the face (torch %s), judged with `judge.py`'s rule." % (
                 args.oracle, args.face, args.samples, args.dtypes,
                 " --filter '%s'" % args.filter if args.filter else "",
                 time.strftime("%Y-%m-%d"), oh.get("torch", "?"), fh_.get("torch", "?")))
    L.append("")
    L.append("OpInfos: %d — **pass %d**, fail %d, partial %d (some samples refused), "
             "refused %d, unresolvable %d (lambda / test helper), unencodable %d (no runnable "
             "sample)." % (len(rows), tot[PASS], tot[FAIL], tot[PARTIAL], tot[REFUSED_OP],
                           tot[UNRESOLVABLE], tot[UNENCODABLE]))
    L.append("Samples: %d run — agree %d, disagree %d, refused %d, error %d; %d skipped "
             "(unencodable)." % (samp["samples"], samp[J.AGREE], samp[J.DISAGREE],
                                 samp[J.REFUSED], samp[J.ERROR], samp["skipped"]))
    L.append("Runtime: oracle %.1fs, face %.1fs (restarts %d)." % times)
    if missing:
        top = sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))[:40]
        L.append("")
        L.append("Missing overloads named by refusals (OpInfos): " +
                 ", ".join("`%s` %d" % kv for kv in top) + ".")
    L.append("")
    L.append("| OpInfo | Status | Samples | Agree | Disagree | Refused | Error | First reason |")
    L.append("|---|---|---:|---:|---:|---:|---:|---|")
    for st in ORDER[:4]:
        for row in rows:
            if row["status"] == st:
                L.append("| `%s` | %s | %d | %d | %d | %d | %d | %s |" % (
                    row["opinfo"], st, row["samples"], row[J.AGREE], row[J.DISAGREE],
                    row[J.REFUSED], row[J.ERROR], _cell(row["first"])))
    for st in ORDER[4:]:
        names = [r["opinfo"] for r in rows if r["status"] == st]
        if names:
            L.append("")
            L.append("%s (%d): %s." % (st.capitalize(), len(names),
                                        ", ".join("`%s`" % n for n in names)))
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle", required=True, help="command prefix of upstream's python")
    ap.add_argument("--face", required=True, help="command prefix of the face's python")
    ap.add_argument("--filter", default=None, help="regex searched in OpInfo name[.variant]")
    ap.add_argument("--samples", type=int, default=8, help="samples per OpInfo and dtype")
    ap.add_argument("--dtypes", default="float32,float64,int64,bool",
                    help="comma-separated dtypes")
    ap.add_argument("--report", default=None, help="write a markdown report here")
    ap.add_argument("--json", default=None, help="write per-OpInfo rows as JSON here")
    ap.add_argument("--workdir", default=None, help="keep side outputs and logs here")
    oracle_cache.add_options(ap, "opinfo")
    ap.add_argument("--reuse-oracle", action="store_true",
                    help="(older spelling) use --workdir/oracle-cache as the oracle cache, "
                         "unless --oracle-cache names one")
    ap.add_argument("--sample-timeout", type=float, default=20.0,
                    help="seconds per call inside a side (SIGALRM)")
    ap.add_argument("--case-timeout", type=float, default=60.0,
                    help="seconds without a new face result before the face is killed")
    ap.add_argument("--fail-on-disagree", action="store_true",
                    help="exit 1 when some OpInfo fails")
    ap.add_argument("--show", type=int, default=30, help="failing OpInfos to print")
    args = ap.parse_args(argv)
    oracle_cache.check_options(ap, args)
    if args.filter:
        try:
            re.compile(args.filter)
        except re.error as e:
            ap.error("bad --filter: %s" % e)
    t0 = time.time()
    workdir = args.workdir or tempfile.mkdtemp(prefix="opinfo-")
    os.makedirs(workdir, exist_ok=True)
    keep = bool(args.workdir)
    store, cache_msg = oracle_cache.open_store(args, "opinfo", shlex.split(args.oracle),
                                               ["torch"], SIDE)
    try:
        lines, oh, owall, ofile, ncached, ncomputed = run_oracle(args, workdir, store)
        if store is None:
            print("opinfo: %s: %d OpInfos computed on the oracle" % (cache_msg, ncomputed))
        else:
            print("opinfo: oracle results: %d OpInfos from the cache, %d computed (%s)" % (
                ncached, ncomputed, store.path))
        names = [r["name"] for r in runnable(lines)]
        face = SideRun("face", shlex.split(args.face), names, workdir, None, False,
                       args.case_timeout, script=SIDE,
                       extra=["--role", "face", "--inputs", ofile,
                              "--sample-timeout", str(args.sample_timeout)])
        face.run()
        if face.fatal:
            print("opinfo: %s" % face.fatal, file=sys.stderr)
            keep = True
            if face.header is None:
                return 2
        if face.restarts:
            keep = True
        rows = aggregate(lines, face.results)
        tot, samp, missing = totals(rows)
        fh_ = face.header or {}
        print("opinfo: %d OpInfos (oracle torch %s, face torch %s), %d samples run, "
              "%d skipped" % (len(rows), oh.get("torch", "?"), fh_.get("torch", "?"),
                              samp["samples"], samp["skipped"]))
        for st in ORDER:
            print("  %-13s %5d" % (st, tot[st]))
        print("  samples: agree %d, disagree %d, refused %d, error %d" % (
            samp[J.AGREE], samp[J.DISAGREE], samp[J.REFUSED], samp[J.ERROR]))
        print("  time: oracle %.1fs, face %.1fs (restarts %d); total %.1fs%s" % (
            owall, face.wall, face.restarts, time.time() - t0,
            "; outputs and logs in " + workdir if keep else ""))
        bad = [r for r in rows if r["status"] == FAIL]
        for r in bad[:args.show]:
            print("  FAIL %s: %s" % (r["opinfo"], r["first"][:300]))
        if len(bad) > args.show:
            print("  ... %d more (see --report / --json)" % (len(bad) - args.show))
        if args.report:
            write_report(args.report, args, rows, oh, fh_, (owall, face.wall, face.restarts))
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"totals": tot, "samples": samp, "missing_overloads": missing,
                           "opinfos": rows}, fh, indent=0)
        return 1 if args.fail_on_disagree and tot[FAIL] else 0
    finally:
        if not keep:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
