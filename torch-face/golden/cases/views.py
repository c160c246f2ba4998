"""Views and layout: the result's shape, strides and storage offset, whether it aliases the
input (``y.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()``, ``y._is_view()``)
and whether a write through the view lands in the base.  Also the in-place view ops
(t_, transpose_, squeeze_, unsqueeze_, as_strided_), contiguous/clone memory formats and
view(dtype)."""
from ._lib import case, T, values, numel

FAM = "view"

DTS = ("float32", "int64", "bool", "bfloat16", "float16", "uint8")

# input name -> source defining x (and xb, its base)
def inputs(dt):
    v = values(dt, 64, "gen")
    return {
        "c3d": "x = inp(%s)\nxb = x\n" % T(v[:24], (2, 3, 4), dt),
        "t3d": "xb = inp(%s)\nx = xb.permute(2, 0, 1)\n" % T(v[:24], (3, 4, 2), dt),
        "s3d": "xb = inp(%s)\nx = xb[:, 1:, ::2]\n" % T(v[:64], (2, 4, 8), dt),
    }


# (name, expression of x, overloads); expressions valid for a (2, 3, 4)-shaped x
VIEWS = [
    ("view-6x4", "x.view(6, 4)", ["aten::view"]),
    ("view-flat", "x.view(-1)", ["aten::view"]),
    ("view-4x-1", "x.view(4, -1)", ["aten::view"]),
    ("view-size", "x.view(torch.Size([3, 8]))", ["aten::view"]),
    ("view_as", "x.view_as(torch.empty(24))", ["aten::view_as"]),
    ("reshape-6x4", "x.reshape(6, 4)", ["aten::reshape"]),
    ("reshape-flat", "x.reshape(-1)", ["aten::reshape"]),
    ("reshape-2x12", "torch.reshape(x, (2, 12))", ["aten::reshape"]),
    ("reshape_as", "x.reshape_as(torch.empty(4, 6))", ["aten::reshape_as"]),
    ("permute", "x.permute(2, 0, 1)", ["aten::permute"]),
    ("permute-neg", "torch.permute(x, (-1, -3, -2))", ["aten::permute"]),
    ("transpose", "x.transpose(0, 2)", ["aten::transpose.int"]),
    ("transpose-same", "torch.transpose(x, 1, 1)", ["aten::transpose.int"]),
    ("swapaxes", "x.swapaxes(0, 1)", ["aten::swapaxes"]),
    ("swapdims", "torch.swapdims(x, 1, 2)", ["aten::swapdims"]),
    ("movedim", "torch.movedim(x, 0, -1)", ["aten::movedim.int"]),
    ("movedim-list", "torch.movedim(x, (0, 1), (2, 0))", ["aten::movedim.intlist"]),
    ("moveaxis", "torch.moveaxis(x, 2, 0)", ["aten::moveaxis.int"]),
    ("mT", "x.mT", ["aten::transpose.int"]),
    ("expand", "x.expand(2, 2, 3, 4)", ["aten::expand"]),
    ("expand-neg", "x[:, :1].expand(-1, 5, -1)", ["aten::expand", "aten::slice.Tensor"]),
    ("expand_as", "x[:1].expand_as(x)", ["aten::expand_as"]),
    ("broadcast_to", "torch.broadcast_to(x[:, :, :1], (2, 3, 4))", ["aten::broadcast_to"]),
    ("as_strided", "torch.as_strided(x, (2, 2), (1, 3), 1)", ["aten::as_strided"]),
    ("as_strided-method", "x.as_strided((3, 3), (4, 1))", ["aten::as_strided"]),
    ("unfold", "x.unfold(2, 2, 1)", ["aten::unfold"]),
    ("unfold-step2", "x.unfold(1, 2, 2)", ["aten::unfold"]),
    ("narrow", "x.narrow(2, 1, 2)", ["aten::narrow"]),
    ("narrow-neg", "torch.narrow(x, -2, 0, 1)", ["aten::narrow"]),
    ("narrow-tensor-start", "x.narrow(1, torch.tensor(1), 2)", ["aten::narrow.Tensor"]),
    ("select", "x.select(1, 2)", ["aten::select.int"]),
    ("select-neg", "torch.select(x, -1, -1)", ["aten::select.int"]),
    ("index-int", "x[1]", ["aten::select.int"]),
    ("index-int-int", "x[1, 2]", ["aten::select.int"]),
    ("slice", "x[:, 1:3]", ["aten::slice.Tensor"]),
    ("slice-step", "x[..., ::3]", ["aten::slice.Tensor"]),
    ("slice-neg", "x[:, -2:]", ["aten::slice.Tensor"]),
    ("slice-empty", "x[:, 2:1]", ["aten::slice.Tensor"]),
    ("slice-past-end", "x[:, 5:]", ["aten::slice.Tensor"]),
    ("slice-ellipsis-none", "x[..., None, 1]", ["aten::unsqueeze", "aten::select.int"]),
    ("none-first", "x[None]", ["aten::unsqueeze"]),
    ("slice-mixed", "x[1:, None, 2, ::2]", ["aten::slice.Tensor", "aten::select.int"]),
    ("squeeze-none", "x[:1, :, :1].squeeze()", ["aten::squeeze"]),
    ("squeeze-dim", "x[:1].squeeze(0)", ["aten::squeeze.dim"]),
    ("squeeze-dim-noop", "x.squeeze(1)", ["aten::squeeze.dim"]),
    ("squeeze-dims", "x[:1, :, :1].squeeze((0, 2))", ["aten::squeeze.dims"]),
    ("unsqueeze", "x.unsqueeze(1)", ["aten::unsqueeze"]),
    ("unsqueeze-neg", "torch.unsqueeze(x, -1)", ["aten::unsqueeze"]),
    ("flatten", "x.flatten()", ["aten::flatten.using_ints"]),
    ("flatten-1-2", "torch.flatten(x, 1, 2)", ["aten::flatten.using_ints"]),
    ("flatten-0-1", "x.flatten(0, 1)", ["aten::flatten.using_ints"]),
    ("ravel", "x.ravel()", ["aten::ravel"]),
    ("unflatten", "x.unflatten(2, (2, 2))", ["aten::unflatten.int"]),
    ("diagonal", "x.diagonal()", ["aten::diagonal"]),
    ("diagonal-off", "torch.diagonal(x, 1, 1, 2)", ["aten::diagonal"]),
    ("diagonal-neg", "x.diagonal(offset=-1, dim1=2, dim2=1)", ["aten::diagonal"]),
    ("split", "x.split(2, dim=2)", ["aten::split.Tensor"]),
    ("split-uneven", "torch.split(x, 2, 1)", ["aten::split.Tensor"]),
    ("split-sizes", "x.split([1, 3], dim=2)", ["aten::split_with_sizes"]),
    ("chunk", "x.chunk(2, dim=1)", ["aten::chunk"]),
    ("chunk-more", "torch.chunk(x, 3, 2)", ["aten::chunk"]),
    ("unbind", "x.unbind(1)", ["aten::unbind.int"]),
    ("tensor_split", "torch.tensor_split(x, 3, dim=2)", ["aten::tensor_split.sections"]),
    ("tensor_split-idx", "torch.tensor_split(x, [1, 3], dim=2)", ["aten::tensor_split.indices"]),
    ("hsplit", "torch.hsplit(x, 3)", ["aten::hsplit.int"]),
    ("vsplit", "torch.vsplit(x, [1])", ["aten::vsplit.array"]),
    ("dsplit", "torch.dsplit(x, 2)", ["aten::dsplit.int"]),
    ("detach", "x.detach()", ["aten::detach"]),
    ("alias", "torch.ops.aten.alias(x)", ["aten::alias"]),
    ("contiguous", "x.contiguous()", ["aten::contiguous"]),
    ("clone", "x.clone()", ["aten::clone"]),
    ("clone-contig", "x.clone(memory_format=torch.contiguous_format)", ["aten::clone"]),
    ("real", "torch.real(x)", ["aten::real"]),
    ("view_as_real-err", "torch.view_as_real(x)", ["aten::view_as_real"]),
    ("matrix-T", "x[0].T", ["aten::numpy_T"]),
    ("t", "x[0].t()", ["aten::t"]),
    ("t-1d", "x[0, 0].t()", ["aten::t"]),
    ("adjoint", "x[0].adjoint()", ["aten::adjoint"]),
    ("H", "x[0].H", ["aten::matrix_H"]),
    ("atleast_3d", "torch.atleast_3d(x[0])", ["aten::atleast_3d"]),
    ("atleast_2d", "torch.atleast_2d(x[0, 0])", ["aten::atleast_2d"]),
    ("atleast_1d", "torch.atleast_1d(x[0, 0, 0])", ["aten::atleast_1d"]),
    ("expand-4d-then-view", "x.unsqueeze(0).expand(2, 2, 3, 4)[1]", ["aten::expand"]),
    ("diag-view-2d", "x[0].diagonal(1)", ["aten::diagonal"]),
]


