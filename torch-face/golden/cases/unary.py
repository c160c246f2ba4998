"""Pointwise unary ops: every op x 10 dtypes x layouts x forms (functional, method,
in-place, out=).  Upstream's answer for an op/dtype it rejects (bitwise_not of a float,
in-place sin of an int) is a case too."""
from ._lib import DTYPES, FLOATS, LAYOUT_NAMES, case, make

FAM = "unary"

# op -> (value pool, forms, kind)
#   forms: f = torch.op(x), m = x.op(), i = x.op_(), o = torch.op(x, out=o)
#   kind:  "tr" float math (float64 reference), "ex" exact (bitwise), "b" bool result
OPS = {
    "abs": ("gen", "fmio", "ex"), "neg": ("gen", "fmio", "ex"),
    "sign": ("gen", "fmio", "ex"), "sgn": ("gen", "fmio", "ex"),
    "sqrt": ("pos", "fmio", "tr"), "rsqrt": ("pos", "fmio", "tr"),
    "exp": ("mod", "fmio", "tr"), "exp2": ("mod", "fmio", "tr"), "expm1": ("mod", "fmio", "tr"),
    "log": ("pos", "fmio", "tr"), "log2": ("pos", "fmio", "tr"), "log10": ("pos", "fmio", "tr"),
    "log1p": ("pos", "fmio", "tr"),
    "sin": ("gen", "fmio", "tr"), "cos": ("gen", "fmio", "tr"), "tan": ("gen", "fmio", "tr"),
    "asin": ("unit", "fmio", "tr"), "acos": ("unit", "fmio", "tr"), "atan": ("gen", "fmio", "tr"),
    "sinh": ("mod", "fmio", "tr"), "cosh": ("mod", "fmio", "tr"), "tanh": ("gen", "fmio", "tr"),
    "asinh": ("gen", "fmio", "tr"), "acosh": ("ge1", "fmio", "tr"), "atanh": ("unit", "fmio", "tr"),
    "sigmoid": ("gen", "fmio", "tr"),
    "ceil": ("gen", "fmio", "ex"), "floor": ("gen", "fmio", "ex"), "round": ("gen", "fmio", "ex"),
    "trunc": ("gen", "fmio", "ex"), "frac": ("gen", "fmio", "ex"),
    "reciprocal": ("gen", "fmio", "tr"), "square": ("gen", "fmio", "tr"),
    "erf": ("gen", "fmio", "tr"), "erfc": ("gen", "fmio", "tr"), "erfinv": ("unit", "fmio", "tr"),
    "lgamma": ("pos", "fmio", "tr"), "digamma": ("pos", "fmio", "tr"),
    "bitwise_not": ("gen", "fmio", "ex"), "logical_not": ("gen", "fmio", "ex"),
    "nan_to_num": ("gen", "fmio", "ex"), "relu": ("gen", "fmi", "ex"),
    "deg2rad": ("gen", "fmio", "tr"), "rad2deg": ("gen", "fmio", "tr"),
    "i0": ("mod", "fmio", "tr"), "sinc": ("gen", "fmio", "tr"), "logit": ("prob", "fmio", "tr"),
    "isnan": ("gen", "fm", "b"), "isinf": ("gen", "fm", "b"), "isfinite": ("gen", "fm", "b"),
    "isposinf": ("gen", "fmo", "b"), "isneginf": ("gen", "fmo", "b"),
    "signbit": ("gen", "fmo", "b"), "isreal": ("gen", "fm", "b"),
    "positive": ("gen", "fm", "ex"), "clone": ("gen", "fm", "ex"), "angle": ("gen", "fmo", "tr"),
    "conj_physical": ("gen", "fmio", "ex"),
}
# Aliases (distinct ATen ops): fewer dtypes and layouts.
ALIASES = {
    "absolute": "ex", "negative": "ex", "arcsin": "tr", "arccos": "tr", "arctan": "tr",
    "arcsinh": "tr", "arccosh": "tr", "arctanh": "tr", "fix": "ex",
}
ALIAS_POOL = {"arcsin": "unit", "arccos": "unit", "arctanh": "unit", "arccosh": "ge1"}
METHOD_LAYOUTS = ("scalar", "2d", "transposed", "strided")


