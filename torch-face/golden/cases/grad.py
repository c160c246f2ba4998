"""Gradients: every differentiable operator the other families exercise, run forward on leaf
inputs that require grad, then ``backward`` with a fixed cotangent; the case's result is the
forward value, each leaf's ``.grad`` (what optimizers read, so its layout is compared too) and
the output's ``grad_fn`` class name.  float32 cases get upstream's float64 run as the reference
(the judge's usual rule); float64 cases get the float32 estimate.

An operator whose backward the face lacks is *refused* (NotImplementedError from the
backward); upstream's own refusals (a derivative it does not implement) are cases too.  The
derivative self-test (``compare.py --wrong-derivatives``) runs this family with every formula's
gradient perturbed and requires each case with a non-zero gradient to be rejected.
"""
from ._lib import case, T, values

FAM = "grad"
DTS = ("float32", "float64")

# Cotangent: a fixed pattern of exact values in every float dtype (-0.75 .. 0.75).
TAIL = ("g = ((torch.arange(y.numel()) %% 7 - 3) / 4).to(y.dtype).reshape(y.shape)\n"
        "y.backward(g)\n"
        "out = (y.detach(), %s, type(y.grad_fn).__name__)\n")


def leaf(spec, dt):
    """``var:shape:pool[:shift]`` -> source of a leaf input that requires grad."""
    parts = spec.split(":")
    var, shape = parts[0], tuple(int(s) for s in parts[1].split(",") if s)
    pool = parts[2] if len(parts) > 2 else "gen"
    shift = int(parts[3]) if len(parts) > 3 else 0
    n = 1
    for s in shape:
        n *= s
    return var, "%s = inp(%s).detach().requires_grad_()\n" % (
        var, T(values(dt, max(n, 1), pool, shift), shape, dt))


SPECS = []


def G(name, expr, ins, ops, acc=False, pre="", pick=None):
    """One operator's gradient case: ``ins`` are leaf specs (see ``leaf``); ``pre`` builds the
    non-differentiable arguments; ``pick`` indexes a tuple result (values of max.dim, ...)."""
    SPECS.append((name, expr, ins, ops, acc, pre, pick))


def U(name, ops, pool="gen", expr=None, shape="2,3"):
    G(name, expr or "torch.%s(x)" % name, ["x:%s:%s" % (shape, pool)], ops)


# ----- pointwise unary ------------------------------------------------------------------------
for _op, _pool in [
        ("abs", "nz"), ("neg", "gen"), ("sqrt", "pos"), ("rsqrt", "pos"), ("exp", "mod"),
        ("exp2", "mod"), ("expm1", "mod"), ("log", "pos"), ("log2", "pos"), ("log10", "pos"),
        ("log1p", "pos"), ("sin", "gen"), ("cos", "gen"), ("tan", "mod"), ("asin", "unit"),
        ("acos", "unit"), ("atan", "gen"), ("sinh", "mod"), ("cosh", "mod"), ("tanh", "gen"),
        ("asinh", "gen"), ("acosh", "ge1"), ("atanh", "unit"), ("sigmoid", "gen"),
        ("reciprocal", "nz"), ("erf", "gen"), ("erfc", "gen"), ("erfinv", "unit"),
        ("lgamma", "pos"), ("digamma", "pos"), ("deg2rad", "gen"), ("rad2deg", "gen"),
        ("i0", "mod"), ("sinc", "nz"), ("logit", "prob"), ("sign", "nz"),
        ("ceil", "gen"), ("floor", "gen"), ("round", "gen"), ("trunc", "gen"), ("frac", "gen"),
        ("relu", "nz"), ("nan_to_num", "gen"), ("clone", "gen"), ("angle", "nz"),
        ("conj_physical", "gen")]:
    U(_op, "aten::" + _op, _pool)
U("square", "aten::pow.Tensor_Scalar", "gen")
U("positive", "aten::positive", "gen")
U("round_decimals", "aten::round.decimals", "gen", "torch.round(x, decimals=1)")
U("logit_eps", "aten::logit", "unit", "torch.logit(x, eps=0.2)")
U("nan_to_num_special", "aten::nan_to_num", expr="torch.nan_to_num(x * torch.tensor([1.0, math.inf, -math.inf]).to(x.dtype), posinf=3.0)")
U("pow_scalar", "aten::pow.Tensor_Scalar", "pos", "torch.pow(x, 2.5)")
U("pow_scalar_neg", "aten::pow.Tensor_Scalar", "pos", "x ** -1.5")
U("rpow_scalar", "aten::pow.Scalar", "mod", "torch.pow(2.0, x)")
U("float_power", "aten::float_power.Tensor_Scalar", "pos", "torch.float_power(x, 1.5)")
U("mul_scalar", "aten::mul.Tensor", "gen", "x * 2.5")
U("div_scalar", "aten::div.Tensor", "gen", "x / 3.0")
U("add_scalar", "aten::add.Tensor", "gen", "torch.add(x, 2.0, alpha=3)")
U("rsub_scalar", "aten::rsub.Scalar", "gen", "torch.rsub(x, 2.0)")
U("clamp", "aten::clamp", "gen", "torch.clamp(x, -1.0, 2.0)")
U("clamp_min", "aten::clamp_min", "gen", "torch.clamp_min(x, 0.25)")
U("clamp_max", "aten::clamp_max", "gen", "torch.clamp_max(x, 0.25)")
U("clip", "aten::clip", "gen", "torch.clip(x, max=1.0)")
U("xlogy_scalar_self", "aten::xlogy.Scalar_Self", "pos", "torch.xlogy(2.0, x)")
U("xlogy_scalar_other", "aten::xlogy.Scalar_Other", "pos", "torch.xlogy(x, 3.0)")
U("fmod_scalar", "aten::fmod.Scalar", "gen", "torch.fmod(x, 1.5)")
U("remainder_scalar", "aten::remainder.Scalar", "gen", "torch.remainder(x, 1.5)")
U("copysign_scalar", "aten::copysign.Scalar", "gen", "torch.copysign(x, -1.0)")
U("threshold", "aten::threshold", "gen", "F.threshold(x, 0.6, -2.0)")
U("polygamma", "aten::polygamma", "pos", "torch.polygamma(1, x)")
U("mvlgamma", "aten::mvlgamma", "ge1", "torch.mvlgamma(x + 1, p=2)")
U("special_entr", "aten::special_entr", "pos", "torch.special.entr(x)")
U("special_ndtri", "aten::special_ndtri", "prob", "torch.special.ndtri(x)")
U("special_log_ndtr", "aten::special_log_ndtr", "gen", "torch.special.log_ndtr(x)")
U("special_erfcx", "aten::special_erfcx", "gen", "torch.special.erfcx(x)")
U("special_i1", "aten::special_i1", "mod", "torch.special.i1(x)")
U("special_i0e", "aten::special_i0e", "mod", "torch.special.i0e(x)")
U("special_xlog1py", "aten::special_xlog1py", "pos", "torch.special.xlog1py(x, x)")

