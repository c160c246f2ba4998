"""Memory shared with other libraries: torch.from_numpy and Tensor.numpy() (both ways, writes
seen on the other side), torch.frombuffer over the buffer protocol, DLPack capsules
(torch.from_dlpack, torch.utils.dlpack, numpy.from_dlpack), and the errors upstream raises
for arrays it cannot share (negative strides, non-native byte order, unsupported types)."""
from ._lib import case

FAM = "interop"

NP_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")

# (name, numpy source of `a`), each at least 2-D with 6 elements or more
ARRAYS = (
    ("contig", "np.arange(12).reshape(3, 4)"),
    ("transposed", "np.arange(12).reshape(3, 4).T"),
    ("sliced", "np.arange(24).reshape(4, 6)[1:, ::2]"),
    ("broadcast-0-stride", "np.broadcast_to(np.arange(4), (3, 4))"),
    ("empty", "np.zeros((0, 3))"),
    ("scalar", "np.array(5)"),
)


def gen():
    cs = []
    for dt in NP_DTYPES:
        fill = "True" if dt == "bool" else "7"
        for name, src in ARRAYS:
            a = "import numpy as np\na = (%s).astype(np.%s)\n" % (src, dt)
            if "broadcast" in name:
                a = "import numpy as np\na = np.broadcast_to(np.arange(4).astype(np.%s), (3, 4))\n" % dt
            cs.append(case("interop/from_numpy-%s/%s" % (name, dt),
                           a + "t = torch.from_numpy(a)\nout = (t, t.stride(), t.storage_offset(), t.is_contiguous())\n",
                           [], FAM, exact=True))
            if name in ("contig", "transposed", "sliced"):
                cs.append(case("interop/from_numpy-write-%s/%s" % (name, dt),
                               a + "a = a.copy(order='K')\nt = torch.from_numpy(a)\nt[0, 1] = %s\na[-1, -1] = %s\n"
                               "out = (t, torch.tensor(a.tolist()))\n" % (fill, fill),
                               [], FAM, exact=True))
                cs.append(case("interop/numpy-roundtrip-%s/%s" % (name, dt),
                               a + "t = torch.from_numpy(a.copy())\nn = t.numpy()\nn[0, 0] = %s\n"
                               "out = (t, n.strides, str(n.dtype), torch.from_numpy(n).stride())\n" % fill,
                               [], FAM, exact=True))
                cs.append(case("interop/dlpack-numpy-%s/%s" % (name, dt),
                               a + "a = a.copy(order='K')\nt = torch.from_dlpack(a)\nt[0, 0] = %s\n"
                               "out = (t, t.stride(), torch.tensor(a.tolist()))\n" % fill,
                               [], FAM, exact=True))
                cs.append(case("interop/dlpack-to-numpy-%s/%s" % (name, dt),
                               a + "t = torch.from_numpy(a.copy())\nn = np.from_dlpack(t)\nn[0, 0] = %s\n"
                               "out = (t, n.strides, str(n.dtype))\n" % fill,
                               [], FAM, exact=True))
                cs.append(case("interop/dlpack-capsule-%s/%s" % (name, dt),
                               a + "t = torch.from_numpy(a.copy())\nimport torch.utils.dlpack as D\n"
                               "c = D.to_dlpack(t)\nu = D.from_dlpack(c)\nu[0, 0] = %s\n"
                               "try:\n    D.from_dlpack(c)\n    again = 'ok'\nexcept Exception as e:\n    again = type(e).__name__\n"
                               "out = (t, u.stride(), again, u.data_ptr() == t.data_ptr())\n" % fill,
                               [], FAM, exact=True))
                cs.append(case("interop/dlpack-torch-%s/%s" % (name, dt),
                               a + "t = torch.from_numpy(a.copy())\nu = torch.from_dlpack(t)\nu[0, 0] = %s\n"
                               "out = (t, u.stride(), u.data_ptr() == t.data_ptr(), t.__dlpack_device__())\n" % fill,
                               [], FAM, exact=True))
    # torch.frombuffer: counts, offsets, dtypes, writable and read-only buffers, errors
    for dt in ("float32", "int16", "uint8", "int64", "float64", "bfloat16", "int8"):
        for name, stmt in (
                ("all", "t = torch.frombuffer(buf, dtype=torch.%s)"),
                ("count", "t = torch.frombuffer(buf, dtype=torch.%s, count=2)"),
                ("offset", "t = torch.frombuffer(buf, dtype=torch.%s, offset=8, count=1)"),
                ("write", "t = torch.frombuffer(buf, dtype=torch.%s)\nt[0] = 3\nt = (t, list(buf[:8]))"),
                ("bytes", "import warnings\nwarnings.simplefilter('ignore')\nt = torch.frombuffer(bytes(buf), dtype=torch.%s)"),
                ("bad-offset", "t = torch.frombuffer(buf, dtype=torch.%s, offset=64)"),
                ("too-long", "t = torch.frombuffer(buf, dtype=torch.%s, count=100)"),
                ("empty", "t = torch.frombuffer(bytearray(), dtype=torch.%s)"),
                ("not-a-buffer", "t = torch.frombuffer([1, 2], dtype=torch.%s)"),
                ("misaligned-length", "t = torch.frombuffer(buf, dtype=torch.%s, offset=1)"),
        ):
            cs.append(case("interop/frombuffer-%s/%s" % (name, dt),
                           "buf = bytearray(range(1, 33))\n" + (stmt % dt) + "\nout = t\n",
                           [], FAM, exact=True))
    for name, src in (
            ("negative-stride", "np.arange(6.)[::-1]"),
            ("byteswapped", "np.arange(6.).astype('>f8')"),
            ("uint16", "np.arange(6).astype(np.uint16)"),
            ("object", "np.array([1, 'a'], dtype=object)"),
            ("not-an-array", "[1, 2, 3]"),
    ):
        cs.append(case("interop/from_numpy-err-%s" % name,
                       "import numpy as np\nout = torch.from_numpy(%s)\n" % src, [], FAM, exact=True))
    return cs


CASES = gen()
