"""Self-test of the comparator: inject plausible misimplementations into face results.

Why: a golden harness that accepts everything is worse than none.  Starting from cases the
comparator accepts (normally oracle vs oracle), each mutation below rewrites the face's
result the way a buggy implementation would, and the comparator must reject every mutated
result.  Two controls must be *accepted*: the unmodified results, and a float value moved
by less than its tolerance (so the rule is not simply "bit-identical").

Mutations (each applied to up to PER_KIND cases, spread over all families):
  stride-swap      two unequal strides of an output tensor swapped
  promotion        output dtype moved to a neighbour (float32->float64, int64->int32, ...),
                   values converted, as a wrong promotion rule would
  reduce-dim       a reduction's result shaped as if another dim were reduced (dims
                   permuted, or a size-1 dim inserted)
  reduce-values    a reduction's values shifted by one element (the neighbouring slice)
  keepdim-dropped  the kept size-1 dims of a keepdim=True result squeezed away
  ulp-beyond-tol   one float element moved to the first value beyond its tolerance, in
                   elements where upstream's own error is zero
  ulp-exact        one float element of an exact case (abs, floor, views...) moved by 1 ulp
  exception-type   upstream raises X, face raises another type
  raise-vs-value   upstream raises, face returns a value; and the reverse
  bool-flip        one element of a bool result (or a Python bool) flipped
  int-off-by-one   one element of an integer result off by one
  nan-position     a NaN replaced by 0 / a number replaced by NaN
  offset           storage_offset off by one
  refusal          face raises NotImplementedError (must not count as agreeing)
"""
import copy
import math

import judge as J

PER_KIND = 150

NEIGHBOUR = {"float32": "float64", "float64": "float32", "float16": "float32",
             "bfloat16": "float16", "int64": "int32", "int32": "int64", "int16": "int32",
             "int8": "int16", "uint8": "int16", "bool": "uint8", "complex64": "complex128",
             "complex128": "complex64"}


def tensors(v, path=()):
    """(path, tensor) for every tensor in an encoded value."""
    if v.get("t") == "tensor":
        yield path, v
    elif v.get("t") in ("tuple", "list"):
        for k, e in enumerate(v["items"]):
            yield from tensors(e, path + (k,))


def at(v, path):
    for k in path:
        if v is None or v.get("t") not in ("tuple", "list") or k >= len(v.get("items", ())):
            return None
        v = v["items"][k]
    return v


def contiguous_strides(shape):
    st, acc = [], 1
    for s in reversed(shape):
        st.append(acc)
        acc *= max(s, 1)
    return list(reversed(st))


def convert(vals, src, dst):
    out = []
    for v in vals:
        if dst == "bool":
            out.append(bool(v))
        elif J.is_floating(dst):
            if dst in J.COMPONENT:
                out.append(complex(v))
            else:
                x = v.real if isinstance(v, complex) else float(v)
                out.append(J.round_to(dst, x))
        else:
            lo, hi = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1),
                      "int16": (-2**15, 2**15 - 1), "int8": (-128, 127),
                      "uint8": (0, 255)}[dst]
            x = v.real if isinstance(v, complex) else v
            x = int(x) if (not isinstance(x, float) or math.isfinite(x)) else 0
            out.append(min(max(x, lo), hi))
    return out


# ---- mutations: each takes (case, orec, frec, rrec) and returns a list of mutated face
# records (possibly empty when the case does not fit) --------------------------------------

def m_stride_swap(c, o, f, r):
    res = []
    for path, t in tensors(f["out"]):
        st = t["stride"]
        for i in range(len(st)):
            for j in range(i + 1, len(st)):
                if st[i] != st[j]:
                    g = copy.deepcopy(f)
                    tt = at(g["out"], path)
                    tt["stride"][i], tt["stride"][j] = tt["stride"][j], tt["stride"][i]
                    return [g]
    return res


