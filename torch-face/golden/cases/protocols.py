"""Protocols around the operators: `__torch_function__` on Tensor subclasses and function modes
(which callable reaches the override, with which types and arguments, and what type comes back),
nn.Parameter, grad-mode switches and their state, the default dtype, torch.library custom
operators, and torch.Size / dtype / device behaviour."""
from ._lib import case

FAM = "protocols"

SUBCLASS = '''
calls = []
class Logged(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        calls.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})
x = torch.arange(4.).as_subclass(Logged)
'''

MODE = '''
from torch.overrides import TorchFunctionMode
seen = []
class Recorder(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        seen.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))
'''


def gen():
    cs = []
    for label, expr in (("add-op", "x + 1"), ("radd", "2 * x"), ("method", "x.sum()"), ("function", "torch.exp(x)"),
                        ("getitem", "x[1:]"), ("view", "x.view(2, 2)"), ("inplace", "x.add_(1)"),
                        ("nn-functional", "torch.nn.functional.relu(x)")):
        cs.append(case("protocols/subclass/%s" % label,
                       SUBCLASS + "y = %s\nout = (type(y).__name__, calls, y.as_subclass(torch.Tensor))" % expr,
                       [], FAM))
    for label, expr in (("add", "torch.add(torch.ones(2), 1)"), ("method", "torch.ones(2).mul(3)"),
                        ("operator", "torch.ones(2) - 1"), ("factory", "torch.zeros(2)")):
        cs.append(case("protocols/mode/%s" % label,
                       MODE + "with Recorder():\n    r = %s\nout = (seen, r)" % expr, [], FAM))
    cs.append(case("protocols/parameter",
                   "p = torch.nn.Parameter(torch.ones(2, 3))\n"
                   "out = (type(p).__name__, p.requires_grad, p.is_leaf, type(p * 2).__name__, p.shape, p.dtype)",
                   [], FAM))
    cs.append(case("protocols/parameter-no-grad",
                   "p = torch.nn.Parameter(torch.ones(2), requires_grad=False)\nout = (p.requires_grad, repr(p))",
                   [], FAM))
    cs.append(case("protocols/no-grad-state",
                   "a = torch.is_grad_enabled()\nwith torch.no_grad():\n    b = torch.is_grad_enabled()\n"
                   "    with torch.enable_grad():\n        c = torch.is_grad_enabled()\n"
                   "d = torch.is_grad_enabled()\nout = (a, b, c, d)", [], FAM))
    cs.append(case("protocols/set-grad-enabled",
                   "with torch.set_grad_enabled(False):\n    a = torch.is_grad_enabled()\nout = (a, torch.is_grad_enabled())",
                   [], FAM))
    cs.append(case("protocols/inference-mode",
                   "with torch.inference_mode():\n    a = (torch.is_inference_mode_enabled(), torch.is_grad_enabled())\n"
                   "out = (a, torch.is_inference_mode_enabled())", [], FAM))
    cs.append(case("protocols/default-dtype",
                   "old = torch.get_default_dtype()\ntorch.set_default_dtype(torch.float64)\n"
                   "try:\n    out = (torch.tensor([1.5]).dtype, torch.ones(1).dtype, torch.arange(2.).dtype, "
                   "torch.get_default_dtype())\nfinally:\n    torch.set_default_dtype(old)", [], FAM))
    cs.append(case("protocols/library-custom-op",
                   "lib = torch.library.Library('golden_proto', 'FRAGMENT')\n"
                   "lib.define('twice(Tensor x) -> Tensor')\n"
                   "lib.impl('twice', lambda x: x * 2, 'CPU')\n"
                   "out = (torch.ops.golden_proto.twice(torch.arange(3.)), str(torch.ops.golden_proto.twice.default._schema))",
                   [], FAM))
    cs.append(case("protocols/ops-schema",
                   "out = [str(torch.ops.aten.add.Tensor._schema), str(torch.ops.aten.sum.dim_IntList._schema), "
                   "sorted(torch.ops.aten.add.overloads())]", [], FAM))
    cs.append(case("protocols/ops-call",
                   "out = (torch.ops.aten.add.Tensor(torch.ones(2), torch.ones(2), alpha=3), "
                   "torch.ops.aten.mul(torch.ones(2), 4))", [], FAM))
    cs.append(case("protocols/size",
                   "s = torch.ones(2, 3, 4).shape\nout = (s, s[1:], s.numel(), len(s), s == (2, 3, 4), "
                   "isinstance(s, tuple), s + (5,))", [], FAM))
    cs.append(case("protocols/dtype-props",
                   "out = [(d.is_floating_point, d.is_signed, d.itemsize) for d in "
                   "(torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.bool)]", [], FAM))
    cs.append(case("protocols/device",
                   "d = torch.device('cuda:1')\nout = (d.type, d.index, str(d), torch.device('cpu') == "
                   "torch.device('cpu'), repr(torch.device('meta')))", [], FAM))
    cs.append(case("protocols/promote-types",
                   "out = [torch.promote_types(torch.int8, torch.uint8), torch.promote_types(torch.float16, "
                   "torch.bfloat16), torch.result_type(torch.ones(1, dtype=torch.int32), 2.5), "
                   "torch.can_cast(torch.float32, torch.int32)]", [], FAM))
    return cs


CASES = gen()