# ----- activations (torch.nn.functional) ------------------------------------------------------
for _name, _expr, _ops in [
        ("gelu", "F.gelu(x)", "aten::gelu"),
        ("gelu_tanh", "F.gelu(x, approximate='tanh')", "aten::gelu"),
        ("silu", "F.silu(x)", "aten::silu"), ("mish", "F.mish(x)", "aten::mish"),
        ("elu", "F.elu(x, alpha=0.7)", "aten::elu"), ("selu", "F.selu(x)", "aten::elu"),
        ("celu", "F.celu(x, alpha=1.5)", "aten::elu"),
        ("leaky_relu", "F.leaky_relu(x, 0.05)", "aten::leaky_relu"),
        ("hardtanh", "F.hardtanh(x, -1.0, 2.0)", "aten::hardtanh"),
        ("relu6", "F.relu6(x)", "aten::hardtanh"),
        ("hardsigmoid", "F.hardsigmoid(x)", "aten::hardsigmoid"),
        ("hardswish", "F.hardswish(x)", "aten::hardswish"),
        ("hardshrink", "F.hardshrink(x, 0.6)", "aten::hardshrink"),
        ("softshrink", "F.softshrink(x, 0.6)", "aten::softshrink"),
        ("softplus", "F.softplus(x, beta=2.0, threshold=5.0)", "aten::softplus"),
        ("logsigmoid", "F.logsigmoid(x)", "aten::log_sigmoid"),
        ("softsign", "F.softsign(x)", "aten::div.Tensor"),
        ("tanhshrink", "F.tanhshrink(x)", "aten::tanh"),
        ("glu", "F.glu(x, dim=0)", "aten::glu"),
        ("softmax", "torch.softmax(x, 1)", "aten::_softmax"),
        ("softmax_dim0", "F.softmax(x, dim=0)", "aten::_softmax"),
        ("log_softmax", "torch.log_softmax(x, 1)", "aten::_log_softmax"),
        ("softmin", "F.softmin(x, dim=1)", "aten::_softmax"),
        ("normalize", "F.normalize(x, dim=1)", "aten::linalg_vector_norm"),
        ("dropout_p0", "F.dropout(x, p=0.0)", "aten::dropout")]:
    G(_name, _expr, ["x:2,4:nz"], _ops, acc=_name.startswith(("soft", "log_soft", "norm", "glu")))
G("prelu", "F.prelu(x, w)", ["x:2,3,2:nz", "w:3:pos"], "aten::prelu", acc=True)

# ----- pointwise binary and ternary -----------------------------------------------------------
for _name, _expr, _pa, _pb, _ops in [
        ("add", "torch.add(x, w, alpha=2)", "gen", "gen", "aten::add.Tensor"),
        ("sub", "torch.sub(x, w, alpha=0.5)", "gen", "gen", "aten::sub.Tensor"),
        ("rsub", "torch.rsub(x, w)", "gen", "gen", "aten::rsub.Tensor"),
        ("mul", "x * w", "gen", "gen", "aten::mul.Tensor"),
        ("div", "x / w", "gen", "nz", "aten::div.Tensor"),
        ("div_trunc", "torch.div(x, w, rounding_mode='trunc')", "gen", "nz", "aten::div.Tensor_mode"),
        ("div_floor", "torch.div(x, w, rounding_mode='floor')", "gen", "nz", "aten::div.Tensor_mode"),
        ("pow", "torch.pow(x, w)", "pos", "mod", "aten::pow.Tensor_Tensor"),
        ("atan2", "torch.atan2(x, w)", "gen", "nz", "aten::atan2"),
        ("maximum", "torch.maximum(x, w)", "gen", "mod", "aten::maximum"),
        ("minimum", "torch.minimum(x, w)", "gen", "mod", "aten::minimum"),
        ("fmax", "torch.fmax(x, w)", "gen", "mod", "aten::fmax"),
        ("fmin", "torch.fmin(x, w)", "gen", "mod", "aten::fmin"),
        ("fmod", "torch.fmod(x, w)", "gen", "nz", "aten::fmod.Tensor"),
        ("remainder", "torch.remainder(x, w)", "gen", "nz", "aten::remainder.Tensor"),
        ("hypot", "torch.hypot(x, w)", "nz", "gen", "aten::hypot"),
        ("copysign", "torch.copysign(x, w)", "gen", "nz", "aten::copysign.Tensor"),
        ("xlogy", "torch.xlogy(x, w)", "gen", "pos", "aten::xlogy.Tensor"),
        ("logaddexp", "torch.logaddexp(x, w)", "gen", "mod", "aten::logaddexp"),
        ("logaddexp2", "torch.logaddexp2(x, w)", "gen", "mod", "aten::logaddexp2"),
        ("lerp_scalar", "torch.lerp(x, w, 0.3)", "gen", "mod", "aten::lerp.Scalar"),
        ("ldexp", "torch.ldexp(x, w)", "gen", "mod", "aten::ldexp.Tensor"),
        ("float_power_t", "torch.float_power(x, w)", "pos", "mod", "aten::float_power.Tensor_Tensor"),
        ("heaviside", "torch.heaviside(x, w)", "gen", "mod", "aten::heaviside"),
        ("nextafter", "torch.nextafter(x, w)", "gen", "mod", "aten::nextafter"),
        ("where", "torch.where(x > 0, x, w)", "gen", "mod", "aten::where.self"),
        ("clamp_tensor", "torch.clamp(x, min=w)", "gen", "mod", "aten::clamp.Tensor"),
        ("clamp_min_tensor", "torch.clamp_min(x, w)", "gen", "mod", "aten::clamp_min.Tensor"),
        ("clamp_max_tensor", "torch.clamp_max(x, w)", "gen", "mod", "aten::clamp_max.Tensor"),
        ("special_zeta", "torch.special.zeta(x + 1.5, w)", "pos", "pos", "aten::special_zeta")]:
    G(_name, _expr, ["x:2,3:%s" % _pa, "w:2,3:%s:5" % _pb], _ops)
