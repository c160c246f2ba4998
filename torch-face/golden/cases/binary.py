"""Pointwise binary and ternary ops: type promotion over every dtype pair, Python scalars
(int, float, bool, negative) on either side, 0-dim tensors (which do not promote within a
category), broadcasting, non-contiguous operands, and the functional / method / in-place /
out= / operator forms."""
from ._lib import DTYPES, FLOATS, INTS, case, make, tens, lit

FAM = "binary"

# op -> spec: f, i, o = overloads of torch.op(a, b) / a.op_(b) / torch.op(a, b, out=o);
# sym = Python operator (overload it reaches), pa/pb = value pools of a/b, pbi = pool of b
# for integer dtypes, kind = "tr" (float math, float64 reference) or "ex" (exact).
B = {
    "add": dict(f="add.Tensor", i="add_.Tensor", o="add.out", sym=("+", "add.Tensor"), kind="tr"),
    "sub": dict(f="sub.Tensor", i="sub_.Tensor", o="sub.out", sym=("-", "sub.Tensor"), kind="tr"),
    "mul": dict(f="mul.Tensor", i="mul_.Tensor", o="mul.out", sym=("*", "mul.Tensor"), kind="tr"),
    "div": dict(f="div.Tensor", i="div_.Tensor", o="div.out", sym=("/", "div.Tensor"),
                kind="tr", pb="nz", pbi="nz"),
    "true_divide": dict(f="true_divide.Tensor", i="true_divide_.Tensor", o="true_divide.out",
                        kind="tr", pb="nz", pbi="nz"),
    "floor_divide": dict(f="floor_divide", i="floor_divide_.Tensor", o="floor_divide.out",
                         sym=("//", "floor_divide"), kind="ex", pb="nz", pbi="nz"),
    "remainder": dict(f="remainder.Tensor", i="remainder_.Tensor", o="remainder.Tensor_out",
                      sym=("%", "remainder.Tensor"), kind="ex", pb="nz", pbi="nz"),
    "fmod": dict(f="fmod.Tensor", i="fmod_.Tensor", o="fmod.Tensor_out", kind="ex",
                 pb="nz", pbi="nz"),
    "pow": dict(f="pow.Tensor_Tensor", i="pow_.Tensor", o="pow.Tensor_Tensor_out",
                sym=("**", "pow.Tensor_Tensor"), kind="tr", pa="pos", pb="exp", pbi="exp"),
    "float_power": dict(f="float_power.Tensor_Tensor", i="float_power_.Tensor",
                        o="float_power.Tensor_Tensor_out", kind="tr", pa="pos", pb="exp",
                        pbi="exp"),
    "atan2": dict(f="atan2", i="atan2_", o="atan2.out", kind="tr"),
    "hypot": dict(f="hypot", i="hypot_", o="hypot.out", kind="tr"),
    "maximum": dict(f="maximum", o="maximum.out", kind="ex"),
    "minimum": dict(f="minimum", o="minimum.out", kind="ex"),
    "fmax": dict(f="fmax", o="fmax.out", kind="ex"),
    "fmin": dict(f="fmin", o="fmin.out", kind="ex"),
    "eq": dict(f="eq.Tensor", i="eq_.Tensor", o="eq.Tensor_out", sym=("==", "eq.Tensor"), kind="ex"),
    "ne": dict(f="ne.Tensor", i="ne_.Tensor", o="ne.Tensor_out", sym=("!=", "ne.Tensor"), kind="ex"),
    "lt": dict(f="lt.Tensor", i="lt_.Tensor", o="lt.Tensor_out", sym=("<", "lt.Tensor"), kind="ex"),
    "le": dict(f="le.Tensor", i="le_.Tensor", o="le.Tensor_out", sym=("<=", "le.Tensor"), kind="ex"),
    "gt": dict(f="gt.Tensor", i="gt_.Tensor", o="gt.Tensor_out", sym=(">", "gt.Tensor"), kind="ex"),
    "ge": dict(f="ge.Tensor", i="ge_.Tensor", o="ge.Tensor_out", sym=(">=", "ge.Tensor"), kind="ex"),
    "logical_and": dict(f="logical_and", i="logical_and_", o="logical_and.out", kind="ex"),
    "logical_or": dict(f="logical_or", i="logical_or_", o="logical_or.out", kind="ex"),
    "logical_xor": dict(f="logical_xor", i="logical_xor_", o="logical_xor.out", kind="ex"),
    "bitwise_and": dict(f="bitwise_and.Tensor", i="bitwise_and_.Tensor",
                        o="bitwise_and.Tensor_out", sym=("&", "__and__.Tensor"), kind="ex"),
    "bitwise_or": dict(f="bitwise_or.Tensor", i="bitwise_or_.Tensor", o="bitwise_or.Tensor_out",
                       sym=("|", "__or__.Tensor"), kind="ex"),
    "bitwise_xor": dict(f="bitwise_xor.Tensor", i="bitwise_xor_.Tensor",
                        o="bitwise_xor.Tensor_out", sym=("^", "__xor__.Tensor"), kind="ex"),
    "bitwise_left_shift": dict(f="bitwise_left_shift.Tensor", i="bitwise_left_shift_.Tensor",
                               o="bitwise_left_shift.Tensor_out", sym=("<<", "__lshift__.Tensor"),
                               kind="ex", pb="exp", pbi="exp"),
    "bitwise_right_shift": dict(f="bitwise_right_shift.Tensor", i="bitwise_right_shift_.Tensor",
                                o="bitwise_right_shift.Tensor_out",
                                sym=(">>", "__rshift__.Tensor"), kind="ex", pb="exp", pbi="exp"),
    "copysign": dict(f="copysign.Tensor", i="copysign_.Tensor", o="copysign.out", kind="ex"),
    "nextafter": dict(f="nextafter", i="nextafter_", o="nextafter.out", kind="ex"),
    "xlogy": dict(f="xlogy.Tensor", i="xlogy_.Tensor", o="xlogy.OutTensor", kind="tr", pb="pos"),
    "logaddexp": dict(f="logaddexp", o="logaddexp.out", kind="tr"),
    "logaddexp2": dict(f="logaddexp2", o="logaddexp2.out", kind="tr"),
    "heaviside": dict(f="heaviside", i="heaviside_", o="heaviside.out", kind="ex"),
    "gcd": dict(f="gcd", i="gcd_", o="gcd.out", kind="ex"),
    "lcm": dict(f="lcm", i="lcm_", o="lcm.out", kind="ex"),
    "igamma": dict(f="igamma", i="igamma_", o="igamma.out", kind="tr", pa="pos", pb="pos"),
    "igammac": dict(f="igammac", i="igammac_", o="igammac.out", kind="tr", pa="pos", pb="pos"),
    "ldexp": dict(f="ldexp.Tensor", i="ldexp_", o="ldexp.out", kind="tr", pb="exp", pbi="exp"),
}
# ops that get the full 10 x 10 dtype-pair promotion matrix
PAIR_OPS = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "eq",
            "lt", "bitwise_and", "logical_and", "atan2", "fmod", "copysign"]

