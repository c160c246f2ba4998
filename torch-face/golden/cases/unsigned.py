"""Upstream's barebones unsigned dtypes (uint16, uint32, uint64): creation with range checks,
casts both ways, views and moves, NumPy exchange, and upstream's refusals (mixed promotion,
arithmetic without a kernel)."""
from ._lib import case

FAM = "unsigned"
UDTS = ("uint16", "uint32", "uint64")


def gen():
    cs = []
    for dt in UDTS:
        src = "x = inp(torch.tensor([[0, 1, 7], [300, 65535, 42]], dtype=torch.%s))\n" % dt
        for name, expr, ops in (
                ("values", "(x, x.dtype, x.element_size())", []),
                ("to-int64", "x.to(torch.int64)", ["aten::_to_copy"]),
                ("to-float64", "x.double()", ["aten::_to_copy"]),
                ("from-float", "torch.tensor([1.5, 2.0, 9.75]).to(torch.%s)" % dt, ["aten::_to_copy"]),
                ("views", "(x.t(), x[:, 1:], x.reshape(3, 2), x.unsqueeze(0).stride())", []),
                ("cat-stack-flip", "(torch.cat([x, x]), torch.stack([x, x]), x.flip(1))", ["aten::cat", "aten::stack", "aten::flip"]),
                ("index", "(x[1], x[:, [2, 0]], x[x.to(torch.int64) > 5])", []),
                ("clone-contiguous", "x.t().contiguous()", ["aten::clone"]),
                ("fill", "torch.zeros(3, dtype=torch.%s).fill_(9)" % dt, ["aten::fill_.Scalar"]),
                ("full-like", "torch.full_like(x, 5)", ["aten::full_like"]),
                ("numpy", "torch.from_numpy(x.numpy()).tolist()", []),
                ("view-int", "x.view(torch.int%s)" % dt[4:], ["aten::view.dtype"]),
                ("promote-int-err", "torch.promote_types(torch.%s, torch.int16)" % dt, ["aten::promote_types"]),
                ("promote-float", "torch.promote_types(torch.%s, torch.float32)" % dt, ["aten::promote_types"]),
                ("add-refused", "x + x", ["aten::add.Tensor"]),
                ("neg-refused", "-x", ["aten::neg"]),
        ):
            cs.append(case("unsigned/%s/%s" % (name, dt), src + "out = %s\n" % expr, ops, FAM, exact=True))
    cs.append(case("unsigned/overflow/uint16", "out = torch.tensor([1, 70000], dtype=torch.uint16)\n",
                   [], FAM, exact=True))
    return cs


CASES = gen()
