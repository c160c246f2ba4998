"""Print what identifies this interpreter's upstream install, for the oracle cache.

Why: ``oracle_cache.py`` keys every cached oracle result by the upstream install that produced
it.  A dist-info ``RECORD`` lists every installed file of a wheel with its sha256, so its hash
identifies the wheel's contents (a rebuilt or patched wheel of the same version differs).  This
script runs under the oracle (it needs only the standard library and imports none of the
packages it describes) and prints one JSON object::

    PY oracle_fingerprint.py DIST [DIST ...]

    {"python": sys.version, "machine": ..., "numpy": version | null,
     "dists": {DIST: {"version": ..., "record_sha256": ...}, ...}}

Each DIST (``torch``, ``transformers``) must be installed with a ``RECORD`` file, and its
top-level package must be the one ``import DIST`` would load (not shadowed by another copy on
``sys.path``); otherwise it exits 3 saying which and why, and the caller runs without a cache.
"""
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import sys


def describe(name):
    """{"version", "record_sha256"} of the installed distribution ``name`` (ValueError: why not)."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        raise ValueError("%s is not installed (no %s dist-info on sys.path)" % (name, name))
    record = dist.read_text("RECORD")
    if not record:
        raise ValueError("%s %s has no RECORD file in its dist-info (not a wheel install?)" % (
            name, dist.version))
    spec = importlib.util.find_spec(name)
    if spec is None:
        raise ValueError("%s has a dist-info but no importable package" % name)
    where = spec.origin if spec.origin not in (None, "namespace") else \
        next(iter(spec.submodule_search_locations or []), None)
    installed = os.path.realpath(str(dist.locate_file(name)))
    if where is None or not os.path.realpath(where).startswith(installed):
        raise ValueError("import %s loads %s, not the copy its dist-info describes (%s)" % (
            name, where, installed))
    return {"version": dist.version,
            "record_sha256": hashlib.sha256(record.encode("utf-8")).hexdigest()}


def main(argv):
    if not argv:
        print("usage: oracle_fingerprint.py DIST [DIST ...]", file=sys.stderr)
        return 2
    out = {"python": sys.version, "machine": platform.machine(), "dists": {}}
    try:
        out["numpy"] = importlib.metadata.version("numpy")
    except importlib.metadata.PackageNotFoundError:
        out["numpy"] = None
    for name in argv:
        try:
            out["dists"][name] = describe(name)
        except ValueError as e:
            print("oracle_fingerprint: %s" % e, file=sys.stderr)
            return 3
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
