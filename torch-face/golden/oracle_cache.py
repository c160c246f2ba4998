"""A persistent cache of upstream's (the oracle's) side of the golden harness and the sweeps.

Why: upstream's results never change unless upstream, the case or the side script changes, yet
compare.py, opinfo_sweep.py and arch_sweep.py recomputed them every run (most of the harness's
time).  Only the oracle's results are cached, never the face's.

Keys.  Every entry is keyed by the sha256 of

* the oracle's fingerprint: ``oracle_fingerprint.py`` run once under the oracle command (the
  sha256 of the torch dist-info ``RECORD``, which lists every installed file with its hash; of
  transformers' too for the architecture sweep; numpy's version; the Python version);
* the sha256 of the side script that produced it (run_side.py, opinfo_side.py, arch_side.py)
  and of every module of this tree it imports, found by reading its imports (``side_hash``);
* what the entry is about, given by the tool: for a golden case, the pass and the whole case
  dict (name, code, ops, family, ref64, acc, exact); for an OpInfo, its key, the dtypes, the
  sample count and the per-sample timeout; for an architecture, its name.

So a changed case, a changed side script or another oracle reads no old entry: a stale entry is
never used.  The fingerprint takes about 0.1 s (no import of torch), so it is not cached.

Layout.  ``DIR/<fingerprint[:16]>-<side[:16]>.cache``, one file per (oracle, side script): a
JSON header line (tool, full fingerprint and side hash, the oracle's versions), then one line
per entry, ``KEY <TAB> SHA256(VALUE) <TAB> VALUE`` with VALUE compact JSON.  The file is
rewritten atomically (a temporary file in DIR, then ``os.replace``), merged with what another
run wrote meanwhile.  A file that cannot be read, a header that does not match, or an entry
whose checksum or JSON is wrong is a miss, with a message, never a crash; the next save
rewrites the file without the bad entries.  The architecture sweep keeps its saved models in
``DIR/<same stem>.models/<entry key>/`` (their files' sha256 are in the entry and checked
before use).

Where: ``--oracle-cache DIR``; by default ``$TORCHNATIVE_HOME/oracle-cache/<tool>`` when
TORCHNATIVE_HOME is set, else off; ``--no-oracle-cache`` turns it off.  Delete the directory
to drop the cache.
"""
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FINGERPRINT_PY = os.path.join(HERE, "oracle_fingerprint.py")
FORMAT = 1


class CacheError(Exception):
    """The cache cannot be used (the oracle cannot be fingerprinted, the directory is unusable)."""


def add_options(ap, tool):
    """--oracle-cache DIR and --no-oracle-cache on an argparse parser."""
    ap.add_argument("--oracle-cache", default=None, metavar="DIR",
                    help="keep upstream's results here between runs (default "
                         "$TORCHNATIVE_HOME/oracle-cache/%s when TORCHNATIVE_HOME is set, else "
                         "off)" % tool)
    ap.add_argument("--no-oracle-cache", action="store_true",
                    help="compute every oracle result, read and write no cache")


def check_options(ap, args):
    """The checks every tool makes of the cache options after parsing (errors through ``ap``):
    the older ``--reuse-oracle`` spelling means ``--oracle-cache WORKDIR/oracle-cache``."""
    if args.reuse_oracle and not args.workdir:
        ap.error("--reuse-oracle needs --workdir")
    if args.reuse_oracle and not args.oracle_cache:
        args.oracle_cache = os.path.join(args.workdir, "oracle-cache")
    if args.oracle_cache and args.no_oracle_cache:
        ap.error("--oracle-cache and --no-oracle-cache contradict each other")


def cache_dir(args, tool):
    """The cache directory chosen by the options and the environment, or None (off)."""
    if getattr(args, "no_oracle_cache", False):
        return None
    if getattr(args, "oracle_cache", None):
        return args.oracle_cache
    home = os.environ.get("TORCHNATIVE_HOME")
    if home:
        return os.path.join(home, "oracle-cache", tool)
    return None


def digest(*parts):
    """sha256 (hex) of JSON-serializable parts."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":"))
                          .encode("utf-8")).hexdigest()


def fingerprint(cmd, dists):
    """(sha256, description) of the upstream install the oracle command prefix ``cmd`` (a list)
    runs: oracle_fingerprint.py's output for ``dists`` (e.g. ["torch", "transformers"])."""
    argv = list(cmd) + [FINGERPRINT_PY] + list(dists)
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        raise CacheError("cannot run the oracle to fingerprint it (%s): %s" % (argv[0], e))
    if p.returncode != 0:
        raise CacheError("cannot fingerprint the oracle (exit %s): %s" % (
            p.returncode, (p.stderr.strip() or p.stdout.strip())[-500:]))
    try:
        desc = json.loads(p.stdout.strip().splitlines()[-1])
        desc["dists"]
    except (ValueError, IndexError, KeyError, TypeError):
        raise CacheError("the oracle's fingerprint is not the expected JSON: %r" % p.stdout[-300:])
    return digest(desc), desc