def m_promotion(c, o, f, r):
    for path, t in tensors(f["out"]):
        dt = t["dtype"]
        if dt in NEIGHBOUR:
            g = copy.deepcopy(f)
            tt = at(g["out"], path)
            nd = NEIGHBOUR[dt]
            tt["data"] = J.encode_values(nd, convert(J.decode(t), dt, nd))
            tt["dtype"] = nd
            return [g]
    return []


def m_reduce_dim(c, o, f, r):
    if c["family"] != "reduction":
        return []
    for path, t in tensors(f["out"]):
        shape = t["shape"]
        g = copy.deepcopy(f)
        tt = at(g["out"], path)
        if len(shape) >= 2 and shape != shape[::-1]:
            tt["shape"] = shape[::-1]
            tt["stride"] = contiguous_strides(tt["shape"])
            if tt["stride"] == t["stride"] and tt["shape"] == shape:
                continue
        else:
            tt["shape"] = [1] + shape
            tt["stride"] = [t["stride"][0] * max(shape[0], 1) if shape else 1] + t["stride"]
        return [g]
    return []


def m_reduce_values(c, o, f, r):
    if c["family"] != "reduction":
        return []
    for path, t in tensors(f["out"]):
        vals = J.decode(t)
        if len(vals) >= 2:
            rolled = vals[1:] + vals[:1]
            if any(not J._same_bits(float(a.real) if isinstance(a, complex) else float(a),
                                    float(b.real) if isinstance(b, complex) else float(b))
                   for a, b in zip(vals, rolled)):
                g = copy.deepcopy(f)
                at(g["out"], path)["data"] = J.encode_values(t["dtype"], rolled)
                return [g]
    return []


def m_keepdim(c, o, f, r):
    if "keepdim" not in c["name"] or "nokeepdim" in c["name"]:
        return []
    for path, t in tensors(f["out"]):
        if 1 in t["shape"] and len(t["shape"]) > 0:
            g = copy.deepcopy(f)
            tt = at(g["out"], path)
            keep = [i for i, s in enumerate(t["shape"]) if s != 1]
            tt["shape"] = [t["shape"][i] for i in keep]
            tt["stride"] = [t["stride"][i] for i in keep]
            return [g]
    return []


def _float_targets(c, o, f, r):
    """(path, tensor, ref tensor or None) for real-float tensors."""
    rout = r.get("out") if r else None
    for path, t in tensors(f["out"]):
        if t["dtype"] in J.FLOAT_BITS:
            rt = at(rout, path) if rout else None
            if rt is not None and (rt.get("t") != "tensor" or rt.get("shape") != t["shape"]):
                rt = None
            yield path, t, rt


def m_ulp_beyond(c, o, f, r):
    if c.get("exact"):
        return []
    for path, t, rt in _float_targets(c, o, f, r):
        up = J.decode(t)
        ref = J.decode(rt) if rt is not None else None
        if ref is not None and ref and isinstance(ref[0], complex):
            ref = None
        tols = J.tolerances(t["dtype"], up, ref, c.get("acc", False))
        for i, u in enumerate(up):
            if tols[i] is None or not math.isfinite(u):
                continue
            if ref is not None and abs(u - ref[i]) != 0:
                continue
            v = J.round_to(t["dtype"], u + tols[i])
            while math.isfinite(v) and v - u <= tols[i]:
                v = J.next_up(t["dtype"], v)
            if not math.isfinite(v):
                continue
            g = copy.deepcopy(f)
            vals = list(up)
            vals[i] = v
            at(g["out"], path)["data"] = J.encode_values(t["dtype"], vals)
            return [g]
    return []


