"""Check the cases' declared ATen overloads against what upstream really calls.

Why: coverage ("N overloads covered") is only worth something if each case's ``ops`` list
is true.  Run under the oracle interpreter::

    ORACLE_PY torch-face/golden/check_cases.py [--filter REGEX] [--verbose]

For every case it runs the snippet under upstream's legacy profiler (which records every
ATen op by name, composite ones included) and a TorchDispatchMode (which sees the exact
overload of every op that reaches a kernel).  A declared overload is *confirmed* when its
op name was recorded and, if the dispatcher saw that op at all, under this overload.
Problems: an overload that does not exist, an op name never called, or an overload other
than the one the dispatcher saw.  Cases whose snippet raises are only checked for
existence (upstream may reject the call before dispatching).  Exit 1 on any problem.
"""
import argparse
import math
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from cases import load_cases, select  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--module", action="append", default=None)
    ap.add_argument("--filter", default=None)
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args(argv)

    # upstream's profiler prints a line per session on fd 2; keep the terminal readable
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    warnings.simplefilter("ignore")

    class Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            ns, name = func.namespace, func._schema.name.split("::")[-1]
            ov = func._overloadname
            self.seen.add("%s::%s%s" % (ns, name, "" if ov == "default" else "." + ov))
            return func(*args, **(kwargs or {}))

    def exists(op):
        ns, rest = op.split("::")
        name, _, ov = rest.partition(".")
        try:
            pk = getattr(getattr(torch.ops, ns), name)
            getattr(pk, ov or "default")
            return True
        except (AttributeError, RuntimeError):
            return False

    def composite(op):
        """CompositeImplicitAutograd overloads decompose before a dispatch mode sees them."""
        try:
            return torch._C._dispatch_has_kernel_for_dispatch_key(
                op, "CompositeImplicitAutograd")
        except RuntimeError:
            return False

    cases = select(load_cases(args.module), args.filter)
    problems = []
    confirmed_dispatch, confirmed_profiler = set(), set()
    all_declared = set()
    raising = 0
    for c in cases:
        all_declared.update(c["ops"])
        ns = {"torch": torch, "F": torch.nn.functional, "math": math,
              "inp": lambda t: t, "fdt": lambda d: d}
        log = Log()
        raised = None
        with torch.autograd.profiler.profile(use_kineto=False) as prof:
            try:
                with log:
                    exec(compile(c["code"], c["name"], "exec"), ns)
            except Exception as e:  # noqa: BLE001
                raised = e
        names = {e.name for e in prof.function_events}
        seen_bases = {}
        for s in log.seen:
            seen_bases.setdefault(s.split(".")[0], set()).add(s)
        if raised is not None:
            raising += 1
        for op in c["ops"]:
            if not exists(op):
                problems.append("%s: %s does not exist" % (c["name"], op))
                continue
            if raised is not None:
                continue
            base = op.split(".")[0]
            if base not in names and base not in seen_bases:
                problems.append("%s: %s declared but never called (called: %s)" % (
                    c["name"], op, ", ".join(sorted(names))[:300]))
            elif base in seen_bases:
                if op in seen_bases[base] or composite(op):
                    confirmed_dispatch.add(op)
                else:
                    problems.append("%s: declared %s, dispatcher saw %s" % (
                        c["name"], op, ", ".join(sorted(seen_bases[base]))))
            else:
                confirmed_profiler.add(op)
    confirmed_profiler -= confirmed_dispatch
    for p in problems:
        print(p)
    print("check_cases: %d cases (%d raise), %d declared overloads: %d confirmed by the "
          "dispatcher, %d by name only (composite ops), %d problems" % (
              len(cases), raising, len(all_declared), len(confirmed_dispatch),
              len(confirmed_profiler), len(problems)))
    if args.verbose:
        print("by name only:", " ".join(sorted(confirmed_profiler)))
        never = all_declared - confirmed_dispatch - confirmed_profiler
        print("not confirmed (only in raising cases or problems):", " ".join(sorted(never)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