def _local_imports(path, seen):
    """Files of this tree that the module at ``path`` imports (directly or not), by its AST."""
    base = os.path.dirname(path)
    with open(path, "rb") as fh:
        tree = ast.parse(fh.read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    for name in sorted(names):
        for cand in (os.path.join(base, name + ".py"), os.path.join(base, name, "__init__.py"),
                     os.path.join(HERE, name + ".py"), os.path.join(HERE, name, "__init__.py")):
            if os.path.isfile(cand):
                cand = os.path.abspath(cand)
                if cand not in seen:
                    seen.add(cand)
                    _local_imports(cand, seen)
                break
    return seen


def side_files(script):
    """The side script and every module of this tree it imports, sorted."""
    script = os.path.abspath(script)
    return sorted(_local_imports(script, {script}))


def side_hash(script):
    """sha256 over the side script's and its local imports' names and bytes."""
    h = hashlib.sha256()
    for path in side_files(script):
        with open(path, "rb") as fh:
            data = fh.read()
        h.update(os.path.basename(os.path.dirname(path)).encode() + b"/" +
                 os.path.basename(path).encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


class Store:
    """One cache file: entries of one oracle (fingerprint) and one side script (side)."""

    def __init__(self, directory, tool, fp, fp_desc, side, log=None):
        self.dir, self.tool, self.fp, self.side = directory, tool, fp, side
        self.desc = fp_desc
        self.log = log or (lambda msg: print(msg, file=sys.stderr))
        self.stem = "%s-%s" % (fp[:16], side[:16])
        self.path = os.path.join(directory, self.stem + ".cache")
        self.header = {"torchnative_oracle_cache": FORMAT, "tool": tool, "fingerprint": fp,
                       "side": side, "oracle": fp_desc}
        self.raw = self._read(self.path, quiet=False)   # key -> (checksum, value json)
        self.new = {}
        self.bad = 0
        self.dropped = set()
        self.dirty = False

    def _read(self, path, quiet):
        raw = {}
        try:
            with open(path, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return raw
        except OSError as e:
            self.log("oracle cache: cannot read %s: %s; every entry is a miss" % (path, e))
            return raw
        lines = data.split(b"\n")
        try:
            head = json.loads(lines[0].decode("utf-8"))
            ok = isinstance(head, dict) and all(
                head.get(k) == self.header[k]
                for k in ("torchnative_oracle_cache", "tool", "fingerprint", "side"))
        except (ValueError, UnicodeDecodeError):
            ok = False
        if not ok:
            if not quiet:
                self.log("oracle cache: %s has no valid header for this oracle and side script "
                         "(corrupt or foreign); every entry is a miss" % path)
            return raw
        bad = 0
        # the last element is what follows the last newline: empty unless the file was cut
        for line in lines[1:-1]:
            parts = line.split(b"\t", 2)
            if len(parts) != 3 or len(parts[0]) != 64 or len(parts[1]) != 64:
                bad += 1
                continue
            try:
                raw[parts[0].decode("ascii")] = (parts[1].decode("ascii"), parts[2])
            except UnicodeDecodeError:
                bad += 1
        if lines[-1]:
            bad += 1
        if bad and not quiet:
            self.log("oracle cache: %s: %d unreadable line(s) (a truncated or corrupt file); "
                     "those entries are misses" % (path, bad))
        return raw

    def key(self, *parts):
        """The entry key of ``parts`` (what the entry is about) for this oracle and side."""
        return digest(self.fp, self.side, self.tool, parts)

    def get(self, key):
        """The cached value, or None (absent, or its checksum or JSON is wrong: a miss)."""
        if key in self.new:
            return json.loads(self.new[key][1])
        ent = self.raw.get(key)
        if ent is None:
            return None
        check, data = ent
        if hashlib.sha256(data).hexdigest() != check:
            self._drop(key, "its checksum does not match")
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, UnicodeDecodeError) as e:
            self._drop(key, "its JSON does not parse (%s)" % e)
            return None

    def _drop(self, key, why):
        self.bad += 1
        if self.bad <= 3:
            self.log("oracle cache: %s: entry %s… is corrupt (%s); it is a miss" % (
                self.path, key[:12], why))
        del self.raw[key]
        self.new.pop(key, None)
        self.dropped.add(key)
        self.dirty = True

    def put(self, key, value):
        data = json.dumps(value, separators=(",", ":")).encode("utf-8")
        self.new[key] = (hashlib.sha256(data).hexdigest(), data)

    def save(self):
        """Write the file atomically with the old, the new and what another run added meanwhile
        (a failure to write is a message, not an error: the results are computed anyway)."""
        if not self.new and not self.dirty:
            return True
        try:
            os.makedirs(self.dir, exist_ok=True)
            # entries another run wrote since this one read the file are kept
            merged = {k: v for k, v in self._read(self.path, quiet=True).items()
                      if k not in self.dropped}
            merged.update(self.raw)
            merged.update(self.new)
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix="." + self.stem + ".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(json.dumps(self.header, sort_keys=True).encode("utf-8") + b"\n")
                    for k in sorted(merged):
                        check, data = merged[k]
                        fh.write(k.encode("ascii") + b"\t" + check.encode("ascii") + b"\t" +
                                 data + b"\n")
                    fh.flush()
                    os.fsync(fh.fileno())
                os.chmod(tmp, 0o644)  # mkstemp makes it 0600
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as e:
            self.log("oracle cache: cannot write %s: %s (results not cached)" % (self.path, e))
            return False
        self.raw = merged
        self.new = {}
        self.dirty = False
        return True

    def models_dir(self):
        """Where the architecture sweep keeps saved models of this file's entries."""
        return os.path.join(self.dir, self.stem + ".models")


def open_store(args, tool, oracle_cmd, dists, side_script, log=None):
    """The Store for this run, or (None, why) when the cache is off or unusable (a message, the
    run goes on without it).  Returns (store, message)."""
    directory = cache_dir(args, tool)
    if directory is None:
        why = "--no-oracle-cache" if getattr(args, "no_oracle_cache", False) else \
            "no --oracle-cache and TORCHNATIVE_HOME unset"
        return None, "oracle cache off (%s)" % why
    try:
        fp, desc = fingerprint(oracle_cmd, dists)
        side = side_hash(side_script)
    except (CacheError, OSError, SyntaxError) as e:
        return None, "oracle cache off: %s" % e
    return Store(directory, tool, fp, desc, side, log=log), "oracle cache %s" % directory
