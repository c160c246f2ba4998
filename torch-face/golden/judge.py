"""The comparison rule: is the face's result for a case the same as upstream's?

Exact parts.  Result structure, tensor dtype, shape, strides, storage offset and
requires_grad, Python ints/bools/strings, dtypes and sizes must be equal.  Integer and bool
tensors must be equal element for element.  Exceptions: the face must raise the same
exception type name as upstream (a NotImplementedError from the face where upstream did not
raise one is a *refusal*, counted apart).

Floats.  NaN must be NaN where upstream has NaN; an infinity must be the same infinity.
Cases flagged ``exact`` (ops that only move, negate or round values) must be bit-identical,
signed zeros included.  Otherwise an element passes when

    |face - up| <= K * err + U * ulp(mag)

* ``up`` is upstream's result; ``ref`` is upstream's result for the same inputs upcast to
  float64 (the ``ref64`` pass), and ``err = |up - ref|`` is upstream's own rounding error:
  the float noise this op has in this dtype on these values.  A second implementation that
  is as good as upstream is within about 2 x err of it (triangle inequality), so K = 4 leaves
  room for one that is up to 3x noisier, while a wrong formula, a wrong dtype of accumulation,
  a dropped term is far larger.
* float64 results have no wider reference (the float64 pass computes the same thing), so for
  cases named float64/complex128 upstream's error is estimated from a float32 pass of the
  same case (inputs downcast): ``err = max(|up32 - up| * 2**-29, |up| * 2**-46)``, the
  float32 error scaled by the ratio of the epsilons, at least about 64 ulp of the value (one
  float32 run is a noisy estimate; implementations differ by a few ulp in summation order,
  fma or series truncation).  ``ref_from32``; the OpInfo sweep uses the same estimate.
* ``U * ulp(mag)`` is a floor for elements where upstream's error happens to be (near) zero,
  and for cases without a float64 reference: a few units in the last place of the result's
  dtype at that magnitude (U = 4 for float32/float64, U = 2 for float16/bfloat16, whose
  results are one rounding of a float32 computation).  Different correct libms differ by
  a couple of ulp; a 1-ulp-wrong value in an exact case is caught by ``exact`` instead.
* Pointwise results use each element's own ``err`` and magnitude.  Accumulating results
  (case flag ``acc``: reductions, matmul, norms, convolutions, softmax) use the tensor's
  largest ``err`` and largest magnitude for every element, because an element's error scales
  with the size of the summands, not of the (possibly cancelled) result.
* Signed zeros are not compared outside ``exact`` cases.

Complex values are compared as (real, imag) float pairs.  Python floats in the output are
treated as 0-dim float64 results.

Checked both ways (2026-12): a different correct implementation passes (numpy's float16/32/64
libm for 27 unary functions: 647 of 648 cases accepted, the one rejected is Python's
math.lgamma, 15 ulp off at lgamma(1.5) in float64; numpy sums/means/matmuls: 297 of 297), and
wrong ones fail (selftest.py; a float16/bfloat16 sum accumulated in its own dtype over 1000
elements is rejected).
"""
import base64
import math
import struct

K = 4.0
ULPS = {"float32": 4.0, "float64": 4.0, "float16": 2.0, "bfloat16": 2.0,
        "complex64": 4.0, "complex128": 4.0, "complex32": 2.0}
# significand bits (with the hidden one) and the exponent of the smallest subnormal
FLOAT_BITS = {"float64": (53, -1074), "float32": (24, -149), "float16": (11, -24),
              "bfloat16": (8, -133)}
COMPONENT = {"complex64": "float32", "complex128": "float64", "complex32": "float16"}
FMT = {"float64": "d", "float32": "f", "float16": "e", "int64": "q", "int32": "i",
       "int16": "h", "int8": "b", "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
       "bool": "?"}
SIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4,
        "int16": 2, "int8": 1, "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8, "bool": 1,
        "complex64": 8, "complex128": 16, "complex32": 4}


def is_floating(dt):
    return dt in FLOAT_BITS or dt in COMPONENT


def decode(enc):
    """Flat list of Python values of an encoded tensor (complex as complex)."""
    dt = enc["dtype"]
    raw = base64.b64decode(enc["data"])
    if dt == "bfloat16":
        n = len(raw) // 2
        return list(struct.unpack("<%df" % n, b"".join(b"\x00\x00" + raw[i:i + 2]
                                                        for i in range(0, len(raw), 2))))
    if dt in COMPONENT:
        comp = COMPONENT[dt]
        n = len(raw) // SIZE[comp]
        f = struct.unpack("<%d%s" % (n, FMT[comp]), raw)
        return [complex(f[i], f[i + 1]) for i in range(0, n, 2)]
    n = len(raw) // SIZE[dt]
    return list(struct.unpack("<%d%s" % (n, FMT[dt]), raw))


