"""A deliberately wrong "face" for the end-to-end self-test.

Why: the mutation self-test edits results; this one is a real interpreter side that behaves
wrongly, so the whole path (process, crash recovery, stall watchdog, refusals, judging) is
exercised.  It is upstream torch with a few ops patched into plausible bugs, plus a crash and
a hang on named cases.  ``compare.py --self-test`` runs it over ``EXPECT``'s cases and some
untouched ones and checks every category.

Run as a face command prefix:  ``--face "ORACLE_PY torch-face/golden/wrong_face.py"``.
"""
import os
import sys

# case name -> category compare.py must give it under this face
EXPECT = {
    "view/unfold/float32/c3d": "disagree",                  # unfold copies: strides, aliasing
    "view/unfold-step2/int64/t3d": "disagree",
    "binary/add/func/float32/same2d": "disagree",           # float32 + float32 -> float64
    "binary/add/func/float32/bcast": "disagree",
    "reduction/amax/dim1-keepdim/float32/2d": "disagree",   # keepdim dropped
    "reduction/amax/dim0-keepdim/int64/3d": "disagree",
    "unary/sin/func/float32/2d": "disagree",                # values off by ~8 ulp
    "unary/sin/func/float32/transposed": "disagree",
    "shape/sort/float32": "refused",                        # NotImplementedError
    "shape/sort/int64": "refused",
    "reduction/cumsum/dim-1/float32/2d": "disagree",        # reduces dim 0 instead
    "linalg/mm-mismatch/float32": "disagree",               # TypeError, upstream RuntimeError
    "unary/isnan/func/float32/special": "disagree",         # bools flipped
    "unary/cos/func/float32/2d": "error",                   # the process aborts
    "unary/cos/func/float32/1d": "error",                   # the process hangs
}
# untouched cases run alongside: they must still agree (patches do not leak)
CONTROL = r"^(unary/(cos|sin)/func/float64/|reduction/amax/dim1-nokeepdim/|view/(permute|t)/float32/|shape/argsort/)"
CRASH_AT = "unary/cos/func/float32/2d"
HANG_AT = "unary/cos/func/float32/1d"


def _patch():
    import builtins
    import time
    import torch

    real_compile = builtins.compile

    def compile_(src, name, mode, *a, **k):
        if name == CRASH_AT:
            os.abort()
        if name == HANG_AT:
            while True:
                time.sleep(1)
        return real_compile(src, name, mode, *a, **k)
    builtins.compile = compile_

    unfold, add, amax, sin = torch.Tensor.unfold, torch.add, torch.amax, torch.sin
    cumsum, mm, isnan = torch.cumsum, torch.mm, torch.isnan
    torch.Tensor.unfold = lambda self, *a: unfold(self, *a).contiguous()

    def add_(a, b, **kw):
        r = add(a, b, **kw)
        return r.double() if r.dtype == torch.float32 else r
    torch.add = add_
    torch.amax = lambda x, dim=(), keepdim=False, **kw: amax(x, dim, **kw)
    torch.sin = lambda x, **kw: sin(x, **kw) * (1 + 2 ** -20) if x.dtype == torch.float32 else sin(x, **kw)

    def sort_(*a, **k):
        raise NotImplementedError("sort: not implemented in this face")
    torch.sort = sort_
    torch.cumsum = lambda x, dim, **kw: cumsum(x, 0, **kw)

    def mm_(a, b, **kw):
        if a.shape[-1] != b.shape[0]:
            raise TypeError("mm: bad shapes")
        return mm(a, b, **kw)
    torch.mm = mm_
    torch.isnan = lambda x: ~isnan(x)


if __name__ == "__main__":
    _patch()
    import runpy
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")
