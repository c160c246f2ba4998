"""One side of the OpInfo sweep: PyTorch's own OpInfo database as a second opinion on the face.

Why: the golden cases (``cases/``) are written by us; upstream's ``op_db``
(``torch.testing._internal.common_methods_invocations``, shipped in the wheel) holds ~700
OpInfos with sample inputs written by PyTorch's authors.  Running those samples through upstream
and through the face, and judging them with ``judge.py``'s rule, finds what our own cases miss.
``opinfo_sweep.py`` drives this script; it is not normally run by hand.

Two roles::

    ORACLE opinfo_side.py --role oracle --out FILE [--filter REGEX] [--keys FILE] [--samples N]
                          [--dtypes float32,float64,int64,bool] [--sample-timeout S]
    FACE   opinfo_side.py --role face --inputs FILE --out FILE [--start K] [--sample-timeout S]

``--role oracle`` (upstream only: importing op_db needs upstream's test tree, and
``expecttest`` is stubbed when absent since only its TestCase base class is needed).  For each
OpInfo (selected by ``--filter``, a regex searched in ``name[.variant]``, and ``--keys FILE``, a
JSON list of exact keys: opinfo_sweep.py passes the OpInfos its oracle cache lacks) it

* finds a path the face can resolve, e.g. ``torch.add``, ``torch.nn.functional.relu``,
  ``torch.linalg.norm``, ``torch.Tensor.add``, ``torch.ops.aten.foo.default``: the first
  attribute path under a list of public (then private) modules that *is* ``op.op``.  Lambdas
  and helpers defined in the test tree have none: the OpInfo is ``unresolvable``;
* for each dtype in ``--dtypes`` that ``op.supported_dtypes('cpu')`` has, seeds the RNG
  (``torch.manual_seed(0)``), takes the first N ``op.sample_inputs('cpu', dtype,
  requires_grad=False)``, encodes ``input``/``args``/``kwargs`` with ``run_side.encode``
  (tensors keep dtype, shape, strides, storage offset; numbers, bools, None, strings, dtypes,
  sizes, devices, memory formats, nested lists/tuples).  Anything else (callables,
  generators, sparse tensors, tensors over 65536 elements...) makes the sample ``skip``;
* calls ``op.op(input, *args, **kwargs)`` right after ``torch.manual_seed(1234)`` (so random
  ops can be compared too) and records the encoded result or exception; for float32 samples
  it calls it again with every floating input upcast to float64 (complex to complex128):
  upstream's own rounding error, the tolerance input of ``judge.py`` (``ref``).  float64
  samples have no wider dtype: they are called again with floating inputs downcast to
  float32 (``ref32``), from which opinfo_sweep.py estimates upstream's float64 error (the
  float32 error scaled by 2**-29, the ratio of the two epsilons: the op's conditioning
  amplifies both roundings alike).

Output lines (JSON, flushed per line; the first is a header, whose ``all_keys`` lists every
OpInfo key of op_db in order, selected or not)::

    {"opinfo": KEY, "name": .., "variant": .., "path": P|null, "why": .., "acc": bool,
     "cls": "UnaryUfuncInfo"...}                               # one per OpInfo, before its samples
    {"name": "KEY|dtype|i", "op": KEY, "path": P, "dtype": .., "inputs": {"input": V,
     "args": V, "kwargs": {k: V}}, "out": V | "exc": {..}, "ref"|"ref32": V, "time": s}
    {"name": .., "op": KEY, "dtype": .., "skip": "why"}        # not runnable on the face

``--role face`` (runs under the face; needs only ``torch``): reads the oracle file, takes the
sample lines with ``inputs`` (and from ``--start K`` on), rebuilds the inputs as face tensors
(``torch.tensor`` of the storage values, then ``as_strided`` to the recorded
shape/strides/offset when the tensor was not contiguous), resolves ``path`` by ``getattr``
from ``torch``, calls it after ``torch.manual_seed(1234)``, and writes run_side.py-style lines
``{"name", "out"|"exc"|"harness", "time"}``; an exception while rebuilding the inputs carries
``"phase": "inputs"``.  Every sample is isolated (exceptions caught, SIGALRM timeout, default
dtype and grad mode restored), lines are flushed, and the driver restarts the process after a
crash with ``--start``.
"""
import argparse
import json
import os
import re
import signal
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import run_side  # noqa: E402  (encode)
import judge as J  # noqa: E402  (decode)

