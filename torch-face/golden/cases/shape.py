"""Sorting and reshaping data: sort/argsort/topk/msort, cat/stack and friends (with dtype
promotion across inputs), split/chunk, flip/roll/rot90, repeat/tile/repeat_interleave,
unique/unique_consecutive, searchsorted/bucketize, histc/bincount, diff, and casts between
every pair of dtypes (.to, .type, copy_ into another dtype)."""
from ._lib import DTYPES, FLOATS, INTS, case, T, values, tens

FAM = "shape"


def gen():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        xd = "x = inp(%s)\n" % T(values(dt, 12, "distinct"), (3, 4), dt)
        xt = "xb = inp(%s)\nx = xb.t()\n" % T(values(dt, 12, "distinct"), (4, 3), dt)
        xr = "x = inp(%s)\n" % T(values(dt, 12, "mod"), (3, 4), dt)  # repeated values
        y = "y = inp(%s)\n" % T(values(dt, 8, "gen", 3), (2, 4), dt)
        for name, src, expr, ops in (
                ("sort", xd, "torch.sort(x)", ["aten::sort"]),
                ("sort-dim0-desc", xd, "torch.sort(x, 0, descending=True)", ["aten::sort"]),
                ("sort-stable-ties", xr, "torch.sort(x, stable=True)", ["aten::sort.stable"]),
                ("sort-stable-desc-ties", xr, "torch.sort(x, dim=0, descending=True, stable=True)", ["aten::sort.stable"]),
                ("sort-transposed", xt, "x.sort()", ["aten::sort"]),
                ("sort-values-attr", xd, "torch.sort(x, 1).values", ["aten::sort"]),
                ("sort-out", xd, "torch.sort(x, out=(torch.empty(0, dtype=x.dtype), torch.empty(0, dtype=torch.int64)))", ["aten::sort.values"]),
                ("argsort", xd, "torch.argsort(x)", ["aten::argsort"]),
                ("argsort-stable", xr, "torch.argsort(x, dim=0, stable=True)", ["aten::argsort.stable"]),
                ("msort", xd, "torch.msort(x)", ["aten::msort"]),
                ("topk", xd, "torch.topk(x, 2)", ["aten::topk"]),
                ("topk-smallest", xd, "torch.topk(x, 2, dim=0, largest=False)", ["aten::topk"]),
                ("topk-k0", xd, "torch.topk(x, 0)", ["aten::topk"]),
                ("topk-too-big", xd, "torch.topk(x, 5)", ["aten::topk"]),
                ("topk-transposed", xt, "x.topk(1)", ["aten::topk"]),
                ("kthvalue", xd, "torch.kthvalue(x, 3)", ["aten::kthvalue"]),
                ("cat", xd + y, "torch.cat([x[:2], y])", ["aten::cat"]),
                ("cat-dim1", xd + y, "torch.cat((x[:2], y, x[:2]), dim=1)", ["aten::cat"]),
                ("cat-empty-1d", xd, "torch.cat([x, torch.tensor([])])", ["aten::cat"]),
                ("cat-single", xd, "torch.cat([x])", ["aten::cat"]),
                ("cat-out", xd + y, "torch.cat([x[:2], y], out=torch.empty(0, dtype=x.dtype))", ["aten::cat.out"]),
                ("cat-mismatch", xd + y, "torch.cat([x, y], 1)", ["aten::cat"]),
                ("concat", xd + y, "torch.concat([x[:2], y], -1)", ["aten::concat"]),
                ("concatenate", xd + y, "torch.concatenate([x[:2], y], axis=0)", ["aten::concatenate"]),
                ("stack", xd, "torch.stack([x, x.flip(0)])", ["aten::stack"]),
                ("stack-dim2", xd, "torch.stack([x, x, x], dim=2)", ["aten::stack"]),
                ("stack-mismatch", xd + y, "torch.stack([x, y])", ["aten::stack"]),
                ("hstack", xd + y, "torch.hstack([x[:2], y])", ["aten::hstack"]),
                ("vstack", xd + y, "torch.vstack([x, y])", ["aten::vstack"]),
                ("dstack", xd, "torch.dstack([x, x])", ["aten::dstack"]),
                ("column_stack", xd, "torch.column_stack([x[0], x[1]])", ["aten::column_stack"]),
                ("row_stack", xd + y, "torch.row_stack([x, y])", ["aten::vstack"]),
                ("flip", xd, "torch.flip(x, [0])", ["aten::flip"]),
                ("flip-both", xt, "x.flip(0, 1)", ["aten::flip"]),
                ("fliplr", xd, "torch.fliplr(x)", ["aten::fliplr"]),
                ("flipud", xd, "torch.flipud(x)", ["aten::flipud"]),
                ("roll", xd, "torch.roll(x, 1)", ["aten::roll"]),
                ("roll-dims", xd, "torch.roll(x, (1, -1), (0, 1))", ["aten::roll"]),
                ("roll-big", xt, "x.roll(7, 0)", ["aten::roll"]),
                ("rot90", xd, "torch.rot90(x)", ["aten::rot90"]),
                ("rot90-k3", xd, "torch.rot90(x, 3, [1, 0])", ["aten::rot90"]),
                ("repeat", xd, "x.repeat(2, 1)", ["aten::repeat"]),
                ("repeat-newdim", xt, "x.repeat(2, 1, 2)", ["aten::repeat"]),
                ("tile", xd, "torch.tile(x, (2,))", ["aten::tile"]),
                ("repeat_interleave", xd, "torch.repeat_interleave(x, 2)", ["aten::repeat_interleave.self_int"]),
                ("repeat_interleave-dim", xd, "x.repeat_interleave(torch.tensor([1, 0, 2]), dim=0)", ["aten::repeat_interleave.self_Tensor"]),
                ("repeat_interleave-counts", xd, "torch.repeat_interleave(torch.tensor([2, 0, 1]))", ["aten::repeat_interleave.Tensor"]),
                ("unique", xr, "torch.unique(x)", ["aten::_unique2"]),
                ("unique-inverse-counts", xr, "torch.unique(x, return_inverse=True, return_counts=True)", ["aten::_unique2"]),
                ("unique-dim", xr, "torch.unique(torch.cat([x, x[:1]]), dim=0)", ["aten::unique_dim"]),
                ("unique_consecutive", xr, "torch.unique_consecutive(x.flatten().sort().values, return_counts=True)", ["aten::unique_consecutive"]),
                ("diff", xd, "torch.diff(x)", ["aten::diff"]),
                ("diff-n2-dim0", xd, "torch.diff(x, n=2, dim=0)", ["aten::diff"]),
                ("diff-prepend", xd, "torch.diff(x, prepend=x[:, :1])", ["aten::diff"]),
                ("clone", xt, "x.clone()", ["aten::clone"]),
                ("masked-sort-combo", xd, "x[x.argsort(dim=1)[:, :2] > 1]", ["aten::argsort"]),
                ("count_nonzero", xr, "torch.count_nonzero(x, dim=0)", ["aten::count_nonzero"]),
                ("trapezoid", xd, "torch.trapezoid(x)", ["aten::trapezoid.x"]),
                ("cumulative_trapezoid", xd, "torch.cumulative_trapezoid(x)", ["aten::cumulative_trapezoid.x"]),
                ("trapezoid-x1d", xd, "torch.trapezoid(x, torch.arange(x.shape[-1]) ** 2)", ["aten::trapezoid.x"]),
                ("trapezoid-x-dim0", xd, "torch.trapezoid(x, x.abs().cumsum(0), dim=0)", ["aten::trapezoid.x"]),
                ("trapz-x", xd, "torch.trapz(x, torch.arange(x.shape[-1]) * 0.5)", ["aten::trapz.x"]),
                ("cumulative_trapezoid-x", xd, "torch.cumulative_trapezoid(x, torch.arange(x.shape[-1]) ** 2)", ["aten::cumulative_trapezoid.x"]),
                ("isin", xr, "torch.isin(x, x[0])", ["aten::isin.Tensor_Tensor"]),
                ("allclose", xd, "torch.allclose(x, x + 0)", ["aten::allclose"]),
                ("isclose", xd + y, "torch.isclose(x[:2], y)", ["aten::isclose"]),
                ("equal", xd, "(torch.equal(x, x.clone()), torch.equal(x, x[:2]))", ["aten::equal"]),
                ("numel-dim-size", xt, "(x.numel(), x.dim(), x.size(), x.size(1), x.shape, len(x), x.ndim, x.element_size(), x.is_contiguous(), x.dtype, x.is_floating_point(), x.is_signed())", []),
                ("item", xd, "x[1, 2].item()", ["aten::_local_scalar_dense"]),
                ("tolist", xt, "x.tolist()", []),
                ("float-of-tensor", xd, "(float(x[0, 0]), int(x[0, 1]), bool(x[0, 2]))", []),
                ("bool-ambiguous", xd, "bool(x)", []),
                ("iter", xd, "[r for r in x]", ["aten::unbind.int"]),
        ):
            cs.append(case("shape/%s/%s" % (name, dt), src + "out = %s\n" % expr, ops, FAM, exact=not name.startswith(("trapezoid", "cumulative_trapezoid", "trapz")),
                           acc=True, ref64=fl))
        # searchsorted / bucketize / histc / bincount
        srt = "s = inp(%s)\n" % T(sorted(values(dt, 6, "distinct")), (6,), dt) if dt != "bool" else "s = torch.tensor([False, True])\n"
        q = "q = inp(%s)\n" % T(values(dt, 6, "gen"), (2, 3), dt)
        for name, expr, ops in (
                ("searchsorted", "torch.searchsorted(s, q)", ["aten::searchsorted.Tensor"]),
                ("searchsorted-right", "torch.searchsorted(s, q, right=True)", ["aten::searchsorted.Tensor"]),
                ("searchsorted-int32", "torch.searchsorted(s, q, out_int32=True, side='right')", ["aten::searchsorted.Tensor"]),
                ("searchsorted-scalar", "torch.searchsorted(s, 2)", ["aten::searchsorted.Scalar"]),
                ("bucketize", "torch.bucketize(q, s)", ["aten::bucketize.Tensor"]),
                ("bucketize-right", "torch.bucketize(q, s, right=True)", ["aten::bucketize.Tensor"]),
                ("histc", "torch.histc(q, bins=4, min=-3, max=3)", ["aten::histc"]),
                ("histc-auto", "torch.histc(q, bins=3)", ["aten::histc"]),
                ("bincount", "torch.bincount(q.flatten().abs().long())", ["aten::bincount"]),
                ("bincount-weights", "torch.bincount(torch.tensor([0, 2, 2, 1]), weights=q.flatten()[:4], minlength=5)", ["aten::bincount"]),
        ):
            cs.append(case("shape/%s/%s" % (name, dt), srt + q + "out = %s\n" % expr, ops, FAM, exact=True))
    cs += promotion_lists()
    cs += casts()
    return cs


