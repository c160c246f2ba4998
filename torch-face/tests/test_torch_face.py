"""torch._C on its own: the compiled module loaded inside the installed face, without running
upstream's torch/__init__.py (which does not import to the end yet; see docs/STATUS.md).

A bare `torch` package object stands in for the partially imported package, as it is when
upstream's __init__ reaches `from torch._C import *`. The tests exercise the door (registry,
overload resolution, kernels, refusals by name), dtypes, devices and schemas, and compare values
with upstream where the oracle's answer is fixed by definition.
"""

import importlib.machinery
import importlib.util
import os
import sys
import types

import pytest


@pytest.fixture(scope="module")
def C():
    spec = importlib.util.find_spec("torch")
    torch_dir = spec.submodule_search_locations[0]
    pkg = types.ModuleType("torch")
    pkg.__path__ = [torch_dir]
    saved = {k: v for k, v in sys.modules.items() if k == "torch" or k.startswith("torch.")}
    sys.modules["torch"] = pkg
    try:
        path = os.path.join(torch_dir, "_C.abi3.so")
        loader = importlib.machinery.ExtensionFileLoader("torch._C", path)
        mod_spec = importlib.util.spec_from_file_location("torch._C", path, loader=loader)
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules["torch._C"] = module
        mod_spec.loader.exec_module(module)
        yield module
    finally:
        for k in [k for k in sys.modules if k == "torch" or k.startswith("torch.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def t(C, data, dtype=None):
    return C._tn_tensor(data, dtype)


def dt(C, name):
    return dict((n, d) for d, names in C._tn_dtype_names() for n in names)[name]


def test_registry_covers_upstream_overloads(C):
    names = C._tn_registry_names()
    # Base names with a function, method or submodule binding (upstream: 2,590 func entries).
    assert len(names) > 1500
    assert C._get_schema("aten::add", "Tensor").arguments[2].kwarg_only
    # torchgen's autogen out= form, which the yaml only names.
    s = C._get_schema("aten::empty_like", "out")
    assert s.arguments[-1].name == "out" and s.arguments[-1].is_out


def test_add_promotes_and_broadcasts(C):
    F = C._VariableFunctions
    a = t(C, [[1, 2, 3]])
    b = t(C, [[0.5], [1.5]])
    r = F.add(a, b, alpha=2)
    assert repr(r.dtype) == "torch.float32"
    assert r.tolist() == [[2.0, 3.0, 4.0], [4.0, 5.0, 6.0]]
    assert tuple(r.shape) == (2, 3)
    # int tensor + Python float -> default float dtype; + Python int stays int64.
    assert repr(F.add(a, 1.5).dtype) == "torch.float32"
    assert repr(F.mul(a, 3).dtype) == "torch.int64"


def test_in_place_returns_self_and_refuses_bad_cast(C):
    x = t(C, [1.0, 2.0])
    y = x.add_(1)
    assert y is x and x.tolist() == [2.0, 3.0]
    i = t(C, [1, 2])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        i.add_(0.5)


def test_out_argument_is_written_and_returned(C):
    F = C._VariableFunctions
    out = t(C, [0.0, 0.0])
    r = F.add(t(C, [1.0, 2.0]), t(C, [3.0, 4.0]), out=out)
    assert r is out and out.tolist() == [4.0, 6.0]


def test_views_share_storage_and_report_strides(C):
    x = C._VariableFunctions.arange(12).view(3, 4)
    v = x.t()
    assert v.stride() == (1, 4) and tuple(v.shape) == (4, 3)
    assert v.data_ptr() == x.data_ptr()
    x.select(0, 0).fill_(7)
    assert v.tolist()[0][0] == 7
    assert x[1:, ::2].tolist() == [[4, 6], [8, 10]]
    assert x[..., 1].tolist() == [7, 5, 9]


def test_reductions_and_methods(C):
    x = C._VariableFunctions.arange(6, dtype=dt(C, "float32")).view(2, 3)
    assert x.sum(1, keepdim=True).tolist() == [[3.0], [12.0]]
    values, indices = x.max(1)
    assert values.tolist() == [2.0, 5.0] and indices.tolist() == [2, 2]
    assert x.mean().item() == 2.5


def test_missing_kernel_is_refused_by_name(C):
    x = t(C, [[1.0, 0.0], [0.0, 1.0]])
    with pytest.raises(NotImplementedError, match=r"operator aten::lgamma has no kernel in torchnative"):
        C._VariableFunctions.lgamma(x)
    with pytest.raises(NotImplementedError, match=r"operator aten::lgamma_ has no kernel"):
        x.lgamma_()


def test_devices_and_dtypes_refused_by_name(C):
    cuda = C.device("cuda:0")
    assert repr(cuda) == "device(type='cuda', index=0)" and str(cuda) == "cuda:0"
    with pytest.raises(RuntimeError, match="device 'cuda' is not available in torchnative"):
        C._VariableFunctions.zeros(2, device=cuda)
    with pytest.raises(NotImplementedError, match="dtype torch.complex64 is not supported by torchnative"):
        C._VariableFunctions.zeros(2, dtype=dt(C, "complex64"))
    meta = C._VariableFunctions.zeros(2, 3, device="meta")
    assert meta.is_meta and tuple(meta.shape) == (2, 3)


def test_wrong_arguments_list_the_overloads(C):
    with pytest.raises(TypeError, match=r"add\(\) received an invalid combination of arguments"):
        C._VariableFunctions.add("a", "b")


def test_parse_schema_round_trips(C):
    text = "mylib::foo(Tensor(a!) x, int[2] k=1, *, float? eps=None) -> Tensor(a!)"
    s = C.parse_schema(text)
    assert str(s) == text and s.is_mutable and s.arguments[1].N == 2
    with pytest.raises(RuntimeError, match="invalid schema"):
        C.parse_schema("foo(Tensor x")


def test_library_define_and_python_kernel(C):
    lib = C._dispatch_library("DEF", "tnlib")
    lib.define("scale(Tensor x, float k) -> Tensor")
    lib.impl("scale", "CPU", lambda x, k: C._VariableFunctions.mul(x, k))
    op = C._tn_op_overload("tnlib::scale", "")
    assert op(t(C, [1.0, 2.0]), 3.0).tolist() == [3.0, 6.0]


def test_numpy_shares_memory(C):
    np = pytest.importorskip("numpy")
    x = t(C, [1.0, 2.0, 3.0])
    a = x.numpy()
    assert a.dtype == np.float32
    a[0] = 9.0
    assert x.tolist()[0] == 9.0


def test_dtype_table_matches_upstream_names(C):
    f32 = dt(C, "float")
    assert repr(f32) == "torch.float32" and f32.itemsize == 4 and f32.is_floating_point
    assert [d.abbr for d in C._get_all_dtypes()][:8] == ["u8", "i8", "i16", "i32", "i64", "f16", "f32", "f64"]