CALL_SEED = 1234
SAMPLE_SEED = 0
MAX_NUMEL = 65536
DEFAULT_DTYPES = "float32,float64,int64,bool"

# Where the face can find an OpInfo's op: modules searched in this order for an attribute
# that *is* op.op (public API first).
PUBLIC_MODULES = ["torch", "torch.nn.functional", "torch.linalg", "torch.special", "torch.fft",
                  "torch.masked", "torch.signal.windows", "torch.Tensor", "torch.functional",
                  "torch.nn.init", "torch.sparse"]
PRIVATE_MODULES = ["torch._C._nn", "torch._C._linalg", "torch._C._special", "torch._C._fft",
                   "torch._C._VariableFunctions", "torch.masked._ops",
                   "torch.signal.windows.windows", "torch._C.TensorBase"]


class Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise Timeout("sample ran past its timeout")


def resolve(torch, path):
    """The object at dotted ``path`` (starting with ``torch``), by getattr; a path starting
    with ``lambda`` is evaluated in lambda_namespace."""
    if path.startswith("lambda"):
        return eval(path, lambda_namespace(torch))  # noqa: S307 - op_db's own source text
    parts = path.split(".")
    if parts[0] != "torch":
        raise ValueError("path %r does not start with torch" % path)
    obj = torch
    for p in parts[1:]:
        obj = getattr(obj, p)
    return obj


def exc_record(e):
    return {"type": type(e).__name__, "mro": [k.__name__ for k in type(e).__mro__],
            "msg": str(e)[:500]}


# ---------------------------------------------------------------------------- oracle role

def _stub_expecttest():
    try:
        import expecttest  # noqa: F401
    except ImportError:
        import types
        import unittest
        m = types.ModuleType("expecttest")
        m.TestCase = unittest.TestCase
        m.ACCEPT = False
        sys.modules["expecttest"] = m


def _module(torch, dotted):
    try:
        return resolve(torch, dotted)
    except Exception:  # noqa: BLE001
        return None


def build_index(torch):
    """id(object) -> the first path that reaches it, over PUBLIC_MODULES then PRIVATE_MODULES."""
    index = {}
    for dotted in PUBLIC_MODULES + PRIVATE_MODULES:
        mod = _module(torch, dotted)
        if mod is None:
            continue
        for name in dir(mod):
            if name.startswith("__") and dotted not in ("torch.Tensor", "torch._C.TensorBase"):
                continue
            try:
                obj = getattr(mod, name)
            except Exception:  # noqa: BLE001
                continue
            index.setdefault(id(obj), "%s.%s" % (dotted, name))
    return index


# names a shipped lambda may use besides its arguments and builtins; the face's namespace
# provides them (wrapper_set_seed: upstream's test helper, seed 42 around the call)
LAMBDA_NAMES = ("torch", "wrapper_set_seed")
_SOURCES = {}


def lambda_namespace(torch):
    def wrapper_set_seed(op, *args, **kwargs):
        torch.manual_seed(42)
        return op(*args, **kwargs)
    return {"torch": torch, "wrapper_set_seed": wrapper_set_seed, "__builtins__": __builtins__}


def lambda_source(torch, f):
    """(source, None) or (None, why) for a lambda the face can evaluate: found by ast at its
    line in its file, no closure, and no global names besides LAMBDA_NAMES and builtins."""
    import ast
    import builtins
    code = f.__code__
    if code.co_freevars:
        return None, "lambda with a closure (%s)" % ", ".join(code.co_freevars)
    fn = code.co_filename
    if fn not in _SOURCES:
        try:
            with open(fn) as fh:
                src = fh.read()
            _SOURCES[fn] = (src, ast.parse(src))
        except Exception as e:  # noqa: BLE001
            _SOURCES[fn] = (None, e)
    src, tree = _SOURCES[fn]
    if src is None:
        return None, "lambda source unreadable"
    argnames = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Lambda) and node.lineno == code.co_firstlineno:
            if [a.arg for a in node.args.args + node.args.kwonlyargs] == argnames:
                found.append(node)
    if len(found) != 1:
        return None, "lambda not found in its source (%d candidates)" % len(found)
    node = found[0]
    bound = {a.arg for a in node.args.args + node.args.kwonlyargs}
    for a in (node.args.vararg, node.args.kwarg):
        if a is not None:
            bound.add(a.arg)
    for n in ast.walk(node.body):  # nested lambdas' arguments and comprehension targets
        if isinstance(n, ast.Lambda):
            bound.update(a.arg for a in n.args.args + n.args.kwonlyargs)
            bound.update(a.arg for a in (n.args.vararg, n.args.kwarg) if a is not None)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            bound.add(n.id)
    for n in ast.walk(node.body):
        if isinstance(n, ast.Name) and n.id not in bound:
            if n.id == "torch" and f.__globals__.get("torch") is torch:
                continue
            if n.id == "wrapper_set_seed" or (n.id not in f.__globals__
                                               and hasattr(builtins, n.id)):
                continue
            return None, "lambda uses %s" % n.id
    text = ast.get_source_segment(src, node)
    if text is None:
        return None, "lambda source unreadable"
    return " ".join(text.split()), None