# (name, a layout/shape, b layout/shape): layouts from _lib or ("shape", (dims))
PAIRS = {
    "same2d": ("2d", ("shape", (2, 3))),
    "bcast": ("2d", ("shape", (3,))),
    "bcast2": (("shape", (2, 1)), ("shape", (1, 3))),
    "zerodim": ("2d", ("shape", ())),
    "scalars": ("scalar", ("shape", ())),
    "transposed": ("transposed", ("shape", (4, 3))),
    "strided": ("strided", "transposed_b"),
    "expanded": ("expanded", ("shape", (4,))),
    "empty": ("empty", ("shape", (3,))),
}
IO_PAIRS = ("same2d", "bcast", "transposed", "expanded", "bcast2")
I_PAIRS = ("same2d", "bcast", "transposed", "expanded")
# ops whose Python binding takes no number for ``other``: one TypeError case each is enough
TENSOR_ONLY = {"atan2", "hypot", "maximum", "minimum", "fmax", "fmin", "logical_and",
               "logical_or", "logical_xor", "nextafter", "logaddexp", "logaddexp2", "heaviside",
               "gcd", "lcm", "igamma", "igammac", "ldexp"}
SYM_PAIRS = ("same2d", "bcast")
# what ``number <sym> tensor`` reaches (Tensor.__r*__)
RSYM = {"+": ["aten::add.Tensor"], "*": ["aten::mul.Tensor"], "-": ["aten::rsub.Scalar"],
        "/": ["aten::reciprocal", "aten::mul.Tensor"], "**": ["aten::pow.Scalar"],
        "%": ["aten::remainder.Scalar_Tensor"], "//": ["aten::floor_divide"],
        "&": ["aten::bitwise_and.Scalar"], "|": ["aten::bitwise_or.Scalar"],
        "^": ["aten::bitwise_xor.Scalar"], "<<": ["aten::bitwise_left_shift.Scalar_Tensor"],
        ">>": ["aten::bitwise_right_shift.Scalar_Tensor"], "==": ["aten::eq.Scalar"], "!=": ["aten::ne.Scalar"],
        "<": ["aten::gt.Scalar"], "<=": ["aten::ge.Scalar"], ">": ["aten::lt.Scalar"],
        ">=": ["aten::le.Scalar"]}