def m_ulp_within(c, o, f, r):
    """Control: the largest move not beyond tolerance must be accepted."""
    if c.get("exact"):
        return []
    for path, t, rt in _float_targets(c, o, f, r):
        up = J.decode(t)
        ref = J.decode(rt) if rt is not None else None
        if ref is not None and ref and isinstance(ref[0], complex):
            ref = None
        tols = J.tolerances(t["dtype"], up, ref, c.get("acc", False))
        for i, u in enumerate(up):
            if tols[i] is None or not math.isfinite(u):
                continue
            v = J.round_to(t["dtype"], u + tols[i])
            while math.isfinite(v) and v - u > tols[i]:
                v = -J.next_up(t["dtype"], -v)
            if not math.isfinite(v) or v == u:
                continue
            g = copy.deepcopy(f)
            vals = list(up)
            vals[i] = v
            at(g["out"], path)["data"] = J.encode_values(t["dtype"], vals)
            return [g]
    return []


def m_ulp_exact(c, o, f, r):
    if not c.get("exact"):
        return []
    for path, t, rt in _float_targets(c, o, f, r):
        up = J.decode(t)
        for i, u in enumerate(up):
            if math.isfinite(u):
                g = copy.deepcopy(f)
                vals = list(up)
                vals[i] = J.next_up(t["dtype"], u)
                if not math.isfinite(vals[i]):
                    continue
                at(g["out"], path)["data"] = J.encode_values(t["dtype"], vals)
                return [g]
    return []


def m_exception_type(c, o, f, r):
    if "exc" not in o:
        return []
    g = copy.deepcopy(f)
    g["exc"]["type"] = "TypeError" if o["exc"]["type"] != "TypeError" else "RuntimeError"
    return [g]


def m_raise_vs_value(c, o, f, r):
    g = copy.deepcopy(f)
    if "exc" in o:
        del g["exc"]
        g["out"] = {"t": "none"}
    else:
        del g["out"]
        g["exc"] = {"type": "RuntimeError", "mro": ["RuntimeError", "Exception"],
                    "msg": "injected"}
    return [g]