def op_path(torch, op, index):
    """(path, None) or (None, why) for OpInfo ``op``; a path is a dotted name under ``torch``
    or the source of a lambda (see lambda_source)."""
    f = op.op
    if getattr(f, "__name__", "") == "<lambda>":
        return lambda_source(torch, f)
    p = index.get(id(f))
    if p is None and isinstance(f, (torch._ops.OpOverloadPacket, torch._ops.OpOverload)):
        ns = getattr(f, "namespace", "aten")
        if isinstance(f, torch._ops.OpOverload):
            p = "torch.ops.%s.%s.%s" % (ns, f._schema.name.split("::")[1], f._overloadname)
        else:
            p = "torch.ops.%s.%s" % (ns, f._qualified_op_name.split("::")[1])
    if p is None:
        mod, name = getattr(f, "__module__", None), getattr(f, "__name__", None)
        if mod and name and (mod == "torch" or mod.startswith("torch.")) \
                and ".testing." not in mod + ".":
            p = "%s.%s" % (mod, name)
    if p is None:
        return None, "no path to %s.%s" % (getattr(f, "__module__", type(f).__name__),
                                            getattr(f, "__name__", "?"))
    try:
        ok = resolve(torch, p) is f
    except Exception:  # noqa: BLE001
        ok = False
    if not ok:
        return None, "path %s does not resolve to the op" % p
    return p, None


class Unencodable(Exception):
    pass


def _check(torch, enc, where):
    """Raise Unencodable unless the face can rebuild ``enc``."""
    t = enc["t"]
    if t == "other":
        if enc["cls"] in ("memory_format", "layout") and enc["v"].startswith("torch."):
            return
        raise Unencodable("%s: %s" % (where, enc["cls"]))
    if t in ("tuple", "list"):
        if enc.get("cls"):
            raise Unencodable("%s: %s" % (where, enc["cls"]))
        for k, e in enumerate(enc["items"]):
            _check(torch, e, "%s[%d]" % (where, k))
    if t == "tensor":
        n = 1
        for s in enc["shape"]:
            n *= s
        if n > MAX_NUMEL:
            raise Unencodable("%s: tensor of %d elements" % (where, n))


def encode_in(torch, v, where, depth=0):
    """run_side.encode for an input value; a tensor that is not the whole of its storage
    also carries the storage's values (``storage``: base64 like ``data``), so ops that look
    past the view (as_strided, set_) see what upstream saw."""
    if depth > 20:
        raise Unencodable("%s: nested too deeply" % where)
    if isinstance(v, torch.Tensor):
        if v.layout != torch.strided:
            raise Unencodable("%s: %s tensor" % (where, v.layout))
        try:
            enc = run_side.encode(torch, v)
            n = v.untyped_storage().nbytes() // max(v.element_size(), 1)
        except Exception as e:  # noqa: BLE001
            raise Unencodable("%s: %s" % (where, e))
        if v.numel() and (n != v.numel() or not v.is_contiguous() or v.storage_offset()):
            if n > 4 * MAX_NUMEL:
                raise Unencodable("%s: storage of %d elements" % (where, n))
            enc["storage"] = run_side.encode(torch, v.as_strided((n,), (1,), 0))["data"]
        _check(torch, enc, where)
        return enc
    if isinstance(v, (list, tuple)) and type(v) in (list, tuple):
        return {"t": "list" if isinstance(v, list) else "tuple",
                "items": [encode_in(torch, e, "%s[%d]" % (where, k), depth + 1)
                          for k, e in enumerate(v)]}
    try:
        enc = run_side.encode(torch, v)
    except Exception as e:  # noqa: BLE001
        raise Unencodable("%s: %s" % (where, e))
    _check(torch, enc, where)
    return enc