# the overload ``torch.op(tensor, number)`` binds (default: the Tensor one, number wrapped)
SCALAR_OV = {"eq": "eq.Scalar", "ne": "ne.Scalar", "lt": "lt.Scalar", "le": "le.Scalar",
             "gt": "gt.Scalar", "ge": "ge.Scalar", "remainder": "remainder.Scalar",
             "fmod": "fmod.Scalar", "pow": "pow.Tensor_Scalar", "copysign": "copysign.Scalar",
             "bitwise_and": "bitwise_and.Scalar", "bitwise_or": "bitwise_or.Scalar",
             "bitwise_xor": "bitwise_xor.Scalar",
             "bitwise_left_shift": "bitwise_left_shift.Tensor_Scalar",
             "bitwise_right_shift": "bitwise_right_shift.Tensor_Scalar",
             "xlogy": "xlogy.Scalar_Other", "float_power": "float_power.Tensor_Scalar"}
SCALARS = [("int", 3), ("negint", -2), ("float", 2.5), ("bool", True)]


def pools(spec, dt):
    pa = spec.get("pa", "gen")
    pb = spec.get("pbi", spec.get("pb", "gen")) if dt in INTS or dt == "bool" else spec.get("pb", "gen")
    return pa, pb


def operand(var, lay, dt, pool, shift):
    if isinstance(lay, tuple):
        return tens(var, lay[1], dt, pool, shift)
    if lay == "transposed_b":
        # (2, 3) transposed view over a (3, 2) base
        return ("%sb = inp(torch.tensor(%s, dtype=torch.%s))\n%s = %sb.t()\n" % (
            var, _nest_vals(dt, pool, shift, (3, 2)), dt, var, var))
    return make(var, lay, dt, pool, shift)


def _nest_vals(dt, pool, shift, shape):
    from ._lib import nest, values, numel
    return nest(values(dt, numel(shape), pool, shift), shape)