def gen():
    cs = []
    for dt in DTS:
        for iname, src in inputs(dt).items():
            for vname, expr, ops in VIEWS:
                if vname == "contiguous" and iname == "c3d":
                    ops = []  # a contiguous tensor's contiguous() returns it without a call
                code = src + ("y = %s\n"
                              "def info(v):\n"
                              "    return (v, v.untyped_storage().data_ptr() == x.untyped_storage().data_ptr(), v._is_view(), v.is_contiguous())\n"
                              "out = tuple(info(v) for v in y) if isinstance(y, (tuple, list)) else info(y)\n" % expr)
                cs.append(case("view/%s/%s/%s" % (vname, dt, iname), code, ops, FAM, exact=True))
                if dt in ("float32", "int64") and vname in WRITE:
                    fill = "1" if dt != "bool" else "True"
                    code = src + ("y = %s\n"
                                  "(y[0] if isinstance(y, (tuple, list)) else y).fill_(%s)\n"
                                  "out = (x, xb)\n" % (expr, fill))
                    cs.append(case("view/%s-write/%s/%s" % (vname, dt, iname), code,
                                   ops + ["aten::fill_.Scalar"], FAM, exact=True))
        cs += inplace_views(dt)
    cs += formats()
    return cs


WRITE = {"view-6x4", "reshape-6x4", "permute", "transpose", "expand", "as_strided", "unfold",
         "narrow", "select", "slice-step", "squeeze-dim", "unsqueeze", "flatten", "diagonal",
         "diagonal-off", "split-sizes", "chunk", "unbind", "detach", "alias", "contiguous",
         "clone", "movedim", "tensor_split-idx", "index-int", "slice-mixed", "t", "mT",
         "unflatten", "expand_as", "view_as", "reshape-flat"}


