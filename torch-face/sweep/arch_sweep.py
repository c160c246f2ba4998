"""Architecture sweep: every causal-LM architecture transformers ships (and the encoder families
BERT, RoBERTa, DistilBERT, ModernBERT, T5 encoder), each as a tiny random model built from its
config (seeded, no download) under upstream, saved with ``save_pretrained``, loaded with
``from_pretrained`` under the face, and run forward on the same ids::

    python3 torch-face/sweep/arch_sweep.py --oracle ORACLE_PY --face FACE_PY \\
        [--only REGEX] [--slice N] [--report FILE] [--json FILE] [--workdir DIR]
        [--oracle-cache DIR | --no-oracle-cache] [--reuse-oracle] [--timeout S]

The oracle cache (torch-face/golden/oracle_cache.py; ``--oracle-cache DIR``, default
``$TORCHNATIVE_HOME/oracle-cache/arch`` when TORCHNATIVE_HOME is set, else off;
``--no-oracle-cache``): upstream's record of each architecture and the model it saved are kept,
keyed by the oracle's fingerprint (torch's and transformers' dist-info RECORD, numpy's version),
arch_side.py's source and the architecture's name, with the list of every architecture;
only the architectures it lacks are built by upstream (``arch_side.py --names``), the cached
models are linked into the work directory after their files' sha256 are checked, and one line
says how many came from the cache.  ``--reuse-oracle`` (with ``--workdir``) is the older
spelling of ``--oracle-cache WORKDIR/oracle-cache``.

``--slice N`` keeps about 1/N of the architectures (those whose name's sha256 is 0 mod N,
torch-face/golden/slicing.py) plus at least one of each group: every encoder, the
architectures the face's tests single out (``SINGLED_OUT``: llama, gpt2) and one of each kind
(``SLICE_KINDS`` by model-type name: mixture of experts, latent attention, state space,
hybrids, decoders of encoder-decoders, BERT-style decoders, gemma, qwen, the GPT-2 lineage; a
composite config, a "_text" part, any other decoder).  The summary and the report say it was a
slice and how many of each kind it left out.

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
import hashlib
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
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "golden"))

import oracle_cache  # noqa: E402  (torch-face/golden)
import slicing  # noqa: E402  (torch-face/golden)
sys.path.insert(0, HERE)
from arch_side import ENCODERS  # noqa: E402  (stdlib only at import time)

K, U = 4.0, 4.0


def run_side(label, cmd, mode, models, out, only, timeout, log, names=None):
    """Runs arch_side.py until it has written every architecture, restarting after a crash
    (skipping the architecture it died on, which is recorded as a crash).  ``names``: run
    those architectures (``model_type/Class``), in order, instead of ``only``'s."""
    total, start, crashes = None, 0, 0
    t0 = time.time()
    names_file = None
    if names is not None:
        names_file = out + ".names.json"
        with open(names_file, "w") as fh:
            json.dump(names, fh)
    while True:
        argv = shlex.split(cmd) + [SIDE, "--mode", mode, "--dir", models, "--out", out,
                                   "--start", str(start)]
        if names_file:
            argv += ["--names", names_file]
        elif only:
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


# The architectures the face's own tests single out (test_transformers_face.py captures a
# LlamaForCausalLM and refuses a GPT2LMHeadModel; test_training.py trains a LlamaForCausalLM; the
# default model, SmolLM2, is a llama): a slice always keeps them, and every encoder.
SINGLED_OUT = ("llama", "gpt2")
# Kinds of model a slice keeps at least one of: regexes on the model type, by what the names
# say (an architecture may be in several).  Besides these, "composite config" (a type whose
# "<type>_text" is listed too: the causal-LM class takes the text part of a multimodal config),
# "text part" (the "_text" types) and "other decoder" (in no kind above).
SLICE_KINDS = [
    ("mixture of experts", r"moe|mixtral|dbrx|gpt_oss"),
    ("latent attention", r"deepseek|axk1|kimi_linear|sarvam_mla|minicpm3|longcat_flash"),
    ("state space / recurrent", r"mamba|rwkv|xlstm|recurrent_gemma"),
    ("hybrid attention", r"hybrid|jamba|bamba|zamba|falcon_h1|nemotron_h|lfm2|qwen3_next"),
    ("decoder of an encoder-decoder", r"^(bart|mbart|marian|pegasus|blenderbot|blenderbot-small|"
                                      r"bigbird_pegasus|plbart|prophetnet|mvp|trocr|whisper|"
                                      r"musicgen|musicgen_melody)$"),
    ("BERT-style decoder", r"bert|roberta|electra|^ernie$|xlm|roformer|xmod|big_bird|camembert|"
                           r"data2vec"),
    ("gemma", r"gemma"),
    ("qwen", r"qwen"),
    ("GPT-2 lineage", r"^gpt|openai-gpt|codegen|ctrl|bloom|^opt$|xglm|biogpt"),
]