G("add_broadcast", "x + w", ["x:2,3", "w:3:mod"], "aten::add.Tensor")
G("mul_broadcast", "x * w", ["x:2,1,3", "w:4,1:mod"], "aten::mul.Tensor")
G("div_broadcast", "x / w", ["x:3", "w:2,3:nz:3"], "aten::div.Tensor")
G("pow_broadcast", "x ** w", ["x:2,3:pos", "w:1,3:mod"], "aten::pow.Tensor_Tensor")
G("where_broadcast", "torch.where(c, x, w)", ["x:2,3", "w:3:mod"], "aten::where.self",
  pre="c = torch.tensor([[True, False, True], [False, True, True]])\n")
G("mul_0dim", "x * w", ["x:2,3", "w::pos"], "aten::mul.Tensor")
G("lerp", "torch.lerp(x, w, z)", ["x:2,3", "w:2,3:mod", "z:2,3:prob"], "aten::lerp.Tensor")
G("addcmul", "torch.addcmul(x, w, z, value=0.5)", ["x:2,3", "w:2,3:mod", "z:3:pos"], "aten::addcmul")
G("addcdiv", "torch.addcdiv(x, w, z, value=-2.0)", ["x:2,3", "w:2,3:mod", "z:3:pos"], "aten::addcdiv")
G("clamp_both_tensor", "torch.clamp(x, w, z)", ["x:2,3", "w:2,3:mod", "z:2,3:pos"], "aten::clamp.Tensor")
G("masked_fill", "x.masked_fill(m, 2.0)", ["x:2,3"], "aten::masked_fill.Scalar",
  pre="m = torch.tensor([[True, False, True], [False, False, True]])\n")
G("masked_fill_tensor", "x.masked_fill(m, v)", ["x:2,3", "v::pos"], "aten::masked_fill.Tensor",
  pre="m = torch.tensor([[True, False, True], [False, False, True]])\n")

# ----- reductions and scans -------------------------------------------------------------------
for _name, _expr, _pool, _ops, _pick in [
        ("sum", "x.sum()", "gen", "aten::sum", None),
        ("sum_dim", "x.sum(1)", "gen", "aten::sum.dim_IntList", None),
        ("sum_dims_keepdim", "x.sum((0, 2), keepdim=True)", "gen", "aten::sum.dim_IntList", None),
        ("mean", "x.mean()", "gen", "aten::mean", None),
        ("mean_dim", "x.mean(-1)", "gen", "aten::mean.dim", None),
        ("nansum", "torch.nansum(x, 1)", "gen", "aten::nansum", None),
        ("nanmean", "torch.nanmean(x, 1)", "gen", "aten::nanmean", None),
        ("prod", "x.prod()", "mod", "aten::prod", None),
        ("prod_dim", "x.prod(1)", "mod", "aten::prod.dim_int", None),
        ("prod_zero", "(x * z).prod(1)", "mod", "aten::prod.dim_int", None),
        ("amax", "x.amax(1)", "distinct", "aten::amax", None),
        ("amin", "x.amin((0, 1))", "distinct", "aten::amin", None),
        ("amax_ties", "x.amax(1)", "unit", "aten::amax", None),
        ("max", "x.max()", "distinct", "aten::max", None),
        ("min", "x.min()", "distinct", "aten::min", None),
        ("max_dim", "x.max(1)", "distinct", "aten::max.dim", "[0]"),
        ("min_dim", "x.min(0, keepdim=True)", "distinct", "aten::min.dim", "[0]"),
        ("aminmax", "torch.aminmax(x, dim=1)", "distinct", "aten::aminmax", "[1]"),
        ("std", "x.std()", "gen", "aten::std.correction", None),
        ("std_dim", "x.std(1, correction=0)", "gen", "aten::std.correction", None),
        ("var", "x.var(1)", "gen", "aten::var.correction", None),
        ("var_mean", "torch.var_mean(x, 1)", "gen", "aten::var_mean.correction", "[0]"),
        ("std_mean", "torch.std_mean(x, 0)", "gen", "aten::std_mean.correction", "[1]"),
        ("logsumexp", "torch.logsumexp(x, 1)", "gen", "aten::logsumexp", None),
        ("norm", "x.norm()", "gen", "aten::linalg_vector_norm", None),
        ("norm_p1_dim", "torch.norm(x, p=1, dim=1)", "nz", "aten::linalg_vector_norm", None),
        ("norm_p3", "torch.norm(x, p=3)", "gen", "aten::linalg_vector_norm", None),
        ("norm_inf", "torch.linalg.vector_norm(x, ord=math.inf, dim=1)", "distinct", "aten::linalg_vector_norm", None),
        ("dist", "torch.dist(x, x.flip(1) * 0.5)", "gen", "aten::dist", None),
        ("cumsum", "x.cumsum(1)", "gen", "aten::cumsum", None),
        ("cumprod", "x.cumprod(1)", "mod", "aten::cumprod", None),
        ("logcumsumexp", "x.logcumsumexp(1)", "gen", "aten::logcumsumexp", None),
        ("cummax", "x.cummax(1)", "distinct", "aten::cummax", "[0]"),
        ("cummin", "x.cummin(0)", "distinct", "aten::cummin", "[0]"),
        ("median", "x.median()", "distinct", "aten::median", None),
        ("median_dim", "x.median(1)", "distinct", "aten::median.dim", "[0]"),
        ("nanmedian", "x.nanmedian()", "distinct", "aten::nanmedian", None),
        ("kthvalue", "x.kthvalue(2, 1)", "distinct", "aten::kthvalue", "[0]"),
        ("mode", "x.mode(1)", "unit", "aten::mode", "[0]"),
        ("sort", "x.sort(1, descending=True)", "distinct", "aten::sort", "[0]"),
        ("sort_stable", "torch.sort(x, dim=0, stable=True)", "distinct", "aten::sort.stable", "[0]"),
        ("topk", "x.topk(2, 1)", "distinct", "aten::topk", "[0]"),
        ("msort", "torch.msort(x)", "distinct", "aten::msort", None),
        ("trace", "x[0].trace()", "gen", "aten::trace", None),
        ("softmax_sum", "torch.softmax(x, 2).sum(1)", "gen", "aten::_softmax", None)]:
    G(_name, _expr, ["x:2,3,4:%s" % _pool], _ops, acc=True, pick=_pick,
      pre="z = torch.tensor([[[1.0, 0.0, 1.0, 1.0]]]).to(x.dtype)\n" if "z" in _expr else "")

