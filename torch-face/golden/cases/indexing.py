"""Indexing: basic slices, advanced integer indices (lists, tensors, broadcast, negative,
out of range), bool masks, __setitem__ forms, index_put_ (accumulate), scatter/scatter_add/
scatter_reduce, gather, index_select/add/copy/fill, masked_fill/select/scatter, take,
take_along_dim, put_, nonzero/argwhere.  Index tensors never repeat a target position where
upstream leaves the winner unspecified."""
from ._lib import DTYPES, FLOATS, case, T, values

FAM = "indexing"


def gen():
    cs = []
    for dt in DTYPES:
        fl = dt in FLOATS
        x = "x = inp(%s)\n" % T(values(dt, 12, "distinct"), (3, 4), dt)
        x3 = "x = inp(%s)\n" % T(values(dt, 24, "distinct"), (2, 3, 4), dt)
        v = "v = inp(%s)\n" % T(values(dt, 12, "gen", 5), (3, 4), dt)
        one = {"bool": "True"}.get(dt, "7")
        for name, expr, ops, src in (
                ("basic-slice", "x[1:3]", ["aten::slice.Tensor"], x),
                ("neg-step-err", "x[::-1]", [], x),
                ("int-out-of-range", "x[5]", [], x),
                ("list", "x[[0, 2]]", ["aten::index.Tensor"], x),
                ("list-neg", "x[[-1, 0, -3]]", ["aten::index.Tensor"], x),
                ("tensor-idx", "x[torch.tensor([2, 0])]", ["aten::index.Tensor"], x),
                ("tensor-idx-2d", "x[torch.tensor([[0, 1], [2, 2]])]", ["aten::index.Tensor"], x),
                ("two-lists", "x[[0, 1, 2], [3, 2, 1]]", ["aten::index.Tensor"], x),
                ("broadcast-idx", "x[[[0], [2]], [1, 3]]", ["aten::index.Tensor"], x),
                ("slice-then-list", "x[:, [3, 0]]", ["aten::index.Tensor"], x),
                ("list-slice-list", "x3[[0, 1], :, [1, 2]]", ["aten::index.Tensor"], x3.replace("x =", "x3 =")),
                ("adv-separated", "x3[[1, 0], 1:, [0, 3]]", ["aten::index.Tensor"], x3.replace("x =", "x3 =")),
                ("adv-middle", "x3[:, [2, 0], :]", ["aten::index.Tensor"], x3.replace("x =", "x3 =")),
                ("idx-out-of-range", "x[[0, 3]]", ["aten::index.Tensor"], x),
                ("idx-float-err", "x[torch.tensor([0.0])]", [], x),
                ("int32-idx", "x[torch.tensor([1, 0], dtype=torch.int32)]", ["aten::index.Tensor"], x),
                ("uint8-mask-deprecated", "x[torch.tensor([1, 0, 1], dtype=torch.uint8)]", ["aten::index.Tensor"], x),
                ("bool-mask-rows", "x[torch.tensor([True, False, True])]", ["aten::index.Tensor"], x),
                ("bool-mask-2d", "x[torch.tensor([[True, False, True, False]] * 3)]", ["aten::index.Tensor"], x),
                ("bool-mask-wrong-shape", "x[torch.tensor([True, False])]", ["aten::index.Tensor"], x),
                ("bool-scalar-true", "x[True]", [], x),
                ("bool-scalar-false", "x[False]", [], x),
                ("none-list", "x[None, [0, 1]]", ["aten::index.Tensor"], x),
                ("ellipsis-list", "x[..., [0, 1]]", ["aten::index.Tensor"], x),
                ("empty-list", "x[[]]", ["aten::index.Tensor"], x),
                ("index_select", "torch.index_select(x, 1, torch.tensor([3, 1, 1]))", ["aten::index_select"], x),
                ("index_select-method", "x.index_select(0, torch.tensor([2]))", ["aten::index_select"], x),
                ("index_select-out", "torch.index_select(x, 0, torch.tensor([1, 0]), out=torch.empty(0, dtype=x.dtype))",
                 ["aten::index_select.out"], x),
                ("index_select-0d", "torch.index_select(x, 1, torch.tensor(2))", ["aten::index_select"], x),
                ("gather", "torch.gather(x, 1, torch.tensor([[0, 0], [1, 3], [2, 1]]))", ["aten::gather"], x),
                ("gather-dim0", "x.gather(0, torch.tensor([[2, 1, 0, 0]]))", ["aten::gather"], x),
                ("gather-oob", "x.gather(0, torch.tensor([[3, 0, 0, 0]]))", ["aten::gather"], x),
                ("gather-out", "torch.gather(x, 1, torch.tensor([[1], [0], [3]]), out=torch.empty(0, dtype=x.dtype))",
                 ["aten::gather.out"], x),
                ("take", "torch.take(x, torch.tensor([[0, 11], [5, -1]]))", ["aten::take"], x),
                ("take_along_dim", "torch.take_along_dim(x, torch.tensor([[3], [0], [1]]), dim=1)", ["aten::take_along_dim"], x),
                ("take_along_dim-flat", "torch.take_along_dim(x, torch.tensor([5, 2]))", ["aten::take_along_dim"], x),
                ("masked_select", "torch.masked_select(x, torch.tensor([True, False, False, True]))", ["aten::masked_select"], x),
                ("masked_fill", "x.masked_fill(torch.tensor([[True], [False], [True]]), %s)" % one, ["aten::masked_fill.Scalar"], x),
                ("masked_fill-float", "x.masked_fill(torch.tensor([True, False, False, True]), 2.5)", ["aten::masked_fill.Scalar"], x),
                ("masked_fill-tensor", "x.masked_fill(torch.tensor([True, False, False, True]), torch.tensor(%s))" % one,
                 ["aten::masked_fill.Tensor"], x),
                ("masked_fill_", "(x.masked_fill_(x > x[1, 1], 0), x)", ["aten::masked_fill_.Scalar"], x),
                ("masked_fill-uint8-mask", "x.masked_fill(torch.tensor([1, 0, 0, 1], dtype=torch.uint8), 0)", [], x),
                ("masked_scatter", "x.masked_scatter(torch.tensor([[True, False, True, False]] * 3), v)", ["aten::masked_scatter"], x + v),
                ("masked_scatter_", "(x.masked_scatter_(torch.tensor([False, True, True, False]), v), x)", ["aten::masked_scatter_"], x + v),
                ("nonzero", "torch.nonzero(x)", ["aten::nonzero"], x),
                ("nonzero-tuple", "torch.nonzero(x, as_tuple=True)", ["aten::nonzero"], x),
                ("nonzero-0d", "torch.nonzero(x[0, 0])", ["aten::nonzero"], x),
                ("nonzero-empty", "torch.nonzero(x[:0])", ["aten::nonzero"], x),
                ("nonzero-out", "torch.nonzero(x, out=torch.empty(0, dtype=torch.int64))", ["aten::nonzero.out"], x),
                ("argwhere", "torch.argwhere(x)", ["aten::argwhere"], x),
                ("nonzero_static", "torch.nonzero_static(x, size=20, fill_value=-1)", ["aten::nonzero_static"], x),
        ):
            cs.append(case("indexing/%s/%s" % (name, dt), src + "out = %s\n" % expr, ops, FAM, exact=True))
        # setitem forms
        for name, stmt, ops, src in (
                ("set-int", "x[1] = %s" % one, ["aten::fill_.Scalar"], x),
                ("set-slice-tensor", "x[:, 1:3] = v[:, :2]", ["aten::copy_"], x + v),
                ("set-broadcast", "x[:, 0] = v[0, :3]", ["aten::copy_"], x + v),
                ("set-mask-scalar", "x[x == x[0, 0]] = %s" % one, ["aten::masked_fill_.Scalar"], x),
                ("set-mask-tensor", "x[torch.tensor([True, False, True])] = v[:2]", ["aten::index_put_"], x + v),
                ("set-list", "x[[2, 0]] = v[:2]", ["aten::index_put_"], x + v),
                ("set-two-lists", "x[[0, 1], [3, 0]] = v[0, :2]", ["aten::index_put_"], x + v),
                ("set-list-scalar", "x[[0, 2], 1] = %s" % one, ["aten::index_fill_.int_Scalar"], x),
                ("set-ellipsis", "x[...] = %s" % one, ["aten::fill_.Scalar"], x),
                ("set-none", "x[None, 0] = v[1]", ["aten::copy_"], x + v),
                ("set-float-into-int", "x[0, 0] = 2.75", ["aten::fill_.Scalar"], x),
                ("set-other-dtype-tensor", "x[0] = torch.tensor([1.5, -2.5, 3.5, 0.5])", ["aten::copy_"], x),
                ("set-shape-mismatch", "x[0] = v[:2]", ["aten::copy_"], x + v),
                ("iadd-adv", "x[[0, 1]] += %s" % one, ["aten::index_put_"], x),
                ("index_put_", "x.index_put_((torch.tensor([0, 2]), torch.tensor([1, 3])), v[0, :2])", ["aten::index_put_"], x + v),
                ("index_put_-accumulate", "x.index_put_((torch.tensor([0, 0, 2]),), v[:3], accumulate=True)", ["aten::index_put_"], x + v),
                ("index_put", "x = torch.index_put(x, (torch.tensor([1]),), v[0])", ["aten::index_put"], x + v),
                ("index_add_", "x.index_add_(0, torch.tensor([0, 2, 0]), v[:3])", ["aten::index_add_"], x + v),
                ("index_add-alpha", "x = torch.index_add(x, 1, torch.tensor([3, 1]), v[:, :2], alpha=2)", ["aten::index_add"], x + v),
                ("index_copy_", "x.index_copy_(1, torch.tensor([2, 0]), v[:, :2])", ["aten::index_copy_"], x + v),
                ("index_copy", "x = torch.index_copy(x, 0, torch.tensor([1]), v[:1])", ["aten::index_copy"], x + v),
                ("index_fill_", "x.index_fill_(1, torch.tensor([0, 3]), %s)" % one, ["aten::index_fill_.int_Scalar"], x),
                ("index_fill", "x = x.index_fill(0, torch.tensor([1]), torch.tensor(%s))" % one, ["aten::index_fill.int_Tensor"], x),
                ("scatter", "x = torch.scatter(x, 1, torch.tensor([[0, 1], [2, 3], [1, 0]]), v)", ["aten::scatter.src"], x + v),
                ("scatter-value", "x = x.scatter(0, torch.tensor([[2, 0, 1, 0]]), %s)" % one, ["aten::scatter.value"], x),
                ("scatter_", "x.scatter_(1, torch.tensor([[3], [2], [1]]), v)", ["aten::scatter_.src"], x + v),
                ("scatter_-value", "x.scatter_(0, torch.tensor([[1, 2]]), %s)" % one, ["aten::scatter_.value"], x),
                ("scatter-reduce-add", "x.scatter_(1, torch.tensor([[0, 0], [1, 1], [3, 3]]), v, reduce='add')", ["aten::scatter_.reduce"], x + v),
                ("scatter-reduce-multiply", "x.scatter_(1, torch.tensor([[0, 0], [1, 1], [3, 3]]), v, reduce='multiply')", ["aten::scatter_.reduce"], x + v),
                ("scatter_add", "x = torch.scatter_add(x, 0, torch.tensor([[0, 1, 2, 0], [0, 1, 2, 2]]), v)", ["aten::scatter_add"], x + v),
                ("scatter_add_", "x.scatter_add_(1, torch.tensor([[0, 0, 1], [2, 2, 2], [3, 1, 3]]), v)", ["aten::scatter_add_"], x + v),
                ("put_", "x.put_(torch.tensor([0, 5, 11]), v[0, :3])", ["aten::put_"], x + v),
                ("put_-accumulate", "x.put_(torch.tensor([1, 1, 2]), v[0, :3], accumulate=True)", ["aten::put_"], x + v),
                ("index_reduce_-prod", "x.index_reduce_(0, torch.tensor([0, 2, 0]), v[:3], 'prod')", ["aten::index_reduce_"], x + v),
                ("index_reduce_-amax", "x.index_reduce_(0, torch.tensor([1, 1, 0]), v[:3], 'amax', include_self=False)", ["aten::index_reduce_"], x + v),
        ):
            cs.append(case("indexing/%s/%s" % (name, dt), src + stmt + "\nout = x\n", ops, FAM,
                           exact=name not in ("index_put_-accumulate", "index_add_", "index_add-alpha",
                                              "scatter-reduce-add", "scatter-reduce-multiply", "scatter_add",
                                              "scatter_add_", "put_-accumulate", "iadd-adv", "index_reduce_-prod"),
                           acc=True, ref64=fl))
        for red in ("sum", "prod", "mean", "amax", "amin"):
            for inc in (True, False):
                cs.append(case("indexing/scatter_reduce-%s-%s/%s" % (red, "self" if inc else "noself", dt),
                               x + v + "out = x.scatter_reduce(1, torch.tensor([[0, 0, 2], [1, 3, 3], [2, 2, 2]]), v, %r, include_self=%s)\n" % (red, inc),
                               ["aten::scatter_reduce.two"], FAM, acc=True, ref64=fl,
                               exact=red in ("amax", "amin")))
    return cs


CASES = gen()
