"""Printing: `repr`/`str` of tensors is upstream's Python (torch/_tensor_str.py) on our ops, so
the strings must match upstream's character for character: every dtype, 0-dim, empty, 1-d, 2-d
and 3-d shapes, summarised large tensors, integer-valued floats, scientific notation, nan/inf,
negative zero, print options, and the metadata suffixes (dtype=, requires_grad=)."""
from ._lib import DTYPES, FLOATS, case, T, values

FAM = "printing"

# Printing exercises whatever upstream's _tensor_str calls for that tensor (it differs by dtype
# and size), so these cases declare no overloads: they count as printing, not as op coverage.
PRINT_OPS = []


def gen():
    cs = []
    for dt in DTYPES:
        d = "torch.%s" % dt
        shapes = {"scalar": (), "empty": (0,), "vec": (5,), "mat": (3, 4), "cube": (2, 2, 3)}
        for label, shape in shapes.items():
            n = 1
            for s in shape:
                n *= s
            src = T(values(dt, n), shape, dt)
            cs.append(case("printing/repr/%s/%s" % (dt, label), "out = repr(%s)" % src, PRINT_OPS, FAM))
            cs.append(case("printing/str/%s/%s" % (dt, label), "out = str(%s)" % src, PRINT_OPS, FAM))
        # Summarised output (more than 1000 elements) and a long row that wraps.
        cs.append(case("printing/summarised/%s" % dt,
                       "out = repr(torch.arange(1200).reshape(30, 40).to(%s))" % d, PRINT_OPS, FAM))
        cs.append(case("printing/wrap/%s" % dt,
                       "out = repr(torch.arange(60).to(%s))" % d, PRINT_OPS, FAM))
    for dt in FLOATS:
        d = "torch.%s" % dt
        for label, lit in (
                ("integral", "[1.0, 2.0, -3.0]"),
                ("fraction", "[0.5, 1.25, -2.125]"),
                ("sci-large", "[1e10, 2.5e12, 3.0]"),
                ("sci-small", "[1e-5, 2e-7, 3.0]"),
                ("nonfinite", "[float('nan'), float('inf'), -float('inf'), 1.5]"),
                ("neg-zero", "[-0.0, 0.0, 1.0]"),
                ("mixed-mag", "[123456.789, 0.001, -7.0]")):
            cs.append(case("printing/values/%s/%s" % (dt, label),
                           "out = repr(torch.tensor(%s, dtype=%s))" % (lit, d), PRINT_OPS, FAM))
        cs.append(case("printing/precision/%s" % dt,
                       "torch.set_printoptions(precision=2)\n"
                       "try:\n    out = repr(torch.tensor([1.23456, 2.5, -3.75], dtype=%s))\n"
                       "finally:\n    torch.set_printoptions(profile='default')" % d, PRINT_OPS, FAM))
        cs.append(case("printing/requires-grad/%s" % dt,
                       "out = repr(torch.tensor([1.0, 2.0], dtype=%s, requires_grad=True))" % d, PRINT_OPS, FAM))
    cs.append(case("printing/sci-mode-off", "torch.set_printoptions(sci_mode=False)\n"
                   "try:\n    out = repr(torch.tensor([1e-5, 1e5]))\nfinally:\n"
                   "    torch.set_printoptions(profile='default')", PRINT_OPS, FAM))
    cs.append(case("printing/size", "out = repr(torch.zeros(2, 3).shape)", [], FAM))
    cs.append(case("printing/dtype", "out = [repr(torch.float32), str(torch.int64), repr(torch.bool)]", [], FAM))
    cs.append(case("printing/device", "out = [repr(torch.device('cpu')), str(torch.device('cuda', 1))]", [], FAM))
    return cs


CASES = gen()
