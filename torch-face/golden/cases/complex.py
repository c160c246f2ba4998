"""Complex tensors: creation and inference, real/imag/view_as_real/view_as_complex views, the
lazy conj and neg bits (conj, resolve_conj, is_conj), arithmetic and promotion with real
dtypes, abs/angle/exp/sqrt, reductions and matmul."""
from ._lib import case, T, values, tens

FAM = "complex"
CDTS = ("complex64", "complex128")


def gen():
    cs = []
    for dt in CDTS:
        x = "x = inp(%s)\n" % T(values(dt, 6, "gen"), (2, 3), dt)
        y = "y = inp(%s)\n" % T(values(dt, 3, "nz", 4), (3,), dt)
        r = "r = inp(%s)\n" % T(values("float32", 3, "gen", 2), (3,), "float32")
        src = x + y + r
        for name, expr, ops, kind in (
                ("real", "(x.real, x.real.stride(), x.real.storage_offset())", ["aten::real"], "ex"),
                ("imag", "(x.imag, x.imag.stride(), x.imag.storage_offset())", ["aten::imag"], "ex"),
                ("view_as_real", "torch.view_as_real(x)", ["aten::view_as_real"], "ex"),
                ("view_as_complex", "torch.view_as_complex(torch.view_as_real(x).contiguous())", ["aten::view_as_complex"], "ex"),
                ("conj", "(x.conj(), x.conj().is_conj())", ["aten::_conj"], "ex"),
                ("conj_physical", "(torch.conj_physical(x), torch.conj_physical(x).is_conj())", ["aten::conj_physical"], "ex"),
                ("resolve_conj", "x.conj().resolve_conj()", ["aten::resolve_conj"], "ex"),
                ("conj-write", "(lambda c: (c.add_(1), x))(x.conj())", ["aten::add_.Tensor"], "ex"),
                ("neg-bit", "(torch._neg_view(x).is_neg(), torch._neg_view(x))", ["aten::_neg_view"], "ex"),
                ("abs", "torch.abs(x)", ["aten::abs"], "tr"),
                ("angle", "torch.angle(x)", ["aten::angle"], "tr"),
                ("sgn", "torch.sgn(x)", ["aten::sgn"], "tr"),
                ("exp", "torch.exp(x)", ["aten::exp"], "tr"),
                ("log", "torch.log(x)", ["aten::log"], "tr"),
                ("sqrt", "torch.sqrt(x)", ["aten::sqrt"], "tr"),
                ("sin", "torch.sin(x)", ["aten::sin"], "tr"),
                ("tanh", "torch.tanh(x)", ["aten::tanh"], "tr"),
                ("reciprocal", "torch.reciprocal(x)", ["aten::reciprocal"], "tr"),
                ("add", "x + y", ["aten::add.Tensor"], "tr"),
                ("sub-real", "x - r", ["aten::sub.Tensor"], "tr"),
                ("mul", "x * y", ["aten::mul.Tensor"], "tr"),
                ("div", "x / y", ["aten::div.Tensor"], "tr"),
                ("mul-scalar-complex", "x * (1 - 2j)", ["aten::mul.Tensor"], "tr"),
                ("real-times-complex-scalar", "r * 1j", ["aten::mul.Tensor"], "tr"),
                ("pow", "x ** 2", ["aten::pow.Tensor_Scalar"], "tr"),
                ("eq", "x == x.conj()", ["aten::eq.Tensor"], "ex"),
                ("lt-err", "x < y", ["aten::lt.Tensor"], "ex"),
                ("sum", "x.sum(1)", ["aten::sum.dim_IntList"], "acc"),
                ("mean", "x.mean()", ["aten::mean"], "acc"),
                ("prod", "x.prod(0)", ["aten::prod.dim_int"], "acc"),
                ("matmul", "x @ y", ["aten::matmul"], "acc"),
                ("mm-conj", "torch.mm(x, x.conj().t())", ["aten::mm"], "acc"),
                ("vdot", "torch.vdot(y, y)", ["aten::vdot"], "acc"),
                ("linalg.vector_norm", "torch.linalg.vector_norm(x)", ["aten::linalg_vector_norm"], "acc"),
                ("polar-roundtrip", "torch.polar(x.abs(), x.angle())", ["aten::polar"], "tr"),
                ("to-real-warns", "x.to(torch.float32)", ["aten::_to_copy"], "ex"),
                ("to-other-complex", "x.to(torch.complex128 if x.dtype == torch.complex64 else torch.complex64)", ["aten::_to_copy"], "tr"),
                ("isreal", "torch.isreal(x)", ["aten::isreal"], "ex"),
                ("cat-promote", "torch.cat([x, r[None]])", ["aten::cat"], "ex"),
                ("tensor-infer", "torch.tensor([1, 2j]).dtype", [], "ex"),
                ("item", "x[0, 1].item()", ["aten::_local_scalar_dense"], "ex"),
                ("sort-err", "torch.sort(x)", ["aten::sort"], "ex"),
                ("clone-conj", "x.conj().clone().is_conj()", ["aten::clone"], "ex"),
                ("H", "(x.H, x.H.is_conj())", [], "ex"),
                ("mH-adjoint", "(x.mH, torch.adjoint(x).is_conj(), torch.adjoint(x))", ["aten::adjoint"], "ex"),
                ("imag-of-conj", "x.conj().imag", ["aten::imag"], "ex"),
                ("view_as_real-conj-err", "torch.view_as_real(x.conj())", ["aten::view_as_real"], "ex"),
                ("setitem-through-conj", "(lambda c: (c.__setitem__((0, 1), 1 + 1j), x))(x.conj())", [], "ex"),
                ("index-conj", "(x.conj()[1], x.conj()[1].is_conj(), x.conj()[[1, 0]])", [], "ex"),
                ("where", "torch.where(x.real > 0, x, y)", ["aten::where.self"], "ex"),
                ("tril", "torch.tril(x)", ["aten::tril"], "ex"),
                ("masked_fill", "x.masked_fill(x.imag < 0, 2 - 1j)", ["aten::masked_fill.Scalar"], "ex"),
                ("scatter_add", "torch.zeros(2, 3, dtype=x.dtype).scatter_add(1, torch.tensor([[0, 0, 2], [1, 1, 1]]), x)", ["aten::scatter_add"], "tr"),
                ("index_put-acc", "torch.zeros(3, dtype=x.dtype).index_put_((torch.tensor([0, 2, 0]),), y, accumulate=True)", ["aten::index_put_"], "tr"),
                ("isclose", "torch.isclose(x, x + 1e-9)", ["aten::isclose"], "ex"),
                ("equal", "(torch.equal(x, x.clone()), torch.equal(x, x.conj()))", ["aten::equal"], "ex"),
                ("square", "torch.square(x)", ["aten::square"], "tr"),
                ("sigmoid", "torch.sigmoid(x)", ["aten::sigmoid"], "tr"),
                ("sum-real-dtype", "x.sum(dtype=torch.float64)", ["aten::sum"], "acc"),
                ("randn-seeded", "(torch.manual_seed(3), torch.randn(7, dtype=x.dtype))[1]", ["aten::randn"], "ex"),
                ("rand-seeded", "(torch.manual_seed(4), torch.rand(2, 3, dtype=x.dtype))[1]", ["aten::rand"], "ex"),
                ("normal_-seeded", "(torch.manual_seed(5), torch.empty(5, dtype=x.dtype).normal_(0.5, 2.0))[1]", ["aten::normal_"], "ex"),
                ("randint-err", "torch.randint(0, 3, (2,), dtype=x.dtype)", ["aten::randint"], "ex"),
                ("numpy-roundtrip", "torch.from_numpy(x.numpy())", [], "ex"),
                ("stack-flip", "torch.stack([x, x.flip(1)])", ["aten::stack", "aten::flip"], "ex"),
                ("lgamma-refused", "torch.lgamma(x)", ["aten::lgamma"], "ex"),
        ):
            cs.append(case("complex/%s/%s" % (name, dt), src + "out = %s\n" % expr, ops, FAM,
                           ref64=kind != "ex", acc=kind == "acc", exact=kind == "ex"))
    return cs


CASES = gen()
