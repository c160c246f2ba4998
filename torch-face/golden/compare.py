"""Golden comparison: upstream torch (the oracle) vs the torch face, case by case.

Why: the face is upstream's own Python package on our Rust ``torch._C``; "correct" means
"does what upstream does" for dtypes, shapes, strides, aliasing, exceptions and values.  This
runs thousands of small cases (``cases/``) under both interpreters and judges every result
with one rule (``judge.py``), so a regression or a gap shows up as a named case.

Usage::

    python3 torch-face/golden/compare.py --oracle PY --face PY [--module NAME ...] [--filter REGEX]
        [--slice N] [--allow-refused] [--report FILE] [--json FILE] [--self-test]
        [--wrong-derivatives EPS] [--oracle-cache DIR | --no-oracle-cache] [--workdir DIR]
        [--reuse-oracle] [--case-timeout S] [--show N]

``--oracle`` / ``--face`` are command prefixes split with shlex, so
``--face "env PYTHONPATH=/path/to/face python3"`` works.  Each side runs ``run_side.py`` in
one process over all selected cases; the oracle runs two more processes, the float64
reference pass (``--ref64``) and the float32 pass of float64 cases (``--ref32``).  The four run
in parallel.  A side that dies or stalls (no new result for ``--case-timeout`` seconds) has the
case it was on recorded as an error and is restarted after it, so one crash costs one case.

The oracle cache (``oracle_cache.py``): upstream's results of the three oracle passes are kept
per case in ``--oracle-cache DIR`` (default ``$TORCHNATIVE_HOME/oracle-cache/golden`` when
TORCHNATIVE_HOME is set, else off; ``--no-oracle-cache``: off), keyed by the oracle's
fingerprint, run_side.py's source and the case itself; only the cases it lacks run on the
oracle, and one line says how many results came from it and how many were computed.  The
face is never cached.  ``--reuse-oracle`` (with ``--workdir``) is the older spelling of
``--oracle-cache WORKDIR/oracle-cache``.

``--slice N`` runs about 1/N of the selected cases (``slicing.py``: kept when sha256 of the name
is 0 mod N), plus, for every family and every ATen overload some selected case declares that
no kept case covers, the case with the smallest hash that does; the summary, ``--report`` and
``--json`` say it was a slice and how many cases of each family it left out.  ``ratchet.py``
judges only the cases a run holds.

Categories: agree; disagree (different result, or different exception type); refused (the
face raised NotImplementedError where upstream did not); error (a side crashed, stalled or
produced something unencodable).  Exit status: 0 when every case agrees (refusals allowed
with ``--allow-refused``), 1 otherwise, 2 when the harness itself could not run (bad
arguments, the oracle would not start).  ``--self-test`` exits 0 only when every injected
misimplementation is rejected (selftest.py) and a deliberately wrong face (wrong_face.py:
patched bugs, a refusal, a crash, a hang) gets exactly the expected verdicts; without
``--face`` it uses the oracle for both sides.

``--report FILE`` writes a markdown section (per-family table + the first non-agreeing
cases) for docs/STATUS.md; ``--json FILE`` writes every case's category and reason.
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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cases import load_cases, select  # noqa: E402
import judge as J  # noqa: E402
import oracle_cache  # noqa: E402
import slicing  # noqa: E402

RUN_SIDE = os.path.join(HERE, "run_side.py")
# float64 cases, whose reference comes from a float32 pass (run_side.py --ref32)
F64_NAME = re.compile(r"float64|complex128")


class SideRun:
    """Runs run_side.py under one interpreter, restarting after crashes and stalls."""

    def __init__(self, label, cmd, names, workdir, filt, ref64, case_timeout, modules=None,
                 max_restarts=200, script=None, extra=(), names_file=None):
        # script/extra: another side script with run_side.py's --out/--start/header protocol
        # and its own extra arguments (opinfo_sweep.py runs opinfo_side.py this way);
        # names_file: passed as --names (run_side.py runs only those cases)
        self.script, self.extra = script or RUN_SIDE, list(extra)
        self.label, self.cmd, self.names, self.modules = label, cmd, names, modules
        self.workdir, self.filt, self.ref64 = workdir, filt, ref64
        self.case_timeout, self.max_restarts = case_timeout, max_restarts
        self.names_file = names_file
        self.results = {}
        self.synthetic = set()  # names whose record the harness wrote (crash, stall): not cached
        self.header = None
        self.fatal = None
        self.wall = 0.0
        self.restarts = 0
        self.cached = 0  # results that came from the oracle cache
        self.log = os.path.join(workdir, label + ".log")

    def _attempt(self, start, k):
        out = os.path.join(self.workdir, "%s.%d.jsonl" % (self.label, k))
        argv = self.cmd + [self.script] + self.extra + ["--out", out, "--start", str(start)]
        for m in self.modules or ():
            argv += ["--module", m]
        if self.filt:
            argv += ["--filter", self.filt]
        if self.names_file:
            argv += ["--names", self.names_file]
        if self.ref64 == "ref32":
            argv.append("--ref32")
        elif self.ref64:
            argv.append("--ref64")
        with open(self.log, "a") as log:
            log.write("$ %s\n" % " ".join(shlex.quote(a) for a in argv))
            log.flush()
            try:
                p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
            except OSError as e:
                return None, "cannot start %s: %s" % (argv[0], e), out
            last_size, last_change, stalled = -1, time.time(), False
            while p.poll() is None:
                time.sleep(0.2)
                try:
                    size = os.path.getsize(out)
                except OSError:
                    size = -1
                if size != last_size:
                    last_size, last_change = size, time.time()
                elif time.time() - last_change > self.case_timeout:
                    stalled = True
                    try:
                        os.killpg(p.pid, 9)
                    except OSError:
                        pass
                    p.wait()
                    break
        return p.returncode, "stalled for %gs" % self.case_timeout if stalled else None, out

    def run(self):
        t0 = time.time()
        start, k = 0, 0
        total = len(self.names)
        while True:
            rc, why, out = self._attempt(start, k)
            k += 1
            got = 0
            header = None
            if os.path.exists(out):
                with open(out) as fh:
                    for line in fh:
                        if not line.endswith("\n"):
                            break  # torn last line of a killed process
                        try:
                            rec = json.loads(line)
                        except ValueError:
                            break
                        if rec.get("header"):
                            header = rec
                            continue
                        self.results[rec["name"]] = rec
                        got += 1
            if header is not None and self.header is None:
                self.header = header
            if header is not None and header.get("cases") != total:
                self.fatal = ("%s selected %s cases, compare.py %d: the sides load different "
                              "case lists" % (self.label, header.get("cases"), total))
                break
            done = start + got
            if done >= total and rc == 0:
                break
            if header is None and start == 0:
                self.fatal = "%s did not start (rc=%s%s); see %s" % (
                    self.label, rc, ", " + why if why else "", self.log)
                break
            if done >= total:
                break  # all results are in; a failing exit after the last case is ignored
            name = self.names[done]
            self.results[name] = {"name": name, "harness": "side process %s while running "
                                  "this case (rc=%s)" % (why or "died", rc)}
            self.synthetic.add(name)
            self.restarts += 1
            if self.restarts > self.max_restarts:
                for n in self.names[done + 1:]:
                    self.results[n] = {"name": n, "harness": "not run: too many side crashes"}
                    self.synthetic.add(n)
                break
            start = done + 1
            if start >= total:
                break
        self.wall = time.time() - t0


ORACLE_PASSES = ("oracle", "oracle-ref64", "oracle-ref32")


def _write_names(workdir, label, names):
    path = os.path.join(workdir, label + ".names.json")
    with open(path, "w") as fh:
        json.dump(names, fh)
    return path


def _ref_flag(ref):
    return "--ref32" if ref == "ref32" else "--ref64" if ref else ""


def run_sides(args, cases, ref_names, workdir, store=None, oracle_sides=None):
    """Runs the three oracle passes and the face over ``cases`` in parallel; {label: SideRun}.

    ``store`` (an oracle_cache.Store): oracle results it holds are taken from it, only the
    missing cases run on the oracle, and what they produce is added (the face always runs).
    ``oracle_sides``: the oracle passes of an earlier call over the same cases, reused as they
    are (the derivative self-test runs the face twice against one oracle run)."""
    names = [c["name"] for c in cases]
    byname = {c["name"]: c for c in cases}
    sides = {}
    oracle_cmd = shlex.split(args.oracle)
    face_cmd = shlex.split(args.face) if args.face else oracle_cmd
    ref32_names = [n for n in ref_names if F64_NAME.search(n)]
    plan = [("oracle", oracle_cmd, names, False), ("oracle-ref64", oracle_cmd, ref_names, True),
            ("oracle-ref32", oracle_cmd, ref32_names, "ref32"), ("face", face_cmd, names, False)]
    threads, hits, keys = [], {}, {}
    for label, cmd, nm, ref in plan:
        if label != "face" and oracle_sides is not None:
            sides[label] = oracle_sides[label]
            continue
        todo, hits[label] = nm, {}
        if store is not None and label != "face":
            keys[label] = {n: store.key("golden", label, _ref_flag(ref), byname[n]) for n in nm}
            header = store.get(store.key("golden-header", label, _ref_flag(ref)))
            if header is not None:
                for n in nm:
                    rec = store.get(keys[label][n])
                    if rec is not None:
                        hits[label][n] = rec
            todo = [n for n in nm if n not in hits[label]]
        s = SideRun(label, cmd, todo, workdir, args.filter, ref, args.case_timeout, args.module,
                    names_file=_write_names(workdir, label, todo))
        sides[label] = s
        if store is not None and label != "face" and not todo and header is not None:
            s.header = dict(header, cases=0)
            continue
        th = threading.Thread(target=s.run, daemon=True)
        th.start()
        threads.append(th)
    for th in threads:
        th.join()
    for label, cmd, nm, ref in plan:
        if label not in hits:
            continue
        s = sides[label]
        if store is not None and label != "face" and s.fatal is None:
            for n in s.names:
                if n in s.results and n not in s.synthetic:
                    store.put(keys[label][n], s.results[n])
            if s.header is not None:
                store.put(store.key("golden-header", label, _ref_flag(ref)), s.header)
        s.results.update(hits[label])
        s.cached = len(hits[label])
        s.names = nm
    if store is not None:
        store.save()
    return sides


def cache_line(sides, store, message, tool="golden"):
    """One line: how many oracle results came from the cache and how many were computed."""
    passes = [sides[p] for p in ORACLE_PASSES if p in sides]
    cached = sum(s.cached for s in passes)
    computed = sum(len(s.names) - s.cached for s in passes)
    if store is None:
        return "%s: %s: %d oracle results computed" % (tool, message, computed)
    return "%s: oracle results: %d from the cache, %d computed (%s)" % (
        tool, cached, computed, store.path)


def with_f64_estimates(oracle, ref64, ref32):
    """The reference records, with float64 outputs' references taken from the float32 pass
    (judge.with_f64_estimate)."""
    ref = dict(ref64)
    for n, r32 in ref32.items():
        o, r = oracle.get(n), ref64.get(n)
        if not (o and r and "out" in o and "out" in r and "out" in r32):
            continue
        est = J.ref_from32(o["out"], r32["out"])
        ref[n] = dict(r, out=J.with_f64_estimate(r["out"], est))
    return ref


def judge_all(cases, oracle, face, ref):
    verdicts = {}
    for c in cases:
        n = c["name"]
        verdicts[n] = J.judge(c, oracle.get(n), face.get(n), ref.get(n) if c.get("ref64") else None)
    return verdicts


def summarize(cases, verdicts, oracle):
    """Per-family counts.  Overload coverage counts only agreeing cases in which upstream
    returned a value: agreeing on an exception (a face that refuses everything agrees with
    every upstream NotImplementedError) shows nothing about the op working."""
    fam = {}
    tot = {"cases": 0, J.AGREE: 0, J.DISAGREE: 0, J.REFUSED: 0, J.ERROR: 0}
    covered, declared = set(), set()
    fam_cov, fam_decl = {}, {}
    for c in cases:
        cat = verdicts[c["name"]][0]
        f = fam.setdefault(c["family"], dict.fromkeys(tot, 0))
        f["cases"] += 1
        f[cat] += 1
        tot["cases"] += 1
        tot[cat] += 1
        fam_decl.setdefault(c["family"], set()).update(c["ops"])
        declared.update(c["ops"])
        if cat == J.AGREE and "out" in (oracle.get(c["name"]) or {}):
            covered.update(c["ops"])
            fam_cov.setdefault(c["family"], set()).update(c["ops"])
    return fam, tot, covered, declared, fam_cov, fam_decl


def wrong_face_check(args, workdir, store=None):
    """End to end: upstream with plausible bugs patched in (wrong_face.py) as the face; every
    targeted case must get its expected category, untouched cases must agree."""
    import types
    import wrong_face as W
    regex = "^(%s)$|%s" % ("|".join(re.escape(n) for n in W.EXPECT), W.CONTROL)
    cases = select(load_cases(), regex)
    missing = set(W.EXPECT) - {c["name"] for c in cases}
    ns = types.SimpleNamespace(
        oracle=args.oracle, face="%s %s" % (args.oracle, shlex.quote(os.path.join(HERE, "wrong_face.py"))),
        filter=regex, module=None, case_timeout=min(args.case_timeout, 10.0))
    sub = os.path.join(workdir, "wrong-face")
    os.makedirs(sub, exist_ok=True)
    sides = run_sides(ns, cases, [c["name"] for c in cases if c.get("ref64")], sub, store)
    ok = not missing and not any(s.fatal for s in sides.values())
    ref = with_f64_estimates(sides["oracle"].results, sides["oracle-ref64"].results,
                             sides["oracle-ref32"].results)
    verdicts = judge_all(cases, sides["oracle"].results, sides["face"].results, ref)
    wrong = []
    for c in cases:
        want = W.EXPECT.get(c["name"], J.AGREE)
        got, why = verdicts[c["name"]]
        if got != want:
            wrong.append("%s: expected %s, got %s %s" % (c["name"], want, got, why[:120]))
    ok = ok and not wrong
    print("self-test: wrong face end to end: %d targeted cases (bugs, a refusal, a crash, a hang) "
          "and %d untouched ones, %d as expected, face restarts %d  [%s]" % (
              len(W.EXPECT), len(cases) - len(W.EXPECT), len(cases) - len(wrong),
              sides["face"].restarts, "ok" if ok else "FAIL"))
    for m in sorted(missing):
        print("      missing case: %s" % m)
    for w in wrong[:10]:
        print("      %s" % w)
    return ok


def _nonzero_gradient(out):
    """Whether upstream's result of a grad-family case, ``(y, grad..., grad_fn name)``, has a
    gradient element that is not zero (only such a gradient shows a scaled derivative)."""
    if not out or out.get("t") != "tuple":
        return False
    if out["items"][-1].get("v") == "NoneType":
        # the operator returned its input itself (positive, a no-op dropout): no formula runs
        return False
    for item in out["items"][1:-1]:
        if item.get("t") == "tensor" and any(v != 0 for v in J.decode(item)):
            return True
    return False


def wrong_derivatives_check(args, cases, workdir, store=None, cache_msg=""):
    """The derivative self-test: the face runs the grad family twice, as it is and with every
    backward formula's gradient scaled by 1 + args.wrong_derivatives; each case that agrees as
    it is and has a non-zero upstream gradient must stop agreeing.  The oracle runs once (its
    results from ``store`` where it has them)."""
    import types
    cases = [c for c in cases if c["family"] == "grad"]
    if not cases:
        print("golden: --wrong-derivatives: no grad-family case selected", file=sys.stderr)
        return 2
    ref_names = [c["name"] for c in cases if c.get("ref64")]
    base = dict(oracle=args.oracle, filter=args.filter, module=["grad"],
                case_timeout=args.case_timeout)
    sides = run_sides(types.SimpleNamespace(face=args.face, **base), cases, ref_names, workdir,
                      store)
    print(cache_line(sides, store, cache_msg))
    for label, s in sides.items():
        if s.fatal:
            print("golden: %s" % s.fatal, file=sys.stderr)
            return 2
    oracle = sides["oracle"].results
    ref = with_f64_estimates(oracle, sides["oracle-ref64"].results, sides["oracle-ref32"].results)
    plain = judge_all(cases, oracle, sides["face"].results, ref)
    wrong_face = "env TORCHNATIVE_AUTOGRAD_PERTURB=%r %s" % (args.wrong_derivatives, args.face)
    perturbed_sides = run_sides(types.SimpleNamespace(face=wrong_face, **base),
                                cases, ref_names, workdir, oracle_sides=sides)
    if perturbed_sides["face"].fatal:
        print("golden: %s" % perturbed_sides["face"].fatal, file=sys.stderr)
        return 2
    perturbed = judge_all(cases, oracle, perturbed_sides["face"].results, ref)
    agreeing = [c["name"] for c in cases if plain[c["name"]][0] == J.AGREE]
    zero = [n for n in agreeing if not _nonzero_gradient(oracle[n].get("out"))]
    checked = [n for n in agreeing if n not in set(zero)]
    missed = [n for n in checked if perturbed[n][0] == J.AGREE]
    print("wrong derivatives (every formula's gradient x (1 + %g)): %d grad cases, %d agree as "
          "they are; of those, %d have a non-zero gradient and %d of them are rejected; %d have "
          "only zero gradients or no formula (the output is the input itself)  [%s]" % (
              args.wrong_derivatives, len(cases), len(agreeing), len(checked),
              len(checked) - len(missed), len(zero), "ok" if not missed else "FAIL"))
    for n in missed:
        print("  accepted: %s" % n)
    return 1 if missed else 0


def fmt_secs(s):
    return "%.1fs" % s


def write_report(path, args, cases, verdicts, sides, summary, show=60):
    fam, tot, covered, declared, fam_cov, fam_decl = summary
    oh = sides["oracle"].header or {}
    fh_ = sides["face"].header or {}
    lines = []
    lines.append("### Golden comparison (`torch-face/golden`)")
    lines.append("")
    sl = getattr(args, "slice_info", None)
    lines.append("`python3 torch-face/golden/compare.py --oracle %s --face %s%s%s` (%s): "
                 "oracle torch %s, face torch %s." % (
                     args.oracle, args.face or args.oracle,
                     " --filter '%s'" % args.filter if args.filter else "",
                     " --slice %d" % sl["n"] if sl else "",
                     time.strftime("%Y-%m-%d"), oh.get("torch", "?"), fh_.get("torch", "?")))
    lines.append("")
    if sl:
        lines.append("**A slice**, not every case: %s (kept by sha256 of the name; every family "
                     "and declared overload keeps at least one case)." % slicing.describe(sl))
        lines.append("")
    lines.append("| Family | Cases | Agree | Disagree | Refused | Errors | Overloads agreeing / declared |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for name in sorted(fam):
        f = fam[name]
        lines.append("| %s | %d | %d | %d | %d | %d | %d / %d |" % (
            name, f["cases"], f[J.AGREE], f[J.DISAGREE], f[J.REFUSED], f[J.ERROR],
            len(fam_cov.get(name, ())), len(fam_decl.get(name, ()))))
    lines.append("| **Total** | %d | %d | %d | %d | %d | %d / %d |" % (
        tot["cases"], tot[J.AGREE], tot[J.DISAGREE], tot[J.REFUSED], tot[J.ERROR],
        len(covered), len(declared)))
    lines.append("")
    lines.append("Overloads: distinct ATen overloads the family's cases declare (checked against "
                 "upstream by `check_cases.py`); agreeing = exercised by an agreeing case in which "
                 "upstream returns a value. Refused = the face raised NotImplementedError.")
    lines.append("")
    lines.append("Runtime: oracle %s (float64 reference pass %s, float32 pass of float64 cases "
                 "%s), face %s; %d of %d oracle results from the oracle cache." % (
                     fmt_secs(sides["oracle"].wall), fmt_secs(sides["oracle-ref64"].wall),
                     fmt_secs(sides["oracle-ref32"].wall), fmt_secs(sides["face"].wall),
                     sum(sides[p].cached for p in ORACLE_PASSES),
                     sum(len(sides[p].names) for p in ORACLE_PASSES)))
    bad = [(c["name"], verdicts[c["name"]]) for c in cases if verdicts[c["name"]][0] != J.AGREE]
    if bad:
        per_op = {}
        byname = {c["name"]: c for c in cases}
        for n, (cat, _) in bad:
            for op in byname[n]["ops"] or ["(none declared)"]:
                per_op[op] = per_op.get(op, 0) + 1
        top = sorted(per_op.items(), key=lambda kv: (-kv[1], kv[0]))[:30]
        lines.append("")
        lines.append("Overloads in most non-agreeing cases: " +
                     ", ".join("`%s` %d" % kv for kv in top) + ".")
        lines.append("")
        lines.append("Not agreeing (%d; first %d):" % (len(bad), min(show, len(bad))))
        lines.append("")
        lines.append("| Case | Category | Why |")
        lines.append("|---|---|---|")
        for n, (cat, why) in bad[:show]:
            lines.append("| `%s` | %s | %s |" % (n, cat, why.replace("|", "\\|").replace("\n", " ")[:300]))
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--oracle", required=True, help="command prefix of upstream's python")
    ap.add_argument("--face", default=None,
                    help="command prefix of the face's python (--self-test: default oracle)")
    ap.add_argument("--module", action="append", default=None,
                    help="case file to run (cases/NAME.py; repeatable; default all)")
    ap.add_argument("--filter", default=None, help="regex searched in case names")
    ap.add_argument("--allow-refused", action="store_true",
                    help="NotImplementedError refusals do not fail the run")
    ap.add_argument("--report", default=None, help="write a markdown report here")
    ap.add_argument("--json", default=None, help="write every verdict as JSON here")
    ap.add_argument("--self-test", action="store_true",
                    help="inject misimplementations into the face results; all must be rejected")
    ap.add_argument("--workdir", default=None, help="keep side outputs and logs here")
    oracle_cache.add_options(ap, "golden")
    ap.add_argument("--reuse-oracle", action="store_true",
                    help="(older spelling) use --workdir/oracle-cache as the oracle cache, "
                         "unless --oracle-cache names one")
    ap.add_argument("--slice", type=int, default=None, metavar="N",
                    help="run about 1/N of the selected cases, chosen by sha256 of the name, "
                         "keeping at least one case of every family and declared overload")
    ap.add_argument("--case-timeout", type=float, default=120.0,
                    help="seconds without a new result before a side is killed (default 120)")
    ap.add_argument("--show", type=int, default=40, help="non-agreeing cases to print")
    ap.add_argument("--wrong-derivatives", type=float, default=None, metavar="EPS",
                    help="derivative self-test: run the grad family on --face as it is and with "
                         "every backward formula's gradient scaled by 1 + EPS; each agreeing case "
                         "with a non-zero gradient must be rejected")
    args = ap.parse_args(argv)
    if args.wrong_derivatives is not None and not args.face:
        ap.error("--wrong-derivatives needs --face")
    if not args.face and not args.self_test:
        ap.error("--face is required (except with --self-test)")
    oracle_cache.check_options(ap, args)
    slicing.check_option(ap, args.slice)
    if args.filter:
        try:
            re.compile(args.filter)
        except re.error as e:
            ap.error("bad --filter: %s" % e)

    try:
        cases = select(load_cases(args.module), args.filter)
    except ValueError as e:
        ap.error(str(e))
    if not cases:
        print("golden: no case matches --filter %r" % args.filter, file=sys.stderr)
        return 2
    args.slice_info = None
    if args.slice is not None:
        cases, args.slice_info = slicing.slice_cases(cases, args.slice)
        print("golden: %s (by sha256 of the name; every family and declared overload kept)" %
              slicing.describe(args.slice_info))
    ref_names = [c["name"] for c in cases if c.get("ref64")]
    t0 = time.time()
    # cache_msg says why there is no cache (off, or the oracle cannot be fingerprinted)
    store, cache_msg = oracle_cache.open_store(args, "golden", shlex.split(args.oracle),
                                               ["torch"], RUN_SIDE)
    workdir = args.workdir or tempfile.mkdtemp(prefix="golden-")
    os.makedirs(workdir, exist_ok=True)
    try:
        if args.wrong_derivatives is not None:
            return wrong_derivatives_check(args, cases, workdir, store, cache_msg)
        return _main(args, cases, ref_names, workdir, t0, store, cache_msg)
    finally:
        # a temporary workdir goes, unless a side crashed or failed (its logs say why)
        if not args.workdir and not KEEP:
            shutil.rmtree(workdir, ignore_errors=True)


KEEP = []


def _main(args, cases, ref_names, workdir, t0, store=None, cache_msg=""):
    sides = run_sides(args, cases, ref_names, workdir, store)
    print(cache_line(sides, store, cache_msg))
    if any(s.fatal or s.restarts for s in sides.values()):
        KEEP.append(workdir)
    for label in ("oracle", "oracle-ref64", "oracle-ref32"):
        if sides[label].fatal:
            print("golden: %s" % sides[label].fatal, file=sys.stderr)
            return 2
    if sides["face"].fatal:
        print("golden: %s" % sides["face"].fatal, file=sys.stderr)
    oracle, face = sides["oracle"].results, sides["face"].results
    ref = with_f64_estimates(oracle, sides["oracle-ref64"].results, sides["oracle-ref32"].results)
    verdicts = judge_all(cases, oracle, face, ref)
    summary = summarize(cases, verdicts, oracle)
    fam, tot, covered, declared, _, _ = summary

    oh, fh_ = sides["oracle"].header or {}, sides["face"].header or {}
    print("golden: %d cases, %d with a float64 reference; oracle torch %s, face torch %s" % (
        len(cases), len(ref_names), oh.get("torch", "?"), fh_.get("torch", "?")))
    if args.slice_info:
        print("  a %s" % slicing.describe(args.slice_info))
    print("  agree     %6d" % tot[J.AGREE])
    print("  disagree  %6d" % tot[J.DISAGREE])
    print("  refused   %6d   (face raised NotImplementedError)" % tot[J.REFUSED])
    print("  errors    %6d   (crashed, stalled or unencodable)" % tot[J.ERROR])
    print("  overloads covered by agreeing cases: %d (of %d declared; counting cases where "
          "upstream returns a value)" % (len(covered), len(declared)))
    print("  time: oracle %s, oracle float64 reference %s, float32 pass of float64 cases %s, "
          "face %s (restarts: face %d); total %s%s" % (
              fmt_secs(sides["oracle"].wall), fmt_secs(sides["oracle-ref64"].wall),
              fmt_secs(sides["oracle-ref32"].wall),
              fmt_secs(sides["face"].wall), sides["face"].restarts,
              fmt_secs(time.time() - t0),
              "; outputs and logs in " + workdir if (args.workdir or KEEP) else ""))
    bad = [c["name"] for c in cases if verdicts[c["name"]][0] != J.AGREE]
    for n in bad[:args.show]:
        cat, why = verdicts[n]
        print("  %-8s %s: %s" % (cat.upper(), n, why[:300]))
    if len(bad) > args.show:
        print("  ... %d more (see --report / --json)" % (len(bad) - args.show))

    if args.report:
        write_report(args.report, args, cases, verdicts, sides, summary)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"cases": [{"name": c["name"], "family": c["family"], "ops": c["ops"],
                                  "category": verdicts[c["name"]][0],
                                  "reason": verdicts[c["name"]][1]} for c in cases],
                       "covered_overloads": sorted(covered),
                       "declared_overloads": sorted(declared),
                       "slice": args.slice_info,
                       "selection": {"module": args.module, "filter": args.filter}},
                      fh, indent=0)

    if args.self_test:
        import selftest
        ok = selftest.run(cases, oracle, face, ref, verdicts,
                          partial=bool(args.filter or args.module or args.slice_info))
        ok = wrong_face_check(args, workdir, store) and ok
        print("self-test: %s" % ("PASS" if ok else "FAIL"))
        return 0 if ok else 1

    failing = tot[J.DISAGREE] + tot[J.ERROR] + (0 if args.allow_refused else tot[J.REFUSED])
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