def encode_values(dt, vals):
    """Inverse of decode (used by the self-test to inject wrong results)."""
    if dt == "bfloat16":
        out = []
        for v in vals:
            b = struct.pack("<f", v)
            out.append(b[2:4])
        return base64.b64encode(b"".join(out)).decode("ascii")
    if dt in COMPONENT:
        comp = COMPONENT[dt]
        flat = []
        for c in vals:
            flat += [c.real, c.imag]
        return base64.b64encode(struct.pack("<%d%s" % (len(flat), FMT[comp]), *flat)).decode()
    return base64.b64encode(struct.pack("<%d%s" % (len(vals), FMT[dt]), *vals)).decode()


def round_to(dt, v):
    """Round a Python float to the nearest value of float dtype ``dt``."""
    if dt == "float64" or not math.isfinite(v):
        return v
    if dt == "float32":
        try:
            return struct.unpack("<f", struct.pack("<f", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    if dt == "float16":
        try:
            return struct.unpack("<e", struct.pack("<e", v))[0]
        except OverflowError:
            return math.copysign(math.inf, v)
    if dt == "bfloat16":
        f = round_to("float32", v)
        if not math.isfinite(f):
            return f
        bits = struct.unpack("<I", struct.pack("<f", f))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # round half to even
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    raise ValueError(dt)


def ulp(dt, x):
    """Unit in the last place of float dtype ``dt`` at magnitude ``x``."""
    p, emin = FLOAT_BITS[dt]
    x = abs(x)
    if x == 0 or not math.isfinite(x):
        return math.ldexp(1.0, emin)
    _, e = math.frexp(x)
    return max(math.ldexp(1.0, e - p), math.ldexp(1.0, emin))


def next_up(dt, x):
    """The next value of dtype ``dt`` above x (x finite, representable)."""
    u = ulp(dt, x)
    y = round_to(dt, x + u)
    while y <= x:
        u *= 2
        y = round_to(dt, x + u)
    return y


def tolerances(dt, up, ref, acc):
    """Per-element tolerance for float results ``up`` (flat list) of dtype ``dt``
    (a real float dtype: complex is split into components before this).  ``ref`` is the
    float64 reference (same length) or None.  None entries mean: must match exactly
    (NaN / infinity positions)."""
    U = ULPS[dt]
    errs = []
    for i, u in enumerate(up):
        if ref is not None and math.isfinite(u) and math.isfinite(ref[i]):
            errs.append(abs(u - ref[i]))
        else:
            errs.append(0.0)
    if acc:
        emax = max(errs) if errs else 0.0
        mags = [abs(u) for u in up if math.isfinite(u)]
        if ref is not None:
            mags += [abs(r) for r in ref if math.isfinite(r)]
        mag = max(mags) if mags else 0.0
        floor = U * ulp(dt, mag)
        return [None if not math.isfinite(u) else K * emax + floor for u in up]
    out = []
    for i, u in enumerate(up):
        if not math.isfinite(u):
            out.append(None)
            continue
        mag = abs(u)
        if ref is not None and math.isfinite(ref[i]):
            mag = max(mag, abs(ref[i]))
        out.append(K * errs[i] + U * ulp(dt, mag))
    return out


def _fmt(v):
    return repr(v)


def _same_bits(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def compare_floats(dt, up, face, ref, acc, exact, where):
    """None if ``face`` passes against ``up``; else a reason string."""
    if exact:
        bad = [i for i in range(len(up)) if not _same_bits(up[i], face[i])]
        if bad:
            i = bad[0]
            return "%s: %d of %d elements differ (exact op), first at [%d]: face %s, upstream %s" % (
                where, len(bad), len(up), i, _fmt(face[i]), _fmt(up[i]))
        return None
    tols = tolerances(dt, up, ref, acc)
    bad = []
    worst = None
    for i, (u, f, t) in enumerate(zip(up, face, tols)):
        if math.isnan(u) or math.isnan(f):
            if not (math.isnan(u) and math.isnan(f)):
                bad.append(i)
            continue
        if t is None or math.isinf(f):
            if u != f:
                bad.append(i)
            continue
        d = abs(f - u)
        if d > t:
            bad.append(i)
            r = d / t if t > 0 else math.inf
            if worst is None or r > worst[0]:
                worst = (r, i)
    if bad:
        i = bad[0] if worst is None else worst[1]
        return "%s: %d of %d elements out of tolerance, worst at [%d]: face %s, upstream %s, tol %.3g%s" % (
            where, len(bad), len(up), i, _fmt(face[i]), _fmt(up[i]),
            tols[i] if tols[i] is not None else 0.0,
            "" if ref is None else " (ref64 %s)" % _fmt(ref[i]))
    return None


def compare_tensor(o, f, r, case, where):
    for key, label in (("dtype", "dtype"), ("shape", "shape"), ("stride", "strides"),
                       ("offset", "storage_offset"), ("rg", "requires_grad")):
        if o.get(key) != f.get(key):
            return "%s: %s face %s, upstream %s" % (where, label, f.get(key), o.get(key))
    dt = o["dtype"]
    try:
        uv, fv = decode(o), decode(f)
    except Exception as e:  # noqa: BLE001
        return "%s: undecodable data: %s" % (where, e)
    if len(uv) != len(fv):
        return "%s: %d values, upstream %d" % (where, len(fv), len(uv))
    if not is_floating(dt):
        for i, (a, b) in enumerate(zip(uv, fv)):
            if a != b:
                n = sum(1 for x, y in zip(uv, fv) if x != y)
                return "%s: %d of %d elements differ, first at [%d]: face %r, upstream %r" % (
                    where, n, len(uv), i, b, a)
        return None
    rv = None
    if (r is not None and r.get("t") == "tensor" and r.get("shape") == o["shape"]
            and is_floating(r.get("dtype", ""))):
        try:
            rv = decode(r)
        except Exception:  # noqa: BLE001
            rv = None
        if rv is not None and len(rv) != len(uv):
            rv = None
    acc, exact = case.get("acc", False), case.get("exact", False)
    if dt in COMPONENT:
        comp = COMPONENT[dt]
        for part, get in (("real", lambda c: c.real), ("imag", lambda c: c.imag)):
            rr = None
            if rv is not None:
                rr = [get(complex(x)) for x in rv]
            why = compare_floats(comp, [get(x) for x in uv], [get(x) for x in fv], rr, acc,
                                 exact, where + "." + part)
            if why:
                return why
        return None
    if rv is not None and isinstance(rv[0] if rv else 0.0, complex):
        rv = None
    return compare_floats(dt, uv, fv, rv, acc, exact, where)


def compare_value(o, f, r, case, where="out"):
    """None if face value ``f`` matches upstream ``o`` (``r``: float64 reference or None)."""
    if o.get("t") != f.get("t"):
        return "%s: face gave %s, upstream %s" % (where, f.get("t"), o.get("t"))
    t = o["t"]
    if t == "tensor":
        return compare_tensor(o, f, r, case, where)
    if t in ("tuple", "list"):
        if o.get("cls") != f.get("cls"):
            return "%s: face type %s, upstream %s" % (where, f.get("cls") or t, o.get("cls") or t)
        oi, fi = o["items"], f["items"]
        if len(oi) != len(fi):
            return "%s: face has %d items, upstream %d" % (where, len(fi), len(oi))
        ri = None
        if r is not None and r.get("t") == t and len(r.get("items", ())) == len(oi):
            ri = r["items"]
        for k in range(len(oi)):
            why = compare_value(oi[k], fi[k], ri[k] if ri else None, case, "%s[%d]" % (where, k))
            if why:
                return why
        return None
    if t == "float":
        uv, fv = float.fromhex(o["v"]), float.fromhex(f["v"])
        rv = None
        if r is not None and r.get("t") == "float":
            rv = [float.fromhex(r["v"])]
        return compare_floats("float64", [uv], [fv], rv, False, case.get("exact", False), where)
    if t == "complex":
        for k, part in enumerate(("real", "imag")):
            uv, fv = float.fromhex(o["v"][k]), float.fromhex(f["v"][k])
            why = compare_floats("float64", [uv], [fv], None, False, case.get("exact", False),
                                 where + "." + part)
            if why:
                return why
        return None
    if t == "other":
        if o.get("cls") != f.get("cls") or o.get("v") != f.get("v"):
            return "%s: face %s %s, upstream %s %s" % (where, f.get("cls"), f.get("v"),
                                                        o.get("cls"), o.get("v"))
        return None
    if o.get("v") != f.get("v"):
        return "%s: face %r, upstream %r" % (where, f.get("v"), o.get("v"))
    return None


AGREE, DISAGREE, REFUSED, ERROR = "agree", "disagree", "refused", "error"


EPS_RATIO = 2.0 ** -29  # float64 epsilon / float32 epsilon
REL_FLOOR = 2.0 ** -46  # about 64 float64 ulp of the value


def _est(u, r):
    if isinstance(u, complex):
        return complex(_est(u.real, complex(r).real), _est(u.imag, complex(r).imag))
    if math.isfinite(u) and math.isfinite(r):
        d = (r - u) * EPS_RATIO
        if abs(d) < abs(u) * REL_FLOOR:
            d = abs(u) * REL_FLOOR
        return u + d
    return u


def ref_from32(o, r):
    """A float64 reference for upstream's float64 result ``o`` built from its result ``r`` on
    float32-downcast inputs, so that judge.py's ``err = |up - ref|`` is upstream's estimated
    float64 error: ``max(|r32 - u| * 2**-29, |u| * 2**-46)``.  The first term is the float32
    error scaled by the ratio of the epsilons (cancellation and conditioning amplify both
    alike); the second, about 64 ulp of the value, is there because one float32 run is a
    noisy estimate (two roundings can happen to cancel) and implementations legitimately
    differ by some ulp (fma or not, summation order, series truncation).  Far below any
    semantic error, and the float32 samples of the same OpInfo still get the tight rule.
    None where the structures differ."""
    if not isinstance(r, dict) or o.get("t") != r.get("t"):
        return None
    t = o["t"]
    if t == "tensor":
        if o["dtype"] not in ("float64", "complex128") or r.get("shape") != o["shape"] \
                or not is_floating(r.get("dtype", "")):
            return None
        uv, rv = decode(o), decode(r)
        if len(uv) != len(rv):
            return None
        return dict(o, data=encode_values(o["dtype"], [_est(u, x) for u, x in zip(uv, rv)]))
    if t in ("tuple", "list"):
        if len(o["items"]) != len(r["items"]):
            return None
        return dict(o, items=[ref_from32(a, b) for a, b in zip(o["items"], r["items"])])
    if t == "float":
        return {"t": "float", "v": _est(float.fromhex(o["v"]), float.fromhex(r["v"])).hex()}
    return None



def with_f64_estimate(ref, est):
    """``ref`` (the float64 reference pass's output) with its float64/complex128 tensors and
    floats replaced by the estimate ``est`` (``ref_from32``) where one exists.  For a float64
    case the reference pass computes the same thing as upstream (its error reads as 0), so
    the estimate from the float32 pass is the only measure of upstream's float64 error."""
    if est is None or not isinstance(ref, dict):
        return ref
    if ref.get("t") in ("tuple", "list") and est.get("t") == ref.get("t") \
            and len(est.get("items", ())) == len(ref["items"]):
        return dict(ref, items=[with_f64_estimate(r, e) for r, e in zip(ref["items"], est["items"])])
    if ref.get("t") == "tensor" and ref.get("dtype") in ("float64", "complex128") \
            and est.get("t") == "tensor":
        return est
    if ref.get("t") == "float" and est.get("t") == "float":
        return est
    return ref


def judge(case, orec, frec, rrec=None):
    """(category, reason) for one case; records are run_side.py lines (or None)."""
    if orec is None:
        return ERROR, "upstream produced no result"
    if "harness" in orec:
        return ERROR, "upstream: " + orec["harness"]
    if frec is None:
        return ERROR, "face produced no result"
    if "harness" in frec:
        return ERROR, "face: " + frec["harness"]
    oexc, fexc = orec.get("exc"), frec.get("exc")
    if fexc is not None and fexc["type"] == "NotImplementedError" and (
            oexc is None or oexc["type"] != "NotImplementedError"):
        return REFUSED, "face: NotImplementedError: " + fexc["msg"][:200]
    if oexc is not None:
        if fexc is None:
            return DISAGREE, "face returned a value; upstream raises %s: %s" % (
                oexc["type"], oexc["msg"][:150])
        if fexc["type"] != oexc["type"]:
            return DISAGREE, "face raises %s (%s); upstream raises %s (%s)" % (
                fexc["type"], fexc["msg"][:100], oexc["type"], oexc["msg"][:100])
        return AGREE, ""
    if fexc is not None:
        return DISAGREE, "face raises %s: %s" % (fexc["type"], fexc["msg"][:200])
    rout = None
    if rrec is not None and "out" in rrec:
        rout = rrec["out"]
    why = compare_value(orec["out"], frec["out"], rout, case)
    if why:
        return DISAGREE, why
    return AGREE, ""
