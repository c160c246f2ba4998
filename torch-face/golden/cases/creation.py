"""Creation: factories with every dtype, dtype inference from Python data and fill values,
arange/linspace/logspace lengths and endpoints, *_like (empty_like: shape, dtype and strides
only), new_*, eye, tri*_indices, diag/diag_embed/tril/triu, meshgrid and friends."""
from ._lib import DTYPES, FLOATS, case, T, values

FAM = "creation"


def gen():
    cs = []
    for dt in DTYPES:
        d = "torch.%s" % dt
        fill = {"bool": "True"}.get(dt, "3" if dt not in FLOATS else "2.5")
        for name, expr, ops in (
                ("zeros", "torch.zeros(2, 3, dtype=%s)" % d, ["aten::zeros"]),
                ("zeros-tuple", "torch.zeros((2, 0, 3), dtype=%s)" % d, ["aten::zeros"]),
                ("zeros-scalar", "torch.zeros((), dtype=%s)" % d, ["aten::zeros"]),
                ("ones", "torch.ones(3, dtype=%s)" % d, ["aten::ones"]),
                ("ones-size", "torch.ones(torch.Size([2, 2]), dtype=%s)" % d, ["aten::ones"]),
                ("full", "torch.full((2, 3), %s, dtype=%s)" % (fill, d), ["aten::full"]),
                ("full-neg", "torch.full((2,), -1, dtype=%s)" % d, ["aten::full"]),
                ("empty-meta", "(lambda e: (e.shape, e.dtype, e.stride()))(torch.empty(2, 3, 4, dtype=%s))" % d,
                 ["aten::empty.memory_format"]),
                ("empty_strided", "(lambda e: (e.shape, e.stride()))(torch.empty_strided((2, 3), (1, 2), dtype=%s))" % d,
                 ["aten::empty_strided"]),
                ("eye", "torch.eye(3, dtype=%s)" % d, ["aten::eye"]),
                ("eye-nm", "torch.eye(2, 4, dtype=%s)" % d, ["aten::eye.m"]),
                ("arange", "torch.arange(5, dtype=%s)" % d, ["aten::arange"]),
                ("arange-start-step", "torch.arange(1, 10, 3, dtype=%s)" % d, ["aten::arange.start_step"]),
                ("arange-neg-step", "torch.arange(10, 1, -2, dtype=%s)" % d, ["aten::arange.start_step"]),
                ("arange-float-step", "torch.arange(0, 2, 0.25, dtype=%s)" % d, ["aten::arange.start_step"]),
                ("linspace", "torch.linspace(0, 10, 5, dtype=%s)" % d, ["aten::linspace"]),
                ("linspace-frac", "torch.linspace(-1, 1, 7, dtype=%s)" % d, ["aten::linspace"]),
                ("linspace-1", "torch.linspace(3, 10, 1, dtype=%s)" % d, ["aten::linspace"]),
                ("linspace-0", "torch.linspace(3, 10, 0, dtype=%s)" % d, ["aten::linspace"]),
                ("linspace-desc", "torch.linspace(10, 0, 6, dtype=%s)" % d, ["aten::linspace"]),
                ("logspace", "torch.logspace(0, 2, 3, dtype=%s)" % d, ["aten::logspace"]),
                ("logspace-base2", "torch.logspace(0, 4, 5, base=2, dtype=%s)" % d, ["aten::logspace"]),
                ("scalar_tensor", "torch.scalar_tensor(%s, dtype=%s)" % (fill, d), ["aten::scalar_tensor"]),
                ("tensor-list", "torch.tensor([1, 0, 2], dtype=%s)" % d, ["aten::lift_fresh"]),
                ("tensor-float-list", "torch.tensor([1.7, -0.2, 2.5], dtype=%s)" % d, ["aten::lift_fresh"]),
                ("tensor-bool-list", "torch.tensor([True, False], dtype=%s)" % d, ["aten::lift_fresh"]),
                ("tensor-nested", "torch.tensor([[1, 2], [3, 4]], dtype=%s)" % d, ["aten::lift_fresh"]),
                ("as_tensor", "torch.as_tensor([1, 2, 3], dtype=%s)" % d, []),
                ("tril_indices", "torch.tril_indices(3, 3, dtype=%s)" % d, ["aten::tril_indices"]),
                ("triu_indices", "torch.triu_indices(3, 4, 1, dtype=%s)" % d, ["aten::triu_indices"]),
        ):
            cs.append(case("creation/%s/%s" % (name, dt), "out = %s\n" % expr, ops, FAM, exact=True))
        x = "x = inp(%s)\n" % T(values(dt, 6, "gen"), (2, 3), dt)
        xt = "x = inp(%s).t()\n" % T(values(dt, 6, "gen"), (3, 2), dt)
        for name, expr, ops in (
                ("zeros_like", "torch.zeros_like(x)", ["aten::zeros_like"]),
                ("ones_like", "torch.ones_like(x)", ["aten::ones_like"]),
                ("full_like", "torch.full_like(x, 7)", ["aten::full_like"]),
                ("full_like-float", "torch.full_like(x, 1.75)", ["aten::full_like"]),
                ("zeros_like-dtype", "torch.zeros_like(x, dtype=torch.float64)", ["aten::zeros_like"]),
                ("empty_like-meta", "(lambda e: (e.shape, e.dtype, e.stride()))(torch.empty_like(x))",
                 ["aten::empty_like"]),
                ("new_zeros", "x.new_zeros((2, 2))", ["aten::new_zeros"]),
                ("new_ones", "x.new_ones(3)", ["aten::new_ones"]),
                ("new_full", "x.new_full((2,), 4)", ["aten::new_full"]),
                ("new_empty-meta", "(lambda e: (e.shape, e.dtype))(x.new_empty((1, 4)))", ["aten::new_empty"]),
                ("new_tensor", "x.new_tensor([1, 2, 3])", ["aten::lift_fresh"]),
                ("tril", "torch.tril(x)", ["aten::tril"]),
                ("tril-k", "torch.tril(x, -1)", ["aten::tril"]),
                ("triu", "x.triu()", ["aten::triu"]),
                ("triu-k", "torch.triu(x, 1)", ["aten::triu"]),
                ("tril_", "(x.tril_(), x)", ["aten::tril_"]),
                ("triu_", "(x.triu_(1), x)", ["aten::triu_"]),
                ("diag-2d", "torch.diag(x)", ["aten::diag"]),
                ("diag-1d", "torch.diag(x[0])", ["aten::diag"]),
                ("diag-1d-k", "torch.diag(x[0], 1)", ["aten::diag"]),
                ("diag_embed", "torch.diag_embed(x)", ["aten::diag_embed"]),
                ("diagflat", "torch.diagflat(x)", ["aten::diagflat"]),
                ("block_diag", "torch.block_diag(x, x[0:1, 0:2])", ["aten::block_diag"]),
                ("meshgrid-ij", "torch.meshgrid(x[0], x[1, :2], indexing='ij')", ["aten::meshgrid.indexing"]),
                ("meshgrid-xy", "torch.meshgrid(x[0], x[1, :2], indexing='xy')", ["aten::meshgrid.indexing"]),
                ("cartesian_prod", "torch.cartesian_prod(x[0], x[1, :2])", ["aten::cartesian_prod"]),
                ("combinations", "torch.combinations(x[0])", ["aten::combinations"]),
                ("combinations-r3-repl", "torch.combinations(x[0], 2, with_replacement=True)", ["aten::combinations"]),
                ("vander", "torch.vander(x[0], 3)", ["aten::vander"]),
                ("fill_", "(x.fill_(5), x)", ["aten::fill_.Scalar"]),
                ("fill_-tensor", "(x.fill_(torch.tensor(2)), x)", ["aten::fill_.Tensor"]),
                ("zero_", "(x.zero_(), x)", ["aten::zero_"]),
                ("fill_diagonal_", "(x.fill_diagonal_(9), x)", ["aten::fill_diagonal_"]),
        ):
            cs.append(case("creation/%s/%s" % (name, dt), x + "out = %s\n" % expr, ops, FAM, exact=True))
            if name in ("zeros_like", "empty_like-meta", "ones_like", "full_like", "tril", "triu", "diag-2d"):
                cs.append(case("creation/%s-transposed/%s" % (name, dt), xt + "out = %s\n" % expr, ops, FAM,
                               exact=True))
    # dtype inference
    for name, expr in (
            ("int", "torch.tensor(3)"), ("float", "torch.tensor(2.5)"), ("bool", "torch.tensor(True)"),
            ("ints", "torch.tensor([1, 2, 3])"), ("mixed-int-float", "torch.tensor([1, 2.5])"),
            ("mixed-bool-int", "torch.tensor([True, 2])"), ("nested-mixed", "torch.tensor([[1, 2], [3, 4.0]])"),
            ("empty-list", "torch.tensor([])"), ("empty-nested", "torch.tensor([[], []])"),
            ("big-int", "torch.tensor([1, 2**40])"), ("int-overflow", "torch.tensor([2**63])"),
            ("ragged", "torch.tensor([[1, 2], [3]])"), ("complex", "torch.tensor([1 + 2j, 3.0])"),
            ("tuple", "torch.tensor(((1, 2), (3, 4)))"), ("tensor-of-tensors", "torch.tensor([torch.tensor(1), torch.tensor(2)])"),
            ("float-to-int", "torch.tensor([1.9, -1.9], dtype=torch.int64)"),
            ("neg-to-uint8", "torch.tensor([-1], dtype=torch.uint8)"),
            ("nan-float16", "torch.tensor([float('nan'), 1e5], dtype=torch.float16)"),
            ("round-bfloat16", "torch.tensor([1.00390625, 1.01171875, 3.14159], dtype=torch.bfloat16)"),
            ("round-float16", "torch.tensor([1.00048828125, 1.00146484375, 65519.0, 65520.0], dtype=torch.float16)"),
            ("full-int-fill", "torch.full((2,), 3)"), ("full-float-fill", "torch.full((2,), 2.5)"),
            ("full-bool-fill", "torch.full((2,), False)"), ("arange-int", "torch.arange(5)"),
            ("arange-float", "torch.arange(0.5, 3)"), ("arange-tenth", "torch.arange(0, 1, 0.1)"),
            ("arange-len-rounding", "torch.arange(1, 2.0001, 0.25)"), ("arange-empty", "torch.arange(0)"),
            ("arange-bad-step", "torch.arange(0, 5, 0)"), ("arange-wrong-sign", "torch.arange(5, 0, 1)"),
            ("linspace-default", "torch.linspace(0, 1, 5)"), ("logspace-default", "torch.logspace(-1, 1, 3)"),
            ("zeros-default", "torch.zeros(2)"), ("ones-neg-size", "torch.ones(-1)"),
            ("eye-0", "torch.eye(0)"), ("scalar_tensor-default", "torch.scalar_tensor(1)"),
            ("default-dtype-f64", "(torch.set_default_dtype(torch.float64), torch.tensor([1.5]), torch.arange(0.5, 2), torch.zeros(1))[1:]"),
            ("as_tensor-shares", "(lambda t: torch.as_tensor(t) is t)(torch.ones(2))"),
            ("range-deprecated", "torch.range(0, 3)"),
            ("complex-fn", "torch.complex(torch.tensor([1.0, 2.0]), torch.tensor([0.5, -1.0]))"),
            ("polar", "torch.polar(torch.tensor([1.0, 2.0]), torch.tensor([0.0, 1.5]))"),
            ("heaviside-creation", "torch.heaviside(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor([0.5]))"),
            ("get_default_dtype", "torch.get_default_dtype()"),
            ("result_type", "torch.result_type(torch.tensor([1], dtype=torch.int8), 2.5)"),
            ("promote_types", "torch.promote_types(torch.uint8, torch.int8)"),
            ("can_cast", "torch.can_cast(torch.float32, torch.int32)"),
            ("finfo-eps", "(torch.finfo(torch.float16).eps, torch.finfo(torch.bfloat16).max, torch.iinfo(torch.int8).min)"),
    ):
        cs.append(case("creation/infer/%s" % name, "out = %s\n" % expr, [], FAM, exact=True))
    return cs


CASES = gen()
