"""Reductions and scans: full and per-dim, keepdim, dtype=, out=, over every dtype and over
contiguous, transposed, strided, 3-D, empty and 0-dim inputs.  Names carry ``keepdim`` /
``nokeepdim`` (the self-test drops kept dims of the former)."""
from ._lib import DTYPES, FLOATS, case, make, tens, T, values

FAM = "reduction"

# input name -> (source builder, ndim)
INPUTS = {
    "2d": lambda dt, p: make("x", "2d", dt, p),
    "transposed": lambda dt, p: make("x", "transposed", dt, p),
    "strided": lambda dt, p: make("x", "strided", dt, p),
    "3d": lambda dt, p: tens("x", (2, 3, 4), dt, p),
    "empty": lambda dt, p: make("x", "empty", dt, p),
    "scalar": lambda dt, p: make("x", "scalar", dt, p),
    # 3 x 1000 values with many significant bits: accumulation order and precision matter
    "long": lambda dt, p: "x = inp(((torch.arange(3000) * 37 %% 101 - 30) * %s).to(torch.%s).reshape(3, 1000))\n" % (
        "0.0173" if dt in FLOATS else "1", dt),
}
NDIM = {"2d": 2, "transposed": 2, "strided": 2, "3d": 3, "empty": 2, "scalar": 0, "long": 2}

# op -> (pool, kind, overloads: full / dim / out(dim), extra)
#   kind "acc" (float accumulation: tolerance on the tensor's scale + float64 reference),
#   "ex" (exact selection: max/min/median...)
R = {
    "sum": ("gen", "acc", "sum", "sum.dim_IntList", "sum.IntList_out"),
    "mean": ("gen", "acc", "mean", "mean.dim", "mean.out"),
    "nansum": ("gen", "acc", "nansum", "nansum", "nansum.out"),
    "nanmean": ("gen", "acc", "nanmean", "nanmean", "nanmean.out"),
    "prod": ("mod", "acc", "prod", "prod.dim_int", "prod.int_out"),
    "amax": ("gen", "ex", "amax", "amax", "amax.out"),
    "amin": ("gen", "ex", "amin", "amin", "amin.out"),
    "logsumexp": ("mod", "acc", None, "logsumexp", "logsumexp.out"),
    "all": ("gen", "ex", "all", "all.dim", "all.out"),
    "any": ("gen", "ex", "any", "any.dim", "any.out"),
    "count_nonzero": ("gen", "ex", "count_nonzero", "count_nonzero", None),
    "std": ("gen", "acc", "std.correction", "std.correction", "std.correction_out"),
    "var": ("gen", "acc", "var.correction", "var.correction", "var.correction_out"),
    "argmax": ("gen", "ex", "argmax", "argmax", "argmax.out"),
    "argmin": ("gen", "ex", "argmin", "argmin", "argmin.out"),
}
MULTI_DIM = {"sum", "mean", "nansum", "nanmean", "amax", "amin", "logsumexp", "std", "var",
             "count_nonzero", "all", "any"}
NO_KEEPDIM = {"count_nonzero"}
TUPLE_OV = {"all": "all.dims", "any": "any.dims", "count_nonzero": "count_nonzero.dim_IntList"}
FLOAT_ONLY = {"mean", "nanmean", "std", "var"}


def dims_for(op, nd):
    if nd == 0:
        return [0, -1]
    ds = [0, 1, -1] if nd >= 2 else [0]
    if op in MULTI_DIM and nd >= 2:
        ds += [(0, 1)]
        if nd == 3:
            ds += [(0, 2), (-1, 0)]
    return ds


def dimsrc(d):
    return repr(d) if isinstance(d, int) else "(%s)" % ", ".join(str(v) for v in d)


def dimname(d):
    return str(d) if isinstance(d, int) else "x".join(str(v) for v in d)