def encode_inputs(torch, sample):
    return {"input": encode_in(torch, sample.input, "input"),
            "args": encode_in(torch, tuple(sample.args), "args"),
            "kwargs": {k: encode_in(torch, v, "kwargs[%s]" % k)
                       for k, v in sample.kwargs.items()}}


def recast(torch, v, down=False):
    """Copies of the floating tensors in ``v`` upcast to float64/complex128 (``down``:
    float64/complex128 ones downcast to float32/complex64); other tensors cloned."""
    if isinstance(v, torch.Tensor):
        if v.is_complex():
            if down:
                return v.to(torch.complex64 if v.dtype == torch.complex128 else v.dtype, copy=True)
            return v.to(torch.complex128, copy=True)
        if v.is_floating_point():
            if down:
                return v.to(torch.float32 if v.dtype == torch.float64 else v.dtype, copy=True)
            return v.to(torch.float64, copy=True)
        return v.clone()
    if isinstance(v, list):
        return [recast(torch, e, down) for e in v]
    if isinstance(v, tuple) and type(v) is tuple:
        return tuple(recast(torch, e, down) for e in v)
    return v


def _has_other(enc):
    if enc.get("t") == "other":
        return True
    return any(_has_other(e) for e in enc.get("items", ()))


def _call(torch, f, inp, args, kwargs, timeout):
    """Run one call; ('out', value) or ('exc', exception)."""
    torch.manual_seed(CALL_SEED)
    if timeout > 0:
        signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        return "out", f(inp, *args, **kwargs)
    except Timeout as e:
        return "exc", e
    except Exception as e:  # noqa: BLE001 - the op's exception is its result
        return "exc", e
    finally:
        if timeout > 0:
            signal.setitimer(signal.ITIMER_REAL, 0)


def _restore(torch, default_dtype):
    if torch.get_default_dtype() != default_dtype:
        torch.set_default_dtype(default_dtype)
    if not torch.is_grad_enabled():
        torch.set_grad_enabled(True)