def gen():
    cs = []
    for op, spec in B.items():
        ref = spec["kind"] == "tr"
        ex = spec["kind"] == "ex"
        for dt in DTYPES:
            pa, pb = pools(spec, dt)
            fl = ref and dt in FLOATS
            for pname, (la, lb) in PAIRS.items():
                src = operand("a", la, dt, pa, 0) + operand("b", lb, dt, pb, 5)
                cs.append(case("binary/%s/func/%s/%s" % (op, dt, pname),
                               src + "out = torch.%s(a, b)\n" % op, ["aten::" + spec["f"]],
                               FAM, ref64=fl, exact=ex))
                if pname in ("same2d", "transposed"):
                    cs.append(case("binary/%s/method/%s/%s" % (op, dt, pname),
                                   src + "out = a.%s(b)\n" % op, ["aten::" + spec["f"]],
                                   FAM, ref64=fl, exact=ex))
                if pname in I_PAIRS and "i" in spec:
                    cs.append(case("binary/%s/inplace/%s/%s" % (op, dt, pname),
                                   src + "r = a.%s_(b)\nout = (r, r is a, ab)\n" % op,
                                   ["aten::" + spec["i"]], FAM, ref64=fl, exact=ex))
                if pname in IO_PAIRS and "o" in spec:
                    cs.append(case("binary/%s/out/%s/%s" % (op, dt, pname),
                                   src + "o = torch.empty(0, dtype=torch.%s(a, b).dtype)\n"
                                         "r = torch.%s(a, b, out=o)\nout = (o, r is o)\n" % (op, op),
                                   ["aten::" + spec["o"]], FAM, ref64=fl, exact=ex))
                if pname in SYM_PAIRS and "sym" in spec:
                    sym, ov = spec["sym"]
                    cs.append(case("binary/%s/operator/%s/%s" % (op, dt, pname),
                                   src + "out = a %s b\n" % sym, ["aten::" + ov], FAM,
                                   ref64=fl, exact=ex))
            # Python scalars on the right (functional) and reflected operators
            for sname, sv in SCALARS:
                if op in TENSOR_ONLY and (sname != "int" or dt != "float32"):
                    continue
                src = make("a", "2d", dt, pa, 0)
                cs.append(case("binary/%s/scalar-%s/%s" % (op, sname, dt),
                               src + "out = torch.%s(a, %s)\n" % (op, lit(sv)),
                               ["aten::" + SCALAR_OV.get(op, spec["f"])], FAM, ref64=fl,
                               exact=ex))
                if "sym" in spec and sname in ("int", "float"):
                    sym, ov = spec["sym"]
                    cs.append(case("binary/%s/rscalar-%s/%s" % (op, sname, dt),
                                   make("a", "2d", dt, pb, 0) + "out = %s %s a\n" % (lit(sv), sym),
                                   RSYM.get(sym, []), FAM,
                                   ref64=fl, exact=ex))
        if op in PAIR_OPS:
            for da in DTYPES:
                for db in DTYPES:
                    pa, _ = pools(spec, da)
                    _, pb = pools(spec, db)
                    fl = ref and (da in FLOATS or db in FLOATS)
                    src = tens("a", (2, 3), da, pa, 0) + tens("b", (3,), db, pb, 4)
                    cs.append(case("binary/%s/pair/%s-%s" % (op, da, db),
                                   src + "out = torch.%s(a, b)\n" % op, ["aten::" + spec["f"]],
                                   FAM, ref64=fl, exact=ex))
    # 0-dim tensors and scalars do not promote within their category
    for op in ("add", "mul"):
        for da in DTYPES:
            for db in DTYPES:
                src = tens("a", (2, 3), da, "gen", 0) + tens("b", (), db, "gen", 3)
                cs.append(case("binary/%s/zerodim-pair/%s-%s" % (op, da, db),
                               src + "out = torch.%s(a, b)\n" % op, ["aten::%s.Tensor" % op], FAM,
                               ref64=da in FLOATS or db in FLOATS))
                src = tens("a", (), da, "gen", 0) + tens("b", (), db, "gen", 3)
                cs.append(case("binary/%s/zerodim-both/%s-%s" % (op, da, db),
                               src + "out = torch.%s(a, b)\n" % op, ["aten::%s.Tensor" % op], FAM,
                               ref64=da in FLOATS or db in FLOATS))
    cs += extras()
    cs += ternary()
    return cs


