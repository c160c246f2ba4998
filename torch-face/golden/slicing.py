"""Deterministic slices of a harness's cases (``compare.py --slice N``, ``arch_sweep.py --slice N``).

Why: the fast test gate cannot run every golden case and architecture; a slice runs about 1/N
of them, always the same ones for the same names, and still touches everything a slice must
not lose: every group (for golden cases: every family and every declared ATen overload; for the
architecture sweep: every encoder, the architectures the face's tests single out, and one of
each kind of model).

Rule: a name is kept when ``sha256(name) % N == 0`` (its first 8 bytes, big-endian), so a name
keeps its fate when other names come or go.  Then, for each group (in sorted order) that no
kept name covers, the member with the smallest hash is added (it may cover other groups too).
"""
import hashlib


def check_option(ap, n):
    """The check of a parsed ``--slice N`` (None: no slice), as an argparse error."""
    if n is not None and n < 1:
        ap.error("--slice N needs N >= 1, not %d" % n)


def name_hash(name):
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "big")


def deterministic_slice(names, n, groups_of):
    """The names kept by a 1/``n`` slice, in their given order.  ``groups_of(name)`` gives the
    groups (hashable labels) the name belongs to; every group keeps at least one member."""
    if n < 1:
        raise ValueError("a slice must be 1/N with N >= 1, not %r" % n)
    h = {x: name_hash(x) for x in names}
    kept = {x for x in names if h[x] % n == 0}
    groups = {x: list(groups_of(x)) for x in names}
    covered, best = set(), {}
    for x in names:
        for g in groups[x]:
            if x in kept:
                covered.add(g)
            cur = best.get(g)
            if cur is None or (h[x], x) < cur:
                best[g] = (h[x], x)
    for g in sorted(best, key=repr):
        if g not in covered:
            x = best[g][1]
            kept.add(x)
            covered.update(groups[x])
    return [x for x in names if x in kept]


def case_groups(case):
    """A golden case's groups: its family and each overload it declares."""
    return [("family", case["family"])] + [("op", op) for op in case["ops"]]


def slice_cases(cases, n):
    """(kept cases, info) for ``compare.py --slice n``: info has n, kept, total and
    ``left_out`` (family -> cases left out)."""
    byname = {c["name"]: c for c in cases}
    names = deterministic_slice([c["name"] for c in cases], n, lambda x: case_groups(byname[x]))
    keep = set(names)
    left = {}
    for c in cases:
        if c["name"] not in keep:
            left[c["family"]] = left.get(c["family"], 0) + 1
    info = {"n": n, "kept": len(names), "total": len(cases),
            "left_out": dict(sorted(left.items()))}
    return [byname[x] for x in names], info


def describe(info, what="cases"):
    """One line: 'slice 1/N: K of T cases kept; left out L: fam a, fam b, ...'."""
    left = info["left_out"]
    return "slice 1/%d: %d of %d %s kept; left out %d%s" % (
        info["n"], info["kept"], info["total"], what, info["total"] - info["kept"],
        (": " + ", ".join("%s %d" % kv for kv in left.items())) if left else "")