def m_bool_flip(c, o, f, r):
    def walk(v, path):
        if v.get("t") == "bool":
            return path
        if v.get("t") == "tensor" and v["dtype"] == "bool" and J.decode(v):
            return path
        if v.get("t") in ("tuple", "list"):
            for k, e in enumerate(v["items"]):
                p = walk(e, path + (k,))
                if p is not None:
                    return p
        return None
    if "out" not in f:
        return []
    p = walk(f["out"], ())
    if p is None:
        return []
    g = copy.deepcopy(f)
    tt = at(g["out"], p)
    if tt["t"] == "bool":
        tt["v"] = not tt["v"]
    else:
        vals = J.decode(tt)
        vals[len(vals) // 2] = not vals[len(vals) // 2]
        tt["data"] = J.encode_values("bool", vals)
    return [g]


def m_int_off(c, o, f, r):
    for path, t in tensors(f["out"]):
        if t["dtype"] in ("int64", "int32", "int16", "int8", "uint8"):
            vals = J.decode(t)
            if vals:
                k = len(vals) // 2
                vals[k] = vals[k] + 1 if vals[k] < {"uint8": 255, "int8": 127}.get(t["dtype"], 32767) else vals[k] - 1
                g = copy.deepcopy(f)
                at(g["out"], path)["data"] = J.encode_values(t["dtype"], vals)
                return [g]
    return []


def m_nan_position(c, o, f, r):
    for path, t, rt in _float_targets(c, o, f, r):
        vals = J.decode(t)
        for i, v in enumerate(vals):
            g = copy.deepcopy(f)
            nv = list(vals)
            if math.isnan(v):
                nv[i] = 0.0
            elif math.isfinite(v):
                nv[i] = math.nan
            else:
                continue
            at(g["out"], path)["data"] = J.encode_values(t["dtype"], nv)
            return [g]
    return []


def m_offset(c, o, f, r):
    for path, t in tensors(f["out"]):
        g = copy.deepcopy(f)
        at(g["out"], path)["offset"] = t["offset"] + 1
        return [g]
    return []


def m_refusal(c, o, f, r):
    if "exc" in o and o["exc"]["type"] == "NotImplementedError":
        return []
    g = copy.deepcopy(f)
    g.pop("out", None)
    g["exc"] = {"type": "NotImplementedError", "mro": ["NotImplementedError"],
                "msg": "injected refusal"}
    return [g]


MUTATIONS = [
    ("stride-swap", m_stride_swap), ("promotion", m_promotion),
    ("reduce-dim", m_reduce_dim), ("reduce-values", m_reduce_values),
    ("keepdim-dropped", m_keepdim), ("ulp-beyond-tol", m_ulp_beyond),
    ("ulp-exact", m_ulp_exact), ("exception-type", m_exception_type),
    ("raise-vs-value", m_raise_vs_value), ("bool-flip", m_bool_flip),
    ("int-off-by-one", m_int_off), ("nan-position", m_nan_position), ("offset", m_offset),
    ("refusal", m_refusal),
]
CONTROLS = [("ulp-within-tol", m_ulp_within)]


def _spread(names, n):
    """Up to n names spread evenly over the list."""
    if len(names) <= n:
        return names
    step = len(names) / n
    return [names[int(i * step)] for i in range(n)]


def _round_robin(names, byname):
    """Candidates taken in turn from each family (each family's spread evenly), so every
    family gets its share of the mutations."""
    per = {}
    for n in names:
        per.setdefault(byname[n]["family"], []).append(n)
    lists = [_spread(v, PER_KIND * 4) for _, v in sorted(per.items())]
    for i in range(max((len(v) for v in lists), default=0)):
        for v in lists:
            if i < len(v):
                yield v[i]


def run(cases, oracle, face, ref, verdicts, partial=False):
    """True when every mutation is rejected and every control accepted.  ``partial``
    (a --filter/--module subset): a kind with no applicable case is reported, not failed."""
    ok = True
    base_agree = [c for c in cases if verdicts[c["name"]][0] == J.AGREE]
    n_bad = len(cases) - len(base_agree)
    print("self-test: unmodified results: %d of %d cases agree" % (len(base_agree), len(cases)))
    if n_bad:
        print("  FAIL (control): %d unmodified cases do not agree" % n_bad)
        ok = False
    byname = {c["name"]: c for c in base_agree}
    # candidates per kind, then an even spread
    for kind, fn, want_reject in [(k, f, True) for k, f in MUTATIONS] + \
                                 [(k, f, False) for k, f in CONTROLS]:
        applicable = []
        for c in base_agree:
            n = c["name"]
            o, f = oracle.get(n), face.get(n)
            r = ref.get(n) if c.get("ref64") else None
            if o is None or f is None:
                continue
            if "out" not in f and kind not in ("exception-type", "raise-vs-value", "refusal"):
                continue
            applicable.append(n)
        applied = wrong = 0
        examples = []
        fams = {}
        for n in _round_robin(applicable, byname):
            if applied >= PER_KIND:
                break
            c = byname[n]
            o, f = oracle[n], face[n]
            r = ref.get(n) if c.get("ref64") else None
            for g in fn(c, o, f, r):
                applied += 1
                fams[c["family"]] = fams.get(c["family"], 0) + 1
                cat, why = J.judge(c, o, g, r)
                rejected = cat != J.AGREE
                if rejected != want_reject:
                    wrong += 1
                    if len(examples) < 5:
                        examples.append("%s -> %s %s" % (n, cat, why[:150]))
        status = "ok"
        if applied == 0 and partial:
            status = "n/a in this selection"
        elif applied == 0:
            status = "FAIL (no applicable case)"
            ok = False
        elif wrong:
            status = "FAIL"
            ok = False
        verb = "rejected" if want_reject else "accepted"
        print("  %-16s %4d injected, %4d %s  [%s]  families: %s" % (
            kind, applied, applied - wrong, verb, status,
            ", ".join("%s %d" % kv for kv in sorted(fams.items()))))
        for e in examples:
            print("      wrongly %s: %s" % ("accepted" if want_reject else "rejected", e))
    return ok