# ----- views and data movement ----------------------------------------------------------------
for _name, _expr, _ops in [
        ("view", "x.view(4, 6)", "aten::view"), ("reshape_t", "x.transpose(0, 2).reshape(-1)", "aten::reshape"),
        ("permute", "x.permute(2, 0, 1)", "aten::permute"),
        ("transpose", "x.transpose(0, 2)", "aten::transpose.int"),
        ("t", "x[0].t()", "aten::t"), ("adjoint", "x.mT", "aten::transpose.int"),
        ("expand", "x[:, :1].expand(2, 5, 4)", "aten::expand"),
        ("broadcast_to", "torch.broadcast_to(x[0, 0], (3, 4))", "aten::expand"),
        ("squeeze", "x[:, :1].squeeze()", "aten::squeeze"),
        ("squeeze_dim", "x[:, :1].squeeze(1)", "aten::squeeze.dim"),
        ("unsqueeze", "x.unsqueeze(1)", "aten::unsqueeze"),
        ("flatten", "x.flatten(1)", "aten::flatten.using_ints"),
        ("unflatten", "x.unflatten(2, (2, 2))", "aten::unflatten.int"),
        ("narrow", "x.narrow(2, 1, 2)", "aten::narrow"),
        ("select", "x.select(1, 2)", "aten::select.int"),
        ("slice_step", "x[:, ::2, 1:]", "aten::slice.Tensor"),
        ("index_int_none", "x[1, None, ..., 2]", "aten::select.int"),
        ("index_tensor", "x[torch.tensor([1, 0, 1])]", "aten::index.Tensor"),
        ("index_tensor_repeat", "x[:, torch.tensor([2, 2, 0]), 1:3]", "aten::index.Tensor"),
        ("index_bool", "x[x > 0]", "aten::index.Tensor"),
        ("masked_select", "torch.masked_select(x, x > 0.5)", "aten::masked_select"),
        ("take", "torch.take(x, torch.tensor([0, 5, 5, 23]))", "aten::take"),
        ("take_along_dim", "torch.take_along_dim(x, torch.tensor([[[0], [3], [1]]]), dim=2)", "aten::take_along_dim"),
        ("index_select", "x.index_select(1, torch.tensor([2, 0, 2]))", "aten::index_select"),
        ("gather", "x.gather(2, torch.tensor([[[0, 0], [3, 1], [2, 2]]]).expand(2, 3, 2))", "aten::gather"),
        ("flip", "x.flip(0, 2)", "aten::flip"), ("fliplr", "torch.fliplr(x)", "aten::flip"),
        ("roll", "x.roll(1, 2)", "aten::roll"), ("roll_flat", "x.roll(5)", "aten::roll"),
        ("rot90", "x.rot90(1, (1, 2))", "aten::rot90"),
        ("repeat", "x.repeat(2, 1, 1, 2)", "aten::repeat"), ("tile", "x.tile((2,))", "aten::repeat"),
        ("repeat_interleave", "x.repeat_interleave(2, dim=1)", "aten::repeat_interleave.self_int"),
        ("tril", "x.tril()", "aten::tril"), ("triu", "x.triu(1)", "aten::triu"),
        ("diagonal", "x.diagonal(0, 1, 2)", "aten::diagonal"),
        ("diagonal_offset", "torch.diagonal(x, -1, 2, 1)", "aten::diagonal"),
        ("diag", "torch.diag(x[0])", "aten::diag"), ("diag_vec", "torch.diag(x[0, 0])", "aten::diag"),
        ("diag_embed", "torch.diag_embed(x[0], 1)", "aten::diag_embed"),
        ("diagflat", "torch.diagflat(x[0, :2])", "aten::diagflat"),
        ("movedim", "x.movedim(0, -1)", "aten::movedim.int"),
        ("split", "x.split(3, 2)[1]", "aten::split.Tensor"),
        ("split_sizes", "x.split([1, 3], 2)[1]", "aten::split_with_sizes"),
        ("chunk", "x.chunk(2, 1)[1]", "aten::chunk"),
        ("unbind", "x.unbind(1)[2]", "aten::unbind.int"),
        ("tensor_split", "x.tensor_split(3, 2)[0]", "aten::tensor_split.sections"),
        ("unfold", "x.unfold(2, 2, 1)", "aten::unfold"),
        ("as_strided", "x.as_strided((3, 3), (4, 1), 2)", "aten::as_strided"),
        ("as_strided_overlap", "x.as_strided((3, 4), (1, 2), 1)", "aten::as_strided"),
        ("as_strided_of_expand", "x[0, 0].expand(3, 4).as_strided((2, 3), (1, 1), 1)", "aten::as_strided"),
        ("contiguous", "x.transpose(1, 2).contiguous()", "aten::contiguous"),
        ("to_float64", "x.to(torch.float64)", "aten::_to_copy"),
        ("pad_constant", "F.pad(x, (1, 2, 0, 1), value=0.5)", "aten::constant_pad_nd"),
        ("pad_reflect", "F.pad(x, (2, 1), mode='reflect')", "aten::pad"),
        ("pad_replicate", "F.pad(x, (1, 2), mode='replicate')", "aten::pad"),
        ("pad_circular", "F.pad(x, (1, 2), mode='circular')", "aten::pad"),
        ("pixel_shuffle", "F.pixel_shuffle(x.reshape(1, 4, 3, 2), 2)", "aten::pixel_shuffle"),
        ("pixel_unshuffle", "F.pixel_unshuffle(x.reshape(1, 1, 4, 6), 2)", "aten::pixel_unshuffle"),
        ("channel_shuffle", "F.channel_shuffle(x.reshape(1, 4, 3, 2), 2)", "aten::channel_shuffle"),
        ("scatter_src", "torch.zeros(2, 3, 5, dtype=x.dtype).scatter(2, torch.tensor([[[4, 0, 2, 1]]]).expand(2, 3, 4), x)", "aten::scatter.src"),
        ("scatter_self", "x.scatter(2, torch.tensor([[[1], [3], [0]]]).expand(2, 3, 1), 0.5)", "aten::scatter.value"),
        ("scatter_add", "torch.zeros(2, 3, 2, dtype=x.dtype).scatter_add(2, torch.tensor([[[1, 0, 1, 1]]]).expand(2, 3, 4), x)", "aten::scatter_add"),
        ("scatter_reduce_sum", "torch.ones(2, 3, 2, dtype=x.dtype).scatter_reduce(2, torch.tensor([[[1, 0, 1, 1]]]).expand(2, 3, 4), x, 'sum')", "aten::scatter_reduce.two"),
        ("index_add", "torch.zeros(2, 2, 4, dtype=x.dtype).index_add(1, torch.tensor([1, 0, 1]), x, alpha=2)", "aten::index_add"),
        ("index_copy", "torch.zeros(2, 4, 4, dtype=x.dtype).index_copy(1, torch.tensor([3, 0, 1]), x)", "aten::index_copy"),
        ("index_fill", "x.index_fill(2, torch.tensor([1, 3]), -1.0)", "aten::index_fill.int_Scalar"),
        ("masked_scatter", "torch.zeros(2, 3, 4, dtype=x.dtype).masked_scatter(x > 0, x * 2)", "aten::masked_scatter"),
        ("index_put", "x.index_put((torch.tensor([0, 1]), torch.tensor([2, 0])), torch.tensor(3.0, dtype=x.dtype))", "aten::index_put")]:
    G(_name, _expr, ["x:2,3,4"], _ops)
