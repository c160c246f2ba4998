"""torch.nn.functional: linear, embedding, norms (layer/rms/group/batch/instance), softmax
family, activations (each approximation and in-place form), scaled_dot_product_attention
(bool/float masks, causal, GQA via enable_gqa, scale), convolutions, pooling, padding,
interpolation, losses, dropout in training mode after manual_seed, and shape helpers."""
from ._lib import FLOATS, case, T, values

FAM = "nn"
FDTS = ("float32", "float64", "float16", "bfloat16")


def ar(var, shape, dt, k=7, m=13, c=6, s=0.25, mark=True):
    """Deterministic input without the RNG: ((arange(n) * k) % m - c) * s, exact in every
    float dtype for these small constants."""
    n = 1
    for d in shape:
        n *= d
    src = "((torch.arange(%d) * %d %% %d - %d) * %r).to(torch.%s).reshape(%r)" % (n, k, m, c, s, dt, tuple(shape))
    if mark:
        src = "inp(%s)" % src
    return "%s = %s\n" % (var, src)


def gen():
    cs = []
    for dt in FDTS:
        cs += per_dtype(dt)
    cs += int_cases()
    return cs


def per_dtype(dt):
    cs = []

    def add(name, src, ops, acc=True, ref=True, exact=False):
        cs.append(case("nn/%s/%s" % (name, dt), src, ops, FAM, ref64=ref and not exact, acc=acc and not exact,
                       exact=exact))

    x2 = ar("x", (3, 4), dt)
    x3 = ar("x", (2, 3, 4), dt, 5, 11, 5, 0.5)
    w = ar("w", (5, 4), dt, 3, 7, 3, 0.5) + ar("b", (5,), dt, 2, 5, 2, 0.5)
    # linear
    add("linear/bias", x2 + w + "out = F.linear(x, w, b)\n", ["aten::linear"])
    add("linear/nobias", x3 + w + "out = F.linear(x, w)\n", ["aten::linear"])
    add("linear/1d", x2 + w + "out = F.linear(x[0], w, b)\n", ["aten::linear"])
    add("linear/transposed-w", x2 + ar("w", (4, 5), dt, 3, 7, 3, 0.5) + "out = F.linear(x, w.t())\n", ["aten::linear"])
    add("bilinear", x2 + ar("w", (2, 4, 4), dt, 3, 7, 3, 0.25) + "out = F.bilinear(x, x, w)\n", ["aten::bilinear"])
    # embedding
    e = ar("wt", (6, 3), dt, 5, 11, 5, 0.5) + "idx = torch.tensor([[0, 5, 2], [2, 2, 1]])\n"
    add("embedding", e + "out = F.embedding(idx, wt)\n", ["aten::embedding"], exact=True)
    add("embedding/padding_idx", e + "out = F.embedding(idx, wt, padding_idx=2)\n", ["aten::embedding"], exact=True)
    add("embedding/oob", e + "out = F.embedding(torch.tensor([6]), wt)\n", ["aten::embedding"], exact=True)
    add("embedding_bag/mean", e + "out = F.embedding_bag(idx, wt, mode='mean')\n", ["aten::embedding_bag.padding_idx"])
    # norms
    g = ar("g", (4,), dt, 3, 5, 1, 0.5) + ar("bb", (4,), dt, 2, 3, 1, 0.25)
    add("layer_norm/affine", x3 + g + "out = F.layer_norm(x, (4,), g, bb)\n", ["aten::layer_norm"])
    add("layer_norm/plain", x3 + "out = F.layer_norm(x, (4,))\n", ["aten::layer_norm"])
    add("layer_norm/2dims", x3 + "out = F.layer_norm(x, (3, 4), eps=1e-3)\n", ["aten::layer_norm"])
    add("layer_norm/const-row", "x = inp(torch.ones(2, 4, dtype=torch.%s))\nout = F.layer_norm(x, (4,))\n" % dt,
        ["aten::layer_norm"])
    add("native_layer_norm", x3 + g + "out = torch.native_layer_norm(x, [4], g, bb, 1e-5)\n", ["aten::native_layer_norm"])
    add("rms_norm/weight", x3 + g + "out = F.rms_norm(x, (4,), g)\n", ["aten::rms_norm"])
    add("rms_norm/plain", x3 + "out = F.rms_norm(x, (4,))\n", ["aten::rms_norm"])
    add("rms_norm/eps", x3 + g + "out = F.rms_norm(x, (4,), g, eps=1e-2)\n", ["aten::rms_norm"])
    add("rms_norm/2dims", x3 + "out = F.rms_norm(x, (3, 4))\n", ["aten::rms_norm"])
    x4 = ar("x", (2, 4, 3, 2), dt, 5, 17, 8, 0.25)
    gc = ar("gc", (4,), dt, 3, 5, 1, 0.5) + ar("bc", (4,), dt, 2, 3, 1, 0.25)
    add("group_norm/2groups", x4 + gc + "out = F.group_norm(x, 2, gc, bc)\n", ["aten::group_norm"])
    add("group_norm/plain", x4 + "out = F.group_norm(x, 4)\n", ["aten::group_norm"])
    add("group_norm/1group", x4 + "out = F.group_norm(x, 1, eps=1e-3)\n", ["aten::group_norm"])
    rm = ar("rm", (4,), dt, 1, 3, 1, 0.5) + ar("rv", (4,), dt, 1, 3, -1, 0.5)
    add("batch_norm/eval", x4 + gc + rm + "out = F.batch_norm(x, rm, rv, gc, bc, training=False)\n", ["aten::batch_norm"])
    add("batch_norm/train", x4 + gc + rm + "y = F.batch_norm(x, rm, rv, gc, bc, training=True, momentum=0.2)\nout = (y, rm, rv)\n",
        ["aten::batch_norm"])
    add("batch_norm/train-nostats", x4 + "out = F.batch_norm(x, None, None, training=True)\n", ["aten::batch_norm"])
    add("instance_norm", x4 + "out = F.instance_norm(x)\n", ["aten::instance_norm"])
    add("local_response_norm", x4 + "out = F.local_response_norm(x, 2)\n", ["aten::avg_pool3d"])
    add("normalize", x3 + "out = F.normalize(x, dim=-1)\n", ["aten::linalg_vector_norm", "aten::clamp_min", "aten::div.Tensor"])
    add("normalize/p1-dim0", x3 + "out = F.normalize(x, p=1, dim=0)\n", ["aten::linalg_vector_norm"])
    add("cosine_similarity", x3 + "out = F.cosine_similarity(x, x.flip(-1), dim=-1)\n", ["aten::cosine_similarity"])
    add("pairwise_distance", x2 + "out = F.pairwise_distance(x, x.flip(0))\n", ["aten::pairwise_distance"])
    # softmax family
    for name, call, ops in (
            ("softmax/last", "F.softmax(x, dim=-1)", ["aten::softmax.int"]),
            ("softmax/dim0", "F.softmax(x, dim=0)", ["aten::softmax.int"]),
            ("softmax/dtype64", "F.softmax(x, dim=1, dtype=fdt(torch.float64))", ["aten::softmax.int"]),
            ("softmax/method", "x.softmax(1)", ["aten::softmax.int"]),
            ("softmax/torch", "torch.softmax(x, 2)", ["aten::softmax.int"]),
            ("log_softmax/last", "F.log_softmax(x, dim=-1)", ["aten::log_softmax.int"]),
            ("log_softmax/dim1", "F.log_softmax(x, 1)", ["aten::log_softmax.int"]),
            ("log_softmax/dtype32", "F.log_softmax(x, 1, dtype=fdt(torch.float32))", ["aten::log_softmax.int"]),
            ("softmin", "F.softmin(x, dim=-1)", ["aten::softmax.int"]),
            ("_softmax", "torch._softmax(x, -1, False)", ["aten::_softmax"]),
            ("_log_softmax", "torch._log_softmax(x, 0, False)", ["aten::_log_softmax"]),
            ("softmax/out", "torch.softmax(x, -1, out=torch.empty(0, dtype=x.dtype))", ["aten::softmax.int_out"]),
    ):
        add(name, x3 + "out = %s\n" % call, ops)
    add("softmax/masked-rows", "x = inp(torch.tensor([[0.0, -math.inf, 1.0], [-math.inf, -math.inf, -math.inf]], dtype=torch.%s))\n"
        "out = (F.softmax(x, -1), F.log_softmax(x, -1))\n" % dt, ["aten::softmax.int", "aten::log_softmax.int"])
    add("softmax/big", "x = inp(torch.tensor([[1000.0, 1001.0, 999.0]], dtype=torch.%s))\nout = F.softmax(x, -1)\n" % dt,
        ["aten::softmax.int"])
    xl = "x = inp(((torch.arange(3000) * 37 % 101 - 30) * 0.0173).to(torch.{dt}).reshape(3, 1000))\n".format(dt=dt)
    add("softmax/long-row", xl + "out = F.softmax(x, -1)\n", ["aten::softmax.int"])
    add("log_softmax/long-row", xl + "out = F.log_softmax(x, -1)\n", ["aten::log_softmax.int"])
    add("layer_norm/long-row", xl + "out = F.layer_norm(x, (1000,))\n", ["aten::layer_norm"])
    add("rms_norm/long-row", xl + "out = F.rms_norm(x, (1000,))\n", ["aten::rms_norm"])
    add("linear/long-k", xl + "out = F.linear(x, x[:2] * 0.5)\n", ["aten::linear"])
    add("logsumexp-inf", "x = inp(torch.tensor([[-math.inf, -math.inf], [math.inf, 1.0]], dtype=torch.%s))\nout = torch.logsumexp(x, 1)\n" % dt,
        ["aten::logsumexp"])
    # activations
    xa = "x = inp(%s)\n" % T(values(dt, 12, "gen") + [], (3, 4), dt)
    for name, call, ops in (
            ("gelu/none", "F.gelu(x)", ["aten::gelu"]),
            ("gelu/tanh", "F.gelu(x, approximate='tanh')", ["aten::gelu"]),
            ("silu", "F.silu(x)", ["aten::silu"]),
            ("silu/inplace", "(F.silu(x, inplace=True), x)", ["aten::silu_"]),
            ("relu", "F.relu(x)", ["aten::relu"]),
            ("relu/inplace", "(F.relu(x, inplace=True), x)", ["aten::relu_"]),
            ("relu6", "F.relu6(x)", ["aten::hardtanh"]),
            ("leaky_relu", "F.leaky_relu(x)", ["aten::leaky_relu"]),
            ("leaky_relu/slope", "F.leaky_relu(x, 0.2)", ["aten::leaky_relu"]),
            ("leaky_relu/inplace", "(F.leaky_relu(x, 0.1, inplace=True), x)", ["aten::leaky_relu_"]),
            ("elu", "F.elu(x)", ["aten::elu"]),
            ("elu/alpha", "F.elu(x, alpha=0.5)", ["aten::elu"]),
            ("elu/inplace", "(F.elu(x, inplace=True), x)", ["aten::elu_"]),
            ("selu", "F.selu(x)", ["aten::selu"]),
            ("celu", "F.celu(x, alpha=2.0)", ["aten::celu"]),
            ("softplus", "F.softplus(x)", ["aten::softplus"]),
            ("softplus/beta-threshold", "F.softplus(x, beta=2, threshold=3)", ["aten::softplus"]),
            ("mish", "F.mish(x)", ["aten::mish"]),
            ("hardtanh", "F.hardtanh(x)", ["aten::hardtanh"]),
            ("hardtanh/range", "F.hardtanh(x, -2.0, 3.0)", ["aten::hardtanh"]),
            ("hardtanh/inplace", "(F.hardtanh(x, inplace=True), x)", ["aten::hardtanh_"]),
            ("hardsigmoid", "F.hardsigmoid(x)", ["aten::hardsigmoid"]),
            ("hardswish", "F.hardswish(x)", ["aten::hardswish"]),
            ("logsigmoid", "F.logsigmoid(x)", ["aten::log_sigmoid"]),
            ("tanhshrink", "F.tanhshrink(x)", ["aten::tanh", "aten::sub.Tensor"]),
            ("softsign", "F.softsign(x)", ["aten::abs", "aten::div.Tensor"]),
            ("softshrink", "F.softshrink(x, 0.6)", ["aten::softshrink"]),
            ("hardshrink", "F.hardshrink(x, 0.6)", ["aten::hardshrink"]),
            ("threshold", "F.threshold(x, 0.6, -9.0)", ["aten::threshold"]),
            ("threshold/inplace", "(F.threshold(x, 0.6, -9.0, inplace=True), x)", ["aten::threshold_"]),
            ("glu", "F.glu(x)", ["aten::glu"]),
            ("glu/dim0", "F.glu(x[:2], 0)", ["aten::glu"]),
            ("prelu", "F.prelu(x, inp(torch.tensor([0.25], dtype=x.dtype)))", ["aten::prelu"]),
            ("rrelu/eval", "F.rrelu(x, training=False)", ["aten::rrelu"]),
            ("sigmoid", "F.sigmoid(x)", ["aten::sigmoid"]),
            ("tanh", "F.tanh(x)", ["aten::tanh"]),
            ("silu-torch", "torch.nn.SiLU()(x)", ["aten::silu"]),
            ("gelu-module-tanh", "torch.nn.GELU('tanh')(x)", ["aten::gelu"]),
    ):
        add("act/" + name, xa + "out = %s\n" % call, ops, acc=False)
    # scaled_dot_product_attention
    q = ar("q", (1, 2, 3, 4), dt, 5, 11, 5, 0.25)
    k = ar("k", (1, 2, 5, 4), dt, 3, 7, 3, 0.5)
    v = ar("v", (1, 2, 5, 4), dt, 7, 13, 6, 0.25)
    qkv = q + k + v
    bm = "m = torch.tensor([[True, True, False, True, False], [True, False, True, True, True], [False, True, True, True, True]])\n"
    fm = "fm = inp(torch.tensor([[0.0, -1.0, -math.inf, 0.5, 0.0], [0.0, 0.0, 0.0, -2.0, 0.25], [-math.inf, 0.0, 1.0, 0.0, 0.0]], dtype=torch.%s))\n" % dt
    sd = ["aten::scaled_dot_product_attention"]
    add("sdpa/plain", qkv + "out = F.scaled_dot_product_attention(q, k, v)\n", sd)
    add("sdpa/bool-mask", qkv + bm + "out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)\n", sd)
    add("sdpa/float-mask", qkv + fm + "out = F.scaled_dot_product_attention(q, k, v, attn_mask=fm)\n", sd)
    add("sdpa/causal", qkv + "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n", sd)
    add("sdpa/causal-square", q + ar("k", (1, 2, 3, 4), dt, 3, 7, 3, 0.5) + ar("v", (1, 2, 3, 4), dt, 7, 13, 6, 0.25)
        + "out = F.scaled_dot_product_attention(q, k, v, is_causal=True)\n", sd)
    add("sdpa/scale", qkv + "out = F.scaled_dot_product_attention(q, k, v, scale=0.3)\n", sd)
    add("sdpa/gqa", ar("q", (1, 4, 3, 4), dt, 5, 11, 5, 0.25) + k + v
        + "out = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)\n", sd)
    add("sdpa/gqa-causal-mask", ar("q", (2, 4, 3, 4), dt, 5, 11, 5, 0.25) + ar("k", (2, 1, 3, 4), dt, 3, 7, 3, 0.5)
        + ar("v", (2, 1, 3, 4), dt, 7, 13, 6, 0.25) + "out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)\n", sd)
    add("sdpa/gqa-without-flag", ar("q", (1, 4, 3, 4), dt, 5, 11, 5, 0.25) + k + v
        + "out = F.scaled_dot_product_attention(q, k, v)\n", sd)
    add("sdpa/3d", ar("q", (2, 3, 4), dt, 5, 11, 5, 0.25) + ar("k", (2, 5, 4), dt, 3, 7, 3, 0.5)
        + ar("v", (2, 5, 2), dt, 7, 13, 6, 0.25) + "out = F.scaled_dot_product_attention(q, k, v)\n", sd)
    add("sdpa/fully-masked-row", qkv + "m = torch.zeros(3, 5, dtype=torch.bool)\nm[0] = True\n"
        "out = F.scaled_dot_product_attention(q, k, v, attn_mask=m)\n", sd)
    add("sdpa/mask-and-causal-err", qkv + bm + "out = F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=True)\n", sd)
    add("sdpa/transposed-q", ar("q", (1, 3, 2, 4), dt, 5, 11, 5, 0.25) + k + v
        + "out = F.scaled_dot_product_attention(q.transpose(1, 2), k, v)\n", sd)
    # convolutions
    xc = ar("x", (1, 2, 5, 5), dt, 5, 17, 8, 0.25)
    wc = ar("wc", (4, 2, 3, 3), dt, 3, 7, 3, 0.25) + ar("bc", (4,), dt, 1, 3, 1, 0.5)
    for name, call in (
            ("conv2d/plain", "F.conv2d(x, wc)"),
            ("conv2d/bias-pad", "F.conv2d(x, wc, bc, padding=1)"),
            ("conv2d/stride", "F.conv2d(x, wc, bc, stride=2)"),
            ("conv2d/dilation", "F.conv2d(x, wc, dilation=2, padding=2)"),
            ("conv2d/same", "F.conv2d(x, wc, padding='same')"),
            ("conv2d/valid", "F.conv2d(x, wc, padding='valid')"),
            ("conv2d/groups", "F.conv2d(x, wc[:, :1], groups=2)"),
            ("conv2d/asym", "F.conv2d(x, wc[:, :, :2], stride=(1, 2), padding=(0, 1))"),
            ("conv2d/unbatched", "F.conv2d(x[0], wc)"),
            ("conv2d/channels_last", "F.conv2d(x.contiguous(memory_format=torch.channels_last), wc)"),
            ("conv_transpose2d", "F.conv_transpose2d(x, wc.transpose(0, 1), bc, stride=2)"),
            ("conv_transpose2d/pad-outpad", "F.conv_transpose2d(x, wc.transpose(0, 1), stride=2, padding=1, output_padding=1)"),
    ):
        op = name.split("/")[0]
        add(name, xc + wc + "out = %s\n" % call, ["aten::" + op + (".input" if op == "conv_transpose2d" else "")])
    x1 = ar("x", (2, 2, 7), dt, 5, 17, 8, 0.25)
    w1 = ar("w1", (3, 2, 3), dt, 3, 7, 3, 0.25) + ar("b1", (3,), dt, 1, 3, 1, 0.5)
    for name, call in (
            ("conv1d/plain", "F.conv1d(x, w1)"),
            ("conv1d/bias-pad-stride", "F.conv1d(x, w1, b1, stride=2, padding=1)"),
            ("conv1d/dilation", "F.conv1d(x, w1, dilation=3)"),
            ("conv1d/groups", "F.conv1d(x, w1[:2, :1], groups=2)"),
            ("conv1d/same", "F.conv1d(x, w1, padding='same')"),
            ("conv1d/causal-pad", "F.conv1d(F.pad(x, (2, 0)), w1)"),
            ("conv_transpose1d", "F.conv_transpose1d(x, w1.transpose(0, 1), b1)"),
            ("conv1d/depthwise", "F.conv1d(x, inp(torch.ones(2, 1, 4, dtype=x.dtype)), groups=2, padding=3)[..., :7]"),
    ):
        add(name, x1 + w1 + "out = %s\n" % call, ["aten::" + name.split("/")[0]])
    # pooling (exact: max; avg: accumulation)
    xp = ar("x", (1, 2, 5, 6), dt, 5, 17, 8, 0.25)
    for name, call, ops, ex in (
            ("max_pool2d/plain", "F.max_pool2d(x, 2)", ["aten::max_pool2d"], True),
            ("max_pool2d/stride-pad", "F.max_pool2d(x, 3, stride=2, padding=1)", ["aten::max_pool2d"], True),
            ("max_pool2d/ceil", "F.max_pool2d(x, 2, ceil_mode=True)", ["aten::max_pool2d"], True),
            ("max_pool2d/dilation", "F.max_pool2d(x, 2, dilation=2)", ["aten::max_pool2d"], True),
            ("max_pool2d/indices", "F.max_pool2d(x, 2, return_indices=True)", ["aten::max_pool2d_with_indices"], True),
            ("max_pool1d", "F.max_pool1d(x[0], 3, stride=2)", ["aten::max_pool1d"], True),
            ("max_pool1d/indices", "F.max_pool1d(x[0], 2, return_indices=True)", ["aten::max_pool1d_with_indices"], True),
            ("avg_pool2d/plain", "F.avg_pool2d(x, 2)", ["aten::avg_pool2d"], False),
            ("avg_pool2d/pad-count", "F.avg_pool2d(x, 3, stride=2, padding=1)", ["aten::avg_pool2d"], False),
            ("avg_pool2d/pad-nocount", "F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False)", ["aten::avg_pool2d"], False),
            ("avg_pool2d/ceil", "F.avg_pool2d(x, 2, ceil_mode=True)", ["aten::avg_pool2d"], False),
            ("avg_pool2d/divisor", "F.avg_pool2d(x, 2, divisor_override=3)", ["aten::avg_pool2d"], False),
            ("avg_pool1d", "F.avg_pool1d(x[0], 3, stride=2, padding=1)", ["aten::avg_pool1d"], False),
            ("adaptive_avg_pool2d", "F.adaptive_avg_pool2d(x, (2, 4))", ["aten::adaptive_avg_pool2d"], False),
            ("adaptive_avg_pool2d/1", "F.adaptive_avg_pool2d(x, 1)", ["aten::adaptive_avg_pool2d"], False),
            ("adaptive_avg_pool1d", "F.adaptive_avg_pool1d(x[0], 4)", ["aten::adaptive_avg_pool1d"], False),
            ("adaptive_max_pool2d", "F.adaptive_max_pool2d(x, (3, 4), return_indices=True)", ["aten::adaptive_max_pool2d"], True),
            ("adaptive_max_pool1d", "F.adaptive_max_pool1d(x[0], 4)", ["aten::adaptive_max_pool1d"], True),
            ("lp_pool2d", "F.lp_pool2d(x, 2, 2)", ["aten::avg_pool2d"], False),
            ("pad/constant", "F.pad(x, (1, 2, 0, 1), value=-1.5)", ["aten::pad"], True),
            ("pad/reflect", "F.pad(x, (2, 1, 1, 2), mode='reflect')", ["aten::pad"], True),
            ("pad/replicate", "F.pad(x, (2, 1, 1, 2), mode='replicate')", ["aten::pad"], True),
            ("pad/circular", "F.pad(x, (2, 1, 1, 2), mode='circular')", ["aten::pad"], True),
            ("pad/negative", "F.pad(x, (-1, -2))", ["aten::pad"], True),
            ("pad/1d-reflect", "F.pad(x[0], (2, 2), mode='reflect')", ["aten::pad"], True),
            ("constant_pad_nd", "torch.constant_pad_nd(x, (1, 1))", ["aten::constant_pad_nd"], True),
            ("interpolate/nearest", "F.interpolate(x, scale_factor=2, mode='nearest')", ["aten::upsample_nearest2d.vec"], True),
            ("interpolate/nearest-size", "F.interpolate(x, size=(3, 4), mode='nearest')", ["aten::upsample_nearest2d.vec"], True),
            ("interpolate/nearest-exact", "F.interpolate(x, size=(3, 4), mode='nearest-exact')", ["aten::_upsample_nearest_exact2d.vec"], True),
            ("interpolate/bilinear", "F.interpolate(x, size=(7, 9), mode='bilinear')", ["aten::upsample_bilinear2d.vec"], False),
            ("interpolate/bilinear-ac", "F.interpolate(x, size=(7, 9), mode='bilinear', align_corners=True)", ["aten::upsample_bilinear2d.vec"], False),
            ("interpolate/bilinear-down", "F.interpolate(x, scale_factor=0.5, mode='bilinear')", ["aten::upsample_bilinear2d.vec"], False),
            ("interpolate/bilinear-aa", "F.interpolate(x, size=(2, 3), mode='bilinear', antialias=True)", ["aten::_upsample_bilinear2d_aa.vec"], False),
            ("interpolate/bilinear-aa-up", "F.interpolate(x, size=(7, 9), mode='bilinear', antialias=True)", ["aten::_upsample_bilinear2d_aa.vec"], False),
            ("interpolate/bilinear-aa-ac", "F.interpolate(x, size=(2, 5), mode='bilinear', antialias=True, align_corners=True)", ["aten::_upsample_bilinear2d_aa.vec"], False),
            ("interpolate/bilinear-aa-scale", "F.interpolate(x, scale_factor=0.4, mode='bilinear', antialias=True)", ["aten::_upsample_bilinear2d_aa.vec"], False),
            ("interpolate/bicubic-aa", "F.interpolate(x, size=(2, 3), mode='bicubic', antialias=True)", ["aten::_upsample_bicubic2d_aa.vec"], False),
            ("interpolate/bicubic-aa-up", "F.interpolate(x, size=(7, 4), mode='bicubic', antialias=True)", ["aten::_upsample_bicubic2d_aa.vec"], False),
            ("interpolate/trilinear", "F.interpolate(x.unsqueeze(2).expand(-1, -1, 2, -1, -1), size=(3, 4, 5), mode='trilinear')", ["aten::upsample_trilinear3d.vec"], False),
            ("interpolate/nearest3d", "F.interpolate(x.unsqueeze(2).expand(-1, -1, 2, -1, -1), size=(3, 4, 5), mode='nearest')", ["aten::upsample_nearest3d.vec"], False),
            ("interpolate/bicubic", "F.interpolate(x, size=(7, 9), mode='bicubic')", ["aten::upsample_bicubic2d.vec"], False),
            ("interpolate/area", "F.interpolate(x, size=(2, 3), mode='area')", ["aten::adaptive_avg_pool2d"], False),
            ("interpolate/linear", "F.interpolate(x[0], size=9, mode='linear')", ["aten::upsample_linear1d.vec"], False),
            ("interpolate/nearest1d", "F.interpolate(x[0], scale_factor=1.5)", ["aten::upsample_nearest1d.vec"], True),
            ("pixel_shuffle", "F.pixel_shuffle(x.reshape(1, 4, 3, 5), 2)", ["aten::pixel_shuffle"], True),
            ("pixel_unshuffle", "F.pixel_unshuffle(x[:, :, :4], 2)", ["aten::pixel_unshuffle"], True),
            ("unfold-im2col", "F.unfold(x, 2, stride=(1, 2))", ["aten::im2col"], True),
            ("fold-col2im", "F.fold(F.unfold(x, 2), (5, 6), 2)", ["aten::col2im"], False),
            ("channel_shuffle", "F.channel_shuffle(x.reshape(1, 4, 3, 5), 2)", ["aten::channel_shuffle"], True),
            ("flatten-module", "torch.nn.Flatten()(x)", ["aten::flatten.using_ints"], True),
    ):
        add(name, xp + "out = %s\n" % call, ops, exact=ex)
    # losses
    lg = ar("lg", (4, 3), dt, 5, 11, 5, 0.5)
    tg = "tg = torch.tensor([2, 0, 1, 2])\n"
    pr = "pr = inp(torch.tensor([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0], [0.25, 0.25, 0.5], [0.6, 0.3, 0.1]], dtype=torch.%s))\n" % dt
    yt = ar("yt", (4, 3), dt, 3, 7, 3, 0.5)
    p01 = "p = inp(torch.tensor([[0.1, 0.9, 0.5], [0.3, 0.7, 0.2], [0.99, 0.01, 0.6], [0.4, 0.5, 0.8]], dtype=torch.%s))\n" % dt
    t01 = "t = inp(torch.tensor([[0.0, 1.0, 1.0], [0.0, 0.5, 0.0], [1.0, 0.0, 1.0], [0.25, 1.0, 0.0]], dtype=torch.%s))\n" % dt
    for name, src, call, ops in (
            ("cross_entropy/mean", lg + tg, "F.cross_entropy(lg, tg)", ["aten::cross_entropy_loss"]),
            ("cross_entropy/sum", lg + tg, "F.cross_entropy(lg, tg, reduction='sum')", ["aten::cross_entropy_loss"]),
            ("cross_entropy/none", lg + tg, "F.cross_entropy(lg, tg, reduction='none')", ["aten::cross_entropy_loss"]),
            ("cross_entropy/ignore", lg + tg, "F.cross_entropy(lg, tg, ignore_index=2)", ["aten::cross_entropy_loss"]),
            ("cross_entropy/smoothing", lg + tg, "F.cross_entropy(lg, tg, label_smoothing=0.1)", ["aten::cross_entropy_loss"]),
            ("cross_entropy/weight", lg + tg, "F.cross_entropy(lg, tg, weight=inp(torch.tensor([1.0, 2.0, 0.5], dtype=lg.dtype)))", ["aten::cross_entropy_loss"]),
            ("cross_entropy/probs", lg + pr, "F.cross_entropy(lg, pr)", ["aten::cross_entropy_loss"]),
            ("cross_entropy/all-ignored", lg, "F.cross_entropy(lg, torch.full((4,), -100))", ["aten::cross_entropy_loss"]),
            ("nll_loss", lg + tg, "F.nll_loss(F.log_softmax(lg, 1), tg)", ["aten::nll_loss_nd"]),
            ("nll_loss/none", lg + tg, "F.nll_loss(lg, tg, reduction='none')", ["aten::nll_loss_nd"]),
            ("mse_loss", lg + yt, "F.mse_loss(lg, yt)", ["aten::mse_loss"]),
            ("mse_loss/sum", lg + yt, "F.mse_loss(lg, yt, reduction='sum')", ["aten::mse_loss"]),
            ("l1_loss", lg + yt, "F.l1_loss(lg, yt)", ["aten::l1_loss"]),
            ("smooth_l1_loss", lg + yt, "F.smooth_l1_loss(lg, yt, beta=0.5)", ["aten::smooth_l1_loss"]),
            ("huber_loss", lg + yt, "F.huber_loss(lg, yt, delta=0.75, reduction='none')", ["aten::huber_loss"]),
            ("binary_cross_entropy", p01 + t01, "F.binary_cross_entropy(p, t)", ["aten::binary_cross_entropy"]),
            ("bce_with_logits", lg + t01, "F.binary_cross_entropy_with_logits(lg, t)", ["aten::binary_cross_entropy_with_logits"]),
            ("bce_with_logits/pos_weight", lg + t01, "F.binary_cross_entropy_with_logits(lg, t, pos_weight=inp(torch.tensor([1.0, 2.0, 3.0], dtype=lg.dtype)))",
             ["aten::binary_cross_entropy_with_logits"]),
            ("kl_div", lg + pr, "F.kl_div(F.log_softmax(lg, 1), pr, reduction='batchmean')", ["aten::kl_div"]),
            ("kl_div/log_target", lg + yt, "F.kl_div(lg, yt, reduction='sum', log_target=True)", ["aten::kl_div"]),
            ("soft_margin_loss", lg + yt, "F.soft_margin_loss(lg, yt.sign())", ["aten::soft_margin_loss"]),
            ("margin_ranking_loss", lg + yt, "F.margin_ranking_loss(lg[:, 0], lg[:, 1], yt[:, 0].sign(), margin=0.1)", ["aten::margin_ranking_loss"]),
            ("poisson_nll_loss", lg + p01, "F.poisson_nll_loss(lg, p)", ["aten::poisson_nll_loss"]),
            ("gaussian_nll_loss", lg + yt + p01, "F.gaussian_nll_loss(lg, yt, p)", []),
            ("hinge_embedding_loss", lg + yt, "F.hinge_embedding_loss(lg, yt.sign())", ["aten::hinge_embedding_loss"]),
            ("cosine_embedding_loss", lg + yt, "F.cosine_embedding_loss(lg, yt, torch.tensor([1, -1, 1, -1]))", ["aten::cosine_embedding_loss"]),
            ("triplet_margin_loss", lg + yt, "F.triplet_margin_loss(lg, yt, lg.flip(0))", ["aten::triplet_margin_loss"]),
            ("multi_margin_loss", lg + tg, "F.multi_margin_loss(lg, tg)", ["aten::multi_margin_loss"]),
    ):
        add("loss/" + name, src + "out = %s\n" % call, ops)
    # dropout in training mode, after seeding (the mask comes from upstream's CPU generator)
    xd = ar("x", (4, 8), dt, 5, 11, 5, 0.5)
    for name, call, ops in (
            ("dropout/p0.5", "F.dropout(x, 0.5, training=True)", ["aten::dropout"]),
            ("dropout/p0.2", "F.dropout(x, 0.2)", ["aten::dropout"]),
            ("dropout/eval", "F.dropout(x, 0.5, training=False)", []),
            ("dropout/p1", "F.dropout(x, 1.0)", ["aten::dropout"]),
            ("dropout/p0", "F.dropout(x, 0.0)", ["aten::dropout"]),
            ("dropout/inplace", "(F.dropout(x, 0.5, inplace=True), x)", ["aten::dropout_"]),
            ("dropout2d", "F.dropout2d(x.reshape(1, 4, 2, 4), 0.5)", ["aten::feature_dropout"]),
            ("alpha_dropout", "F.alpha_dropout(x, 0.5, training=True)", ["aten::alpha_dropout"]),
            ("native_dropout", "torch.native_dropout(x, 0.5, True)", ["aten::native_dropout"]),
            ("dropout-module", "torch.nn.Dropout(0.25)(x)", ["aten::dropout"]),
            ("dropout/big", "F.dropout(inp(torch.ones(64, 33, dtype=x.dtype)), 0.3)", ["aten::dropout"]),
    ):
        add(name, "torch.manual_seed(1234)\n" + xd + "out = %s\n" % call, ops, ref=False)
    return cs


