"""Helpers for writing case generators: literals, deterministic inputs, layouts.

Inputs are torch.tensor literals (values chosen here, cycled from small pools) plus a view
for the layout, so a case depends on nothing but torch.tensor, the view, and the op under test.
"""
import math

DTYPES = ["float32", "float64", "float16", "bfloat16",
          "int64", "int32", "int16", "int8", "uint8", "bool"]
FLOATS = ("float32", "float64", "float16", "bfloat16")
INTS = ("int64", "int32", "int16", "int8", "uint8")
SIGNED = ("int64", "int32", "int16", "int8")

RANGES = {"int64": (-2**63, 2**63 - 1), "int32": (-2**31, 2**31 - 1),
          "int16": (-2**15, 2**15 - 1), "int8": (-128, 127), "uint8": (0, 255)}


def is_float(dt):
    return dt in FLOATS


def case(name, code, ops, family, ref64=False, acc=False, exact=False):
    """One case (see cases/__init__.py).  ``exact``: float results must be bit-identical
    (ops that only move, negate or round values: abs, floor, clone, views, ...)."""
    if isinstance(ops, str):
        ops = [ops]
    return {"name": name, "code": code, "ops": list(ops), "family": family,
            "ref64": bool(ref64), "acc": bool(acc), "exact": bool(exact)}