def inplace_views(dt):
    cs = []
    v = values(dt, 24, "gen")
    base = "x = inp(%s)\n" % T(v[:6], (2, 3), dt)
    x3 = "x = inp(%s)\n" % T(v[:24], (2, 1, 3, 4), dt)
    for name, stmt, ops in (
            ("t_", "r = x.t_()", ["aten::t_"]),
            ("transpose_", "r = x.transpose_(0, 1)", ["aten::transpose_"]),
            ("squeeze_", "r = x.unsqueeze(0).squeeze_()", ["aten::squeeze_"]),
            ("unsqueeze_", "r = x.unsqueeze_(1)", ["aten::unsqueeze_"]),
            ("as_strided_", "r = x.as_strided_((2, 2), (1, 2), 1)", ["aten::as_strided_"]),
            ("resize_-shrink", "r = x.resize_(2, 2)", ["aten::resize_"]),
            ("resize_as_", "r = x.resize_as_(torch.empty(3, 2))", ["aten::resize_as_"]),
            ("swapaxes_", "r = x.swapaxes_(0, 1)", ["aten::swapaxes_"]),
            ("squeeze_-dim", "r = x.unsqueeze(0).squeeze_(0)", ["aten::squeeze_.dim"])):
        cs.append(case("view/%s/%s" % (name, dt), base + stmt + "\nout = (r, r is x or r._base is x, x.shape, x.stride())\n",
                       ops, FAM, exact=True))
    for name, stmt, ops in (
            ("squeeze_-4d", "r = x.squeeze_()", ["aten::squeeze_"]),
            ("squeeze_-dims", "r = x.squeeze_((1,))", ["aten::squeeze_.dims"]),
            ("view-dtype-same-size", "r = x.view(x.dtype)", ["aten::view.dtype"])):
        cs.append(case("view/%s/%s" % (name, dt), x3 + stmt + "\nout = (r, r is x, x.shape, x.stride())\n",
                       ops, FAM, exact=True))
    return cs