for _name, _expr, _ops in [
        ("cat", "torch.cat([x, w], 1)", "aten::cat"),
        ("cat_neg_dim", "torch.cat([w, x, w], -3)", "aten::cat"),
        ("stack", "torch.stack([x, w], 1)", "aten::stack"),
        ("hstack", "torch.hstack([x, w])", "aten::cat"),
        ("vstack", "torch.vstack([x, w])", "aten::cat"),
        ("dstack", "torch.dstack([x, w])", "aten::cat"),
        ("column_stack", "torch.column_stack([x[0], w[1]])", "aten::column_stack"),
        ("block_diag", "torch.block_diag(x[0], w[1, :2])", "aten::block_diag"),
        ("kron", "torch.kron(x[0], w[1, :2])", "aten::kron"),
        ("cross", "torch.linalg.cross(x[..., :3], w[..., 1:])", "aten::linalg_cross"),
        ("index_put_values", "torch.zeros(2, 3, 4, dtype=x.dtype).index_put((torch.tensor([1, 0]),), w[:2])", "aten::index_put"),
        ("masked_scatter_src", "x.masked_scatter(x > 0, w)", "aten::masked_scatter")]:
    G(_name, _expr, ["x:2,3,4", "w:2,3,4:mod:3"], _ops)

# ----- linear algebra -------------------------------------------------------------------------
for _name, _expr, _sa, _sb, _ops in [
        ("mm", "torch.mm(x, w)", "3,4", "4,2", "aten::mm"),
        ("bmm", "torch.bmm(x, w)", "2,3,4", "2,4,2", "aten::bmm"),
        ("matmul_2d", "x @ w", "3,4", "4,2", "aten::matmul"),
        ("matmul_3d_2d", "x @ w", "2,3,4", "4,2", "aten::matmul"),
        ("matmul_1d_3d", "x @ w", "4", "2,4,3", "aten::matmul"),
        ("matmul_3d_1d", "x @ w", "2,3,4", "4", "aten::matmul"),
        ("matmul_broadcast", "x @ w", "2,1,3,4", "3,4,2", "aten::matmul"),
        ("dot", "torch.dot(x, w)", "5", "5", "aten::dot"),
        ("vdot", "torch.vdot(x, w)", "5", "5", "aten::vdot"),
        ("mv", "torch.mv(x, w)", "3,4", "4", "aten::mv"),
        ("outer", "torch.outer(x, w)", "3", "4", "aten::outer"),
        ("inner", "torch.inner(x, w)", "2,4", "3,4", "aten::inner"),
        ("tensordot", "torch.tensordot(x, w, dims=([1, 2], [0, 1]))", "2,3,4", "3,4,2", "aten::tensordot"),
        ("einsum", "torch.einsum('bij,bjk->bik', x, w)", "2,3,4", "2,4,2", "aten::einsum"),
        ("einsum_trace", "torch.einsum('ii,j->j', x, w)", "3,3", "4", "aten::einsum"),
        ("linear_nobias", "F.linear(x, w)", "2,3,4", "5,4", "aten::linear"),
        ("cdist", "torch.cdist(x, w)", "3,4", "2,4", "aten::cdist"),
        ("cosine_similarity", "F.cosine_similarity(x, w, dim=1)", "3,4", "3,4", "aten::cosine_similarity"),
        ("pairwise_distance", "F.pairwise_distance(x, w)", "3,4", "3,4", "aten::pairwise_distance")]:
    G(_name, _expr, ["x:%s" % _sa, "w:%s:mod:3" % _sb], _ops, acc=True)
