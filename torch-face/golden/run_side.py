"""Run golden cases under one interpreter and write what they produced.

Why a separate script: the oracle (upstream torch) and the face (upstream torch's Python tree
on our Rust ``torch._C``) are different interpreters, and a case may crash the face.  So
``compare.py`` runs this file once per side, in its own process, and reads back a file that
needs no torch to decode.

Usage (normally called by compare.py)::

    PY run_side.py --out FILE [--module NAME ...] [--filter REGEX] [--names FILE] [--start N]
                   [--ref64|--ref32]

Every selected case (see ``cases/__init__.py``) runs in a fresh namespace holding ``torch``,
``F`` (torch.nn.functional), ``math`` and two helpers:

* ``inp(t)`` marks a case input.  Normally it returns ``t``.  With ``--ref64`` (the oracle's
  float64 reference pass) it returns floating tensors upcast to float64 (complex to
  complex128), so the same values go through the same op in double precision.
* ``fdt(dtype)``: a floating dtype argument of the op; float64 under ``--ref64``.

``--names FILE`` (a JSON list of case names) keeps only those of the selected cases, in their
usual order: compare.py passes the cases of a ``--slice`` and, for the oracle, the cases its
cache does not hold.  A name that is not a selected case is an error (exit 2): the sides must
load the same case list.

The case sets ``out``.  Exceptions are caught per case.  Only cases with ``ref64`` set run
under ``--ref64``.  ``--ref32`` is the float32 pass for float64 cases (``ref64`` cases named
float64/complex128): inputs and dtype arguments go down to float32/complex64, and the judge
estimates upstream's float64 error from how far that run lands (``judge.ref_from32``).

Output: JSON lines, flushed after every case, so a crash loses nothing already done.
Line 1 is a header; then one object per case::

    {"name": ..., "time": seconds, "out": VALUE}                       # ran
    {"name": ..., "time": seconds, "exc": {"type", "mro", "msg"}}      # raised
    {"name": ..., "time": seconds, "harness": "why"}                   # could not encode

VALUE encodings (``t`` = kind):

* tensor: ``{"t": "tensor", "dtype": "float32", "shape": [..], "stride": [..], "offset": n,
  "rg": requires_grad, "data": base64}``.  ``data`` is the little-endian raw bytes of the
  row-major (contiguous) copy: float16 as IEEE half, bfloat16 as its raw 16 bits, bool as one
  byte, complex as (real, imag) pairs.  The bytes are rebuilt from ``Tensor.tolist()`` with
  ``struct`` (exact for every dtype; only NaN payloads are normalized), so the face needs no
  numpy and no storage access to be measured.
* ``{"t": "tuple"|"list", "items": [...], "cls": "sort"}``: ``cls`` names tuple subclasses
  (torch.return_types).
* ``{"t": "int"|"bool"|"str"|"none"|"float"|"complex", "v": ...}``: floats as ``float.hex``.
* ``{"t": "dtype", "v": "float32"}``, ``{"t": "size", "v": [..]}``,
  ``{"t": "device", "v": "cpu"}``, ``{"t": "other", "cls": ..., "v": repr}``.

No pickle: nothing here needs torch, or trust, to read.
"""
import argparse
import base64
import json
import math
import os
import re
import struct
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))

# struct format per dtype name; bfloat16 is packed by hand (upper half of the float32 bits).
FORMATS = {
    "float64": "d", "float32": "f", "float16": "e", "int64": "q", "int32": "i",
    "int16": "h", "int8": "b", "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "bool": "?", "complex64": "f", "complex128": "d", "complex32": "e",
}

# float64 cases get a float32 pass (--ref32); their names carry the dtype.
F64_NAME = re.compile(r"float64|complex128")


def _flatten(v, acc):
    if isinstance(v, list):
        for e in v:
            _flatten(e, acc)
    else:
        acc.append(v)
    return acc


def tensor_bytes(dtype_name, values):
    """Little-endian raw bytes of a flat list of Python values of ``dtype_name``."""
    n = len(values)
    if dtype_name == "bfloat16":
        raw = struct.pack("<%df" % n, *values)
        # values are exact bfloat16 numbers: the low 16 bits of each float32 are zero
        # (NaN is packed as the canonical quiet NaN, whose low bits are zero too)
        return b"".join(raw[i + 2:i + 4] for i in range(0, len(raw), 4))
    fmt = FORMATS[dtype_name]
    if dtype_name.startswith("complex"):
        flat = []
        for c in values:
            c = complex(c)
            flat.append(c.real)
            flat.append(c.imag)
        return struct.pack("<%d%s" % (2 * n, fmt), *flat)
    return struct.pack("<%d%s" % (n, fmt), *values)


def encode(torch, v, depth=0):
    if depth > 20:
        raise ValueError("output nested too deeply")
    if isinstance(v, torch.Tensor):
        dt = str(v.dtype).replace("torch.", "")
        if dt not in FORMATS and dt != "bfloat16":
            raise ValueError("no encoding for dtype %s" % dt)
        if v.layout != torch.strided:
            raise ValueError("no encoding for layout %s" % v.layout)
        flat = _flatten(v.detach().tolist(), [])
        return {
            "t": "tensor", "dtype": dt, "shape": list(v.shape), "stride": list(v.stride()),
            "offset": v.storage_offset(), "rg": bool(v.requires_grad),
            "data": base64.b64encode(tensor_bytes(dt, flat)).decode("ascii"),
        }
    if isinstance(v, bool):
        return {"t": "bool", "v": v}
    if isinstance(v, int):
        return {"t": "int", "v": v}
    if isinstance(v, float):
        return {"t": "float", "v": v.hex()}
    if isinstance(v, complex):
        return {"t": "complex", "v": [v.real.hex(), v.imag.hex()]}
    if isinstance(v, str):
        return {"t": "str", "v": v}
    if v is None:
        return {"t": "none"}
    if isinstance(v, torch.dtype):
        return {"t": "dtype", "v": str(v).replace("torch.", "")}
    if isinstance(v, torch.Size):
        return {"t": "size", "v": [int(s) for s in v]}
    if isinstance(v, torch.device):
        return {"t": "device", "v": str(v)}
    if isinstance(v, (tuple, list)):
        d = {"t": "list" if isinstance(v, list) else "tuple",
             "items": [encode(torch, e, depth + 1) for e in v]}
        if type(v) not in (tuple, list):
            d["cls"] = type(v).__name__
        return d
    return {"t": "other", "cls": type(v).__name__, "v": repr(v)[:200]}