def extras():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        a = make("a", "2d", dt, "gen") + tens("b", (2, 3), dt, "nz", 3)
        for alpha in (2, 0.5, -1, True):
            cs.append(case("binary/add/alpha-%s/%s" % (lit(alpha), dt),
                           a + "out = torch.add(a, b, alpha=%s)\n" % lit(alpha),
                           ["aten::add.Tensor"], FAM, ref64=fl))
            cs.append(case("binary/sub/alpha-%s/%s" % (lit(alpha), dt),
                           a + "out = torch.sub(a, b, alpha=%s)\n" % lit(alpha),
                           ["aten::sub.Tensor"], FAM, ref64=fl))
        cs.append(case("binary/add_/alpha/%s" % dt, a + "r = a.add_(b, alpha=2)\nout = (r, a)\n",
                       ["aten::add_.Tensor"], FAM, ref64=fl))
        for mode in ("trunc", "floor"):
            cs.append(case("binary/div/%s/%s" % (mode, dt),
                           a + "out = torch.div(a, b, rounding_mode=%r)\n" % mode,
                           ["aten::div.Tensor_mode"], FAM, exact=True))
            cs.append(case("binary/div/%s-scalar/%s" % (mode, dt),
                           a + "out = torch.div(a, -3, rounding_mode=%r)\n" % mode,
                           ["aten::div.Tensor_mode"], FAM, exact=True))
            cs.append(case("binary/div_/%s/%s" % (mode, dt),
                           a + "r = a.div_(b, rounding_mode=%r)\nout = (r, r is a)\n" % mode,
                           ["aten::div_.Tensor_mode"], FAM, exact=True))
            cs.append(case("binary/div/%s-out/%s" % (mode, dt),
                           a + "o = torch.empty(0, dtype=a.dtype)\n"
                               "torch.div(a, b, rounding_mode=%r, out=o)\nout = o\n" % mode,
                           ["aten::div.out_mode"], FAM, exact=True))
        cs.append(case("binary/div/zero-divisor/%s" % dt,
                       a + "out = torch.div(a, torch.zeros(3, dtype=a.dtype))\n",
                       ["aten::div.Tensor"], FAM, exact=True))
        cs.append(case("binary/floor_divide/zero-divisor/%s" % dt,
                       a + "out = torch.floor_divide(a, torch.zeros(3, dtype=a.dtype))\n",
                       ["aten::floor_divide"], FAM, exact=True))
        cs.append(case("binary/remainder/zero-divisor/%s" % dt,
                       a + "out = torch.remainder(a, torch.zeros(3, dtype=a.dtype))\n",
                       ["aten::remainder.Tensor"], FAM, exact=True))
        # direct Scalar overloads through torch.ops (what C++ callers reach)
        for op, ov, arg in (("add", "Scalar", "2"), ("sub", "Scalar", "2"), ("mul", "Scalar", "3"),
                            ("div", "Scalar", "2"), ("remainder", "Scalar", "3"),
                            ("fmod", "Scalar", "3"), ("pow", "Tensor_Scalar", "2"),
                            ("eq", "Scalar", "1"), ("lt", "Scalar", "1"), ("ge", "Scalar", "1"),
                            ("bitwise_and", "Scalar", "3"), ("rsub", "Scalar", "2"),
                            ("rsub", "Tensor", None), ("clamp_min", "default", "0"),
                            ("clamp_max", "default", "1"), ("floor_divide", "Scalar", "2"),
                            ("copysign", "Scalar", "-1.0"), ("xlogy", "Scalar_Other", "2.0"),
                            ("float_power", "Tensor_Scalar", "2"), ("true_divide", "Scalar", "4"),
                            ("div", "Scalar_mode", "2, rounding_mode='floor'"),
                            ("bitwise_left_shift", "Tensor_Scalar", "1"),
                            ("ne", "Scalar", "0"), ("le", "Scalar", "2"), ("gt", "Scalar", "0")):
            argsrc = "b" if arg is None else arg
            cs.append(case("binary/aten-%s.%s/%s" % (op, ov, dt),
                           a + "out = torch.ops.aten.%s.%s(a, %s)\n" % (op, ov, argsrc),
                           ["aten::%s%s" % (op, "" if ov == "default" else "." + ov)], FAM,
                           ref64=fl))
        for op, ov, arg in (("pow", "Scalar", "2.0"), ("remainder", "Scalar_Tensor", "5"),
                            ("bitwise_and", "Scalar_Tensor", "6"), ("xlogy", "Scalar_Self", "3.0"),
                            ("float_power", "Scalar", "2")):
            cs.append(case("binary/aten-%s.%s/%s" % (op, ov, dt),
                           a + "out = torch.ops.aten.%s.%s(%s, a)\n" % (op, ov, arg),
                           ["aten::%s.%s" % (op, ov)], FAM, ref64=fl))
        for op, ov in (("add_", "Scalar"), ("mul_", "Scalar"), ("sub_", "Scalar"),
                       ("div_", "Scalar"), ("pow_", "Scalar"), ("eq_", "Scalar"),
                       ("remainder_", "Scalar")):
            cs.append(case("binary/aten-%s.%s/%s" % (op, ov, dt),
                           a + "r = torch.ops.aten.%s.%s(a, 2)\nout = (r, r is a)\n" % (op, ov),
                           ["aten::%s.%s" % (op, ov)], FAM, ref64=fl))
        # scalar functional forms that bind the Scalar overloads from Python
        for op, ov in (("pow", "Tensor_Scalar"), ("float_power", "Tensor_Scalar"),
                       ("bitwise_left_shift", "Tensor_Scalar"),
                       ("xlogy", "Scalar_Other")):
            cs.append(case("binary/%s/py-scalar/%s" % (op, dt),
                           a + "out = torch.%s(a, 2)\n" % op, ["aten::%s.%s" % (op, ov)], FAM,
                           ref64=fl))
        for op, ov in (("pow", "Scalar"), ("float_power", "Scalar"),
                       ("bitwise_left_shift", "Scalar_Tensor"), ("xlogy", "Scalar_Self"),
                       ("remainder", "Scalar_Tensor"), ("bitwise_and", "Scalar_Tensor")):
            cs.append(case("binary/%s/py-scalar-self/%s" % (op, dt),
                           a + "out = torch.%s(2, a)\n" % op, ["aten::%s.%s" % (op, ov)], FAM,
                           ref64=fl))
    return cs


