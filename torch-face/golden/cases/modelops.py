"""Operations and API forms that transformers' model code uses and the architecture sweep
(torch-face/sweep) found: grouped matmuls of mixture-of-experts layers, comparison aliases,
Python types as dtypes, tensors from NumPy arrays, `Tensor.to(None)`, `.data` swaps, custom
autograd Functions run forward, factories under a meta device context, one kv head in SDPA,
storages from files and their slices (how safetensors loads)."""
from ._lib import case

FAM = "modelops"


def gen():
    cs = []
    x = "x = inp(torch.arange(48, dtype=torch.float32).reshape(6, 8) / 7 - 3)\n"
    w = "w = inp(torch.arange(192, dtype=torch.float32).reshape(3, 8, 8) / 50 - 1.9)\n"
    for name, expr, ops, kind in (
            ("grouped_mm-2d3d", "torch._grouped_mm(x, w, offs=torch.tensor([2, 2, 6], dtype=torch.int32))", ["aten::_grouped_mm"], "acc"),
            ("grouped_mm-3d3d", "torch._grouped_mm(x.reshape(3, 2, 8), w)", ["aten::_grouped_mm"], "acc"),
            ("grouped_mm-2d2d", "torch._grouped_mm(x.t().contiguous(), x, offs=torch.tensor([4, 8], dtype=torch.int32))", ["aten::_grouped_mm"], "acc"),
            ("grouped_mm-int64-offs", "torch._grouped_mm(x, w, offs=torch.tensor([2, 2, 6]))", ["aten::_grouped_mm"], "ex"),
            ("grouped_mm-no-offs", "torch._grouped_mm(x, w)", ["aten::_grouped_mm"], "ex"),
            ("grouped_mm-double", "torch._grouped_mm(x.double(), w.double(), offs=torch.tensor([2, 2, 6], dtype=torch.int32))", ["aten::_grouped_mm"], "ex"),
            ("greater", "(torch.greater(x, 0), torch.greater_equal(x, 0.5), torch.less(x, x.t()[:6, :6].sum()), torch.less_equal(x, 1), torch.not_equal(x, 0))",
             ["aten::greater.Scalar", "aten::greater_equal.Scalar", "aten::less.Tensor", "aten::less_equal.Scalar", "aten::not_equal.Scalar"], "ex"),
            ("dtype-python-types", "(torch.zeros(2, dtype=float), torch.ones(2, dtype=int), torch.ones(2, dtype=bool), torch.arange(3, dtype=float))", [], "ex"),
            ("to-none", "(x.to(None) is x, x.to(None, torch.float64).dtype, x.to(None, torch.float64, copy=True).dtype)", [], "ex"),
            ("tensor-from-ndarray", "(lambda np: (torch.tensor(np.arange(6.).reshape(2, 3)[:, ::2]), torch.tensor(np.ones(3, dtype=np.int16)), torch.FloatTensor(np.arange(4)), torch.tensor(np.arange(3.), dtype=torch.float16)))(__import__('numpy'))", [], "ex"),
            ("tensor-from-ndarray-negative-strides", "torch.tensor(__import__('numpy').arange(6.)[::-1])", [], "ex"),
            ("data-swap", "(lambda p: (setattr(p, 'data', p), setattr(p, 'data', torch.ones(2)), p))(torch.zeros(3))[2]", [], "ex"),
            ("function-apply-forward", "(lambda F: F.apply(x))(type('Sq', (torch.autograd.Function,), {'forward': staticmethod(lambda ctx, t: (ctx.save_for_backward(t), t * t)[1]), 'backward': staticmethod(lambda ctx, g: 2 * ctx.saved_tensors[0] * g)}))", [], "ex"),
            ("function-apply-setup-context", "(lambda F: F.apply(x, 2.0))(type('Sc', (torch.autograd.Function,), {'forward': staticmethod(lambda t, k: t * k), 'setup_context': staticmethod(lambda ctx, inputs, output: None), 'backward': staticmethod(lambda ctx, g: (g, None))}))", [], "ex"),
            ("meta-context-tril", "(lambda: [torch.tril(torch.ones(4, 4, dtype=torch.bool)) for _ in [0] if torch.device('meta').__enter__()][0])().shape if False else (lambda d: (d.__enter__(), torch.tril(torch.ones(4, 4, dtype=torch.bool)).device, d.__exit__(None, None, None))[1])(torch.device('meta'))", [], "ex"),
            ("meta-pad", "torch.nn.functional.pad(torch.ones(2, 3, device='meta'), (1, 2)).shape", ["aten::pad"], "ex"),
            ("sdpa-one-kv-head", "torch.nn.functional.scaled_dot_product_attention(x.reshape(1, 2, 3, 8), x[:3].reshape(1, 1, 3, 8) / 3, x[3:].reshape(1, 1, 3, 8))", ["aten::scaled_dot_product_attention"], "acc"),
            ("out-none", "(torch.stack([x, x], 0, out=None), torch.add(x, 1, out=None), torch.cat([x, x], out=None).shape)", ["aten::stack", "aten::add.Tensor", "aten::cat"], "ex"),
            ("record-function", "(lambda rf: (rf.__enter__(), x + 1, rf.__exit__(None, None, None))[1])(torch.autograd.profiler.record_function('scope'))", [], "ex"),
            ("dataloader-workers0", "[b for b in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, torch.arange(6)), batch_size=4)]", [], "ex"),
            ("dataloader-workers2", "[b for b in torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, torch.arange(6)), batch_size=4, num_workers=2)]", [], "ex"),
            ("share-memory", "(lambda t: (t.is_shared(), t.share_memory_() is t, t.is_shared(), t.untyped_storage().is_shared(), t + 1))(x.clone())", [], "ex"),
            ("tensor-new", "(x.new(2, 3).shape, x.new([1, 2]), x.new(x) is x, x.new().shape, x.new(torch.UntypedStorage(16)).shape, x.new(x).data_ptr() == x.data_ptr())", [], "ex"),
            ("tensor-python-type-dtypes", "(torch.tensor([0], dtype=int), torch.tensor([1], dtype=float), torch.tensor([1], dtype=bool), torch.tensor([2], dtype=complex))", [], "ex"),
            ("multiply", "(torch.multiply(x, w[0, :6]), torch.multiply(x, 2), x.clone().multiply_(x), torch.multiply(x, x, out=torch.empty(6, 8)), x.to(torch.bfloat16).multiply(x))", ["aten::multiply.Tensor", "aten::multiply.Scalar", "aten::multiply_.Tensor", "aten::multiply.out"], "acc"),
            ("is-all-any-true", "(torch._is_all_true(x > -5), torch._is_all_true(x > 0), torch._is_any_true(x > 2), torch._is_any_true(x > 100))", ["aten::_is_all_true", "aten::_is_any_true"], "ex"),
            ("storage-from-file", "(lambda f: (f.write(bytes(range(64))), f.flush(), (lambda s: (s.nbytes(), s[3], torch.asarray(s[8:24], dtype=torch.uint8).view(torch.float32)))(torch.UntypedStorage.from_file(f.name, shared=False, nbytes=64)))[2])(__import__('tempfile').NamedTemporaryFile())", [], "ex"),
    ):
        cs.append(case("modelops/%s" % name, x + w + "out = %s\n" % expr, ops, FAM,
                       ref64=kind != "ex", acc=kind == "acc", exact=kind == "ex"))
    # nn.MultiheadAttention's inference fast path (eval, no grad needed, batch_first): every
    # mask form it merges and both weight forms.
    mha = ("torch.manual_seed(0)\n"
           "m = torch.nn.MultiheadAttention(8, 2, batch_first=True).eval().requires_grad_(False)\n"
           "q = inp(torch.arange(48, dtype=torch.float32).reshape(2, 3, 8) / 20 - 1)\n"
           "causal = torch.triu(torch.ones(3, 3, dtype=torch.bool), 1)\n"
           "pad = torch.tensor([[False, False, True], [True, True, True]])\n")
    for name, kwargs in (
            ("plain", "need_weights=False"),
            ("weights-averaged", "need_weights=True"),
            ("weights-per-head", "need_weights=True, average_attn_weights=False"),
            ("causal", "need_weights=False, attn_mask=causal"),
            ("padding-all-masked-row", "need_weights=True, key_padding_mask=pad"),
            ("causal-and-padding", "need_weights=False, attn_mask=causal, key_padding_mask=pad[[0, 0]]"),
    ):
        cs.append(case("modelops/mha-fast-path-%s" % name, mha + "out = m(q, q, q, %s)\n" % kwargs,
                       ["aten::_native_multi_head_attention"], FAM, ref64=True, acc=True))
    return cs


CASES = gen()