def formats():
    """memory formats, view(dtype) bit views, non-viewable reshapes"""
    cs = []
    for dt in ("float32", "int64", "bfloat16", "uint8"):
        x4 = "x = inp(%s)\n" % T(values(dt, 48, "gen"), (2, 3, 2, 4), dt)
        for name, expr, ops in (
                ("clone-channels_last", "x.clone(memory_format=torch.channels_last)", ["aten::clone"]),
                ("contiguous-channels_last", "x.contiguous(memory_format=torch.channels_last)",
                 ["aten::contiguous"]),
                ("to-channels_last", "x.to(memory_format=torch.channels_last)", ["aten::to.dtype_layout"]),
                ("channels_last-is_contiguous",
                 "(lambda y: (y.is_contiguous(), y.is_contiguous(memory_format=torch.channels_last)))(x.contiguous(memory_format=torch.channels_last))",
                 ["aten::contiguous"]),
                ("empty_like-channels_last", "torch.empty_like(x.contiguous(memory_format=torch.channels_last)).stride()",
                 ["aten::empty_like"]),
                ("clone-preserve-permuted", "x.permute(0, 2, 3, 1).clone()", ["aten::clone"]),
                ("clone-preserve-sliced", "x[:, :, ::2].clone()", ["aten::clone"]),
                ("clone-preserve-expanded", "x[:, :1].expand(2, 3, 2, 4).clone()", ["aten::clone"]),
                ("add-preserves-channels_last",
                 "x.contiguous(memory_format=torch.channels_last) + x.contiguous(memory_format=torch.channels_last)",
                 ["aten::add.Tensor"]),
                ("add-mixed-formats", "x.contiguous(memory_format=torch.channels_last) + x",
                 ["aten::add.Tensor"]),
                ("add-transposed-operands", "x.transpose(1, 3) + x.transpose(1, 3)", ["aten::add.Tensor"]),
                ("add-transposed-and-contig", "x.transpose(1, 3) + x.transpose(1, 3).contiguous()",
                 ["aten::add.Tensor"]),
                ("reshape-copies", "(lambda y: (y, y._is_view()))(x.transpose(0, 1).reshape(-1))",
                 ["aten::reshape"]),
                ("view-noncontig-err", "x.transpose(0, 1).view(-1)", ["aten::view"]),
                ("view-compatible-noncontig", "x.transpose(2, 3).view(2, 3, 8)", ["aten::view"]),
                ("view-dtype-int32", "x.view(torch.int32)", ["aten::view.dtype"]),
                ("view-dtype-uint8", "x.view(torch.uint8)", ["aten::view.dtype"]),
                ("view-dtype-int16", "x.view(torch.int16)", ["aten::view.dtype"]),
                ("view-dtype-float64", "x.view(torch.float64)", ["aten::view.dtype"]),
                ("view-dtype-transposed", "x.transpose(2, 3).view(torch.int16)", ["aten::view.dtype"]),
        ):
            cs.append(case("view/%s/%s" % (name, dt), x4 + "out = %s\n" % expr, ops, FAM, exact=True))
    return cs


def dtype_views():
    """view(dtype) across element sizes: layout, aliasing writes both ways, upstream's errors"""
    cs = []
    for src in ("float32", "float64", "int16", "uint8", "int64", "bfloat16", "bool"):
        x = "x = inp(%s)\n" % T(values(src, 48, "gen"), (2, 3, 8), src)
        for dst in ("uint8", "int16", "float32", "int64", "float64", "float16"):
            for name, stmt in (
                    ("plain", "y = x.view(torch.%s)\nout = (y, y.stride(), y.storage_offset(), y._base is x)" % dst),
                    ("offset", "y = x[1:].view(torch.%s)\nout = (y, y.stride(), y.storage_offset())" % dst),
                    ("sliced-last", "y = x[:, :, 2:6].view(torch.%s)\nout = (y, y.stride(), y.storage_offset())" % dst),
                    ("transposed", "out = x.transpose(0, 2).view(torch.%s)" % dst),
                    ("zerodim", "out = x[0, 0, 0].view(torch.%s)" % dst),
                    ("write-through", "y = x.view(torch.%s)\ny[0].zero_()\ny[1, 1] = 3\nout = (x, y)" % dst),
                    ("write-base", "y = x.view(torch.%s)\nx[1].zero_()\nout = y" % dst),
                    ("roundtrip", "out = x.view(torch.%s).view(x.dtype).equal(x)" % dst),
            ):
                cs.append(case("view/dtype-%s/%s/%s" % (name, src, dst), x + stmt + "\n",
                               ["aten::view.dtype"], FAM, exact=True))
    return cs


def bool_views():
    """Other bytes viewed as bool (any nonzero byte is true) and bools written through byte views"""
    src = "u = inp(torch.tensor([0, 1, 2, 0, 255, 1, 7, 0], dtype=torch.uint8))\nx = u.view(torch.bool)\n"
    cs = []
    for name, expr in (
            ("values", "x"), ("sum", "x.sum()"), ("and", "x & x.flip(0)"), ("not", "~x"),
            ("any-all", "(x.any(), x.all(), x[1:3].all())"), ("where", "torch.where(x, 1.0, -1.0)"),
            ("nonzero", "x.nonzero()"), ("to-float", "x.float()"), ("mask-index", "u[x]"),
            ("eq", "x == x.clone()"), ("masked_fill", "torch.zeros(8).masked_fill(x, 5.0)"),
            ("contiguous", "x.reshape(2, 4).t().contiguous()"), ("count_nonzero", "x.count_nonzero()"),
            ("fill-writes-bytes", "(x[2:5].fill_(True), u)[1]"),
            ("setitem-writes-bytes", "(x.__setitem__(1, False), u)[1]"),
            ("bytes-into-bools", "(lambda b: (b.view(torch.uint8).add_(3), b))(torch.zeros(4, dtype=torch.bool))[1]"),
    ):
        cs.append(case("view/bool-of-bytes/%s" % name, src + "out = %s\n" % expr,
                       ["aten::view.dtype"], FAM, exact=True))
    return cs


CASES = gen() + dtype_views() + bool_views()