def ternary():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        c = tens("c", (2, 3), "bool", "gen", 1)
        ab = make("a", "2d", dt, "gen") + tens("b", (3,), dt, "gen", 7)
        cs.append(case("binary/where/func/%s" % dt, c + ab + "out = torch.where(c, a, b)\n",
                       ["aten::where.self"], FAM, exact=True))
        cs.append(case("binary/where/method/%s" % dt, c + ab + "out = a.where(c, b)\n",
                       ["aten::where.self"], FAM, exact=True))
        cs.append(case("binary/where/scalar-other/%s" % dt, c + ab + "out = torch.where(c, a, -1.5)\n",
                       ["aten::where.ScalarOther"], FAM, exact=True))
        cs.append(case("binary/where/scalar-self/%s" % dt, c + ab + "out = torch.where(c, 2, b)\n",
                       ["aten::where.ScalarSelf"], FAM, exact=True))
        cs.append(case("binary/where/scalars/%s" % dt, c + "out = torch.where(c, 1, 0.5)\n",
                       ["aten::where.Scalar"], FAM, exact=True))
        cs.append(case("binary/where/out/%s" % dt,
                       c + ab + "o = torch.empty(0, dtype=a.dtype)\ntorch.where(c, a, b, out=o)\nout = o\n",
                       ["aten::where.self_out"], FAM, exact=True))
        cs.append(case("binary/where/cond-only/%s" % dt,
                       make("a", "2d", dt, "gen") + "out = torch.where(a)\n",
                       ["aten::where"], FAM, exact=True))
        cs.append(case("binary/where/transposed/%s" % dt,
                       c + make("a", "transposed", dt, "gen") + tens("b", (4, 1), dt, "gen", 2)
                       + "cc = torch.ones(4, 3, dtype=torch.bool).tril()\n"
                       + "out = torch.where(cc, a, b)\n", ["aten::where.self"], FAM, exact=True))
        w = tens("w", (3,), dt, "prob", 0)
        e = make("a", "2d", dt, "gen") + tens("b", (2, 3), dt, "gen", 9)
        cs.append(case("binary/lerp/scalar/%s" % dt, e + "out = torch.lerp(a, b, 0.3)\n",
                       ["aten::lerp.Scalar"], FAM, ref64=fl))
        cs.append(case("binary/lerp/tensor/%s" % dt, e + w + "out = torch.lerp(a, b, w)\n",
                       ["aten::lerp.Tensor"], FAM, ref64=fl))
        cs.append(case("binary/lerp_/scalar/%s" % dt, e + "r = a.lerp_(b, 0.75)\nout = (r, r is a)\n",
                       ["aten::lerp_.Scalar"], FAM, ref64=fl))
        cs.append(case("binary/lerp_/tensor/%s" % dt, e + w + "r = a.lerp_(b, w)\nout = r\n",
                       ["aten::lerp_.Tensor"], FAM, ref64=fl))
        cs.append(case("binary/lerp/out/%s" % dt,
                       e + "o = torch.empty(0, dtype=a.dtype)\ntorch.lerp(a, b, 0.5, out=o)\nout = o\n",
                       ["aten::lerp.Scalar_out"], FAM, ref64=fl))
        t3 = e + tens("t", (3,), dt, "nz", 4)
        for op in ("addcmul", "addcdiv"):
            cs.append(case("binary/%s/func/%s" % (op, dt), t3 + "out = torch.%s(a, b, t)\n" % op,
                           ["aten::" + op], FAM, ref64=fl))
            cs.append(case("binary/%s/value/%s" % (op, dt),
                           t3 + "out = torch.%s(a, b, t, value=0.5)\n" % op, ["aten::" + op], FAM,
                           ref64=fl))
            cs.append(case("binary/%s/int-value/%s" % (op, dt),
                           t3 + "out = torch.%s(a, b, t, value=2)\n" % op, ["aten::" + op], FAM,
                           ref64=fl))
            cs.append(case("binary/%s_/%s" % (op, dt),
                           t3 + "r = a.%s_(b, t, value=2)\nout = (r, r is a)\n" % op,
                           ["aten::%s_" % op], FAM, ref64=fl))
            cs.append(case("binary/%s/out/%s" % (op, dt),
                           t3 + "o = torch.empty(0, dtype=a.dtype)\n"
                                "torch.%s(a, b, t, out=o)\nout = o\n" % op,
                           ["aten::%s.out" % op], FAM, ref64=fl))
        x = make("x", "2d", dt, "gen") + make("y", "transposed", dt, "gen")
        lo = tens("lo", (3,), dt, "gen", 2)
        hi = "hi = lo + 2\n" if dt != "bool" else "hi = lo\n"
        for name, call, ov in (
                ("min-max", "torch.clamp(x, min=-1, max=2)", "clamp"),
                ("float-bounds", "torch.clamp(x, min=-0.5, max=1.5)", "clamp"),
                ("min-only", "torch.clamp(x, min=0)", "clamp"),
                ("max-only", "torch.clamp(x, max=1)", "clamp"),
                ("min-gt-max", "torch.clamp(x, min=2, max=-1)", "clamp"),
                ("none", "torch.clamp(x)", "clamp"),
                ("tensor", "torch.clamp(x, min=lo, max=hi)", "clamp.Tensor"),
                ("tensor-min", "torch.clamp(x, min=lo)", "clamp.Tensor"),
                ("transposed", "torch.clamp(y, min=-1, max=2)", "clamp"),
                ("nan-bound", "torch.clamp(x, min=float('nan'))", "clamp"),
                ("clip", "torch.clip(x, -1, 1)", "clip"),
                ("clip-tensor", "torch.clip(x, lo, hi)", "clip.Tensor"),
                ("clamp_min", "torch.clamp_min(x, 0.5)", "clamp_min"),
                ("clamp_max", "torch.clamp_max(x, 0.5)", "clamp_max"),
                ("clamp_min-tensor", "torch.clamp_min(x, lo)", "clamp_min.Tensor"),
                ("clamp_max-tensor", "torch.clamp_max(x, lo)", "clamp_max.Tensor"),
                ("method", "x.clamp(-1, 1)", "clamp"),
                ("inplace", "(x.clamp_(-1, 1), x)", "clamp_"),
                ("inplace-tensor", "(x.clamp_(lo, hi), x)", "clamp_.Tensor"),
                ("clip_", "(x.clip_(-1, 1), x)", "clip_"),
                ("clamp_min_", "x.clamp_min_(0)", "clamp_min_"),
                ("clamp_max_", "x.clamp_max_(0)", "clamp_max_"),
                ("out", "torch.clamp(x, -1, 1, out=torch.empty(0, dtype=x.dtype))", "clamp.out"),
                ("out-tensor", "torch.clamp(x, lo, hi, out=torch.empty(0, dtype=x.dtype))",
                 "clamp.Tensor_out")):
            cs.append(case("binary/clamp/%s/%s" % (name, dt), x + lo + hi + "out = %s\n" % call,
                           ["aten::" + ov], FAM, exact=True))
    return cs


CASES = gen()