def gen():
    cs = []
    for op, (pool, kind, full, dim_ov, out_ov) in R.items():
        acc = kind == "acc"
        for dt in DTYPES:
            fl = dt in FLOATS and acc
            for iname, build in INPUTS.items():
                if op in FLOAT_ONLY and dt not in FLOATS and iname != "2d":
                    continue  # upstream refuses these; one input per dtype shows it
                src = build(dt, pool)
                nd = NDIM[iname]
                if full:
                    cs.append(case("reduction/%s/full/%s/%s" % (op, dt, iname),
                                   src + "out = torch.%s(x)\n" % op, ["aten::" + full], FAM,
                                   ref64=fl, acc=acc, exact=not acc))
                    if iname in ("2d", "transposed"):
                        cs.append(case("reduction/%s/method/%s/%s" % (op, dt, iname),
                                       src + "out = x.%s()\n" % op, ["aten::" + full], FAM,
                                       ref64=fl, acc=acc, exact=not acc))
                for d in dims_for(op, nd):
                    for keep in ((False,) if op in NO_KEEPDIM else (False, True)):
                        kw = ", keepdim=True" if keep else ""
                        kn = "keepdim" if keep else "nokeepdim"
                        cs.append(case("reduction/%s/dim%s-%s/%s/%s" % (op, dimname(d), kn, dt, iname),
                                       src + "out = torch.%s(x, %s%s)\n" % (op, dimsrc(d), kw),
                                       ["aten::" + (TUPLE_OV.get(op, dim_ov)
                                                    if isinstance(d, tuple) else dim_ov)],
                                       FAM, ref64=fl, acc=acc, exact=not acc))
                if out_ov and iname in ("2d", "3d"):
                    cs.append(case("reduction/%s/out-keepdim/%s/%s" % (op, dt, iname),
                                   src + "o = torch.empty(0, dtype=torch.%s(x, 1).dtype)\n"
                                         "r = torch.%s(x, 1, keepdim=True, out=o)\n"
                                         "out = (o, r is o)\n" % (op, op),
                                   ["aten::" + out_ov], FAM, ref64=fl, acc=acc, exact=not acc))
    # dtype= on sum/mean/prod/cumsum
    for op, ov_full, ov_dim in (("sum", "sum", "sum.dim_IntList"), ("mean", "mean", "mean.dim"),
                                ("prod", "prod", "prod.dim_int"), ("nansum", "nansum", "nansum")):
        for dt in DTYPES:
            for odt in ("float32", "float64", "int64", "float16", "int32", "bool"):
                src = tens("x", (2, 3, 4), dt, "mod")
                fo = odt in FLOATS
                d = "fdt(torch.%s)" % odt
                cs.append(case("reduction/%s/dtype-%s/full/%s" % (op, odt, dt),
                               src + "out = torch.%s(x, dtype=%s)\n" % (op, d), ["aten::" + ov_full],
                               FAM, ref64=fo, acc=True))
                cs.append(case("reduction/%s/dtype-%s/dim-nokeepdim/%s" % (op, odt, dt),
                               src + "out = torch.%s(x, 1, dtype=%s)\n" % (op, d), ["aten::" + ov_dim],
                               FAM, ref64=fo, acc=True))
    # std/var options
    for op in ("std", "var"):
        for dt in FLOATS + ("int64",):
            x = tens("x", (3, 4), dt, "gen")
            for name, args in (("unbiased-false", "unbiased=False"), ("correction0", "correction=0"),
                               ("correction2", "correction=2"), ("dim-unbiased", "1, True, True"),
                               ("dims-correction", "dim=(0, 1), correction=1, keepdim=True")):
                cs.append(case("reduction/%s/%s/%s" % (op, name, dt), x + "out = torch.%s(x, %s)\n" % (op, args),
                               ["aten::%s.correction" % op] if "unbiased" not in name or "dim" in name
                               else ["aten::%s.correction" % op], FAM,
                               ref64=dt in FLOATS, acc=True))
            for op2 in ("%s_mean" % op,):
                for args in ("", "1", "0, keepdim=True", "correction=0"):
                    cs.append(case("reduction/%s/%s/%s" % (op2, args.replace(" ", "") or "full", dt),
                                   x + "out = torch.%s(x%s)\n" % (op2, ", " + args if args else ""),
                                   ["aten::%s.correction" % op2], FAM, ref64=dt in FLOATS,
                                   acc=True))
            cs.append(case("reduction/%s/single-element/%s" % (op, dt),
                           tens("x", (1,), dt, "gen") + "out = torch.%s(x)\n" % op,
                           ["aten::%s.correction" % op], FAM, ref64=dt in FLOATS, acc=True))
    cs += selections()
    cs += scans()
    cs += norms()
    return cs