for _name, _expr, _ins, _ops in [
        ("addmm", "torch.addmm(b, x, w, beta=0.5, alpha=2.0)", ["b:2", "x:3,4", "w:4,2:mod"], "aten::addmm"),
        ("addmv", "torch.addmv(b, x, w)", ["b:3", "x:3,4", "w:4:mod"], "aten::addmv"),
        ("addr", "torch.addr(b, x, w, alpha=3.0)", ["b:3,4", "x:3", "w:4:mod"], "aten::addr"),
        ("baddbmm", "torch.baddbmm(b, x, w, beta=2.0)", ["b:1,3,2", "x:2,3,4", "w:2,4,2:mod"], "aten::baddbmm"),
        ("addbmm", "torch.addbmm(b, x, w)", ["b:3,2", "x:2,3,4", "w:2,4,2:mod"], "aten::addbmm"),
        ("linear", "F.linear(x, w, b)", ["x:2,3,4", "w:5,4:mod", "b:5:pos"], "aten::linear"),
        ("bilinear", "F.bilinear(x, z, w, b)", ["x:3,2", "z:3,4:pos", "w:5,2,4:mod", "b:5"], "aten::bilinear"),
        ("multi_dot", "torch.linalg.multi_dot([x, w, b])", ["x:2,3", "w:3,4:mod", "b:4,2:pos"], "aten::linalg_multi_dot"),
        ("chain_matmul", "torch.chain_matmul(x, w, b)", ["x:2,3", "w:3,4:mod", "b:4,2:pos"], "aten::chain_matmul"),
        ("pdist", "F.pdist(x)", ["x:4,3"], "aten::pdist"),
        ("sdpa", "F.scaled_dot_product_attention(x, w, b)", ["x:1,2,3,4", "w:1,2,5,4:mod", "b:1,2,5,4:pos"], "aten::scaled_dot_product_attention"),
        ("sdpa_causal", "F.scaled_dot_product_attention(x, w, b, is_causal=True, scale=0.3)", ["x:1,2,3,4", "w:1,2,3,4:mod", "b:1,2,3,4:pos"], "aten::scaled_dot_product_attention")]:
    G(_name, _expr, _ins, _ops, acc=True)
# square, well-conditioned matrices: A = x + 4 I
_WELL = "a = x + 4 * torch.eye(3, dtype=x.dtype)\n"
for _name, _expr, _ops in [
        ("det", "torch.linalg.det(a)", "aten::linalg_det"),
        ("slogdet", "torch.linalg.slogdet(a)[1]", "aten::linalg_slogdet"),
        ("logdet", "torch.logdet(a)", "aten::logdet"),
        ("inv", "torch.linalg.inv(a)", "aten::linalg_inv"),
        ("inverse", "torch.inverse(a)", "aten::inverse"),
        ("solve", "torch.linalg.solve(a, w)", "aten::linalg_solve"),
        ("cholesky", "torch.linalg.cholesky(a @ a.mT)", "aten::linalg_cholesky"),
        ("cholesky_solve", "torch.cholesky_solve(w, torch.linalg.cholesky(a @ a.mT))", "aten::cholesky_solve"),
        ("solve_triangular", "torch.linalg.solve_triangular(a.triu(), w, upper=True)", "aten::linalg_solve_triangular"),
        ("matrix_power", "torch.linalg.matrix_power(a, 3)", "aten::linalg_matrix_power"),
        ("matrix_power_neg", "torch.linalg.matrix_power(a, -2)", "aten::linalg_matrix_power"),
        ("matrix_norm_fro", "torch.linalg.matrix_norm(a)", "aten::linalg_matrix_norm"),
        ("matrix_norm_1", "torch.linalg.matrix_norm(a, ord=1)", "aten::linalg_matrix_norm"),
        ("pinv", "torch.linalg.pinv(a)", "aten::linalg_pinv.atol_rtol_tensor"),
        ("lstsq", "torch.linalg.lstsq(a, w).solution", "aten::linalg_lstsq"),
        ("qr", "torch.linalg.qr(a)[1]", "aten::linalg_qr"),
        ("svdvals", "torch.linalg.svdvals(a)", "aten::linalg_svdvals"),
        ("eigvalsh", "torch.linalg.eigvalsh(a + a.mT)", "aten::linalg_eigvalsh"),
        ("lu_factor", "torch.linalg.lu_factor(a)[0]", "aten::linalg_lu_factor")]:
    G(_name, _expr, ["x:3,3", "w:3,2:mod:4"], _ops, acc=True, pre=_WELL)