def forms_code(op, form):
    if form == "f":
        return "out = torch.%s(x)\n" % op, "aten::%s" % op
    if form == "m":
        return "out = x.%s()\n" % op, "aten::%s" % op
    if form == "i":
        return "r = x.%s_()\nout = (r, r is x, xb)\n" % op, "aten::%s_" % op
    if form == "o":
        return ("o = torch.empty(0, dtype=odt)\nr = torch.%s(x, out=o)\nout = (o, r is o)\n"
                % op, "aten::%s.out" % op)
    raise ValueError(form)


FORM_NAMES = {"f": "func", "m": "method", "i": "inplace", "o": "out"}


def gen():
    cs = []
    for op, (pool, forms, kind) in OPS.items():
        for form in forms:
            body, aten = forms_code(op, form)
            for dt in DTYPES:
                for lay in LAYOUT_NAMES:
                    if form == "m" and lay not in METHOD_LAYOUTS:
                        continue
                    # in-place float math on an integer tensor: upstream refuses; 2 layouts do
                    if (form == "i" and kind == "tr" and dt not in FLOATS
                            and lay not in ("scalar", "transposed")):
                        continue
                    code = make("x", lay, dt, pool)
                    if form == "o":
                        # out= of the input's dtype; integer inputs of float math write float32
                        odt = "x.dtype" if kind != "tr" or dt in FLOATS else "torch.float32"
                        if kind == "b":
                            odt = "torch.bool"
                        code += "odt = %s\n" % odt
                    code += body
                    fl = dt in FLOATS
                    cs.append(case("unary/%s/%s/%s/%s" % (op, FORM_NAMES[form], dt, lay), code,
                                   [aten], FAM, ref64=fl and kind == "tr",
                                   exact=kind == "ex"))
    for op, kind in ALIASES.items():
        pool = ALIAS_POOL.get(op, "gen")
        for form in "fio":
            body, aten = forms_code(op, form)
            for dt in ("float32", "bfloat16", "int64"):
                for lay in ("2d", "transposed"):
                    code = make("x", lay, dt, pool) + "odt = x.dtype\n" + body
                    cs.append(case("unary/%s/%s/%s/%s" % (op, FORM_NAMES[form], dt, lay), code,
                                   [aten], FAM, ref64=dt in FLOATS and kind == "tr",
                                   exact=kind == "ex"))
    # argument variants
    for dt in ("float32", "float64", "float16", "bfloat16", "int64"):
        for lay in ("1d", "transposed", "special"):
            x = make("x", lay, dt, "gen")
            cs.append(case("unary/round/decimals2/%s/%s" % (dt, lay),
                           x + "out = torch.round(x * 3.7, decimals=2)\n",
                           ["aten::round.decimals", "aten::mul.Tensor"], FAM, ref64=False))
            cs.append(case("unary/round/decimals-1/%s/%s" % (dt, lay),
                           x + "out = torch.round(x * 37, decimals=-1)\n",
                           ["aten::round.decimals", "aten::mul.Tensor"], FAM, ref64=False))
            cs.append(case("unary/round_/decimals1/%s/%s" % (dt, lay),
                           x + "y = x * 1.37\nr = y.round_(decimals=1)\nout = (r, r is y)\n",
                           ["aten::round_.decimals"], FAM))
            cs.append(case("unary/round/decimals_out/%s/%s" % (dt, lay),
                           x + "o = torch.empty(0, dtype=x.dtype)\n"
                               "torch.round(x * 1.37, decimals=1, out=o)\nout = o\n",
                           ["aten::round.decimals_out"], FAM))
            cs.append(case("unary/nan_to_num/args/%s/%s" % (dt, lay),
                           x + "out = torch.nan_to_num(x, nan=-7.5, posinf=3.0, neginf=-4.0)\n",
                           ["aten::nan_to_num"], FAM, exact=True))
            cs.append(case("unary/logit/eps/%s/%s" % (dt, lay),
                           make("x", lay, dt, "prob") + "out = torch.logit(x, eps=0.2)\n",
                           ["aten::logit"], FAM, ref64=dt in FLOATS))
            cs.append(case("unary/sigmoid_/%s/%s" % (dt, lay),
                           x + "r = torch.sigmoid_(x)\nout = (r, r is x)\n",
                           ["aten::sigmoid_"], FAM, ref64=dt in FLOATS))
            cs.append(case("unary/relu_/torch/%s/%s" % (dt, lay),
                           x + "r = torch.relu_(x)\nout = (r, r is x)\n",
                           ["aten::relu_"], FAM, exact=True))
    return cs


CASES = gen()