def int_cases():
    cs = []
    for dt in ("int64", "int32", "uint8", "bool"):
        x = "x = %s\n" % T(values(dt, 12, "gen"), (3, 4), dt)
        for name, call, ops in (
                ("relu", "F.relu(x)", ["aten::relu"]),
                ("relu/inplace", "(F.relu(x, inplace=True), x)", ["aten::relu_"]),
                ("one_hot", "F.one_hot(x.abs().long() % 5)", ["aten::one_hot"]),
                ("one_hot/classes", "F.one_hot(x.abs().long() % 5, 7)", ["aten::one_hot"]),
                ("one_hot/int-err", "F.one_hot(x)", ["aten::one_hot"]),
                ("pad/constant", "F.pad(x, (1, 1), value=3)", ["aten::pad"]),
                ("max_pool2d", "F.max_pool2d(x.reshape(1, 1, 3, 4), 2)", ["aten::max_pool2d"]),
                ("softmax-int-err", "F.softmax(x, -1)", ["aten::softmax.int"]),
                ("softmax-int-dtype", "F.softmax(x, -1, dtype=torch.float32)", ["aten::softmax.int"]),
                ("embedding-idx", "F.embedding(x.abs().long() % 3, torch.eye(3))", ["aten::embedding"]),
                ("hardtanh", "F.hardtanh(x)", ["aten::hardtanh"]),
                ("leaky_relu-int-err", "F.leaky_relu(x)", ["aten::leaky_relu"]),
                ("linear-int", "F.linear(x, x)", ["aten::linear"]),
                ("gelu-int-err", "F.gelu(x)", ["aten::gelu"]),
                ("pixel_shuffle", "F.pixel_shuffle(x.reshape(1, 4, 1, 3), 2)", ["aten::pixel_shuffle"]),
        ):
            cs.append(case("nn/int/%s/%s" % (name, dt), x + "out = %s\n" % call, ops, FAM, exact=True))
    return cs


CASES = gen()