def selected_cases(args):
    """The cases this run executes, in order (needs no torch): --module, --filter, the
    --ref64/--ref32 pass's subset, then --names (ValueError: a name that is not among them)."""
    sys.path.insert(0, HERE)
    from cases import load_cases, select

    selected = select(load_cases(args.module), args.filter, args.ref64 or args.ref32)
    if args.ref32:
        selected = [c for c in selected if F64_NAME.search(c["name"])]
    if args.names:
        with open(args.names) as fh:
            names = json.load(fh)
        have = {c["name"] for c in selected}
        unknown = [n for n in names if n not in have]
        if unknown:
            raise ValueError("--names %s: %d name(s) are not selected cases here, e.g. %r" % (
                args.names, len(unknown), unknown[0]))
        want = set(names)
        selected = [c for c in selected if c["name"] in want]
    return selected


def build_parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON-lines result file to write")
    ap.add_argument("--module", action="append", default=None,
                    help="case file to run (cases/NAME.py; repeatable; default all)")
    ap.add_argument("--filter", default=None, help="regex searched in case names")
    ap.add_argument("--names", default=None,
                    help="JSON file with a list of case names: run only those")
    ap.add_argument("--start", type=int, default=0,
                    help="skip the first N selected cases (crash recovery)")
    ap.add_argument("--ref64", action="store_true",
                    help="float64 reference pass: inputs upcast, only ref64 cases")
    ap.add_argument("--ref32", action="store_true",
                    help="float32 pass of the float64 ref64 cases: inputs downcast")
    ap.add_argument("--case-timeout", type=float, default=0,
                    help="seconds per case (SIGALRM; 0 = none; compare.py has its own watchdog)")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        selected = selected_cases(args)
    except ValueError as e:
        print("run_side: %s" % e, file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    import torch
    import_time = time.perf_counter() - t0
    F = torch.nn.functional
    warnings.simplefilter("ignore")

    ref64 = args.ref64
    if args.ref32:
        f32, c64 = torch.float32, torch.complex64

        def inp(t):
            if isinstance(t, torch.Tensor):
                if t.dtype == torch.complex128:
                    return t.to(c64)
                if t.dtype == torch.float64:
                    return t.to(f32)
            return t

        def fdt(d):
            if d == torch.float64:
                return f32
            if d == torch.complex128:
                return c64
            return d
    elif ref64:
        f64, c128 = torch.float64, torch.complex128

        def inp(t):
            if isinstance(t, torch.Tensor):
                if t.is_complex():
                    return t.to(c128)
                if t.is_floating_point():
                    return t.to(f64)
            return t

        def fdt(d):
            if d is not None and d.is_floating_point:
                return f64
            if d is not None and d.is_complex:
                return c128
            return d
    else:
        def inp(t):
            return t

        def fdt(d):
            return d

    if args.case_timeout > 0:
        import signal

        class CaseTimeout(Exception):
            pass

        def _alarm(signum, frame):
            raise CaseTimeout("case ran past %gs" % args.case_timeout)
        signal.signal(signal.SIGALRM, _alarm)

    default_dtype = torch.get_default_dtype()
    with open(args.out, "w", buffering=1) as fh:
        fh.write(json.dumps({
            "header": True, "python": sys.version.split()[0],
            "torch": getattr(torch, "__version__", "?"), "ref64": ref64,
            "cases": len(selected), "start": args.start, "import_time": import_time,
        }) + "\n")
        for c in selected[args.start:]:
            rec = {"name": c["name"]}
            ns = {"torch": torch, "F": F, "math": math, "inp": inp, "fdt": fdt,
                  "__name__": "golden_case"}
            t = time.perf_counter()
            try:
                if args.case_timeout > 0:
                    signal.setitimer(signal.ITIMER_REAL, args.case_timeout)
                try:
                    exec(compile(c["code"], c["name"], "exec"), ns)
                finally:
                    if args.case_timeout > 0:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                rec["time"] = time.perf_counter() - t
                if "out" not in ns:
                    rec["harness"] = "case did not set out"
                else:
                    try:
                        rec["out"] = encode(torch, ns["out"])
                    except Exception as e:  # noqa: BLE001 - report, do not stop
                        rec["harness"] = "cannot encode out: %s: %s" % (type(e).__name__, e)
            except Exception as e:  # noqa: BLE001 - the case's own exception is its result
                rec["time"] = time.perf_counter() - t
                rec["exc"] = {"type": type(e).__name__,
                              "mro": [k.__name__ for k in type(e).__mro__],
                              "msg": str(e)[:500]}
            # a case must not leak global state into the next one
            if torch.get_default_dtype() != default_dtype:
                torch.set_default_dtype(default_dtype)
            if not torch.is_grad_enabled():
                torch.set_grad_enabled(True)
            fh.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