def arch_kinds(name, types):
    """The slice groups of ``model_type/Class`` ``name`` (``types``: every model type listed)."""
    mt = name.split("/", 1)[0]
    if name in {"%s/%s" % e for e in ENCODERS}:
        return [("encoder", name)]
    groups = [("singled out", mt)] if mt in SINGLED_OUT else []
    kinds = [label for label, rx in SLICE_KINDS if re.search(rx, mt)]
    if mt + "_text" in types:
        kinds.append("composite config")
    if mt.endswith("_text"):
        kinds.append("text part")
    return groups + [("kind", k) for k in (kinds or ["other decoder"])]


def slice_archs(names, n):
    """(kept names, info) of a 1/n slice (slicing.py's rule) keeping every group of arch_kinds;
    info's left_out counts the architectures left out by their first kind."""
    types = {x.split("/", 1)[0] for x in names}
    kept = slicing.deterministic_slice(names, n, lambda x: arch_kinds(x, types))
    keep, left = set(kept), {}
    for x in names:
        if x not in keep:
            # encoders and the singled-out types are always kept: x has a kind
            k = next(label for what, label in arch_kinds(x, types) if what == "kind")
            left[k] = left.get(k, 0) + 1
    return kept, {"n": n, "kept": len(kept), "total": len(names),
                  "left_out": dict(sorted(left.items()))}