# ----- torch.nn.functional: layers, pooling, interpolation ------------------------------------
for _name, _expr, _ins, _ops in [
        ("layer_norm", "F.layer_norm(x, (4,), w, b, eps=1e-3)", ["x:2,3,4", "w:4:pos", "b:4:mod"], "aten::native_layer_norm"),
        ("layer_norm_2d", "F.layer_norm(x, (3, 4))", ["x:2,3,4"], "aten::native_layer_norm"),
        ("rms_norm", "F.rms_norm(x, (4,), w, eps=1e-5)", ["x:2,3,4", "w:4:pos"], "aten::rms_norm"),
        ("group_norm", "F.group_norm(x, 2, w, b)", ["x:2,4,3", "w:4:pos", "b:4:mod"], "aten::group_norm"),
        ("instance_norm", "F.instance_norm(x)", ["x:2,3,4"], "aten::instance_norm"),
        ("batch_norm_train", "F.batch_norm(x, None, None, w, b, training=True)", ["x:4,3,2", "w:3:pos", "b:3:mod"], "aten::batch_norm"),
        ("batch_norm_eval", "F.batch_norm(x, torch.tensor([0.5, -1.0, 0.25]).to(x.dtype), torch.tensor([1.5, 0.5, 2.0]).to(x.dtype), w, b)", ["x:4,3,2", "w:3:pos", "b:3:mod"], "aten::batch_norm"),
        ("local_response_norm", "F.local_response_norm(x, 2)", ["x:2,4,3"], "aten::avg_pool2d"),
        ("embedding", "F.embedding(torch.tensor([[1, 3], [1, 0]]), x)", ["x:4,3"], "aten::embedding"),
        ("embedding_padding", "F.embedding(torch.tensor([[1, 3], [2, 0]]), x, padding_idx=1)", ["x:4,3"], "aten::embedding"),
        ("embedding_bag", "F.embedding_bag(torch.tensor([1, 3, 1, 0]), x, torch.tensor([0, 2]))", ["x:4,3"], "aten::embedding_bag.padding_idx"),
        ("embedding_bag_mean", "F.embedding_bag(torch.tensor([1, 3, 1, 0, 1]), x, torch.tensor([0, 2, 4]), mode='mean', padding_idx=1, scale_grad_by_freq=True)", ["x:4,3"], "aten::embedding_bag.padding_idx"),
        ("embedding_bag_weights", "F.embedding_bag(torch.tensor([1, 3, 1, 0]), x, torch.tensor([0, 2]), per_sample_weights=w, mode='sum')", ["x:4,3", "w:4:mod"], "aten::embedding_bag.padding_idx"),
        ("conv1d", "F.conv1d(x, w, b, padding=1)", ["x:2,2,5", "w:3,2,3:mod", "b:3:pos"], "aten::conv1d"),
        ("conv1d_same", "F.conv1d(x, w, padding='same', dilation=2)", ["x:1,2,6", "w:2,2,2:mod"], "aten::conv1d"),
        ("conv2d", "F.conv2d(x, w, b, stride=2, padding=1)", ["x:1,2,4,5", "w:3,2,3,3:mod", "b:3:pos"], "aten::conv2d"),
        ("conv2d_groups", "F.conv2d(x, w, groups=2, dilation=(1, 2))", ["x:1,4,4,5", "w:2,2,2,2:mod"], "aten::conv2d"),
        ("conv_transpose1d", "F.conv_transpose1d(x, w, b, stride=2)", ["x:1,2,4", "w:2,3,3:mod", "b:3:pos"], "aten::conv_transpose1d"),
        ("conv_transpose2d", "F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1)", ["x:1,2,3,3", "w:2,1,3,3:mod"], "aten::conv_transpose2d.input"),
        ("conv3d", "F.conv3d(x, w)", ["x:1,1,3,3,3", "w:2,1,2,2,2:mod"], "aten::conv3d"),
        ("avg_pool1d", "F.avg_pool1d(x, 2)", ["x:2,2,6"], "aten::avg_pool1d"),
        ("avg_pool2d", "F.avg_pool2d(x, 2, stride=1, padding=1, count_include_pad=False)", ["x:1,2,3,4"], "aten::avg_pool2d"),
        ("avg_pool3d", "F.avg_pool3d(x, 2)", ["x:1,1,2,4,4"], "aten::avg_pool3d"),
        ("max_pool1d", "F.max_pool1d(x, 2)", ["x:2,2,6:distinct"], "aten::max_pool1d"),
        ("max_pool2d", "F.max_pool2d(x, 2, stride=1)", ["x:1,2,3,4:distinct"], "aten::max_pool2d"),
        ("max_pool3d", "F.max_pool3d(x, 2)", ["x:1,1,2,2,4:distinct"], "aten::max_pool3d"),
        ("adaptive_avg_pool1d", "F.adaptive_avg_pool1d(x, 4)", ["x:2,2,6"], "aten::adaptive_avg_pool1d"),
        ("adaptive_avg_pool2d", "F.adaptive_avg_pool2d(x, (2, 3))", ["x:1,2,3,4"], "aten::adaptive_avg_pool2d"),
        ("adaptive_max_pool1d", "F.adaptive_max_pool1d(x, 3)", ["x:2,2,6:distinct"], "aten::adaptive_max_pool1d"),
        ("adaptive_max_pool2d", "F.adaptive_max_pool2d(x, (2, 2))", ["x:1,2,3,4:distinct"], "aten::adaptive_max_pool2d"),
        ("lp_pool1d", "F.lp_pool1d(x, 2, 2)", ["x:2,2,6:pos"], "aten::avg_pool1d"),
        ("interp_nearest", "F.interpolate(x, scale_factor=2)", ["x:1,2,3"], "aten::upsample_nearest1d.vec"),
        ("interp_linear", "F.interpolate(x, size=5, mode='linear')", ["x:1,2,3"], "aten::upsample_linear1d.vec"),
        ("interp_bilinear", "F.interpolate(x, size=(3, 5), mode='bilinear', align_corners=True)", ["x:1,2,2,3"], "aten::upsample_bilinear2d.vec"),
        ("interp_bicubic", "F.interpolate(x, scale_factor=2, mode='bicubic')", ["x:1,1,2,3"], "aten::upsample_bicubic2d.vec"),
        ("interp_nearest2d", "F.interpolate(x, size=(4, 5))", ["x:1,2,2,3"], "aten::upsample_nearest2d.vec"),
        ("interp_nearest_exact", "F.interpolate(x, size=(3, 5), mode='nearest-exact')", ["x:1,2,2,3"], "aten::_upsample_nearest_exact2d.vec"),
        ("interp_trilinear", "F.interpolate(x, scale_factor=2, mode='trilinear')", ["x:1,1,2,2,2"], "aten::upsample_trilinear3d.vec"),
        ("unfold_im2col", "F.unfold(x, 2, padding=1)", ["x:1,2,3,3"], "aten::im2col"),
        ("fold_col2im", "F.fold(x, (3, 3), 2)", ["x:1,8,4"], "aten::col2im"),
        ("grid_sample", "F.grid_sample(x, w * 0.4, align_corners=False)", ["x:1,1,3,3", "w:1,2,2,2:mod"], "aten::grid_sampler_2d")]:
    G(_name, _expr, _ins, _ops, acc=True)