def selections():
    """max/min/median/mode/kthvalue/aminmax with indices (distinct values: indices are defined)."""
    cs = []
    for dt in DTYPES:
        ex = True
        for iname in ("2d", "transposed", "3d", "empty", "scalar"):
            src = INPUTS[iname](dt, "distinct")
            nd = NDIM[iname]
            for op in ("max", "min"):
                cs.append(case("reduction/%s/full/%s/%s" % (op, dt, iname), src + "out = torch.%s(x)\n" % op,
                               ["aten::" + op], FAM, exact=ex))
                for d in ([0, -1] if nd else [0]):
                    for keep in (False, True):
                        kn = "keepdim" if keep else "nokeepdim"
                        cs.append(case("reduction/%s/dim%d-%s/%s/%s" % (op, d, kn, dt, iname),
                                       src + "r = torch.%s(x, %d, keepdim=%s)\nout = (r, r.values, r.indices)\n" % (op, d, keep),
                                       ["aten::%s.dim" % op], FAM, exact=ex))
            for op in ("median", "nanmedian"):
                cs.append(case("reduction/%s/full/%s/%s" % (op, dt, iname), src + "out = torch.%s(x)\n" % op,
                               ["aten::" + op], FAM, exact=ex))
                for keep in (False, True):
                    kn = "keepdim" if keep else "nokeepdim"
                    cs.append(case("reduction/%s/dim0-%s/%s/%s" % (op, kn, dt, iname),
                                   src + "out = torch.%s(x, 0, keepdim=%s)\n" % (op, keep),
                                   ["aten::%s.dim" % op], FAM, exact=ex))
            cs.append(case("reduction/aminmax/full/%s/%s" % (dt, iname), src + "out = torch.aminmax(x)\n",
                           ["aten::aminmax"], FAM, exact=ex))
            cs.append(case("reduction/aminmax/dim0-keepdim/%s/%s" % (dt, iname),
                           src + "out = torch.aminmax(x, dim=0, keepdim=True)\n", ["aten::aminmax"], FAM,
                           exact=ex))
            if nd:
                cs.append(case("reduction/kthvalue/k2-dim-1-nokeepdim/%s/%s" % (dt, iname),
                               src + "out = torch.kthvalue(x, 2 if x.shape[-1] >= 2 else 1)\n",
                               ["aten::kthvalue"], FAM, exact=ex))
                cs.append(case("reduction/kthvalue/k1-dim0-keepdim/%s/%s" % (dt, iname),
                               src + "out = torch.kthvalue(x, 1, 0, keepdim=True)\n",
                               ["aten::kthvalue"], FAM, exact=ex))
        # mode with a unique most-frequent value per row
        m = "x = inp(%s)\n" % T([1, 2, 2, 3, 0, 0, 5, 0, 4, 1, 4, 4], (3, 4), dt)
        cs.append(case("reduction/mode/dim-1-nokeepdim/%s" % dt, m + "out = torch.mode(x)\n",
                       ["aten::mode"], FAM, exact=True))
        cs.append(case("reduction/mode/values-dim0-keepdim/%s" % dt,
                       m + "out = torch.mode(x, 0, keepdim=True).values\n", ["aten::mode"], FAM, exact=True))
        # max/min with out=
        x = tens("x", (3, 4), dt, "distinct")
        cs.append(case("reduction/max/dim-out-keepdim/%s" % dt,
                       x + "v = torch.empty(0, dtype=x.dtype)\ni = torch.empty(0, dtype=torch.int64)\n"
                           "r = torch.max(x, 1, keepdim=True, out=(v, i))\nout = (v, i, r[0] is v)\n",
                       ["aten::max.dim_max"], FAM, exact=True))
        cs.append(case("reduction/min/dim-out-nokeepdim/%s" % dt,
                       x + "v = torch.empty(0, dtype=x.dtype)\ni = torch.empty(0, dtype=torch.int64)\n"
                           "torch.min(x, 0, out=(v, i))\nout = (v, i)\n",
                       ["aten::min.dim_min"], FAM, exact=True))
        # ties: argmax/max return the first occurrence
        t = "x = inp(%s)\n" % T([1, 3, 3, 0, 2, 2, 2, 1, 0, 0, 0, 0], (3, 4), dt)
        cs.append(case("reduction/argmax/ties-dim1-nokeepdim/%s" % dt, t + "out = torch.argmax(x, 1)\n",
                       ["aten::argmax"], FAM, exact=True))
        cs.append(case("reduction/argmin/ties-full/%s" % dt, t + "out = torch.argmin(x)\n",
                       ["aten::argmin"], FAM, exact=True))
        cs.append(case("reduction/max/ties-dim1-nokeepdim/%s" % dt, t + "out = torch.max(x, 1)\n",
                       ["aten::max.dim"], FAM, exact=True))
        cs.append(case("reduction/max/binary/%s" % dt,
                       x + "out = torch.max(x, x.flip(0))\n", ["aten::maximum"], FAM, exact=True))
    for dt in FLOATS:
        n = "x = inp(torch.tensor([[1.0, float('nan'), 3.0], [float('nan'), float('nan'), -1.0]], dtype=torch.%s))\n" % dt
        for op, ov in (("max", "max"), ("amax", "amax"), ("argmax", "argmax"), ("median", "median"),
                       ("nanmedian", "nanmedian"), ("sum", "sum"), ("nansum", "nansum"),
                       ("nanmean", "nanmean"), ("min", "min"), ("argmin", "argmin")):
            cs.append(case("reduction/%s/nan-full/%s" % (op, dt), n + "out = torch.%s(x)\n" % op,
                           ["aten::" + ov], FAM, exact=True))
        for op, ov in (("max", "max.dim"), ("median", "median.dim"), ("nanmedian", "nanmedian.dim"),
                       ("argmax", "argmax"), ("amin", "amin"), ("nansum", "nansum"), ("cumsum", "cumsum"),
                       ("cummax", "cummax"), ("logcumsumexp", "logcumsumexp")):
            cs.append(case("reduction/%s/nan-dim1-nokeepdim/%s" % (op, dt), n + "out = torch.%s(x, 1)\n" % op,
                           ["aten::" + ov], FAM, exact=True))
    return cs