def promotion_lists():
    """cat/stack/where across dtypes: the result dtype is the promotion of all inputs."""
    cs = []
    for da in DTYPES:
        for db in DTYPES:
            src = tens("a", (2, 2), da, "gen") + tens("b", (1, 2), db, "gen", 3)
            cs.append(case("shape/cat-promote/%s-%s" % (da, db), src + "out = torch.cat([a, b])\n",
                           ["aten::cat"], FAM, exact=True))
    for da in DTYPES:
        for db in ("float32", "int64", "bool"):
            src = tens("a", (2,), da, "gen") + tens("b", (2,), db, "gen", 3)
            cs.append(case("shape/stack-promote/%s-%s" % (da, db), src + "out = torch.stack([a, b])\n",
                           ["aten::stack"], FAM, exact=True))
    return cs


# values safe to cast into every dtype (no UB: in range, no NaN/inf into integers)
SAFE = {
    "float": [0.0, 1.0, 2.5, 100.75, 7.0, 0.5, 127.0, 3.9],
    "signed": [-3.75, -1.0, -100.5, 0.25, 126.9, -127.0],
}


def casts():
    cs = []
    for src_dt in DTYPES:
        if src_dt in FLOATS:
            vals = SAFE["float"]
        elif src_dt == "bool":
            vals = [True, False, True, True, False, True, False, False]
        else:
            vals = [0, 1, 2, 100, 7, 127, 3, 64]
        base = "x = %s\n" % T(vals, (2, 4), src_dt)
        for dst in DTYPES:
            cs.append(case("shape/cast/%s-%s" % (src_dt, dst), base + "out = x.to(torch.%s)\n" % dst,
                           ["aten::_to_copy"] if src_dt != dst else [], FAM, exact=True))
            cs.append(case("shape/cast-transposed/%s-%s" % (src_dt, dst), base + "out = x.t().to(torch.%s)\n" % dst,
                           ["aten::_to_copy"] if src_dt != dst else [], FAM, exact=True))
            cs.append(case("shape/copy_/%s-%s" % (src_dt, dst),
                           base + "o = torch.zeros(4, 2, dtype=torch.%s).t()\nr = o.copy_(x)\nout = (o, r is o)\n" % dst,
                           ["aten::copy_"], FAM, exact=True))
        if src_dt in FLOATS:
            neg = "x = %s\n" % T(SAFE["signed"], (6,), src_dt)
            for dst in ("int64", "int32", "int16", "int8"):
                cs.append(case("shape/cast-neg/%s-%s" % (src_dt, dst), neg + "out = x.to(torch.%s)\n" % dst,
                               ["aten::_to_copy"], FAM, exact=True))
            sp = "x = %s\n" % T([float("nan"), float("inf"), -float("inf"), -0.0, 1e-8, 65504.0, 70000.0, 3.0e38], (8,), src_dt)
            for dst in ("float32", "float64", "float16", "bfloat16", "bool"):
                cs.append(case("shape/cast-special/%s-%s" % (src_dt, dst), sp + "out = x.to(torch.%s)\n" % dst,
                               ["aten::_to_copy"] if dst != src_dt else [], FAM, exact=True))
        x = "x = %s\n" % T(vals, (2, 4), src_dt)
        for name, expr in (("float", "x.float()"), ("double", "x.double()"), ("half", "x.half()"),
                           ("bfloat16", "x.bfloat16()"), ("long", "x.long()"), ("int", "x.int()"),
                           ("short", "x.short()"), ("char", "x.char()"), ("byte", "x.byte()"),
                           ("bool", "x.bool()"), ("type-str", "x.type(torch.float64)"),
                           ("type_as", "x.type_as(torch.ones(1, dtype=torch.int16))"),
                           ("to-same-is-self", "x.to(x.dtype) is x"), ("to-copy", "x.to(x.dtype, copy=True) is x"),
                           ("to-other", "x.to(torch.ones(1, dtype=torch.float16))"),
                           ("to-device-dtype", "x.to('cpu', torch.float64)")):
            cs.append(case("shape/convert-%s/%s" % (name, src_dt), x + "out = %s\n" % expr, [], FAM, exact=True))
    # float rounding on casts between float widths
    for dst in ("float16", "bfloat16", "float32"):
        cs.append(case("shape/cast-rounding/float64-%s" % dst,
                       "x = torch.tensor([1.0 + 2**-11, 1.0 + 3 * 2**-11, 1.0 + 2**-8, 1.0 + 3 * 2**-8, 1.0 + 2**-24, 1.0 + 3 * 2**-24, 5.960464477539063e-08, 1e-40], dtype=torch.float64)\n"
                       "out = x.to(torch.%s)\n" % dst, ["aten::_to_copy"], FAM, exact=True))
    return cs


CASES = gen()
