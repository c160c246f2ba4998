"""Helpers of the harness's tests: a fake upstream install, fake side commands, their log."""
import contextlib
import io
import json
import os
import shlex
import sys

TESTS = os.path.dirname(os.path.abspath(__file__))
GOLDEN = os.path.dirname(TESTS)
FAKE_SIDE = os.path.join(TESTS, "fake_side.py")
if GOLDEN not in sys.path:
    sys.path.insert(0, GOLDEN)


def make_site(root, dists=("torch",), record="v1"):
    """A site directory holding an importable package and a dist-info (METADATA, RECORD) for
    each of ``dists``; ``record`` goes into every RECORD (change it: another wheel)."""
    site = os.path.join(root, "site")
    for name in dists:
        os.makedirs(os.path.join(site, name), exist_ok=True)
        open(os.path.join(site, name, "__init__.py"), "w").close()
        info = os.path.join(site, "%s-2.15.0.dist-info" % name)
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w") as fh:
            fh.write("Metadata-Version: 2.1\nName: %s\nVersion: 2.15.0\n" % name)
        write_record(site, name, record)
    return site


def write_record(site, name, record):
    with open(os.path.join(site, "%s-2.15.0.dist-info" % name, "RECORD"), "w") as fh:
        fh.write("%s/__init__.py,sha256=%s,0\n" % (name, record))


def side_cmd(role, site, log, script=FAKE_SIDE, **env):
    """A command prefix running ``script`` (a fake side) as ``role``, logging to ``log``."""
    parts = ["env", "FAKE_ROLE=" + role, "FAKE_SIDE_LOG=" + log]
    if site:
        parts.append("PYTHONPATH=" + site)
    parts += ["%s=%s" % kv for kv in sorted(env.items())]
    return " ".join(shlex.quote(p) for p in parts + [sys.executable, script])


def read_log(path):
    """The logged invocations (dicts: role, script, pass, names); [] when none."""
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [json.loads(line) for line in fh if line.strip()]


def oracle_runs(path, script="run_side.py"):
    """{pass: [names run]} of the oracle's invocations of ``script`` in the log."""
    out = {}
    for e in read_log(path):
        if e["role"] == "oracle" and e["script"] == script:
            out.setdefault(e["pass"], []).extend(e["names"])
    return out


def run_main(main, argv):
    """(exit status, stdout, stderr) of ``main(argv)`` run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), err.getvalue()
