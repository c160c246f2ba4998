"""Golden cases: what both sides run, generated without torch.

Each ``cases/<family>.py`` module (files starting with ``_`` are helpers) exposes ``CASES``: a
list of dicts made by ``_lib.case``:

* ``name``: unique, ``family/op/form/dtype/layout``-like, what ``--filter`` matches.
* ``code``: a Python snippet run with ``torch``, ``F``, ``math``, ``inp``, ``fdt`` in scope
  (see run_side.py) that sets ``out``: a tensor, a tuple/list of them, a Python
  number/bool/str/None, a torch.dtype or torch.Size.  Inputs are built from literals or
  ``torch.arange``-style formulas, never from the RNG (except the random family, which seeds).
* ``ops``: the ATen overloads it exercises (``aten::add.Tensor``, ``aten::add_.Tensor``,
  ``aten::add.out``; the default overload is written bare: ``aten::sin``).  Coverage counts
  these; ``check_cases.py`` checks them against the oracle's profiler and dispatcher.
* ``family``: the row of the report table.
* ``ref64``: run again on the oracle with ``inp``-marked float inputs upcast to float64; the
  float tolerance is derived from upstream's own error against that run (see judge.py).
* ``acc``: results are accumulations (reductions, matmul, norms, convolutions, softmax): the
  error scale of every element is the tensor's, not the element's own (see judge.py).

Generation is deterministic; both sides and compare.py load the same list in the same order.
"""
import importlib
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))


def modules():
    return sorted(f[:-3] for f in os.listdir(HERE)
                  if f.endswith(".py") and not f.startswith("_"))


_CACHE = {}


def load_cases(only=None):
    """All cases, or those of the case files named in ``only`` (e.g. ["unary", "nn"])."""
    key = tuple(sorted(only)) if only else None
    if key in _CACHE:
        return _CACHE[key]
    mods = modules()
    if only:
        unknown = set(only) - set(mods)
        if unknown:
            raise ValueError("no case file %s (have: %s)" % (", ".join(sorted(unknown)), ", ".join(mods)))
        mods = [m for m in mods if m in only]
    out, seen = [], set()
    for m in mods:
        mod = importlib.import_module("cases." + m)
        for c in mod.CASES:
            if c["name"] in seen:
                raise ValueError("duplicate case name: " + c["name"])
            seen.add(c["name"])
            out.append(c)
    _CACHE[key] = out
    return out


def select(cases, regex=None, ref64=False):
    rx = re.compile(regex) if regex else None
    return [c for c in cases
            if (rx is None or rx.search(c["name"])) and (not ref64 or c.get("ref64"))]