def oracle(args):
    _stub_expecttest()
    t0 = time.perf_counter()
    import torch
    from torch.testing._internal.common_methods_invocations import op_db
    import_time = time.perf_counter() - t0
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    index = build_index(torch)
    filt = re.compile(args.filter) if args.filter else None
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",") if d]
    default_dtype = torch.get_default_dtype()
    keys = None
    if args.keys:
        with open(args.keys) as fh:
            keys = set(json.load(fh))
    ops, all_keys = [], []
    for op in op_db:
        key = op.name + ("." + op.variant_test_name if op.variant_test_name else "")
        all_keys.append(key)
        if (filt is None or filt.search(key)) and (keys is None or key in keys):
            ops.append((key, op))
    with open(args.out, "w", buffering=1) as fh:
        fh.write(json.dumps({"header": True, "role": "oracle", "python": sys.version.split()[0],
                             "torch": torch.__version__, "opinfos": len(ops),
                             "samples": args.samples, "dtypes": args.dtypes,
                             "import_time": import_time, "all_keys": all_keys}) + "\n")
        for key, op in ops:
            path, why = op_path(torch, op, index)
            cls = type(op).__name__
            # pointwise OpInfos are judged per element; everything else (reductions, matmuls,
            # linalg, convolutions, norms...) with the tensor's largest error and magnitude
            acc = cls not in ("UnaryUfuncInfo", "BinaryUfuncInfo")
            fh.write(json.dumps({"opinfo": key, "name": op.name,
                                 "variant": op.variant_test_name, "path": path, "why": why,
                                 "acc": acc, "cls": cls}) + "\n")
            if path is None:
                continue
            f = op.op
            try:
                supported = op.supported_dtypes("cpu")
            except Exception as e:  # noqa: BLE001
                fh.write(json.dumps({"name": "%s|-|0" % key, "op": key, "dtype": None,
                                     "skip": "supported_dtypes: %s: %s" % (
                                         type(e).__name__, str(e)[:200])}) + "\n")
                continue
            for dt in dtypes:
                if dt not in supported:
                    continue
                dname = str(dt).replace("torch.", "")
                torch.manual_seed(SAMPLE_SEED)
                try:
                    if args.sample_timeout > 0:
                        signal.setitimer(signal.ITIMER_REAL, args.sample_timeout * 3)
                    try:
                        samples = []
                        for s in op.sample_inputs("cpu", dt, requires_grad=False):
                            samples.append(s)
                            if len(samples) >= args.samples:
                                break
                    finally:
                        if args.sample_timeout > 0:
                            signal.setitimer(signal.ITIMER_REAL, 0)
                except Exception as e:  # noqa: BLE001
                    fh.write(json.dumps({"name": "%s|%s|0" % (key, dname), "op": key,
                                         "dtype": dname, "skip": "sample_inputs: %s: %s" % (
                                             type(e).__name__, str(e)[:200])}) + "\n")
                    _restore(torch, default_dtype)
                    continue
                for i, s in enumerate(samples):
                    rec = {"name": "%s|%s|%d" % (key, dname, i), "op": key, "path": path,
                           "dtype": dname}
                    try:
                        rec["inputs"] = encode_inputs(torch, s)
                    except Unencodable as e:
                        fh.write(json.dumps({"name": rec["name"], "op": key, "dtype": dname,
                                             "skip": "unencodable input: %s" % e}) + "\n")
                        continue
                    up, refkey = None, "ref"
                    if dt.is_floating_point or dt.is_complex:
                        # recast copies first: an in-place op mutates its inputs
                        down = dt in (torch.float64, torch.complex128)
                        refkey = "ref32" if down else "ref"
                        up = (recast(torch, s.input, down), recast(torch, s.args, down),
                              {k: recast(torch, x, down) for k, x in s.kwargs.items()})
                    t = time.perf_counter()
                    kind, v = _call(torch, f, s.input, s.args, s.kwargs, args.sample_timeout)
                    rec["time"] = time.perf_counter() - t
                    if isinstance(v, Timeout):
                        rec = {"name": rec["name"], "op": key, "dtype": dname,
                               "skip": "upstream ran past %gs" % args.sample_timeout}
                    elif kind == "exc":
                        rec["exc"] = exc_record(v)
                    else:
                        try:
                            rec["out"] = run_side.encode(torch, v)
                            if _has_other(rec["out"]):
                                raise ValueError("result holds a %s" % type(v).__name__)
                        except Exception as e:  # noqa: BLE001
                            rec = {"name": rec["name"], "op": key, "dtype": dname,
                                   "skip": "unencodable result: %s" % e}
                    if "out" in rec and up is not None:
                        kind, v = _call(torch, f, up[0], up[1], up[2], args.sample_timeout)
                        if isinstance(v, Timeout):
                            rec["ref_timeout"] = True  # not a result to cache
                        elif kind == "out":
                            try:
                                rec[refkey] = run_side.encode(torch, v)
                            except Exception:  # noqa: BLE001
                                pass
                    _restore(torch, default_dtype)
                    fh.write(json.dumps(rec) + "\n")
    return 0


# ------------------------------------------------------------------------------ face role

