# The long tail of torch._C that `import torch` and transformers read: flags, enums, registries
# and guards that carry no computation. Ours, not upstream's: it runs once, in the namespace of
# the compiled torch._C module (lib.rs), after the Rust classes and `_tn_*` functions are in it.
# Everything that computes (tensors, dtypes, the operator registry, the door, kernels) is Rust.
#
# Names upstream exposes but we do not implement are either absent (CUDA/XPU/MPS/MTIA/
# distributed back ends: upstream's own CPU-only builds lack them too, so `hasattr` probes take
# the CPU path) or present as callables that raise NotImplementedError naming themselves.

import builtins as _builtins
import enum as _enum
import sys as _sys
import types as _types

_this = _sys.modules[__name__]

# This namespace gets the dtype singletons `torch._C.float`, `.int`, `.bool`, ... (as upstream's
# has), which shadow the builtins of those names here: the code below spells them
# `_builtins.int` and so on.


def _refuse(qualname):
    def refused(*args, **kwargs):
        raise NotImplementedError(f"torch._C.{qualname} is not implemented in torchnative")

    refused.__name__ = qualname.rsplit(".", 1)[-1]
    refused.__qualname__ = qualname
    return refused


def _returns(value, name="f"):
    def f(*args, **kwargs):
        return value

    f.__name__ = name
    return f


def _submodule(name, stubs=False, **attrs):
    """A `torch._C.<name>` module. With `stubs`, names it lacks are refusing stand-ins (classes
    for CamelCase names, functions otherwise): upstream's Python imports many of them from
    TorchScript, dynamo and profiler modules that torchnative does not implement."""
    mod = _types.ModuleType(f"torch._C.{name}")
    mod.__dict__.update(attrs)
    if stubs:
        def __getattr__(attr, _name=name):
            if attr.startswith("__"):
                raise AttributeError(attr)
            qual = f"{_name}.{attr}"
            value = _stub_class(qual) if attr.lstrip("_")[:1].isupper() else _refuse(qual)
            setattr(mod, attr, value)
            return value

        mod.__getattr__ = __getattr__
    _sys.modules[f"torch._C.{name}"] = mod
    parent, _, leaf = name.rpartition(".")
    setattr(_sys.modules[f"torch._C.{parent}"] if parent else _this, leaf, mod)
    return mod


# ----- dtypes, layouts, memory formats, devices -----------------------------------------------

_dtype_names = _tn_dtype_names()  # noqa: F821  (defined in Rust)


class _NamedConstant:
    """A singleton upstream's Python compares by identity and prints as `torch.<name>`."""

    __module__ = "torch"

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return f"torch.{self._name}"

    def __reduce__(self):
        return self._name


class layout(_NamedConstant):
    __module__ = "torch"


class memory_format(_NamedConstant):
    __module__ = "torch"


class qscheme(_NamedConstant):
    __module__ = "torch"


_layouts = {n: layout(n) for n in ("strided", "sparse_coo", "sparse_csr", "sparse_csc", "sparse_bsr", "sparse_bsc", "_mkldnn", "jagged")}
_memory_formats = {n: memory_format(n) for n in ("contiguous_format", "channels_last", "channels_last_3d", "preserve_format")}
_qschemes = {n: qscheme(n) for n in ("per_tensor_affine", "per_channel_affine", "per_tensor_symmetric", "per_channel_symmetric", "per_channel_affine_float_qparams")}

_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")


class device:
    """torch.device: any upstream device type can be named; only cpu and meta hold tensors."""

    __module__ = "torch"
    __slots__ = ("_type", "_index")

    def __init__(self, type, index=None):
        if isinstance(type, device):
            self._type, self._index = type._type, type._index
            return
        if isinstance(type, _builtins.int) and not isinstance(type, _builtins.bool):
            self._type, self._index = "cuda", type
            return
        if not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got ({_builtins.type(type).__name__})")
        kind, _, idx = type.partition(":")
        if kind not in _DEVICE_TYPES:
            raise RuntimeError(
                "Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, "
                f"maia, xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: {type}"
            )
        if idx:
            if index is not None:
                raise RuntimeError("type (string) must not include an index because index was passed explicitly: " + type)
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: '{type}'")
            index = _builtins.int(idx)
        if index is not None and index < 0:
            raise RuntimeError(f"Device index must not be negative")
        self._type, self._index = kind, index

    type = property(lambda self: self._type)
    index = property(lambda self: self._index)

    def __repr__(self):
        if self._index is None:
            return f"device(type='{self._type}')"
        return f"device(type='{self._type}', index={self._index})"

    def __str__(self):
        return self._type if self._index is None else f"{self._type}:{self._index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self._type, self._index) == (other._type, other._index)

    def __hash__(self):
        return hash((self._type, self._index))

    def __reduce__(self):
        return (device, (self._type, self._index) if self._index is not None else (self._type,))

    # As upstream's C++: entering pushes a torch.utils._device.DeviceContext mode (factories
    # without a device= get this one), leaving pops it.
    def __enter__(self):
        from torch.utils._device import DeviceContext

        _push_on_torch_function_stack(DeviceContext(self))
        return self

    def __exit__(self, *a):
        _pop_torch_function_stack()
        return False

    def __call__(self, func):
        from torch.utils._device import device_decorator

        return device_decorator(self, func)


_cpu_device = device("cpu")
_meta_device = device("meta")


def _device_factory(name):
    return _cpu_device if name == "cpu" else _meta_device