# ----- losses ---------------------------------------------------------------------------------
for _name, _expr, _ins, _ops in [
        ("mse_loss", "F.mse_loss(x, w)", ["x:3,4", "w:3,4:mod"], "aten::mse_loss"),
        ("mse_loss_none", "F.mse_loss(x, w, reduction='none')", ["x:3,4", "w:3,4:mod"], "aten::mse_loss"),
        ("l1_loss", "F.l1_loss(x, w)", ["x:3,4", "w:3,4:mod"], "aten::l1_loss"),
        ("smooth_l1_loss", "F.smooth_l1_loss(x, w, beta=0.5)", ["x:3,4", "w:3,4:mod"], "aten::smooth_l1_loss"),
        ("huber_loss", "F.huber_loss(x, w, delta=0.8)", ["x:3,4", "w:3,4:mod"], "aten::huber_loss"),
        ("soft_margin_loss", "F.soft_margin_loss(x, torch.tensor([1.0, -1.0, 1.0, 1.0]).to(x.dtype))", ["x:3,4"], "aten::soft_margin_loss"),
        ("bce", "F.binary_cross_entropy(x, w)", ["x:3,4:prob", "w:3,4:prob:5"], "aten::binary_cross_entropy"),
        ("bce_weight", "F.binary_cross_entropy(x, w, weight=torch.tensor([1.0, 2.0, 0.5, 1.0]).to(x.dtype), reduction='sum')", ["x:3,4:prob", "w:3,4:prob:5"], "aten::binary_cross_entropy"),
        ("bce_logits", "F.binary_cross_entropy_with_logits(x, w, pos_weight=torch.tensor([2.0, 1.0, 0.5, 3.0]).to(x.dtype))", ["x:3,4", "w:3,4:prob"], "aten::binary_cross_entropy_with_logits"),
        ("nll_loss", "F.nll_loss(x, torch.tensor([1, 0, 3]))", ["x:3,4"], "aten::nll_loss_nd"),
        ("nll_loss_weight", "F.nll_loss(x, torch.tensor([1, 0, 3]), weight=torch.tensor([1.0, 2.0, 0.5, 1.5]).to(x.dtype), ignore_index=0)", ["x:3,4"], "aten::nll_loss_nd"),
        ("nll_loss_2d", "F.nll_loss(x.reshape(1, 4, 3), torch.tensor([[1, 0, 3]]), reduction='sum')", ["x:3,4"], "aten::nll_loss_nd"),
        ("cross_entropy", "F.cross_entropy(x, torch.tensor([1, 0, 3]))", ["x:3,4"], "aten::cross_entropy_loss"),
        ("cross_entropy_smooth", "F.cross_entropy(x, torch.tensor([1, 0, 3]), label_smoothing=0.1)", ["x:3,4"], "aten::cross_entropy_loss"),
        ("cross_entropy_probs", "F.cross_entropy(x, w.softmax(1))", ["x:3,4", "w:3,4:mod"], "aten::cross_entropy_loss"),
        ("kl_div", "F.kl_div(x.log_softmax(1), w.softmax(1), reduction='batchmean')", ["x:3,4", "w:3,4:mod"], "aten::kl_div"),
        ("kl_div_log_target", "F.kl_div(x, w, reduction='sum', log_target=True)", ["x:3,4", "w:3,4:mod"], "aten::kl_div"),
        ("poisson_nll", "F.poisson_nll_loss(x, w)", ["x:3,4:mod", "w:3,4:pos"], "aten::poisson_nll_loss"),
        ("gaussian_nll", "F.gaussian_nll_loss(x, w, z)", ["x:3,4", "w:3,4:mod", "z:3,4:pos"], "aten::log"),
        ("margin_ranking", "F.margin_ranking_loss(x, w, torch.tensor([1.0, -1.0, 1.0, -1.0]).to(x.dtype), margin=0.2)", ["x:3,4", "w:3,4:mod"], "aten::margin_ranking_loss"),
        ("hinge_embedding", "F.hinge_embedding_loss(x, torch.tensor([1.0, -1.0, -1.0, 1.0]).to(x.dtype))", ["x:3,4"], "aten::hinge_embedding_loss"),
        ("multi_margin", "F.multi_margin_loss(x, torch.tensor([1, 0, 3]))", ["x:3,4"], "aten::multi_margin_loss"),
        ("multilabel_soft_margin", "F.multilabel_soft_margin_loss(x, torch.tensor([1.0, 0.0, 1.0, 0.0]).to(x.dtype))", ["x:3,4"], "aten::log_sigmoid"),
        ("cosine_embedding", "F.cosine_embedding_loss(x, w, torch.tensor([1.0, -1.0, 1.0]).to(x.dtype))", ["x:3,4", "w:3,4:mod"], "aten::cosine_embedding_loss"),
        ("triplet_margin", "F.triplet_margin_loss(x, w, z)", ["x:3,4", "w:3,4:mod", "z:3,4:pos"], "aten::triplet_margin_loss")]:
    G(_name, _expr, _ins, _ops, acc=True)

# ----- compositions: the gradient flows through several nodes, one leaf used twice -------------
G("chain_shared_leaf", "(x.sin() * x).sum(1) + x.t().mm(x).trace()", ["x:3,3"], "aten::mm", acc=True)
G("chain_views", "x.t()[1:].reshape(-1).exp().cumsum(0)", ["x:3,4"], "aten::cumsum", acc=True)
G("mlp", "torch.tanh(F.linear(x, w, b)).pow(2).mean()", ["x:4,3", "w:5,3:mod", "b:5:pos"], "aten::linear", acc=True)
# in-place operators on non-leaf tensors (the recorded graph is rewritten in place)
G("inplace_mul", "(x * 1).mul_(w)", ["x:2,3", "w:2,3:mod"], "aten::mul_.Tensor")
G("inplace_exp", "(x + 0).exp_()", ["x:2,3:mod"], "aten::exp_")
G("inplace_view_write", "(lambda t: (t[0].mul_(2), t)[1])(x * 1)", ["x:2,3"], "aten::mul_.Tensor")


def gen():
    cs = []
    for name, expr, ins, ops, acc, pre, pick in SPECS:
        for dt in DTS:
            src, leaves = "", []
            for spec in ins:
                var, line = leaf(spec, dt)
                src += line
                leaves.append(var)
            src += pre
            src += "y = %s%s\n" % (expr, pick or "")
            src += TAIL % ", ".join("%s.grad" % v for v in leaves)
            cs.append(case("grad/%s/%s" % (name, dt), src, ops, FAM, ref64=True, acc=acc))
    return cs


CASES = gen()