def _nest(vals, shape):
    if not shape:
        return vals[0]
    if len(shape) == 1:
        return list(vals)
    step = len(vals) // shape[0] if shape[0] else 0
    return [_nest(vals[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def build_tensor(torch, enc):
    """A face tensor with the encoded dtype, shape, strides, storage offset and values."""
    dt = getattr(torch, enc["dtype"])
    shape, stride, offset = enc["shape"], enc["stride"], enc["offset"]
    numel = 1
    for s in shape:
        numel *= s
    contig, acc = [], 1
    for s in reversed(shape):
        contig.append(acc)
        acc *= max(s, 1)
    contig.reverse()
    if numel == 0:
        return torch.empty_strided(shape, stride, dtype=dt)
    if "storage" in enc:
        store = J.decode({"dtype": enc["dtype"], "data": enc["storage"]})
        return torch.tensor(store, dtype=dt).as_strided(shape, stride, offset)
    vals = J.decode(enc)
    dense = all(st == c for st, c, s in zip(stride, contig, shape) if s > 1)
    if not dense or offset:
        raise ValueError("a strided tensor without its storage values")  # encode_in adds them
    t = torch.tensor(_nest(vals, shape), dtype=dt)
    if list(t.stride()) != stride:  # size-1 dims with unusual strides
        t = t.as_strided(shape, stride)
    return t


def build_value(torch, enc):
    t = enc["t"]
    if t == "tensor":
        return build_tensor(torch, enc)
    if t in ("int", "bool", "str"):
        return enc["v"]
    if t == "none":
        return None
    if t == "float":
        return float.fromhex(enc["v"])
    if t == "complex":
        return complex(float.fromhex(enc["v"][0]), float.fromhex(enc["v"][1]))
    if t == "dtype":
        return getattr(torch, enc["v"])
    if t == "size":
        return torch.Size(enc["v"])
    if t == "device":
        return torch.device(enc["v"])
    if t == "list":
        return [build_value(torch, e) for e in enc["items"]]
    if t == "tuple":
        return tuple(build_value(torch, e) for e in enc["items"])
    if t == "other":
        return resolve(torch, enc["v"])
    raise ValueError("cannot rebuild %r" % t)


def runnable(lines):
    """The sample records the face runs, in order (shared with opinfo_sweep.py)."""
    return [r for r in lines if "inputs" in r and "skip" not in r]


def read_lines(path):
    out = []
    with open(path) as fh:
        for line in fh:
            if not line.endswith("\n"):
                break
            try:
                out.append(json.loads(line))
            except ValueError:
                break
    return out


def face(args):
    recs = runnable(read_lines(args.inputs))
    t0 = time.perf_counter()
    import torch
    import_time = time.perf_counter() - t0
    warnings.simplefilter("ignore")
    signal.signal(signal.SIGALRM, _alarm)
    default_dtype = torch.get_default_dtype()
    resolved = {}
    with open(args.out, "w", buffering=1) as fh:
        fh.write(json.dumps({"header": True, "role": "face", "python": sys.version.split()[0],
                             "torch": getattr(torch, "__version__", "?"), "cases": len(recs),
                             "start": args.start, "import_time": import_time}) + "\n")
        for r in recs[args.start:]:
            out = {"name": r["name"]}
            t = time.perf_counter()
            path = r["path"]
            if path not in resolved:
                try:
                    resolved[path] = ("ok", resolve(torch, path))
                except Exception as e:  # noqa: BLE001
                    resolved[path] = ("exc", e)
            kind, f = resolved[path]
            if kind == "exc":
                out["exc"] = exc_record(f)
                out["phase"] = "resolve"
                out["time"] = 0.0
                fh.write(json.dumps(out) + "\n")
                continue
            try:
                inp = r["inputs"]
                x = build_value(torch, inp["input"])
                a = build_value(torch, inp["args"])
                kw = {k: build_value(torch, v) for k, v in inp["kwargs"].items()}
            except Exception as e:  # noqa: BLE001
                out["exc"] = exc_record(e)
                out["phase"] = "inputs"
                out["time"] = time.perf_counter() - t
                _restore(torch, default_dtype)
                fh.write(json.dumps(out) + "\n")
                continue
            kind, v = _call(torch, f, x, a, kw, args.sample_timeout)
            out["time"] = time.perf_counter() - t
            if kind == "exc":
                out["exc"] = exc_record(v)
            else:
                try:
                    out["out"] = run_side.encode(torch, v)
                except Exception as e:  # noqa: BLE001
                    out["harness"] = "cannot encode out: %s: %s" % (type(e).__name__, e)
            _restore(torch, default_dtype)
            fh.write(json.dumps(out) + "\n")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--role", choices=("oracle", "face"), required=True)
    ap.add_argument("--out", required=True, help="JSON-lines file to write")
    ap.add_argument("--inputs", help="(face) the oracle's output file")
    ap.add_argument("--start", type=int, default=0, help="(face) skip the first K samples")
    ap.add_argument("--filter", default=None, help="(oracle) regex searched in name[.variant]")
    ap.add_argument("--keys", default=None,
                    help="(oracle) JSON file with a list of OpInfo keys: only those")
    ap.add_argument("--samples", type=int, default=8, help="(oracle) samples per OpInfo and dtype")
    ap.add_argument("--dtypes", default=DEFAULT_DTYPES, help="(oracle) comma-separated dtypes")
    ap.add_argument("--sample-timeout", type=float, default=20.0,
                    help="seconds per call (SIGALRM; 0 = none)")
    args = ap.parse_args(argv)
    if args.role == "face":
        if not args.inputs:
            ap.error("--role face needs --inputs")
        return face(args)
    return oracle(args)


if __name__ == "__main__":
    sys.exit(main())