def _tree_hashes(root):
    """{relative path: sha256} of every file under ``root``."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, root)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def _link_tree(src, dst):
    """Copy directory ``src`` to ``dst`` (hard links where the file system allows)."""
    def link(a, b):
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)
    shutil.copytree(src, dst, copy_function=link)


def model_dir_name(name):
    return "%s--%s" % tuple(name.split("/", 1))


def cached_entry(store, name):
    """The cached upstream record of architecture ``name`` with its model directory (None: a
    miss, also when the saved model's files are gone or changed)."""
    e = store.get(store.key("arch", name))
    if e is None:
        return None
    if e.get("model"):
        root = os.path.join(store.models_dir(), e["model"])
        try:
            ok = os.path.isdir(root) and _tree_hashes(root) == e["files"]
        except OSError:
            ok = False
        if not ok:
            print("arch sweep: oracle cache: the saved model of %s in %s is missing or changed; "
                  "rebuilding it" % (name, root), file=sys.stderr)
            return None
    return e


def store_entry(store, name, rec, models):
    """Adds upstream's record of ``name`` and the model it saved under ``models`` to the cache
    (not a crash record: that is no result)."""
    if rec.get("phase") == "crash":
        return
    src = os.path.join(models, model_dir_name(name))
    key = store.key("arch", name)
    entry = {"rec": {k: v for k, v in rec.items() if k != "i"}, "model": None, "files": {}}
    if os.path.isdir(src):
        final = os.path.join(store.models_dir(), key)
        tmp = final + ".tmp%d" % os.getpid()
        try:
            os.makedirs(store.models_dir(), exist_ok=True)
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.copytree(src, tmp)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
            entry["model"], entry["files"] = key, _tree_hashes(final)
        except OSError as e:
            print("arch sweep: oracle cache: cannot keep the model of %s: %s" % (name, e),
                  file=sys.stderr)
            shutil.rmtree(tmp, ignore_errors=True)
            return
    store.put(key, entry)


def oracle_side(args, work, models, store, slice_n):
    """Upstream's records for the selected architectures, indexed in that order: from the cache
    where it has them (their models copied into ``models``), the rest built by one oracle run.
    (records, error, cached, computed, slice info)."""
    index = store.get(store.key("arch-index")) if store is not None else None
    if index is None:
        recs, err = run_side("oracle", args.oracle, "list", models,
                             os.path.join(work, "oracle-list.jsonl"), None, args.timeout,
                             os.path.join(work, "oracle.log"))
        if err:
            return None, err, 0, 0, None
        h = next(r for r in recs if r.get("header"))
        index = {"archs": h["all_archs"], "torch": h["torch"], "transformers": h["transformers"]}
        if store is not None:
            store.put(store.key("arch-index"), index)
    selected = list(index["archs"])
    if args.only:
        rx = re.compile(args.only)
        selected = [n for n in selected if rx.search(n.split("/", 1)[0])]
    info = None
    if slice_n is not None:
        selected, info = slice_archs(selected, slice_n)
    cached = {}
    if store is not None:
        for n in selected:
            e = cached_entry(store, n)
            if e is not None:
                cached[n] = e
    missing = [n for n in selected if n not in cached]
    fresh = {}
    if missing:
        out = os.path.join(work, "oracle-build.jsonl")
        recs, err = run_side("oracle", args.oracle, "build", models, out, None, args.timeout,
                             os.path.join(work, "oracle.log"), names=missing)
        if err:
            return None, err, 0, 0, info
        for r in recs:
            if "i" in r:
                fresh[missing[r["i"]]] = r
        if store is not None:
            for n, r in fresh.items():
                store_entry(store, n, r, models)
    for n, e in cached.items():
        if e.get("model"):
            dst = os.path.join(models, model_dir_name(n))
            shutil.rmtree(dst, ignore_errors=True)
            _link_tree(os.path.join(store.models_dir(), e["model"]), dst)
    if store is not None:
        store.save()
    orecs = [{"header": True, "torch": index["torch"], "transformers": index["transformers"],
              "archs": selected}]
    for i, n in enumerate(selected):
        r = cached[n]["rec"] if n in cached else fresh.get(n)
        if r is not None:
            orecs.append(dict(r, i=i))
    return orecs, None, len(cached), len(missing), info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--oracle", required=True, help="command prefix of upstream's python")
    ap.add_argument("--face", required=True, help="command prefix of the face's python")
    ap.add_argument("--only", default=None, help="regex on model types")
    ap.add_argument("--slice", type=int, default=None, metavar="N",
                    help="about 1/N of the architectures (by sha256 of the name), keeping every "
                         "encoder, the singled-out ones and one of each kind")
    ap.add_argument("--report", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per side")
    oracle_cache.add_options(ap, "arch")
    ap.add_argument("--reuse-oracle", action="store_true",
                    help="(older spelling) use --workdir/oracle-cache as the oracle cache, "
                         "unless --oracle-cache names one")
    args = ap.parse_args(argv)
    oracle_cache.check_options(ap, args)
    slicing.check_option(ap, args.slice)
    if args.only:
        try:
            re.compile(args.only)
        except re.error as e:
            ap.error("bad --only: %s" % e)
    work = args.workdir or tempfile.mkdtemp(prefix="arch-sweep-")
    models = os.path.join(work, "models")
    shutil.rmtree(models, ignore_errors=True)  # no model of an earlier run may be read
    os.makedirs(models, exist_ok=True)
    for stale in ("oracle.jsonl", "oracle-list.jsonl", "oracle-build.jsonl", "face.jsonl"):
        if os.path.exists(os.path.join(work, stale)):
            os.remove(os.path.join(work, stale))
    t0 = time.time()
    store, cache_msg = oracle_cache.open_store(args, "arch", shlex.split(args.oracle),
                                               ["torch", "transformers"], SIDE)
    info = None
    if store is None and args.slice is None:
        # no cache, every architecture --only selects: one upstream run, as the face's
        orecs, err = run_side("oracle", args.oracle, "build", models,
                              os.path.join(work, "oracle.jsonl"), args.only, args.timeout,
                              os.path.join(work, "oracle.log"))
        names = None
        ncached = 0
        ncomputed = 0 if err else len(next(r for r in orecs if r.get("header"))["archs"])
    else:
        orecs, err, ncached, ncomputed, info = oracle_side(args, work, models, store, args.slice)
        names = None if err else orecs[0]["archs"]
    if err:
        print("arch sweep: " + err, file=sys.stderr)
        return 2
    if store is None:
        print("arch sweep: %s: %d upstream architectures computed" % (cache_msg, ncomputed))
    else:
        print("arch sweep: oracle results: %d architectures from the cache, %d computed (%s)" % (
            ncached, ncomputed, store.path))
    if info:
        print("arch sweep: %s (by sha256 of the name; every encoder, %s and one of each kind "
              "kept)" % (slicing.describe(info, "architectures"), "/".join(SINGLED_OUT)))
    t1 = time.time()
    frecs, err = run_side("face", args.face, "run", models, os.path.join(work, "face.jsonl"),
                          args.only, args.timeout, os.path.join(work, "face.log"), names=names)
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
    if info:
        print("  a %s" % slicing.describe(info, "architectures"))
    for c in ("agree", "disagree", "refused", "face error", "unsweepable"):
        print("  %-12s %4d" % (c, counts.get(c, 0)))
    print("  forward runs on the face: %d; agree %d of %d judgeable; time: upstream %.0fs "
          "(%d of %d from the oracle cache), face %.0fs" % (
              ran, counts.get("agree", 0), judgeable, t1 - t0, ncached, ncached + ncomputed,
              t2 - t1))
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
            json.dump({"counts": counts, "rows": rows, "upstream": oh, "face_torch": fh["torch"],
                       "slice": info}, f, indent=1)
    if args.report:
        lines = ["### Architecture sweep (`torch-face/sweep/arch_sweep.py`)", "",
                 "%d architectures: %s; %d forward runs on the face, %d of %d judgeable agree." % (
                     swept, ", ".join("%s %d" % (c, counts.get(c, 0)) for c in
                                      ("agree", "disagree", "refused", "face error", "unsweepable")),
                     ran, counts.get("agree", 0), judgeable), ""]
        if info:
            lines += ["**A slice**, not every architecture: %s (kept by sha256 of the name; every "
                      "encoder, %s and one of each kind kept)." % (
                          slicing.describe(info, "architectures"), ", ".join(SINGLED_OUT)), ""]
        lines += ["| Architecture | Category | Detail |", "|---|---|---|"]
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