def scans():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        for iname in ("2d", "transposed", "strided", "3d", "empty", "scalar"):
            src = INPUTS[iname](dt, "mod")
            nd = NDIM[iname]
            for d in ([0, -1] if nd else [0]):
                for op, ov, acc in (("cumsum", "cumsum", True), ("cumprod", "cumprod", True),
                                    ("logcumsumexp", "logcumsumexp", True),
                                    ("cummax", "cummax", False), ("cummin", "cummin", False)):
                    cs.append(case("reduction/%s/dim%d/%s/%s" % (op, d, dt, iname),
                                   src + "out = torch.%s(x, %d)\n" % (op, d), ["aten::" + ov], FAM,
                                   ref64=fl and acc, acc=acc, exact=not acc))
        x = tens("x", (3, 4), dt, "mod")
        cs.append(case("reduction/cumsum/dtype-float64/%s" % dt, x + "out = torch.cumsum(x, 1, dtype=fdt(torch.float64))\n",
                       ["aten::cumsum"], FAM, ref64=True, acc=True))
        cs.append(case("reduction/cumsum/dtype-int32/%s" % dt, x + "out = torch.cumsum(x, 0, dtype=torch.int32)\n",
                       ["aten::cumsum"], FAM, acc=True))
        cs.append(case("reduction/cumsum_/%s" % dt, x + "r = x.cumsum_(1)\nout = (r, r is x)\n",
                       ["aten::cumsum_"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/cumprod_/%s" % dt, x + "r = x.cumprod_(0)\nout = (r, r is x)\n",
                       ["aten::cumprod_"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/cumsum/out/%s" % dt,
                       x + "o = torch.empty(0, dtype=torch.cumsum(x, 1).dtype)\ntorch.cumsum(x, 1, out=o)\nout = o\n",
                       ["aten::cumsum.out"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/cumprod/out/%s" % dt,
                       x + "o = torch.empty(0, dtype=torch.cumprod(x, 1).dtype)\ntorch.cumprod(x, 1, out=o)\nout = o\n",
                       ["aten::cumprod.out"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/cummax/method/%s" % dt, x + "out = x.cummax(1)\n", ["aten::cummax"], FAM,
                       exact=True))
    return cs


def norms():
    cs = []
    for dt in FLOATS + ("int64",):
        fl = dt in FLOATS
        x = tens("x", (3, 4), dt, "gen")
        for p in ("2", "1", "3", "float('inf')", "-float('inf')", "0", "0.5"):
            cs.append(case("reduction/linalg.vector_norm/ord%s/%s" % (p.replace("float('inf')", "inf").replace("'", ""), dt),
                           x + "out = torch.linalg.vector_norm(x, %s)\n" % p, ["aten::linalg_vector_norm"], FAM,
                           ref64=fl, acc=True))
            cs.append(case("reduction/linalg.vector_norm/ord%s-dim1-keepdim/%s" % (p.replace("float('inf')", "inf").replace("'", ""), dt),
                           x + "out = torch.linalg.vector_norm(x, %s, dim=1, keepdim=True)\n" % p,
                           ["aten::linalg_vector_norm"], FAM, ref64=fl, acc=True))
        # torch.norm / Tensor.norm are Python wrappers over linalg_vector_norm
        cs.append(case("reduction/norm/default/%s" % dt, x + "out = torch.norm(x)\n",
                       ["aten::linalg_vector_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/norm/p1-dim1/%s" % dt, x + "out = x.norm(p=1, dim=1)\n",
                       ["aten::linalg_vector_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/norm/fro-dims/%s" % dt, x + "out = torch.norm(x, p='fro', dim=(0, 1))\n",
                       ["aten::linalg_vector_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/norm/p3-keepdim/%s" % dt, x + "out = torch.norm(x, 3, 0, keepdim=True)\n",
                       ["aten::linalg_vector_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/aten-norm.ScalarOpt_dim/%s" % dt,
                       x + "out = torch.ops.aten.norm.ScalarOpt_dim(x, 2, [1], True)\n",
                       ["aten::norm.ScalarOpt_dim"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/aten-norm.Scalar/%s" % dt,
                       x + "out = torch.ops.aten.norm.Scalar(x, 1)\n",
                       ["aten::norm.Scalar"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/linalg.norm/default/%s" % dt, x + "out = torch.linalg.norm(x)\n",
                       ["aten::linalg_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/linalg.matrix_norm/fro/%s" % dt, x + "out = torch.linalg.matrix_norm(x)\n",
                       ["aten::linalg_matrix_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/linalg.matrix_norm/ord1/%s" % dt, x + "out = torch.linalg.matrix_norm(x, 1)\n",
                       ["aten::linalg_matrix_norm"], FAM, ref64=fl, acc=True))
        cs.append(case("reduction/linalg.matrix_norm/inf/%s" % dt,
                       x + "out = torch.linalg.matrix_norm(x, float('inf'))\n",
                       ["aten::linalg_matrix_norm"], FAM, ref64=fl, acc=True))
    return cs


CASES = gen()