class Size(tuple):
    __module__ = "torch"

    def __new__(cls, sizes=()):
        return super().__new__(cls, (s.__index__() for s in sizes))

    def __repr__(self):
        return f"torch.Size([{', '.join(str(s) for s in self)}])"

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = super().__getitem__(key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return Size(tuple(self) * n)

    __rmul__ = __mul__

    def __reduce__(self):
        return (Size, (tuple(self),))


class finfo:
    """Upstream's numbers for each floating dtype: (max, eps, tiny, resolution, bits, min)."""

    __module__ = "torch"
    _table = {
        "float32": (3.4028234663852886e38, 1.1920928955078125e-07, 1.1754943508222875e-38, 1e-06, 32, None),
        "float64": (1.7976931348623157e308, 2.220446049250313e-16, 2.2250738585072014e-308, 1e-15, 64, None),
        "float16": (65504.0, 0.0009765625, 6.103515625e-05, 0.001, 16, None),
        "bfloat16": (3.3895313892515355e38, 0.0078125, 1.1754943508222875e-38, 0.01, 16, None),
        "float8_e5m2": (57344.0, 0.25, 6.103515625e-05, 1.0, 8, None),
        "float8_e4m3fn": (448.0, 0.125, 0.015625, 1.0, 8, None),
        "float8_e5m2fnuz": (57344.0, 0.25, 3.0517578125e-05, 1.0, 8, None),
        "float8_e4m3fnuz": (240.0, 0.125, 0.0078125, 1.0, 8, None),
        "float8_e8m0fnu": (1.7014118346046923e38, 1.0, 5.877471754111438e-39, 1.0, 8, 5.877471754111438e-39),
    }

    def __init__(self, type=None):
        import torch

        type = type or torch.get_default_dtype()
        name = repr(type).split(".")[-1]
        if name not in self._table:
            raise TypeError(f"torch.finfo() requires a floating point input type. Use torch.iinfo to handle '{type}'")
        self.max, self.eps, self.tiny, self.resolution, self.bits, low = self._table[name]
        self.min = -self.max if low is None else low
        self.smallest_normal = self.tiny
        self.dtype = name

    def __repr__(self):
        g = lambda v: format(v, "g")  # noqa: E731
        return (f"finfo(resolution={g(self.resolution)}, min={g(self.min)}, max={g(self.max)}, eps={g(self.eps)}, "
                f"smallest_normal={g(self.tiny)}, tiny={g(self.tiny)}, dtype={self.dtype})")


class iinfo:
    __module__ = "torch"
    _table = {
        "uint8": (0, 255, 8), "int8": (-128, 127, 8), "int16": (-32768, 32767, 16),
        "int32": (-2**31, 2**31 - 1, 32), "int64": (-2**63, 2**63 - 1, 64), "bool": (0, 1, 8),
        "uint16": (0, 2**16 - 1, 16), "uint32": (0, 2**32 - 1, 32), "uint64": (0, 2**64 - 1, 64),
    }

    def __init__(self, type):
        name = repr(type).split(".")[-1]
        if name not in self._table:
            raise TypeError(f"torch.iinfo() requires an integer input type. Use torch.finfo to handle '{type}'")
        self.min, self.max, self.bits = self._table[name]
        self.dtype = name

    def __repr__(self):
        return f"iinfo(min={self.min}, max={self.max}, dtype={self.dtype})"


# ----- operators: namespaces and Tensor methods from upstream's registry ------------------------

class _VariableFunctionsClass:
    pass


_VariableFunctions = _VariableFunctionsClass()
_nn = _submodule("_nn")
_linalg = _submodule("_linalg")
_special = _submodule("_special")
_fft = _submodule("_fft")
_nested = _submodule("_nested")
_sparse = _submodule("_sparse")
_modules_by_python_module = {"nn": _nn, "linalg": _linalg, "special": _special, "fft": _fft, "nested": _nested, "sparse": _sparse}

_tensor_methods = set(dir(TensorBase))  # noqa: F821  (hand-bound in Rust)
for _name, _is_function, _is_method, _module in _tn_registry_names():  # noqa: F821
    if _module:
        setattr(_modules_by_python_module[_module], _name, _tn_function(_name))  # noqa: F821
    elif _is_function:
        setattr(_VariableFunctions, _name, _tn_function(_name))  # noqa: F821
    if _is_method and _name not in _tensor_methods:
        setattr(TensorBase, _name, _tn_op(_name))  # noqa: F821

# Python operators bound to ATen ops as upstream's C++ binds them.
for _dunder, _opname in {
    "__add__": "add", "__iadd__": "add_", "__sub__": "sub", "__isub__": "sub_", "__mul__": "mul",
    "__imul__": "mul_", "__truediv__": "div", "__itruediv__": "div_", "__idiv__": "div_", "__div__": "div",
    "__matmul__": "matmul", "__mod__": "remainder", "__imod__": "remainder_",
    "__and__": "bitwise_and", "__or__": "bitwise_or", "__xor__": "bitwise_xor",
    "__iand__": "bitwise_and_", "__ior__": "bitwise_or_", "__ixor__": "bitwise_xor_",
    "__lshift__": "__lshift__", "__rshift__": "__rshift__", "__ilshift__": "__ilshift__", "__irshift__": "__irshift__",
    "__eq__": "eq", "__ne__": "ne", "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
    "__neg__": "neg", "__invert__": "bitwise_not", "__abs__": "abs",
}.items():
    # Upstream binds the operator to the op's own method: overrides see `add`, not `__add__`.
    setattr(TensorBase, _dunder, _tn_op(_opname))  # noqa: F821
TensorBase.__hash__ = object.__hash__  # noqa: F821
TensorBase.__pos__ = lambda self: self  # noqa: F821


_PYTHON_TYPE_DTYPES = {
    _builtins.int: lambda: __import__("torch").int64,
    _builtins.float: lambda: __import__("torch").float64,
    _builtins.bool: lambda: __import__("torch").bool,
    _builtins.complex: lambda: __import__("torch").complex128,
}


def _tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    # A factory like upstream's C++ one: function modes see it (`with torch.device("meta")`
    # gives it a device), and device= places the result.
    if _is_torch_function_mode_enabled():
        from torch.overrides import handle_torch_function

        return handle_torch_function(_tensor, (), data, dtype=dtype, device=device,
                                     requires_grad=requires_grad, pin_memory=pin_memory)
    if device is not None:
        _check_device(device)
    if dtype in _PYTHON_TYPE_DTYPES:
        # Python's own types name dtypes, as in upstream's argument parser.
        dtype = _PYTHON_TYPE_DTYPES[dtype]()
    if type(data).__name__ == "ndarray" and type(data).__module__ == "numpy":
        # A copy of the array's values in its own dtype (upstream's tensor(ndarray)).
        # from_numpy's checks (negative strides, byte order) are tensor()'s too
        t = _tn_from_numpy(data).clone()  # noqa: F821
        if dtype is not None and t.dtype != dtype:
            t = t.to(dtype)
    else:
        t = _tn_tensor(data, dtype)  # noqa: F821
    if device is not None and str(device).split(":")[0] == "meta":
        t = t.to("meta")
    if requires_grad:
        t.requires_grad_(True)
    return t


def _check_device(d):
    kind = d if isinstance(d, str) else getattr(d, "type", d)
    kind = str(kind).split(":")[0]
    if kind not in ("cpu", "meta"):
        raise RuntimeError(
            f"device '{kind}' is not available in torchnative: tensors live on the CPU (or 'meta', "
            f"shapes only); torchnative has no {kind} backend"
        )


def _as_tensor(data, dtype=None, device=None):
    if _is_torch_function_mode_enabled():
        from torch.overrides import handle_torch_function

        return handle_torch_function(_as_tensor, (), data, dtype=dtype, device=device)
    if isinstance(data, TensorBase):  # noqa: F821
        if device is not None:
            _check_device(device)
            data = data.to(device)
        return data if dtype is None or data.dtype == dtype else data.to(dtype)
    if isinstance(data, StorageBase):  # noqa: F821
        # A storage's bytes as a tensor sharing them (safetensors loads this way).
        return data._tn_as_tensor(dtype)
    return _tensor(data, dtype=dtype, device=device)


_VariableFunctions.tensor = _tensor
_VariableFunctions.as_tensor = _as_tensor
_VariableFunctions.from_numpy = _tn_from_numpy
_VariableFunctions.frombuffer = _tn_frombuffer
_VariableFunctions.asarray = _as_tensor
_VariableFunctions.numel = lambda input: input.numel()


def _get_operation_overload(qualified, overload):
    op = _tn_op_overload(qualified, overload)  # noqa: F821
    return op, op, list(_tags_of(qualified, overload))


def _tags_of(qualified, overload):
    return ()


# ----- schemas ----------------------------------------------------------------------------------

class AliasInfo:
    def __init__(self, is_write, before_set=(), after_set=()):
        self.is_write = is_write
        self.before_set = set(before_set)
        self.after_set = set(after_set)


def _alias_info(d):
    return AliasInfo(d["is_write"], d["before"], d["after"])


class JitType:
    """TorchScript's type objects, as upstream's Python compares and prints them; a type is its
    schema spelling (`Tensor`, `int[]`, `Tensor?`)."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], str):
            self._text = args[0]
        else:
            self._text = self._compose(args)

    def _compose(self, args):
        return type(self).__name__.replace("Type", "")

    def __repr__(self):
        return self._text

    def __str__(self):
        return self._text

    def __eq__(self, other):
        return isinstance(other, JitType) and str(self) == str(other)

    def __hash__(self):
        return hash(self._text)

    def kind(self):
        return _type_kind(self._text)

    def annotation_str(self):
        return self._text

    def isSubtypeOf(self, other):
        return self == other or str(other) in ("Any", "AnyType")

    def getElementType(self):
        if self._text.endswith("[]"):
            return _typed(self._text[:-2])
        if self._text.endswith("?"):
            return _typed(self._text[:-1])
        return self

    def containedTypes(self):
        return [self.getElementType()] if self._text.endswith(("[]", "?")) else []

    getContainedTypes = containedTypes

    def dim(self):
        return None

    def sizes(self):
        return None


def _type_kind(text):
    if text.endswith("?"):
        return "OptionalType"
    if text.endswith("]"):
        return "ListType"
    return {"Tensor": "TensorType", "int": "IntType", "SymInt": "SymIntType", "float": "FloatType", "bool": "BoolType",
            "str": "StringType", "Scalar": "NumberType", "ScalarType": "IntType", "Device": "DeviceObjType",
            "Generator": "_GeneratorType", "Layout": "IntType", "MemoryFormat": "IntType"}.get(text, "AnyType")


def _jit_type_class(name):
    cls = _builtins.type(name, (JitType,), {"get": classmethod(lambda c: c(name.replace("Type", "")))})
    cls.__module__ = "torch._C"
    return cls


for _n in ("TensorType", "IntType", "SymIntType", "SymBoolType", "FloatType", "BoolType", "StringType", "NumberType",
           "NoneType", "DeviceObjType", "StreamObjType", "_GeneratorType", "AnyType", "ComplexType", "ListType",
           "OptionalType", "TupleType", "DictType", "UnionType", "ClassType", "InterfaceType", "FutureType",
           "AwaitType", "RRefType", "EnumType", "Type", "InferredType"):
    setattr(_this, _n, _jit_type_class(_n))
ListType._compose = lambda self, args: f"{args[0]}[]"  # noqa: F821
OptionalType._compose = lambda self, args: f"{args[0]}?"  # noqa: F821
TupleType._compose = lambda self, args: f"({', '.join(str(a) for a in args[0])})"  # noqa: F821
DictType._compose = lambda self, args: f"Dict({args[0]}, {args[1]})"  # noqa: F821
FutureType._compose = lambda self, args: f"Future({args[0]})"  # noqa: F821
TensorType.get = classmethod(lambda c: c("Tensor"))  # noqa: F821
ListType.ofTensors = staticmethod(lambda: ListType("Tensor[]"))  # noqa: F821
ListType.ofInts = staticmethod(lambda: ListType("int[]"))  # noqa: F821
OptionalType.ofTensor = staticmethod(lambda: OptionalType("Tensor?"))  # noqa: F821


_TYPED = {}


def _typed(text):
    # Types are immutable values of their spelling: one object per spelling (import builds
    # ~20,000 arguments over a few hundred spellings).
    t = _TYPED.get(text)
    if t is None:
        t = _TYPED[text] = getattr(_this, _type_kind(text), JitType)(text)
    return t


class Argument:
    def __init__(self, d):
        self.name = d["name"]
        self.type = _typed(d["type"])
        self.real_type = self.type
        self._default_text = d["default"]
        self.kwarg_only = d["kwarg_only"]
        self.is_out = d["is_out"]
        self.alias_info = _alias_info(d["alias"]) if d["alias"] else None
        self.is_write = _builtins.bool(self.alias_info and self.alias_info.is_write)
        self.N = d["list_size"]

    @property
    def default_value(self):
        t = self._default_text
        if t is None:
            return None
        if t in ("True", "False"):
            return t == "True"
        if t == "None":
            return None
        try:
            return _builtins.int(t)
        except ValueError:
            pass
        try:
            return _builtins.float(t)
        except ValueError:
            pass
        if t.startswith("[") and t.endswith("]"):
            inner = t[1:-1].strip()
            return [_builtins.int(x) if x.strip().lstrip("-").isdigit() else x.strip() for x in inner.split(",")] if inner else []
        return t.strip("'\"")

    def has_default_value(self):
        return self._default_text is not None

    def __repr__(self):
        return f"{self.type} {self.name}"


class FunctionSchema:
    def __init__(self, d):
        self._d = d
        self.name = d["name"]
        self.overload_name = d["overload_name"]
        self.arguments = [Argument(a) for a in d["arguments"]]
        self.returns = [Argument(r) for r in d["returns"]]
        self.is_vararg = d["is_vararg"]
        self.is_varret = d["is_varret"]

    @property
    def is_mutable(self):
        return any(a.alias_info is not None and a.alias_info.is_write for a in self.arguments)

    def _is_view_op(self):
        """A result aliases an input without writing it (c10's FunctionSchema::is_view_op)."""
        aliased_inputs = {n for a in self.arguments if a.alias_info and not a.alias_info.is_write
                          for n in a.alias_info.before_set}
        return any(r.alias_info and not r.alias_info.is_write and r.alias_info.before_set & aliased_inputs
                   for r in self.returns)

    def __str__(self):
        return self._d["text"]

    def __repr__(self):
        return self._d["text"]

    def __eq__(self, other):
        return isinstance(other, FunctionSchema) and str(self) == str(other)

    def __hash__(self):
        return hash(str(self))

    def check_forward_compatible_with(self, other):
        return self == other, ""


def parse_schema(text, allow_typevars=False):
    return FunctionSchema(_tn_parse_schema(text))  # noqa: F821


_SCHEMAS = {}


def _get_schema(qualified, overload):
    # Registered schemas never change, and upstream treats schema objects as read-only: one
    # object per overload (torch._ops asks for many several times while importing).
    key = (qualified, overload)
    schema = _SCHEMAS.get(key)
    if schema is None:
        d = _tn_schema(qualified, overload)  # noqa: F821
        if d is None:
            raise RuntimeError(f"Unknown operator {qualified}.{overload}")
        schema = _SCHEMAS[key] = FunctionSchema(d)
    return schema


def _jit_get_schemas_for_operator(qualified):
    return [_get_schema(qualified, o) for o in _tn_overload_names(qualified)]  # noqa: F821


def _jit_get_operation(qualified):
    overloads = _tn_overload_names(qualified)  # noqa: F821
    if not overloads:
        raise RuntimeError(f"No such operator {qualified}")
    return _tn_packet(qualified), overloads  # noqa: F821


def _dispatch_find_schema_or_throw(qualified, overload):
    _get_schema(qualified, overload)
    return _DispatchOperatorHandle(qualified, overload)


class _DispatchOperatorHandle:
    def __init__(self, qualified="", overload=""):
        self.qualified, self.overload = qualified, overload

    def schema(self):
        return _get_schema(self.qualified, self.overload)

    def debug(self, *a):
        return ""

    def redispatch_boxed(self, keyset, *args, **kwargs):
        # One dispatch level here: a redispatch runs the overload's kernel through the door.
        return _tn_op_overload(self.qualified, self.overload)(*args, **kwargs)  # noqa: F821


# ----- dispatch keys ----------------------------------------------------------------------------

def _upstream_stub_lines():
    """Upstream's torch/_C/__init__.pyi (shipped with the .py tree): its record of torch._C."""
    import os

    path = os.path.join(_sys.modules["torch"].__path__[0], "_C", "__init__.pyi")
    with open(path, encoding="utf-8") as f:
        return f.read().split("\n")


_STUB_LINES = _upstream_stub_lines()


def _upstream_enum_members(class_name):
    """Member names of an enum declared in the stubs, in declaration order."""
    lines = _STUB_LINES
    start = lines.index(f"class {class_name}(Enum):")
    names = []
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break
        name, sep, _ = line.strip().partition(" = ")
        if sep and name.isidentifier():
            names.append(name)
    return names


DispatchKey = _enum.Enum("DispatchKey", {k: i for i, k in enumerate(_upstream_enum_members("DispatchKey"))},
                         module="torch._C")


class DispatchKeySet:
    def __init__(self, *keys):
        self._keys = frozenset(k for k in keys if isinstance(k, DispatchKey))

    @classmethod
    def _of(cls, keys):
        s = cls.__new__(cls)
        s._keys = keys
        return s

    def __or__(self, other):
        return DispatchKeySet._of(self._keys | other._keys)

    def __sub__(self, other):
        return DispatchKeySet._of(self._keys - other._keys)

    def __and__(self, other):
        return DispatchKeySet._of(self._keys & other._keys)

    def has(self, key):
        return key in self._keys

    def add(self, key):
        return DispatchKeySet._of(self._keys | {key})

    def remove(self, key):
        return DispatchKeySet._of(self._keys - {key})

    def highestPriorityTypeId(self):
        return max(self._keys, key=lambda k: k.value) if self._keys else DispatchKey.Undefined

    def raw_repr(self):
        return sum(1 << k.value for k in self._keys)

    def empty(self):
        return not self._keys

    def __repr__(self):
        return f"DispatchKeySet({', '.join(k.name for k in sorted(self._keys, key=lambda k: k.value))})"

    def __eq__(self, other):
        return isinstance(other, DispatchKeySet) and self._keys == other._keys

    def __hash__(self):
        return hash(self._keys)


_dispatch_keyset_full = _returns(DispatchKeySet(*DispatchKey), "_dispatch_keyset_full")
_dispatch_keyset_full_after = _returns(DispatchKeySet(), "_dispatch_keyset_full_after")
_after_autograd_keyset = DispatchKeySet()
_after_ADInplaceOrView_keyset = DispatchKeySet()
_dispatch_keys = lambda tensor: DispatchKeySet(DispatchKey.CPU, DispatchKey.AutogradCPU, DispatchKey.ADInplaceOrView)
_dispatch_tls_local_include_set = _returns(DispatchKeySet(), "_dispatch_tls_local_include_set")
_dispatch_tls_local_exclude_set = _returns(DispatchKeySet(), "_dispatch_tls_local_exclude_set")
_dispatch_tls_is_dispatch_key_excluded = _returns(False, "_dispatch_tls_is_dispatch_key_excluded")
_dispatch_tls_is_dispatch_key_included = _returns(False, "_dispatch_tls_is_dispatch_key_included")
_dispatch_tls_set_dispatch_key_excluded = _returns(None, "_dispatch_tls_set_dispatch_key_excluded")
_dispatch_tls_set_dispatch_key_included = _returns(None, "_dispatch_tls_set_dispatch_key_included")
_dispatch_is_alias_key = lambda k: k.name in ("Autograd", "CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional", "FuncTorchBatchedDecomposition", "CompositeImplicitAutogradNestedTensor")
_dispatch_has_backend_fallback = _returns(False, "_dispatch_has_backend_fallback")
_dispatch_kernel_for_dispatch_key_is_fallthrough = _returns(False, "_dispatch_kernel_for_dispatch_key_is_fallthrough")
_dispatch_autogradother_backends = DispatchKeySet()
_dispatch_get_backend_keyset_from_autograd = lambda k: DispatchKeySet()
_functionality_to_backend_keys = lambda k: []
_to_functionality_key = lambda k: k
_dispatch_key_for_device = lambda d: "CPU" if str(d) == "cpu" else "Meta" if str(d) == "meta" else str(d).upper()
_parse_dispatch_key = lambda name: getattr(DispatchKey, name, None)
_dispatch_key_name = lambda k: k.name
_dispatch_key_parse = lambda name: getattr(DispatchKey, name)


def _full_name(name, overload):
    base = name if "::" in name else f"aten::{name}"
    return f"{base}.{overload}" if overload else base


def _dispatch_has_kernel_for_dispatch_key(name, key):
    key = key.name if isinstance(key, DispatchKey) else str(key)
    full = name if "." in name.split("::")[-1] else name
    return _tn_upstream_has_kernel(full, key) or (key in ("CPU", "CompositeExplicitAutograd") and _tn_has_kernel(full))  # noqa: F821


def _dispatch_has_kernel_for_any_dispatch_key(name, keyset):
    return any(_dispatch_has_kernel_for_dispatch_key(name, k) for k in keyset._keys)


def _dispatch_has_kernel(name):
    return _tn_in_dispatcher(name)  # noqa: F821


_dispatch_get_computed_kernel_for_dispatch_key = _returns(None, "_dispatch_get_computed_kernel_for_dispatch_key")
_dispatch_dump = _returns("", "_dispatch_dump")
_dispatch_dump_table = _returns("", "_dispatch_dump_table")
_dispatch_check_invariants = _returns(None, "_dispatch_check_invariants")
_dispatch_check_all_invariants = _returns(None, "_dispatch_check_all_invariants")
_dispatch_get_registrations_for_dispatch_key = lambda key="": []
_dispatch_get_all_op_names = lambda: []
_dispatch_pystub = _returns(None, "_dispatch_pystub")
_dispatch_set_report_error_callback = _returns(None, "_dispatch_set_report_error_callback")
_dispatch_print_registrations_for_dispatch_key = _returns(None, "_dispatch_print_registrations_for_dispatch_key")


class _DispatchModule:
    """torch.library's back end: `define` adds a schema, `impl` a Python kernel."""

    def __init__(self, kind, ns, key=""):
        self.kind, self.ns, self.key = kind, ns, key

    def define(self, schema, alias_analysis="", tags=()):
        schema = schema.strip()
        text = schema if "::" in schema.split("(")[0] else f"{self.ns}::{schema}"
        full = _tn_define(text)  # noqa: F821
        return full.split("::", 1)[1].split(".")[0]

    def impl(self, name, key, fn, *args, **kwargs):
        base = name if "::" in name else f"{self.ns}::{name}"
        key = key or self.key or "CompositeImplicitAutograd"
        key = key.name if isinstance(key, DispatchKey) else str(key)
        if callable(fn):
            _tn_register_py_kernel(base, key, fn)  # noqa: F821

    def fallback(self, key, fn, *args, **kwargs):
        pass

    def reset(self):
        pass

    def _unregister_fallback(self, *a):
        pass


def _dispatch_library(kind, ns, key="", file="", line=0):
    return _DispatchModule(kind, ns, key)


def _dispatch_make_pyobj_dispatch_fns(handle, op, redispatch):
    """Upstream builds C++ fast paths around the Python dispatcher; ours are the op itself."""
    return op, redispatch


class _SafeKernelFunction:
    pass


class _ScalingType(_enum.Enum):
    TensorWise = 0
    RowWise = 1
    BlockWise1x16 = 2
    BlockWise1x32 = 3
    BlockWise1x128 = 4
    BlockWise128x128 = 5


class _SwizzleType(_enum.Enum):
    NO_SWIZZLE = 0
    SWIZZLE_32_4_4 = 1
    SWIZZLE_32_8 = 2


def _upstream_tags():
    """Tag names from upstream's own tags.yaml (shipped in torchgen next to
    native_functions.yaml), in file order, as torchgen numbers them."""
    import os

    path = os.path.join(_sys.modules["torch"].__path__[0], os.pardir, "torchgen", "packaged", "ATen", "native",
                        "tags.yaml")
    with open(path, encoding="utf-8") as f:
        return [line.split(":", 1)[1].strip() for line in f if line.startswith("- tag:")]


Tag = _enum.Enum("Tag", {name: i for i, name in enumerate(_upstream_tags())}, module="torch._C")
Tag.__module__ = "torch._C"


# ----- grad mode, inference mode, torch function and dispatch modes -----------------------------

class _PerThread:
    """A flag each thread holds on its own, starting at `default` (upstream keeps grad mode and
    inference mode thread-local). Read and written as `flag[0]`."""

    def __init__(self, default):
        import threading

        self._local = threading.local()
        self._default = default

    def __getitem__(self, i):
        return getattr(self._local, "value", self._default)

    def __setitem__(self, i, value):
        self._local.value = value


_grad_enabled = _PerThread(True)
_inference_mode = _PerThread(False)


def _set_grad_enabled(mode):
    _grad_enabled[0] = _builtins.bool(mode)


def is_grad_enabled():
    return _grad_enabled[0]


_is_grad_enabled = is_grad_enabled


def is_inference_mode_enabled():
    return _inference_mode[0]


class _InferenceMode:
    def __init__(self, mode=True):
        self.mode = mode

    def __enter__(self):
        self.prev = (_inference_mode[0], _grad_enabled[0])
        _inference_mode[0] = self.mode
        if self.mode:
            _grad_enabled[0] = False
        return self

    def __exit__(self, *a):
        _inference_mode[0], _grad_enabled[0] = self.prev


def _set_inference_mode(mode):
    _inference_mode[0] = _builtins.bool(mode)


class _DisableTorchDispatch:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _disabled_torch_function_impl(func, types, args=(), kwargs=None):
    return func(*args, **(kwargs or {}))


def _disabled_torch_dispatch_impl(func, types, args=(), kwargs=None):
    return func(*args, **(kwargs or {}))


_torch_function_stack = []


def _push_on_torch_function_stack(mode):
    _torch_function_stack.append(mode)
    _tn_tf_modes(1)  # noqa: F821


def _pop_torch_function_stack():
    mode = _torch_function_stack.pop()
    _tn_tf_modes(-1)  # noqa: F821
    return mode


def _len_torch_function_stack():
    return len(_torch_function_stack)


def _get_function_stack_at(i):
    return _torch_function_stack[i]


class _DisableTorchFunctionSubclass:
    def __enter__(self):
        self.prev = _tn_tf_disabled(max(1, _tn_tf_disabled(None)))  # noqa: F821
        return self

    def __exit__(self, *a):
        _tn_tf_disabled(self.prev)  # noqa: F821


class DisableTorchFunction:
    def __enter__(self):
        self.prev = _tn_tf_disabled(2)  # noqa: F821
        return self

    def __exit__(self, *a):
        _tn_tf_disabled(self.prev)  # noqa: F821


class _EnableTorchFunction:
    def __enter__(self):
        self.prev = _tn_tf_disabled(0)  # noqa: F821
        return self

    def __exit__(self, *a):
        _tn_tf_disabled(self.prev)  # noqa: F821


DisableTorchFunctionSubclass = _DisableTorchFunctionSubclass


class _TorchFunctionState(_enum.Enum):
    ENABLED = 0
    SUBCLASSES_DISABLED = 1
    ALL_DISABLED = 2


def _get_torch_function_state():
    return _TorchFunctionState(_tn_tf_disabled(None))  # noqa: F821


def _set_torch_function_state(state):
    _tn_tf_disabled(state.value)  # noqa: F821


def _is_torch_function_enabled():
    return _tn_tf_disabled(None) == 0  # noqa: F821


def _is_torch_function_all_disabled():
    return _tn_tf_disabled(None) == 2  # noqa: F821


def _is_torch_function_mode_enabled():
    return _tn_tf_disabled(None) < 2 and _builtins.bool(_torch_function_stack)  # noqa: F821


def _has_torch_function(args):
    return any(type(a) is not _this._tensor_class and hasattr(type(a), "__torch_function__") and
               getattr(type(a).__torch_function__, "__func__", type(a).__torch_function__) is not _disabled_torch_function_impl
               for a in args) if _is_torch_function_enabled() else False


def _has_torch_function_unary(a):
    return _has_torch_function((a,))


def _has_torch_function_variadic(*args):
    return _has_torch_function(args)


def _skip_one_hop_torch_function():
    return False


_peek_should_skip_torch_function = _returns(False, "_peek_should_skip_torch_function")
_maybe_call_torch_function_for_op_packet = _returns((False, None), "_maybe_call_torch_function_for_op_packet")

_torch_dispatch_stack = []


def _len_torch_dispatch_stack():
    return len(_torch_dispatch_stack)


def _push_on_torch_dispatch_stack(mode):
    raise NotImplementedError("__torch_dispatch__ modes are not implemented in torchnative")


def _pop_torch_dispatch_stack(key=None):
    return _torch_dispatch_stack.pop()


def _get_dispatch_stack_at(i):
    return _torch_dispatch_stack[i]


_get_dispatch_mode = _returns(None, "_get_dispatch_mode")
_set_dispatch_mode = _returns(None, "_set_dispatch_mode")
_unset_dispatch_mode = _returns(None, "_unset_dispatch_mode")


class _TorchDispatchModeKey(_enum.Enum):
    FAKE = 0
    PROXY = 1
    FUNCTIONAL = 2


class _ExcludeDispatchKeyGuard:
    def __init__(self, *a):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_IncludeDispatchKeyGuard = _ForceDispatchKeyGuard = _PreserveDispatchKeyGuard = _ExcludeDispatchKeyGuard
_AutoDispatchBelowAutograd = _AutoDispatchBelowADInplaceOrView = _ExcludeDispatchKeyGuard
_RestorePythonTLSSnapshot = _EnablePythonDispatcher = _DisablePythonDispatcher = _ExcludeDispatchKeyGuard
_EnablePreDispatch = _DisableFuncTorch = _DisableAutocast = _SetExcludeDispatchKeyGuard = _ExcludeDispatchKeyGuard
_DisableTorchDispatch = _ExcludeDispatchKeyGuard
_set_meta_in_tls_dispatch_include = _returns(None, "_set_meta_in_tls_dispatch_include")
_meta_in_tls_dispatch_include = _returns(False, "_meta_in_tls_dispatch_include")


# ----- autograd stand-ins (the rest is autograd.py) ----------------------------------------------

# _FunctionBase (torch.autograd.Function's C base) and _ImperativeEngine are autograd.py's.


class _LegacyVariableBase:
    pass


class _TensorMeta(type):
    pass


# ----- global switches --------------------------------------------------------------------------

_flags = {}


def _flag(name, default):
    _flags[name] = default

    def get(*a):
        return _flags[name]

    def set_(value, *a, **k):
        _flags[name] = value

    return get, set_


(_get_deterministic_algorithms, _set_deterministic_algorithms) = _flag("deterministic", False)
(_get_deterministic_algorithms_warn_only, _set_deterministic_algorithms_warn_only) = _flag("det_warn", False)
(_get_warnAlways, _set_warnAlways) = _flag("warn_always", False)
(_get_float32_matmul_precision, _set_float32_matmul_precision) = _flag("matmul_precision", "highest")
(_get_cudnn_enabled, _set_cudnn_enabled) = _flag("cudnn", False)
(_get_mkldnn_enabled, _set_mkldnn_enabled) = _flag("mkldnn", False)
(_is_multithreading_enabled, _set_multithreading_enabled) = _flag("multithreading", True)
(_is_view_replay_enabled, _set_view_replay_enabled) = _flag("view_replay", False)
(_is_grad_layout_enforcement_enabled, _set_grad_layout_enforcement_enabled) = _flag("grad_layout", False)
(_get_fp32_precision_getter, _set_fp32_precision_setter) = _flag("fp32_precision", "none")
(_jit_get_emit_hooks, _jit_set_emit_hooks) = _flag("emit_hooks", (None, None))
(_get_deterministic_fill_uninitialized_memory, _set_deterministic_fill_uninitialized_memory) = _flag("det_fill", True)
(_get_default_device, _set_default_device) = _flag("default_device", "cpu")
(_get_sm_carveout_experimental, _set_sm_carveout_experimental) = _flag("sm_carveout", None)


def _set_default_dtype(d):
    _tn_set_default_dtype(d)  # noqa: F821


def get_default_dtype():
    return _tn_get_default_dtype()  # noqa: F821


_get_default_dtype = get_default_dtype


def _set_default_tensor_type(t):
    raise NotImplementedError("torch.set_default_tensor_type is not implemented in torchnative")


def _get_tracing_state():
    return None


def _is_tracing():
    return False


def _log_api_usage_once(*a):
    pass


def _log_api_usage_metadata(*a, **k):
    pass


def _add_docstr(obj, doc):
    try:
        obj.__doc__ = doc
    except (AttributeError, TypeError):
        pass
    return obj


def _get_privateuse1_backend_name():
    return "privateuseone"


_is_autocast_available = _returns(False, "_is_autocast_available")
is_autocast_available = _is_autocast_available
_any_requires_grad = lambda *args: False
_has_storage = lambda t: t.device.type == "cpu"
_getenv = lambda name: __import__("os").environ.get(name)
_setenv = lambda name, value: __import__("os").environ.__setitem__(name, value)
_unsetenv = lambda name: __import__("os").environ.pop(name, None)
_get_tensor_metadata = lambda t: {}
_set_tensor_metadata = lambda t, m: None
_storage_throw_on_mutable_data_ptr = _returns(None, "_storage_throw_on_mutable_data_ptr")
_storage_throw_on_immutable_data_ptr = _returns(None, "_storage_throw_on_immutable_data_ptr")
_is_opaque_type_registered = _returns(False, "_is_opaque_type_registered")
_register_opaque_type = _returns(None, "_register_opaque_type")
_unregister_opaque_type = _returns(None, "_unregister_opaque_type")
_get_custom_class_python_wrapper = _returns(None, "_get_custom_class_python_wrapper")
_check_schema_allow_fake_script_object = _returns(None, "_check_schema_allow_fake_script_object")
_any_output_is_alias_to_input_or_output = _returns(False, "_any_output_is_alias_to_input_or_output")
_accelerator_getAccelerator = _returns(None, "_accelerator_getAccelerator")
_accelerator_hooks_device_count = _returns(0, "_accelerator_hooks_device_count")


def _get_accelerator(check=False):
    """The device collectives and FSDP default to: the CPU, as in upstream's CPU-only builds
    (unlike `_accelerator_getAccelerator`, which answers None there)."""
    import torch

    return torch.device("cpu")


has_openmp = False
has_mkl = False
has_lapack = False
_has_mps = False
_has_cuda = False
_has_xpu = False
_has_mtia = False
_has_kineto = False
_has_cudnn = False
has_cuda = False
has_cudnn = False
has_mps = False
has_spectral = True
_has_magma = False
_GLIBCXX_USE_CXX11_ABI = True
_PYBIND11_COMPILER_TYPE = ""
_PYBIND11_STDLIB = ""
_PYBIND11_BUILD_ABI = ""


def _show_config():
    return "torchnative torch face (torch._C in Rust); no CUDA, no MKL, no OpenMP"


def _cxx_flags():
    return ""


def _parallel_info():
    return "torchnative: one rayon pool"


def set_flush_denormal(mode):
    return False


def get_num_interop_threads():
    return 1


def set_num_interop_threads(n):
    pass


def _get_cpu_capability():
    return "AVX512"


def _initExtension(manager_path):
    import torch
    from torch._tensor import Tensor

    _this._tensor_class = Tensor
    _tn_set_classes(Tensor, Size, _device_factory, _disabled_torch_function_impl)  # noqa: F821
    for d, names in _dtype_names:
        for n in names:
            setattr(torch, n, d)
    for table in (_layouts, _memory_formats, _qschemes):
        for n, v in table.items():
            setattr(torch, n, v)
    _legacy_tensor_types(torch)
    # Upstream's default tensor type sets `torch.Storage` (multiprocessing's weak storage
    # references call through it).
    torch.Storage = torch.FloatStorage
    return True


class _LegacyTensorType(type):
    """torch.FloatTensor and friends: isinstance checks the dtype, calling makes a tensor."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, TensorBase) and obj.dtype == cls.dtype  # noqa: F821

    def __call__(cls, *args):
        import torch

        if _builtins.len(args) == 1 and isinstance(args[0], (torch.TypedStorage, torch.UntypedStorage)):
            # A tensor over the storage (shared, not copied), as upstream's legacy constructors make.
            storage = args[0]
            if isinstance(storage, torch.TypedStorage):
                if storage.dtype != cls.dtype:
                    raise TypeError(f"{cls.__name__}(): expected a {cls.dtype} storage, got {storage.dtype}")
                storage = storage._untyped_storage
            itemsize = torch.empty(0, dtype=cls.dtype).element_size()
            n = storage.nbytes() // itemsize
            return torch.empty(0, dtype=cls.dtype).set_(storage, 0, (n,), (1,))
        return torch.Tensor(*args).to(cls.dtype)


def _legacy_tensor_types(torch):
    for name, dtype_name in (("FloatTensor", "float32"), ("DoubleTensor", "float64"), ("HalfTensor", "float16"),
                             ("BFloat16Tensor", "bfloat16"), ("LongTensor", "int64"), ("IntTensor", "int32"),
                             ("ShortTensor", "int16"), ("CharTensor", "int8"), ("ByteTensor", "uint8"),
                             ("BoolTensor", "bool")):
        cls = _LegacyTensorType(name, (), {"dtype": getattr(torch, dtype_name), "is_cuda": False,
                                           "__module__": "torch"})
        setattr(torch, name, cls)


def _init_names(names):
    pass


_tensor_class = None

_submodule("_autograd", stubs=True)
_submodule("_functorch", stubs=True)
_submodule("_dynamo", stubs=True)
_submodule("_dynamo.eval_frame", stubs=True)
_submodule("_dynamo.guards", stubs=True)
_submodule("_export", stubs=True)
_submodule("_jit_tree_views", stubs=True)
_submodule("_distributed_rpc", stubs=True)
_submodule("_cpu", stubs=True)
_submodule("_onnx", stubs=True)
_submodule("_profiler", stubs=True)
_monitor = _submodule("_monitor", stubs=True)
_monitor.__all__ = ["Aggregation", "Stat", "Event", "EventHandlerHandle", "log_event", "register_event_handler",
                    "unregister_event_handler"]
_submodule("_lazy", stubs=True)
_submodule("_verbose", stubs=True)
_submodule("_acc", stubs=True)
_return_types = _submodule("_return_types")


def _make_return_type(name, fields):
    """A tuple with named fields that prints as upstream's structseq does."""
    import operator

    def __new__(cls, sequence=(), dict=None):
        values = tuple(sequence)
        if len(values) != len(fields):
            raise TypeError(f"torch.return_types.{name} takes a {len(fields)}-sequence ({len(values)}-sequence given)")
        return tuple.__new__(cls, values)

    def __repr__(self):
        return f"torch.return_types.{name}(\n" + ",\n".join(f"{f}={v!r}" for f, v in zip(fields, self)) + ")"

    def __reduce__(self):
        return (type(self), (tuple(self),))

    body = {"__new__": __new__, "__repr__": __repr__, "__reduce__": __reduce__, "__slots__": (),
            "__module__": "torch.return_types", "n_fields": len(fields), "n_sequence_fields": len(fields),
            "n_unnamed_fields": 0}
    body.update({f: property(operator.itemgetter(i)) for i, f in enumerate(fields)})
    return _builtins.type(name, (tuple,), body)


for _n, _fields in _tn_return_types():  # noqa: F821
    setattr(_return_types, _n, _make_return_type(_n, _fields))

del _name, _is_function, _is_method, _module, _n, _dunder, _opname


_dlpack_exchange_api = _returns(None, "_dlpack_exchange_api")

# PyO3 records the Rust-added names in __all__; upstream's _C has none, so `from torch._C
# import *` takes every public name.



# Upstream's legacy (non-zip) storage records: an int64 element count, then the raw bytes. Tensor
# pickling (`pickle.dumps(tensor)`, torch.distributed's object collectives) writes and reads them.
def _storage_read_exact(f, n, what):
    data = f.read(n)
    if data is None or _builtins.len(data) != n:
        got = 0 if data is None else _builtins.len(data)
        raise RuntimeError(f"{what}: the file ended after {got} of {n} bytes of a storage record")
    return data


def _storage_record_bytes(f, element_size, what):
    import struct

    (count,) = struct.unpack("<q", _storage_read_exact(f, 8, what))
    if count < 0:
        raise RuntimeError(f"{what}: a storage record of {count} elements")
    return _storage_read_exact(f, count * element_size, what)


def _storage_write_file(self, f, is_real_file, save_size, element_size):
    import struct

    data = self._tn_bytes()
    if save_size:
        f.write(struct.pack("<q", _builtins.len(data) // element_size))
    f.write(data)


def _storage_new_with_file(cls, f, element_size):
    return cls.from_buffer(_storage_record_bytes(f, element_size, "_new_with_file"))


def _storage_set_from_file(self, f, offset, is_real_file, element_size):
    import torch

    if offset is not None:
        f.seek(offset)
    data = _storage_record_bytes(f, element_size, "_set_from_file")
    if _builtins.len(data) != self.nbytes():
        raise RuntimeError(f"_set_from_file: the record holds {_builtins.len(data)} bytes, the storage {self.nbytes()}")
    if data:
        target = torch.empty(0, dtype=torch.uint8).set_(self, 0, (_builtins.len(data),), (1,))
        target.copy_(_tn_tensor_from_bytes(data, torch.uint8))  # noqa: F821
    return self


StorageBase._write_file = _storage_write_file  # noqa: F821
StorageBase._new_with_file = classmethod(_storage_new_with_file)  # noqa: F821
StorageBase._set_from_file = _storage_set_from_file  # noqa: F821


for _n in ("DoubleStorageBase", "FloatStorageBase", "LongStorageBase", "IntStorageBase", "ShortStorageBase",
           "CharStorageBase", "ByteStorageBase", "BoolStorageBase", "HalfStorageBase", "BFloat16StorageBase"):
    setattr(_this, _n, _builtins.type(_n, (StorageBase,), {}))



class _GeneratorMeta(type):
    """A heap metaclass of its own: torch._prims swaps it for CustomClassBaseMeta."""


class Generator(_GeneratorBase, metaclass=_GeneratorMeta):  # noqa: F821
    __module__ = "torch"


default_generator = Generator()
_tn_set_default_generator(default_generator)  # noqa: F821
Generator.graphsafe_set_state = _refuse("Generator.graphsafe_set_state")  # noqa: F821
Generator.graphsafe_get_state = _refuse("Generator.graphsafe_get_state")  # noqa: F821
Generator.clone_state = _refuse("Generator.clone_state")  # noqa: F821
Generator.philox_state = _refuse("Generator.philox_state")  # noqa: F821


def _set_generator_metaclass(meta):
    """torch._prims swaps Generator's metaclass so it registers as an opaque custom class."""
    Generator.__class__ = meta  # noqa: F821


def _stub_class(qualname):
    """A stand-in class: it can be made (upstream makes some at import, e.g. a
    CompilationUnit), and every method of it refuses by name when called."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _refuse(f"{qualname}.{name}")

    return _StubMeta(qualname, (), {"__init__": __init__, "__getattr__": __getattr__, "__module__": "torch._C"})


class _StubMeta(type):
    """Upstream mixes the metaclass of pybind11 classes with others (`type(torch._C._Await)`),
    so stand-in classes need a metaclass of their own, not `type` itself. Their methods are
    refusing stand-ins too (upstream attaches docstrings to them at import)."""

    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        qual = f"{cls.__name__}.{name}"
        value = _stub_class(qual) if name.lstrip("_")[:1].isupper() else _refuse(qual)
        setattr(cls, name, value)
        return value


# Classes upstream's Python names at import (TorchScript, profiling, benchmarking): they exist
# so that modules import, and refuse by name when instantiated.
for _n in ("IODescriptor", "JITException", "Future", "_Await", "_MobileOptimizerType", "GraphExecutorState",
           "AliasDb", "_InsertPoint", "Use", "Value", "Block", "Node", "Graph", "_UpgraderEntry", "_UpgraderRange",
           "ScriptModuleSerializer", "SerializationStorageContext", "DeserializationStorageContext",
           "ConcreteModuleTypeBuilder", "ConcreteModuleType", "CallStack", "ErrorReport", "CompilationUnit",
           "ScriptObject", "ScriptModule", "LiteScriptModule", "ScriptFunction", "ScriptMethod", "ScriptDict",
           "ScriptList", "ModuleDict", "ParameterDict", "BufferDict", "Module", "_LinalgBackend",
           "BatchNormBackend", "_BlasBackend", "_ROCmFABackend", "ConvBackend", "LoggerBase", "NoopLogger",
           "LockingLogger", "AggregationType", "FileCheck", "PyTorchFileReader", "PyTorchFileWriter",
           "_SchemaArgType", "_SchemaArgument", "_SchemaInfo", "BenchmarkConfig", "BenchmarkExecutionStats",
           "ThroughputBenchmark", "_SDPAParams", "_SDPBackend", "_TensorIteratorSpec", "_TensorIterator",
           "TracingState", "IValue", "SourceRange", "TreeView", "Ident", "ClassDef", "Def", "Decl",
           "CapturedTraceback", "_NodeBase", "_NodeIter", "Stream", "Event", "_acceleratorGraph",
           "_StaticCudaLauncher", "_StaticXpuLauncher", "AnyType"):
    if _n not in globals():
        setattr(_this, _n, _stub_class(_n))


class ErrorReport(metaclass=_StubMeta):
    """TorchScript's error context: only its (empty) call stack is read outside TorchScript."""

    def __init__(self, *args):
        pass

    @staticmethod
    def call_stack():
        return ""


class _SourceRangeFactory:
    """TorchScript source ranges; upstream builds them while checking `@_overload` bodies."""

    def __init__(self, text, filename, file_lineno, leading_whitespace_len):
        self.source = text
        self.filename = filename
        self.file_lineno = file_lineno
        self.leading_whitespace_len = leading_whitespace_len

    def make_range(self, line, start_col, end_col):
        return (line, start_col, end_col)

    def make_raw_range(self, start, end):
        return (start, end)


_jit_tree_views.SourceRangeFactory = _SourceRangeFactory  # noqa: F821
for _n in _monitor.__all__:
    getattr(_monitor, _n)


class AcceleratorError(RuntimeError):
    pass


class OutOfMemoryError(RuntimeError):
    pass


class _DistError(RuntimeError):
    pass


class _DistBackendError(_DistError):
    pass


class _DistStoreError(_DistError):
    pass


class _DistNetworkError(_DistError):
    pass


class _DistQueueEmptyError(_DistStoreError):
    pass


# Upstream names them as torch.distributed shows them (tracebacks print these names).
for _cls, _name in ((_DistError, "DistError"), (_DistBackendError, "DistBackendError"),
                    (_DistStoreError, "DistStoreError"), (_DistNetworkError, "DistNetworkError"),
                    (_DistQueueEmptyError, "QueueEmptyError")):
    _cls.__name__ = _cls.__qualname__ = _name
    _cls.__module__ = "torch.distributed"




# ----- Tensor methods upstream binds by hand in C++ (thin: each is one door call) -------------

def _cast_method(dtype_name):
    def cast(self, memory_format=None):
        import torch

        if memory_format is None:
            return self.to(getattr(torch, dtype_name))
        return self.to(getattr(torch, dtype_name), memory_format=memory_format)

    cast.__name__ = dtype_name
    return cast


for _n, _d in (("half", "float16"), ("float", "float32"), ("double", "float64"), ("bfloat16", "bfloat16"),
               ("long", "int64"), ("int", "int32"), ("short", "int16"), ("char", "int8"), ("byte", "uint8"),
               ("bool", "bool")):
    setattr(TensorBase, _n, _cast_method(_d))  # noqa: F821


def _cpu(self, memory_format=None):
    return self


def _to_accelerator(kind):
    def to(self, *args, **kwargs):
        _check_device(kind)

    to.__name__ = kind
    return to


def _new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    return _tensor(data, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


def _new(self, *args, device=None):
    """Tensor.new, upstream's legacy constructor in this tensor's dtype: nothing (empty),
    sizes (uninitialized), a storage (viewed whole, sharing memory), a tensor of the same
    dtype (aliased), or data (copied)."""
    import torch

    if device is not None and torch.device(device).type != "cpu":
        raise RuntimeError(f"Tensor.new: device {device} is not available in torchnative")
    if not args:
        return torch.empty(0, dtype=self.dtype)
    first = args[0]
    if len(args) == 1 and isinstance(first, (torch.UntypedStorage, torch.TypedStorage)):
        if isinstance(first, torch.TypedStorage):
            if first.dtype != self.dtype:
                raise TypeError(f"Expected a Storage of type {self.dtype} but got {first.dtype}")
            first = first._untyped_storage
        size = first.nbytes() // self.element_size()
        return torch.empty(0, dtype=self.dtype).set_(first, 0, (size,), (1,))
    if len(args) == 1 and isinstance(first, TensorBase):  # noqa: F821
        if first.dtype != self.dtype:
            raise TypeError(f"Tensor.new: expected a tensor of type {self.dtype} but got {first.dtype}")
        return first.as_strided(first.size(), first.stride(), first.storage_offset())
    if _builtins.all(isinstance(a, _builtins.int) for a in args):
        return torch.empty(args, dtype=self.dtype)
    if len(args) == 1 and isinstance(first, Size):
        return torch.empty(first, dtype=self.dtype)
    if len(args) == 1:
        return _tensor(first, dtype=self.dtype)
    raise TypeError("Tensor.new(): expected sizes, a storage, a tensor or data")


_TYPE_NAMES = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "float16": "torch.HalfTensor",
               "bfloat16": "torch.BFloat16Tensor", "int64": "torch.LongTensor", "int32": "torch.IntTensor",
               "int16": "torch.ShortTensor", "int8": "torch.CharTensor", "uint8": "torch.ByteTensor",
               "bool": "torch.BoolTensor"}


def _type(self, dtype=None, non_blocking=False, **kwargs):
    """Tensor.type(): the legacy type name, or a cast to a dtype / legacy type (name)."""
    import torch

    if dtype is None:
        return _TYPE_NAMES[repr(self.dtype).split(".")[1]]
    if isinstance(dtype, str):
        by_name = {v: k for k, v in _TYPE_NAMES.items()}
        if dtype not in by_name:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = getattr(torch, by_name[dtype])
    elif isinstance(dtype, _builtins.type) and hasattr(dtype, "dtype"):
        dtype = dtype.dtype
    return self if self.dtype == dtype else self.to(dtype)


def _contains(self, element):
    return _builtins.bool((self == element).any())


_door_to = TensorBase.to  # noqa: F821


def _to(self, *args, **kwargs):
    """Tensor.to: upstream's hand-written binding also takes a device alone
    (`to(Device device=None, ScalarType dtype=None, bool non_blocking=False, bool copy=False)`),
    which no ATen schema spells; that form goes to `to.dtype_layout` by keyword."""
    if args and isinstance(args[0], (device, _builtins.str)) and (
            len(args) == 1 or isinstance(args[1], _builtins.bool)):
        names = ("device", "non_blocking", "copy")
        if len(args) > len(names):
            raise TypeError(f"to() takes at most {len(names)} positional arguments after self")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"to() got multiple values for argument '{name}'")
            kwargs[name] = value
        return _door_to(self, **kwargs)
    if args and args[0] is None:
        # `to(None)`, `to(None, dtype)`: the same binding with no device
        names = ("device", "dtype", "non_blocking", "copy")
        if len(args) > len(names):
            raise TypeError(f"to() takes at most {len(names)} positional arguments after self")
        for name, value in zip(names, args):
            if name in kwargs:
                raise TypeError(f"to() got multiple values for argument '{name}'")
            if value is not None:
                kwargs[name] = value
        return _door_to(self, **kwargs)
    return _door_to(self, *args, **kwargs)


_to.__name__ = "to"
TensorBase.to = _to  # noqa: F821
TensorBase.cpu = _cpu  # noqa: F821
TensorBase.cuda = _to_accelerator("cuda")  # noqa: F821
TensorBase.xpu = _to_accelerator("xpu")  # noqa: F821
TensorBase.new_tensor = _new_tensor  # noqa: F821
TensorBase.new = _new  # noqa: F821
TensorBase.type = _type  # noqa: F821
TensorBase.__contains__ = _contains  # noqa: F821
TensorBase.__floordiv__ = lambda self, other: self.div(other, rounding_mode="floor")  # noqa: F821
TensorBase.__ifloordiv__ = lambda self, other: self.div_(other, rounding_mode="floor")  # noqa: F821
TensorBase.__rfloordiv__ = lambda self, other: _tensor(other, dtype=None).div(self, rounding_mode="floor")  # noqa: F821
TensorBase.__pow__ = lambda self, other: self.pow(other)  # noqa: F821
TensorBase.__radd__ = lambda self, other: self.add(other)  # noqa: F821
TensorBase.__rmul__ = lambda self, other: self.mul(other)  # noqa: F821
TensorBase.__rand__ = lambda self, other: self.bitwise_and(other)  # noqa: F821
TensorBase.__ror__ = lambda self, other: self.bitwise_or(other)  # noqa: F821
TensorBase.__rxor__ = lambda self, other: self.bitwise_xor(other)  # noqa: F821
TensorBase.__long__ = TensorBase.__int__  # noqa: F821
TensorBase.__nonzero__ = TensorBase.__bool__  # noqa: F821
TensorBase.__complex__ = _refuse("TensorBase.__complex__")  # noqa: F821
TensorBase._make_wrapper_subclass = staticmethod(_refuse("TensorBase._make_wrapper_subclass"))  # noqa: F821
TensorBase.storage_type = _refuse("TensorBase.storage_type")  # noqa: F821
TensorBase.apply_ = _refuse("TensorBase.apply_")  # noqa: F821
TensorBase.map_ = _refuse("TensorBase.map_")  # noqa: F821
TensorBase.map2_ = _refuse("TensorBase.map2_")  # noqa: F821
TensorBase._use_count = lambda self: 1  # noqa: F821
TensorBase._grad = property(lambda self: self.grad, lambda self, g: setattr(self, "grad", g))  # noqa: F821
TensorBase._grad_fn = property(lambda self: None)  # noqa: F821
TensorBase._backward_hooks = None  # noqa: F821
TensorBase._post_accumulate_grad_hooks = None  # noqa: F821
TensorBase._dtensor__new__ = staticmethod(_refuse("TensorBase._dtensor__new__"))  # noqa: F821
TensorBase.T = property(lambda self: self.permute(*range(self.dim() - 1, -1, -1)))  # noqa: F821
TensorBase.mT = property(lambda self: self.transpose(-2, -1))  # noqa: F821
TensorBase.H = property(lambda self: self.T.conj())  # noqa: F821
TensorBase.mH = property(lambda self: self.mT.conj())  # noqa: F821
TensorBase.itemsize = property(lambda self: self.element_size())  # noqa: F821
TensorBase.nbytes = property(lambda self: self.element_size() * self.numel())  # noqa: F821
TensorBase.const_data_ptr = lambda self: self.data_ptr()  # noqa: F821
TensorBase.mutable_data_ptr = lambda self: self.data_ptr()  # noqa: F821
TensorBase.is_ipu = TensorBase.is_xla = TensorBase.is_mtia = TensorBase.is_maia = property(lambda self: False)  # noqa: F821
TensorBase.grad_dtype = property(lambda self: None)  # noqa: F821
for _n in ("ipu", "mtia", "mps", "hpu"):
    setattr(TensorBase, _n, _to_accelerator(_n))  # noqa: F821
TensorBase.cdouble = TensorBase.cfloat = _refuse("TensorBase.cfloat")  # noqa: F821
(_get_backcompat_broadcast_warn, _set_backcompat_broadcast_warn) = _flag("bc_broadcast", False)
(_get_backcompat_keepdim_warn, _set_backcompat_keepdim_warn) = _flag("bc_keepdim", False)
_error_if_any_worker_fails = _returns(None, "_error_if_any_worker_fails")
_remove_worker_pids = _returns(None, "_remove_worker_pids")
_set_worker_pids = _returns(None, "_set_worker_pids")
_set_worker_signal_handlers = _returns(None, "_set_worker_signal_handlers")

# Names upstream's modules import from torch._C at module level (found by scanning the
# vendored tree's `from torch._C import ...` statements). Those not defined above are refusing
# stand-ins, so every module imports and a call says what is missing.
_IMPORTED_BY_UPSTREAM = """
AnyType AwaitType BoolType ComplexType DeviceObjType DictType DispatchKey DispatchKeySet
EnumType ErrorReport FileCheck FloatType FunctionSchema Future FutureType Graph
IntType InterfaceType ListType NoneType NumberType OptionalType RRefType ScriptDict
ScriptList ScriptMethod ScriptObject StreamObjType StringType TensorType TupleType UnionType
_Await _CUDAGraph _DTensor_OpSchema_post_init _DTensor_OpSchema_recompute_comparison_key _DistStoreError _GeneratorType _ImperativeEngine _LinAlgError
_MemPool _MobileOptimizerType _NodeBase _NodeIter _SDPAParams _SDPBackend _ScalingType _SwizzleType
_TensorIterator _TensorIteratorSpec _XPUGraph _acceleratorGraph _add_docstr _compile_graph_to_code_table _cuda_CUDAAllocator _cuda_CUDAAllocator_AllocatorState
_cuda_beginAllocateCurrentThreadToPool _cuda_beginAllocateToPool _cuda_endAllocateToPool _cuda_getCurrentRawStream _cuda_isCurrentStreamCapturing _cuda_releasePool _cudart _cudnn
_cusparselt _disabled_torch_function_impl _dispatch_is_included_in_alias _dispatch_keys _enter_dual_level _error_if_any_worker_fails _exit_dual_level _fft
_functionalization _functionalization_reapply_views_tls _functions _fx_map_aggregate _fx_map_arg _generate_upgraders_graph _get_backcompat_broadcast_warn _get_backcompat_keepdim_warn
_get_cpp_backtrace _get_default_device _get_dispatch_stack_at _get_function_stack_at _get_privateuse1_backend_name _graph_pool_handle _has_torch_function _has_torch_function_unary
_has_torch_function_variadic _initExtension _instruction_counter _is_torch_function_mode_enabled _itt _len_torch_dispatch_stack _len_torch_function_stack _linalg
_mtia_getCurrentRawStream _nested _nvtx _onnx _pop_torch_dispatch_stack _pop_torch_function_stack _push_on_torch_dispatch_stack _push_on_torch_function_stack
_remove_worker_pids _rename_privateuse1_backend _set_backcompat_broadcast_warn _set_backcompat_keepdim_warn _set_cached_tensors_enabled _set_worker_pids _set_worker_signal_handlers _sparse
_special _to_dlpack _xpu_getCurrentRawStream _xpu_graph_pool_handle _xpu_isCurrentStreamCapturing default_generator dtype
""".split()
# Accelerator names stay absent, as in upstream's CPU-only builds: upstream probes them with
# hasattr and installs its own dummies.
_ACCELERATOR_WORDS = ("cuda", "xpu", "mtia", "mps", "cudnn", "nccl", "rocm", "mempool", "gds")
for _n in _IMPORTED_BY_UPSTREAM:
    if _n not in globals() and not any(w in _n.lower() for w in _ACCELERATOR_WORDS):
        setattr(_this, _n, _stub_class(_n) if _n.lstrip("_")[:1].isupper() else _refuse(_n))

for _n in ['_aoti', '_autograd', '_distributed', '_distributed_autograd', '_distributed_c10d', '_distributed_rpc', '_distributed_rpc_testing', '_dynamo', '_dynamo.eval_frame', '_dynamo.guards', '_dynamo.utils', '_export', '_functorch', '_jit_tree_views', '_monitor', '_onnx', '_profiler']:
    if f"torch._C.{_n}" not in _sys.modules:
        _submodule(_n, stubs=True)


class _WaitCounter:
    """torch.monitor's wait counters: upstream publishes them to its own monitoring; here they
    time nothing, so the code they wrap (torch.distributed's) runs unchanged. A counter is its
    own guard."""

    def __init__(self, key):
        self.key = key

    def guard(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_sys.modules["torch._C._monitor"]._WaitCounter = _WaitCounter
del _WaitCounter  # torch._C._monitor's, not torch._C's


# Initialisers upstream calls once at import; each reports success as upstream's do.
for _n in ("_jit_init", "_autograd_init", "_multiprocessing_init", "_c10d_init", "_rpc_init", "_dist_autograd_init",
           "_faulty_agent_init", "_functorch_init"):
    setattr(_this, _n, _returns(True, _n))

(_is_fwd_grad_enabled, _set_fwd_grad_enabled) = _flag("fwd_grad", False)
(_get_cudnn_benchmark, _set_cudnn_benchmark) = _flag("cudnn_benchmark", False)
(_get_cudnn_deterministic, _set_cudnn_deterministic) = _flag("cudnn_deterministic", False)
(_get_cudnn_allow_tf32, _set_cudnn_allow_tf32) = _flag("cudnn_tf32", True)
(_get_cudnn_depthwise_kernel, _set_cudnn_depthwise_kernel) = _flag("cudnn_depthwise", False)
(_get_cublas_allow_tf32, _set_cublas_allow_tf32) = _flag("cublas_tf32", False)
(_get_mkldnn_deterministic, _set_mkldnn_deterministic) = _flag("mkldnn_deterministic", False)
(_get_onednn_allow_tf32, _set_onednn_allow_tf32) = _flag("onednn_tf32", False)
(_get_miopen_immediate, _set_miopen_immediate) = _flag("miopen_immediate", False)
(_is_any_autocast_enabled, _set_any_autocast_enabled) = _flag("any_autocast", False)
(_tracer_warn_use_python, _set_tracer_warn_use_python) = _flag("tracer_warn", None)
_has_mkldnn = False
_logging_set_logger = _returns(None, "_logging_set_logger")
_additional_keys_to_prop_for_wrapper_tensors = DispatchKeySet()
_last_executed_optimized_graph = _refuse("_last_executed_optimized_graph")
_jit_flatten = _refuse("_jit_flatten")
_jit_unflatten = _refuse("_jit_unflatten")
_const_dlpack_exchange_api = _returns(None, "_const_dlpack_exchange_api")
_DTensor_compute_global_tensor_info = _refuse("_DTensor_compute_global_tensor_info")


def _infer_size(a, b):
    import torch

    return torch.broadcast_shapes(a, b)




_functorch.TransformType = _enum.Enum("TransformType", "Torch Vmap Grad Jvp Functionalize", module="torch._C._functorch")  # noqa: F821
_functorch.RandomnessType = _enum.Enum("RandomnessType", "Error Same Different", module="torch._C._functorch")  # noqa: F821
_has_gds = False
# Upstream's CPU builds bind these MTIA graph names too (torch/mtia subclasses them at import).
_MTIAGraph = _stub_class("_MTIAGraph")


def _multiprocessing_init():
    """Adds torch.multiprocessing's prctl(PR_SET_PDEATHSIG) wrapper, as upstream's does."""

    def _prctl_pr_set_pdeathsig(signal):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(1, _builtins.int(signal), 0, 0, 0) != 0:  # PR_SET_PDEATHSIG
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")

    _sys.modules["torch.multiprocessing"]._prctl_pr_set_pdeathsig = _prctl_pr_set_pdeathsig
    return True




def _real(self):
    import torch

    return torch.real(self)


def _imag(self):
    import torch

    return torch.imag(self)


def _set_part(part):
    # `x.real = v` / `x.imag = v` copy into the view, as upstream's setters do.
    def setter(self, value):
        getattr(self, part).copy_(value)

    return setter


TensorBase.real = property(_real, _set_part("real"))  # noqa: F821
TensorBase.imag = property(_imag, _set_part("imag"))  # noqa: F821


_fake_dispatch_register_op_impl = _returns(None, "_fake_dispatch_register_op_impl")
_fake_dispatch_register_prim_meta = _returns(None, "_fake_dispatch_register_prim_meta")

# Python decompositions and meta functions upstream registers (torch._decomp): the door runs a
# registered decomposition for an overload that has no kernel of its own.
_python_decomps = set()


def _fake_dispatch_register_decomp(name, overload):
    _python_decomps.add(_full_name(name, overload))


_fake_dispatch_register_meta = _returns(None, "_fake_dispatch_register_meta")
# Upstream binds MTIA's fork check in every build (torch.random.manual_seed asks it).
_mtia_isInBadFork = _returns(False, "_mtia_isInBadFork")
_mtia_isBuilt = _returns(False, "_mtia_isBuilt")
# ... and MPS's availability queries.
_mps_is_available = _returns(False, "_mps_is_available")
_mps_is_on_macos_or_newer = _returns(False, "_mps_is_on_macos_or_newer")
_mtia_getDeviceCount = _returns(0, "_mtia_getDeviceCount")

# functorch's queries about wrapper tensors: torchnative has no functorch transforms, so no
# tensor is wrapped, no interpreter is active and the layer stack is empty.
for _n in ("is_batchedtensor", "is_functionaltensor", "is_functorch_wrapped_tensor", "is_gradtrackingtensor",
           "is_legacy_batchedtensor", "get_inplace_requires_grad_allowed",
           "get_single_level_autograd_function_allowed"):
    setattr(_functorch, _n, _returns(False, _n))  # noqa: F821
for _n in ("peek_interpreter_stack", "maybe_current_level", "maybe_get_level_none"):
    setattr(_functorch, _n, _returns(None, _n))  # noqa: F821
_functorch.get_interpreter_stack = lambda: []  # noqa: F821
_functorch.get_dynamic_layer_stack_depth = _returns(0, "get_dynamic_layer_stack_depth")  # noqa: F821
_functorch.maybe_get_level = lambda tensor: -1  # noqa: F821
_functorch.maybe_get_bdim = lambda tensor: -1  # noqa: F821
_functorch.get_unwrapped = lambda tensor: tensor  # noqa: F821
_functorch.unwrap_if_dead = lambda tensor: tensor  # noqa: F821
_functorch.set_inplace_requires_grad_allowed = _returns(None, "set_inplace_requires_grad_allowed")  # noqa: F821
_functorch.set_single_level_autograd_function_allowed = _returns(None, "set_single_level_autograd_function_allowed")  # noqa: F821

# torch.* functions upstream binds by hand outside the yaml: functionalization (no tensor is
# functional here), thread and grad-mode queries (the same functions as torch._C's), sparse.
for _n in ("_is_functional_tensor", "_is_functional_tensor_base", "_functionalize_is_symbolic",
           "_functionalize_has_metadata_mutation", "_functionalize_are_all_mutations_hidden_from_autograd",
           "_functionalize_are_all_mutations_under_no_grad_or_inference_mode", "_functionalize_was_storage_changed",
           "_functionalize_was_inductor_storage_resized"):
    setattr(_VariableFunctions, _n, _returns(False, _n))
for _n in ("_disable_functionalization", "_enable_functionalization", "_from_functional_tensor",
           "_functionalize_apply_view_metas", "_functionalize_commit_update", "_functionalize_inductor_storage_resized_counter",
           "_functionalize_mark_mutation_hidden_from_autograd", "_functionalize_mark_storage_changed",
           "_functionalize_mutation_counter", "_functionalize_replace", "_functionalize_storage_changed_counter",
           "_functionalize_sync", "_functionalize_unsafe_set", "_sync", "_to_functional_tensor", "dsmm", "hsmm",
           "saddmm", "spmm"):
    setattr(_VariableFunctions, _n, _refuse(f"_VariableFunctions.{_n}"))
for _n in ("get_default_dtype", "get_num_interop_threads", "get_num_threads", "is_grad_enabled",
           "is_inference_mode_enabled", "set_flush_denormal", "set_num_interop_threads", "set_num_threads"):
    setattr(_VariableFunctions, _n, globals()[_n])
_VariableFunctions.init_num_threads = _returns(None, "init_num_threads")

# The dtype, layout and memory-format singletons live on torch._C too.
for _d, _names in _dtype_names:
    for _n in _names:
        setattr(_this, _n, _d)
for _table in (_layouts, _memory_formats, _qschemes):
    for _n, _v in _table.items():
        setattr(_this, _n, _v)


def _stub_function(name):
    """The remaining functions of upstream's stubs: queries answer as a build without the
    feature does (False), `_get_X`/`_set_X` pairs keep their value, everything else refuses by
    name when called."""
    import re as _re

    if _re.match(r"_*(is|has|can|are)_", name) or name.endswith(("_enabled", "_available")):
        return _returns(False, name)
    if name.startswith(("_get_", "_set_", "get_", "set_")):
        key = name.split("_", 2)[-1] if name.startswith("_") else name.split("_", 1)[1]
        _flags.setdefault(key, None)
        if "_get_" in f"_{name}"[:6]:
            return lambda *a: _flags[key]

        def set_(value=None, *a, **k):
            _flags[key] = value

        set_.__name__ = name
        return set_
    return _refuse(name)


for _line in _STUB_LINES:
    if _line.startswith("def "):
        _n = _line[4:].split("(", 1)[0].split("[", 1)[0]
        if _n not in globals() and not any(w in _n.lower() for w in _ACCELERATOR_WORDS):
            setattr(_this, _n, _stub_function(_n))


def _embedding_backward(grad, indices, num_weights, padding_idx, scale_grad_by_freq, sparse):
    # upstream's CompositeImplicitAutograd body: the dense form (sparse gradients refused)
    import torch

    if sparse:
        raise NotImplementedError("torchnative: sparse embedding gradients are not implemented")
    return torch.ops.aten.embedding_dense_backward(grad, indices, num_weights, padding_idx,
                                                   scale_grad_by_freq)


def _convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    # convolution's gradients written as convolutions (upstream's CPU kernels compute the same
    # sums with im2col + GEMM): the input's gradient is the adjoint convolution of the output's
    # gradient, the weight's a correlation of the input with it, group by group
    import torch

    conv = torch.ops.aten.convolution
    nd = weight.dim() - 2
    spatial = _builtins.list(_builtins.range(2, nd + 2))
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            # the transposed convolution's adjoint is the convolution
            grad_input = conv(grad_output, weight, None, stride, padding, dilation, False,
                              [0] * nd, groups)
        else:
            # the output padding that makes the transposed convolution give back the input's size
            extra = []
            for d in _builtins.range(nd):
                covered = ((grad_output.shape[d + 2] - 1) * stride[d] - 2 * padding[d]
                           + dilation[d] * (weight.shape[d + 2] - 1) + 1)
                extra.append(input.shape[d + 2] - covered)
            grad_input = conv(grad_output, weight, None, stride, padding, dilation, True, extra,
                              groups)
    if output_mask[1]:
        # non-transposed: w[o, c, a] = sum x[n, c, p*stride + a*dil - pad] dy[n, o, p];
        # transposed: w[c, o, a] = sum dy[n, o, p*stride + a*dil - pad] x[n, c, p]. Either is a
        # convolution with stride and dilation trading places, group by group.
        long, short = (grad_output, input) if transposed else (input, grad_output)
        n_long, n_short = long.shape[1] // groups, short.shape[1] // groups
        parts = []
        for g in _builtins.range(groups):
            a = long.narrow(1, g * n_long, n_long).transpose(0, 1)
            b = short.narrow(1, g * n_short, n_short).transpose(0, 1)
            w = conv(a, b, None, dilation, padding, stride, False, [0] * nd, 1)
            for d in _builtins.range(nd):
                w = w.narrow(d + 2, 0, weight.shape[d + 2])
            parts.append(w.transpose(0, 1))
        grad_weight = parts[0] if groups == 1 else torch.cat(parts, 0)
        grad_weight = grad_weight.contiguous()
    if output_mask[2]:
        grad_bias = grad_output.sum([0] + spatial)
    return grad_input, grad_weight, grad_bias


# CompositeImplicitAutograd bodies upstream writes in C++ and torch._decomp does not register
# (and convolution_backward, whose CPU kernel the face writes as convolutions).
_IMPLICIT_BODIES = {"aten::embedding_backward": _embedding_backward,
                    "aten::convolution_backward": _convolution_backward}


def _tn_has_decomp(full):
    return (full in _python_decomps or full in _IMPLICIT_BODIES
            or _foreach_base(full) is not None)


def _tn_run_decomp(full, args, kwargs):
    """Runs upstream's registered Python decomposition of `full` (e.g. `aten::unbind.int`), or
    a `_foreach_*` operator as upstream's CPU kernels run it: the per-tensor operator on each
    element of the lists."""
    import torch
    from torch._decomp import decomposition_table

    ns, rest = full.split("::", 1)
    name, _, overload = rest.partition(".")
    op = getattr(getattr(getattr(torch.ops, ns), name), overload or "default")
    if op in decomposition_table:
        return decomposition_table[op](*args, **kwargs)
    if full in _IMPLICIT_BODIES:
        return _IMPLICIT_BODIES[full](*args, **kwargs)
    return _run_foreach(full, args, kwargs)


# `_foreach_<op>` overloads whose per-tensor operator has another name (upstream's foreach
# maximum/minimum with a scalar are clamp_min/clamp_max; norm is linalg_vector_norm).
_FOREACH_RENAMED = {("maximum", "Scalar"): "clamp_min", ("maximum", "ScalarList"): "clamp_min",
                    ("minimum", "Scalar"): "clamp_max", ("minimum", "ScalarList"): "clamp_max",
                    ("norm", "Scalar"): "linalg_vector_norm"}


def _foreach_base(full):
    """(per-tensor operator name, overload, in place) of an `aten::_foreach_*` overload, or None."""
    if not full.startswith("aten::_foreach_"):
        return None
    name, _, overload = full[len("aten::_foreach_"):].partition(".")
    in_place = name.endswith("_")
    base = name.rstrip("_")
    base = _FOREACH_RENAMED.get((base, overload), base)
    return (base + ("_" if in_place else ""), overload, in_place)


def _run_foreach(full, args, kwargs):
    """The per-tensor operator over the lists: list arguments (tensors or scalars) are taken
    element by element, the rest (a single tensor, a scalar) passed to every call; a `Tensor
    scalars` argument of addcmul/addcdiv gives one value per element, as upstream's kernels read
    it."""
    name, overload, in_place = _foreach_base(full)
    lists = [a for a in args if isinstance(a, (_builtins.list, _builtins.tuple))]
    if not lists:
        raise NotImplementedError(f"operator {full} has no kernel in torchnative")
    n = len(lists[0])
    if any(len(a) != n for a in lists):
        raise RuntimeError(f"{full}: tensor lists must have the same number of tensors, got "
                           + ", ".join(str(len(a)) for a in lists))
    per_value = overload == "Tensor" and name.rstrip("_") in ("addcmul", "addcdiv")
    # The foreach schema's trailing arguments (`value`, `alpha`) go by position onto the
    # per-tensor operator's keyword-only ones, as upstream's C++ passes them.
    func = _tn_ag_aten(name)
    trailing = _builtins.list(kwargs.values())
    results = []
    for i in range(n):
        call_args = []
        for k, a in enumerate(args):
            if isinstance(a, (_builtins.list, _builtins.tuple)):
                call_args.append(a[i])
            elif per_value and k == len(args) - 1:
                call_args.append(a[i].item())
            else:
                call_args.append(a)
        results.append(func(*call_args, *trailing))
    return None if in_place else results




def _group_tensors_by_device_and_dtype(tensorlistlist, with_indices=False):
    """Upstream's grouping for the optimizers' foreach paths: the entries at each index of
    the lists, grouped by the device and dtype of the first list's tensor there, in order of
    first appearance: {(device, dtype): ([list per input list], [indices or nothing])}."""
    groups = {}
    for i, t in enumerate(tensorlistlist[0]):
        key = (t.device, t.dtype)
        if key not in groups:
            groups[key] = ([[] for _ in tensorlistlist], [])
        lists, indices = groups[key]
        for j, tl in enumerate(tensorlistlist):
            lists[j].append(tl[i] if i < len(tl) else None)
        if with_indices:
            indices.append(i)
    return groups


# DTensor placements (upstream's python_placement.cpp): plain value classes.
class _Placement:
    __slots__ = ()

    def is_partial(self, reduce_op=None):
        return False

    def is_replicate(self):
        return False

    def is_shard(self, dim=None):
        return False


class _Shard(_Placement):
    __slots__ = ("dim",)

    def __init__(self, dim):
        self.dim = dim

    def is_shard(self, dim=None):
        return dim is None or dim == self.dim

    def __eq__(self, other):
        return type(other) is type(self) and other.dim == self.dim

    def __hash__(self):
        return hash((type(self).__name__, self.dim))

    def __repr__(self):
        return f"Shard(dim={self.dim})"


class _StridedShard(_Shard):
    __slots__ = ("split_factor",)

    def __init__(self, dim, *, split_factor):
        super().__init__(dim)
        self.split_factor = split_factor

    def __eq__(self, other):
        return type(other) is type(self) and (other.dim, other.split_factor) == (self.dim, self.split_factor)

    def __hash__(self):
        return hash((type(self).__name__, self.dim, self.split_factor))

    def __repr__(self):
        return f"_StridedShard(dim={self.dim}, sf={self.split_factor})"


class _Replicate(_Placement):
    __slots__ = ()

    def is_replicate(self):
        return True

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self).__name__)

    def __repr__(self):
        return "Replicate()"


class _Partial(_Placement):
    __slots__ = ("reduce_op",)

    def __init__(self, reduce_op=None):
        self.reduce_op = "sum" if reduce_op is None else reduce_op

    def is_partial(self, reduce_op=None):
        return reduce_op is None or reduce_op == self.reduce_op

    def __eq__(self, other):
        return type(other) is type(self) and other.reduce_op == self.reduce_op

    def __hash__(self):
        return hash((type(self).__name__, self.reduce_op))

    def __repr__(self):
        return f"Partial({self.reduce_op})"


_distributed_mod = _sys.modules["torch._C._distributed"]
for _cls, _n in ((_Placement, "Placement"), (_Shard, "Shard"), (_StridedShard, "StridedShard"),
                 (_Replicate, "Replicate"), (_Partial, "Partial")):
    _cls.__name__ = _cls.__qualname__ = _n
    _cls.__module__ = "torch._C._distributed"
    setattr(_distributed_mod, _n, _cls)


# dynamo's frame-evaluation hooks: torchnative does not compile frames, so no callback is ever
# installed (setting one other than None/False refuses), per-code strategies are recorded, and
# the queries answer for an interpreter that runs every frame as Python does.
_eval_frame = _sys.modules["torch._C._dynamo.eval_frame"]
_eval_frame._FrameAction = _enum.IntEnum("_FrameAction", {"DEFAULT": 0, "SKIP": 1, "RUN_ONLY": 2})


class _FrameExecStrategy:
    def __init__(self, cur_action=None, recursive_action=None):
        self.cur_action = cur_action if cur_action is not None else _eval_frame._FrameAction.DEFAULT
        self.recursive_action = recursive_action if recursive_action is not None else _eval_frame._FrameAction.DEFAULT


_eval_frame._FrameExecStrategy = _FrameExecStrategy
_code_strategies = {}
_eval_frame.set_code_exec_strategy = lambda code, strategy: _code_strategies.__setitem__(code, strategy)
_eval_frame.reset_code = lambda code: _code_strategies.pop(code, None)
_eval_frame.get_eval_frame_callback = _returns(None, "get_eval_frame_callback")


def _set_eval_frame(callback):
    if callback not in (None, False):
        raise NotImplementedError("torch.compile / dynamo frame evaluation is not implemented in torchnative")
    return None


_eval_frame.set_eval_frame = _set_eval_frame
_eval_frame.set_skip_guard_eval_unsafe = _returns(False, "set_skip_guard_eval_unsafe")
_eval_frame.set_guard_error_hook = _returns(None, "set_guard_error_hook")
_eval_frame.set_guard_complete_hook = _returns(None, "set_guard_complete_hook")
_eval_frame.get_c_recursion_limit = lambda: _sys.getrecursionlimit()
_eval_frame.set_c_recursion_limit = lambda limit: None
_TensorBase = TensorBase  # noqa: F821  (upstream's older name, still read by dynamo)


def _parse_to(*args, **kwargs):
    """nn.Module.to's argument parser: (device, dtype, non_blocking, memory_format) from the
    forms Tensor.to takes: to(device, dtype, non_blocking), to(dtype, non_blocking),
    to(tensor, non_blocking), with keywords."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    non_blocking = kwargs.pop("non_blocking", False)
    memory_format = kwargs.pop("memory_format", None)
    kwargs.pop("copy", None)
    if kwargs:
        raise TypeError(f"to() got an unexpected keyword argument '{next(iter(kwargs))}'")
    rest = list(args)
    if rest and isinstance(rest[0], TensorBase):  # noqa: F821
        other = rest.pop(0)
        device, dtype = other.device, other.dtype
    elif rest and isinstance(rest[0], (str, device_type := _this.device, _builtins.int)) and not isinstance(rest[0], _builtins.bool):
        device = rest.pop(0)
    if rest and isinstance(rest[0], _this.dtype):
        dtype = rest.pop(0)
    if rest:
        non_blocking = rest.pop(0)
    if rest:
        rest.pop(0)  # copy
    if device is not None and not isinstance(device, _this.device):
        device = _this.device(device)
    if device is not None:
        _check_device(device)
    return device, dtype, non_blocking, memory_format


_nn._parse_to = _parse_to


# Indexing honours __torch_function__ like every operator (upstream's C++ __getitem__ checks).
_index_get = TensorBase.__getitem__  # noqa: F821
_index_set = TensorBase.__setitem__  # noqa: F821


def _getitem(self, index):
    if type(self) is not _this._tensor_class and _has_torch_function_unary(self):
        import torch

        return torch.overrides.handle_torch_function(torch.Tensor.__getitem__, (self,), self, index)
    if _grad_enabled[0] and self.requires_grad:
        return _getitem_recorded(self, index)
    return _index_get(self, index)


def _getitem_recorded(self, index, for_write=False):
    """Indexing as upstream's applySlicing spells it in operators (select, slice, unsqueeze,
    alias, index), each through the door, so autograd records them; the fast path above
    computes the same view without recording. `for_write`: what an assignment writes, as
    `(view, index tensors)`: the view of the basic indices (`self` itself when every index takes
    a whole dim, as upstream's slice optimisation does) and the indices index_put_ takes after
    them (empty for basic indexing)."""
    import torch

    aten = torch.ops.aten
    items = index if type(index) is _builtins.tuple else (index,)
    items = [torch.tensor(i) if type(i) is _builtins.list else i for i in items]
    # a 0-dim integer tensor indexes as its int (upstream selects)
    items = [i.item() if isinstance(i, TensorBase) and i.dim() == 0  # noqa: F821
             and not i.dtype.is_floating_point and i.dtype != torch.bool else i for i in items]

    def refuse(what):
        raise NotImplementedError(
            f"torchnative: indexing a tensor that requires grad with {what} is not "
            "differentiable yet (autograd: issue 12)")

    consumed = 0
    for i in items:
        if isinstance(i, TensorBase):  # noqa: F821
            # a boolean mask takes as many dims as it has
            consumed += i.dim() if i.dtype in (torch.bool, torch.uint8) else 1
        elif i is None or i is Ellipsis:
            pass
        elif type(i) is _builtins.bool:
            refuse("a Python bool")
        elif isinstance(i, (_builtins.int, _builtins.slice)) or hasattr(i, "__index__"):
            consumed += 1
        else:
            refuse(_builtins.type(i).__name__)
    if consumed > self.dim():
        raise IndexError(f"too many indices for tensor of dimension {self.dim()}")
    result, dim, advanced = self, 0, []
    touched = False
    for i in items:
        if i is Ellipsis:
            dim += self.dim() - consumed
            consumed = self.dim()
        elif i is None:
            result = aten.unsqueeze(result, dim)
            dim += 1
            touched = True
        elif isinstance(i, _builtins.slice):
            size = result.shape[dim]
            start, stop, step = i.indices(size) if i.step is None or i.step > 0 else (None, None, i.step)
            if step is not None and step <= 0:
                raise ValueError("step must be greater than zero")
            if not (start == 0 and stop == size and step == 1):
                result = aten.slice.Tensor(result, dim, start, stop, step)
                touched = True
            dim += 1
        elif isinstance(i, TensorBase):  # noqa: F821
            advanced += [None] * (dim - _builtins.len(advanced)) + [i]
            dim += i.dim() if i.dtype in (torch.bool, torch.uint8) else 1
        else:
            result = aten.select.int(result, dim, i.__index__())
            touched = True
    if for_write:
        return result, advanced
    if advanced:
        return aten.index.Tensor(result, advanced)
    return result if touched else aten.alias(self)


def _setitem(self, index, value):
    if type(self) is not _this._tensor_class and _has_torch_function((self, value)):
        import torch

        return torch.overrides.handle_torch_function(torch.Tensor.__setitem__, (self, value), self, index, value)
    if _grad_enabled[0] and (self.requires_grad or getattr(value, "requires_grad", False)):
        if self.requires_grad and self.grad_fn is None:
            raise RuntimeError(
                "a leaf Variable that requires grad is being used in an in-place operation.")
        # upstream's set_item: the indexed view, then copy_to (copy_, or fill_ from a scalar or
        # a 0-dim value of another shape); autograd records the write (CopySlices on a view)
        import torch

        if (isinstance(index, TensorBase) and index.dtype == torch.bool  # noqa: F821
                and (not isinstance(value, TensorBase) or value.dim() == 0)):  # noqa: F821
            # upstream's fast path for `t[mask] = scalar`
            self.masked_fill_(index, value)
            return None
        target, advanced = _getitem_recorded(self, index, for_write=True)
        if isinstance(value, TensorBase) and value.dim() > 0:  # noqa: F821
            # upstream's slicePrefix1sDims: leading size-1 dims of the value are viewed away
            lead = 0
            while lead < value.dim() and value.shape[lead] == 1:
                lead += 1
            if lead:
                value = value.view(_builtins.list(value.shape[lead:]))
        if advanced:
            # upstream: index_put_ on the basic view, a Python scalar as a 0-dim tensor
            if not isinstance(value, TensorBase):  # noqa: F821
                value = torch.tensor(value, dtype=self.dtype)
            target.index_put_(advanced, value)
            return None
        if isinstance(value, TensorBase):  # noqa: F821
            if value.dim() == 0 and target.dim() != 0:
                target.fill_(value)
            else:
                target.copy_(value)
        else:
            target.fill_(value)
        return None
    return _index_set(self, index, value)


TensorBase.__getitem__ = _getitem  # noqa: F821
TensorBase.__setitem__ = _setitem  # noqa: F821
_getitem.__name__ = _getitem.__qualname__ = "__getitem__"
_setitem.__name__ = _setitem.__qualname__ = "__setitem__"

# torch.nonzero's hand-written binding adds `as_tuple` (upstream's nonzero_numpy).
_nonzero_op = _VariableFunctions.nonzero
_nonzero_method = TensorBase.nonzero  # noqa: F821


def _nonzero_tuple(input):
    return tuple((input.unsqueeze(0) if input.dim() == 0 else input).nonzero().unbind(1))


def _nonzero(input, *, out=None, as_tuple=False):
    if as_tuple:
        if out is not None:
            raise TypeError("nonzero(): as_tuple=True does not take out=")
        return _nonzero_tuple(input)
    return _nonzero_op(input) if out is None else _nonzero_op(input, out=out)


def _nonzero_of(self, *, as_tuple=False):
    return _nonzero_tuple(self) if as_tuple else _nonzero_method.__get__(self)()


_nonzero.__name__ = _nonzero_of.__name__ = "nonzero"
_VariableFunctions.nonzero = _nonzero
TensorBase.nonzero = _nonzero_of  # noqa: F821


# torch.save / torch.load's zip container (upstream's PyTorchStreamWriter/Reader format: an
# uncompressed zip whose records live under one archive directory; storages as little-endian
# bytes in data/<key>), written with Python's zipfile.
TensorBase.untyped_storage = lambda self: _tn_storage_of(self)  # noqa: F821


def _record_bytes(data):
    if isinstance(data, (bytes, bytearray, memoryview)):
        return _builtins.bytes(data)
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, StorageBase):  # noqa: F821
        return data._tn_bytes()
    raise TypeError(f"PyTorchFileWriter.write_record: cannot write {type(data).__name__}")


class PyTorchFileWriter:
    def __init__(self, file, compute_crc32=True, storage_alignment=64):
        import os
        import zipfile

        if isinstance(file, str):
            self._archive = os.path.splitext(os.path.basename(file))[0] or "archive"
        else:
            self._archive = "archive"
        self._zip = zipfile.ZipFile(file, "w", compression=zipfile.ZIP_STORED)
        self._written = []
        self._serialization_id = "".join(str(__import__("random").randrange(10)) for _ in range(40))

    def write_record(self, name, data, size=None):
        payload = _record_bytes(data)
        if size is not None:
            payload = payload[:size]
        self._zip.writestr(f"{self._archive}/{name}", payload)
        self._written.append(name)

    def write_record_metadata(self, name, size):
        self.write_record(name, b"")

    def write_end_of_file(self):
        if self._zip.fp is None:
            return
        self.write_record("version", b"3\n")
        self.write_record(".data/serialization_id", self._serialization_id)
        self._zip.close()

    def archive_name(self):
        return self._archive

    def serialization_id(self):
        return self._serialization_id

    def get_all_written_records(self):
        return set(self._written)

    def set_min_version(self, version):
        pass


class PyTorchFileReader:
    def __init__(self, file):
        import zipfile

        self._zip = zipfile.ZipFile(file, "r")
        names = self._zip.namelist()
        if not names:
            raise RuntimeError("PytorchStreamReader failed reading zip archive: no records")
        self._archive = names[0].split("/", 1)[0]
        self._infos = {n.split("/", 1)[1]: i for n, i in zip(names, self._zip.infolist()) if "/" in n}

    def _info(self, name):
        try:
            return self._infos[name]
        except KeyError:
            raise RuntimeError(f"PytorchStreamReader failed locating file {name}: file not found") from None

    def get_record(self, name):
        return self._zip.read(self._info(name))

    def has_record(self, name):
        return name in self._infos

    def get_all_records(self):
        return list(self._infos)

    def get_storage_from_record(self, name, numel, dtype):
        import torch

        data = self.get_record(name)
        return _tn_tensor_from_bytes(data[:numel], torch.uint8)  # noqa: F821

    def get_record_header_offset(self, name):
        return self._info(name).header_offset

    def get_record_offset(self, name):
        info = self._info(name)
        self._zip.fp.seek(info.header_offset)
        header = self._zip.fp.read(30)
        name_len = _builtins.int.from_bytes(header[26:28], "little")
        extra_len = _builtins.int.from_bytes(header[28:30], "little")
        return info.header_offset + 30 + name_len + extra_len

    def serialization_id(self):
        return self.get_record(".data/serialization_id").decode() if self.has_record(".data/serialization_id") else ""

    def archive_name(self):
        return self._archive


globals().pop("__all__", None)


# ----- profiler scopes --------------------------------------------------------------------------

class _RecordFunctionHandle:
    """What `torch.ops.profiler._record_function_enter_new` returns. torchnative has no
    profiler (starting one is refused by name), so `record_function` scopes, which DataLoader
    and user code open whether or not a profiler runs, enter and exit recording nothing."""


_tn_register_py_kernel("profiler::_record_function_enter_new", "CompositeImplicitAutograd",  # noqa: F821
                       lambda name, args=None: _RecordFunctionHandle())
_tn_register_py_kernel("profiler::_record_function_exit._RecordFunction",  # noqa: F821
                       "CompositeImplicitAutograd", lambda record: None)