def lit(v):
    """Python source for one value."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "math.nan"
        if math.isinf(v):
            return "math.inf" if v > 0 else "-math.inf"
        return repr(v)
    if isinstance(v, complex):
        return "complex(%s, %s)" % (lit(v.real), lit(v.imag))
    raise TypeError(v)


def nest(vals, shape):
    """Nested-list source of ``vals`` (row-major) with ``shape``."""
    shape = tuple(shape)
    if len(shape) == 0:
        return lit(vals[0])
    if shape[0] == 0:
        return "[]"
    step = len(vals) // shape[0] if shape[0] else 0
    return "[" + ", ".join(nest(vals[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def T(vals, shape, dtype):
    """torch.tensor source for ``vals`` reshaped to ``shape``."""
    if numel(shape) == 0:
        src = "torch.tensor([], dtype=torch.%s)" % dtype
        if tuple(shape) != (0,):
            src += ".reshape(%s)" % ", ".join(str(s) for s in shape)
        return src
    return "torch.tensor(%s, dtype=torch.%s)" % (nest(vals, shape), dtype)


# Value pools.  Float pools avoid values whose neighbours are ties in float16/bfloat16 only
# when that matters; they cover signs, fractions, round-half cases and a few magnitudes.
FPOOLS = {
    "gen": [-2.5, -1.75, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 1.5, 2.5, 3.25, -3.5, 0.125, 7.0,
            -0.3, 0.7, 10.0, -6.0, 0.01, 4.5, -12.25, 0.9, 2.0, -0.125],
    "pos": [0.5, 1.0, 2.0, 0.125, 3.5, 10.0, 0.01, 7.25, 1.5, 100.0, 0.3, 2.5, 5.0, 0.75,
            42.0, 0.0, 6.5, 9.0, 1.25, 20.0, 0.05, 3.0, 12.5, 0.2],
    "unit": [-0.9, -0.5, 0.0, 0.25, 0.5, 0.75, -0.25, 0.9, 0.1, -0.1, 0.99, -0.75, 0.3,
             -0.6, 0.6, 0.05, -0.05, 0.4, -0.4, 0.8, -0.8, 0.2, -0.2, 0.65],
    "ge1": [1.0, 1.5, 2.0, 3.0, 10.0, 1.25, 4.5, 1.1, 7.0, 2.5, 20.0, 1.05, 5.5, 3.75, 100.0,
            1.75, 6.0, 1.01, 8.5, 2.25, 12.0, 1.3, 9.0, 15.5],
    "prob": [0.1, 0.25, 0.5, 0.75, 0.9, 0.05, 0.3, 0.6, 0.95, 0.2, 0.45, 0.8, 0.15, 0.35,
             0.55, 0.7, 0.85, 0.4, 0.65, 0.02, 0.98, 0.12, 0.33, 0.66],
    # distinct values (sort/topk/kthvalue indices are defined only without ties)
    "distinct": [3.5, -1.25, 7.0, 0.5, -4.0, 2.25, 9.5, -0.75, 1.0, 5.5, -2.5, 6.25, 0.125,
                 -6.5, 4.0, 8.75, -3.0, 11.0, -0.25, 2.75, -8.0, 12.5, 1.75, -5.25],
    # moderate values for exp-like ops and accumulations
    "exp": [0.5, 2.0, 1.0, 3.0, -1.0, 0.0, 1.5, 2.5, -0.5, 2.0, 0.25, -2.0, 1.0, 0.75, 3.0,
            -1.5, 0.0, 2.0, 1.25, -0.25, 0.5, 4.0, 1.0, 2.0],
    "nz": [-2.5, -1.75, -1.0, -0.5, 3.0, 0.25, 0.5, 1.0, 1.5, 2.5, 3.25, -3.5, 0.125, 7.0,
           -0.3, 0.7, 10.0, -6.0, 0.01, 4.5, -12.25, 0.9, 2.0, -0.125],
    "mod": [-1.5, 0.25, 1.0, -0.5, 0.75, 2.0, -2.0, 0.5, 1.25, -0.25, 1.5, -1.0, 0.1, 3.0,
            -0.75, 0.6, -3.0, 2.5, 0.3, -1.25, 1.75, -0.6, 0.9, -2.25],
}
IPOOLS = {
    "gen": [-3, 5, 0, 7, -1, 2, 4, -6, 1, 3, 9, -2, 11, 6, -8, 10, -5, 12, 8, -4, 13, -7, 15, -9],
    "pos": [1, 2, 3, 5, 7, 4, 9, 6, 8, 10, 12, 11, 13, 15, 14, 16, 3, 2, 20, 1, 25, 5, 30, 7],
    "unit": [0, 1, 0, -1, 1, 0, 0, -1, 1, 1, 0, -1, 0, 1, -1, 0, 1, 0, 0, -1, 1, 0, -1, 1],
    "ge1": [1, 2, 3, 5, 7, 4, 9, 6, 8, 10, 12, 11, 13, 15, 14, 16, 3, 2, 20, 1, 25, 5, 30, 7],
    "prob": [0, 1, 0, 1, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0, 1, 1, 0, 0, 1],
    "distinct": [3, -1, 7, 0, -4, 2, 9, -7, 1, 5, -2, 6, 12, -6, 4, 8, -3, 11, -5, 10, -8, 13,
                 14, -9],
    "exp": [0, 1, 2, 3, 1, 2, 0, 3, 1, 2, 1, 0, 2, 3, 1, 2, 0, 1, 3, 2, 1, 0, 2, 1],
    "nz": [-3, 5, 2, 7, -1, 2, 4, -6, 1, 3, 9, -2, 11, 6, -8, 10, -5, 12, 8, -4, 13, -7, 15, -9],
    "mod": [-1, 0, 1, 2, -2, 3, 1, 0, -1, 2, 1, -3, 0, 2, 1, -1, 3, 0, -2, 1, 2, -1, 0, 1],
}
BPOOL = [True, False, True, True, False, False, True, False, True, True, True, False,
         False, True, False, True, True, False, True, False, False, False, True, True]


def values(dtype, n, pool="gen", shift=0):
    """n deterministic values for dtype from the named pool, starting at ``shift``."""
    if dtype == "bool":
        src = BPOOL
    elif dtype in INTS or dtype in ("uint16", "uint32", "uint64"):
        src = IPOOLS[pool]
        if dtype.startswith("uint"):
            src = [abs(v) for v in src]
            if pool == "distinct":
                src = [3, 1, 7, 0, 4, 2, 9, 17, 10, 5, 12, 6, 22, 16, 14, 8, 13, 11, 15, 20, 18,
                       23, 24, 19]
    elif dtype.startswith("complex"):
        fp = FPOOLS[pool]
        src = [complex(fp[i], fp[(i + 7) % len(fp)]) for i in range(len(fp))]
    else:
        src = FPOOLS[pool]
    return [src[(shift + i) % len(src)] for i in range(n)]


def special_values(dtype):
    if dtype in FLOATS:
        return [math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-30, 60000.0, -1e-3]
    if dtype in RANGES:
        lo, hi = RANGES[dtype]
        return [lo, hi, 0, 1, lo + 1, hi - 1, 2, (lo + hi) // 2]
    if dtype == "bool":
        return [True, False, False, True, True, False, True, False]
    raise ValueError(dtype)


# name -> (base shape, view suffix, resulting shape)
LAYOUTS = {
    "scalar": ((), "", ()),
    "1d": ((5,), "", (5,)),
    "2d": ((2, 3), "", (2, 3)),
    "transposed": ((3, 4), ".t()", (4, 3)),
    "strided": ((2, 8), "[:, 1::3]", (2, 3)),
    "expanded": ((3, 1), ".expand(3, 4)", (3, 4)),
    "empty": ((0, 3), "", (0, 3)),
    "special": ((8,), "", (8,)),
}
LAYOUT_NAMES = list(LAYOUTS)


def layout_shape(layout):
    return LAYOUTS[layout][2]


def make(var, layout, dtype, pool="gen", shift=0, mark=True):
    """Source lines building input ``var`` (and its base ``var``+'b') in ``layout``.

    The literal goes through ``inp`` (when ``mark``) before the view is taken, so the
    float64 reference pass sees the same values in the same layout."""
    base, view, _ = LAYOUTS[layout]
    if layout == "special":
        vals = special_values(dtype)
    else:
        vals = values(dtype, max(numel(base), 1), pool, shift)
    src = T(vals, base, dtype)
    if mark:
        src = "inp(%s)" % src
    if view:
        return "%sb = %s\n%s = %sb%s\n" % (var, src, var, var, view)
    return "%s = %s\n%sb = %s\n" % (var, src, var, var)


def tens(var, shape, dtype, pool="gen", shift=0, mark=True):
    """Source line for a contiguous input of ``shape``."""
    src = T(values(dtype, max(numel(shape), 1), pool, shift), shape, dtype)
    if mark:
        src = "inp(%s)" % src
    return "%s = %s\n" % (var, src)


def arange_src(shape, dtype, scale=None, offset=None, mark=True):
    """``torch.arange``-formula input (for larger tensors than literals comfortably hold):
    (arange(n) * 7 % 13 - 6) * scale, reshaped; exact in every dtype for small n."""
    n = numel(shape)
    s = "(torch.arange(%d) * 7 %% 13 - 6)" % n
    if scale is not None:
        s = "(%s * %r)" % (s, scale)
    if offset is not None:
        s = "(%s + %r)" % (s, offset)
    s = "%s.to(torch.%s).reshape(%r)" % (s, dtype, tuple(shape))
    if mark:
        s = "inp(%s)" % s
    return s
