"""compare.py's oracle cache, end to end with a fake oracle (tests/fake_side.py): no torch.

Run: python3 -m unittest discover -s torch-face/golden/tests
"""
import copy
import json
import os
import re
import shutil
import tempfile
import unittest
from unittest import mock

import fakes
import compare
import oracle_cache
from cases import load_cases

MODULE = "complex"  # 132 cases: 60 with a float64 reference, 30 of them float64/complex128
CACHED = re.compile(r"oracle results: (\d+) from the cache, (\d+) computed")


class GoldenCacheTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="golden-cache-test-")
        self.site = fakes.make_site(self.tmp)
        self.cache = os.path.join(self.tmp, "cache")
        self.runs = 0
        self.cases = load_cases([MODULE])
        self.saved = copy.deepcopy(self.cases)

    def tearDown(self):
        self.cases[:] = self.saved  # the in-process case list, as loaded
        shutil.rmtree(self.tmp, ignore_errors=True)

    def compare(self, *extra, cache=True, oracle_env=None):
        """Runs compare.main with fake sides; (rc, stdout, stderr, oracle runs by pass)."""
        self.runs += 1
        log = os.path.join(self.tmp, "log%d" % self.runs)
        argv = ["--oracle", fakes.side_cmd("oracle", self.site, log, **(oracle_env or {})),
                "--face", fakes.side_cmd("face", None, log), "--module", MODULE,
                "--case-timeout", "20", "--workdir", os.path.join(self.tmp, "work%d" % self.runs)]
        argv += ["--oracle-cache", self.cache] if cache else []
        rc, out, err = fakes.run_main(compare.main, argv + list(extra))
        return rc, out, err, fakes.oracle_runs(log)

    def counts(self, out):
        m = CACHED.search(out)
        self.assertIsNotNone(m, out)
        return int(m.group(1)), int(m.group(2))

    def expected_total(self):
        ref = [c for c in self.cases if c["ref64"]]
        return len(self.cases) + len(ref) + len([c for c in ref if compare.F64_NAME.search(c["name"])])

    def test_warm_cache_calls_no_oracle_and_agrees_the_same(self):
        j1, j2 = os.path.join(self.tmp, "1.json"), os.path.join(self.tmp, "2.json")
        rc, out, err, runs = self.compare("--json", j1)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (0, self.expected_total()))
        self.assertEqual(len(runs["plain"]), len(self.cases))
        rc, out, err, runs = self.compare("--json", j2)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (self.expected_total(), 0))
        self.assertEqual(runs, {}, "the oracle ran although every result was cached")
        with open(j1) as a, open(j2) as b:
            self.assertEqual(json.load(a)["cases"], json.load(b)["cases"])

    def test_changed_case_recomputes_exactly_that_case(self):
        self.compare()
        target = next(c for c in self.cases if c["ref64"] and compare.F64_NAME.search(c["name"]))
        target["code"] += "\n# edited\n"
        rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(runs, {"plain": [target["name"]], "ref64": [target["name"]],
                                "ref32": [target["name"]]})
        self.assertEqual(self.counts(out), (self.expected_total() - 3, 3))
        # a field that is not code counts too (it is part of the case)
        other = next(c for c in self.cases if not c["ref64"])
        other["acc"] = not other["acc"]
        _, out, _, runs = self.compare()
        self.assertEqual(runs, {"plain": [other["name"]]})

    def test_changed_oracle_fingerprint_recomputes_everything(self):
        self.compare()
        fakes.write_record(self.site, "torch", "v2")  # another wheel's RECORD
        rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (0, self.expected_total()))
        self.assertEqual(len(runs["plain"]), len(self.cases))
        self.assertEqual(len([f for f in os.listdir(self.cache) if f.endswith(".cache")]), 2)

    def test_changed_side_script_recomputes_everything(self):
        self.compare()
        changed = os.path.join(self.tmp, "side", "run_side.py")
        os.makedirs(os.path.dirname(changed))
        with open(compare.RUN_SIDE) as src, open(changed, "w") as dst:
            dst.write(src.read() + "\n# a changed side script\n")
        with mock.patch.object(compare, "RUN_SIDE", changed):
            rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (0, self.expected_total()))
        self.assertEqual(len(runs["plain"]), len(self.cases))

    def cache_file(self):
        files = [f for f in os.listdir(self.cache) if f.endswith(".cache")]
        self.assertEqual(len(files), 1, files)
        return os.path.join(self.cache, files[0])

    def test_truncated_cache_file_is_a_miss_not_a_crash(self):
        self.compare()
        path = self.cache_file()
        with open(path, "rb") as fh:
            data = fh.read()
        with open(path, "wb") as fh:
            fh.write(data[:len(data) // 2])  # cut inside a line
        rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("unreadable line", err)
        cached, computed = self.counts(out)
        self.assertGreater(computed, 0)
        self.assertGreater(cached, 0)
        self.assertEqual(cached + computed, self.expected_total())
        # the file was rewritten whole: the next run takes everything from it
        _, out, err, runs = self.compare()
        self.assertEqual(self.counts(out), (self.expected_total(), 0))
        self.assertEqual(runs, {})

    def test_corrupt_entry_and_garbage_header_are_misses(self):
        self.compare()
        path = self.cache_file()
        with open(path, "rb") as fh:
            lines = fh.read().split(b"\n")
        i = next(i for i, line in enumerate(lines[1:], 1) if b'"name"' in line)
        k, check, value = lines[i].split(b"\t", 2)
        lines[i] = b"\t".join([k, check, value[:-1] + b" }"])  # valid JSON, wrong checksum
        with open(path, "wb") as fh:
            fh.write(b"\n".join(lines))
        rc, out, err, _ = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("corrupt", err)
        self.assertEqual(self.counts(out)[1], 1)
        with open(path, "wb") as fh:
            fh.write(b"\x00\xffnot a header\n" + b"\n".join(lines[1:]))
        rc, out, err, _ = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("no valid header", err)
        self.assertEqual(self.counts(out), (0, self.expected_total()))

    def test_a_crash_record_is_not_cached(self):
        victim = self.cases[7]["name"]
        rc, out, err, runs = self.compare(oracle_env={"FAKE_CRASH_AT": victim})
        self.assertEqual(rc, 1, out + err)  # the crashed case is an error
        rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(runs, {"plain": [victim]})

    def test_default_location_and_off_switch(self):
        home = os.path.join(self.tmp, "home")
        with mock.patch.dict(os.environ, {"TORCHNATIVE_HOME": home}):
            _, out, _, _ = self.compare(cache=False)
            self.assertIn(os.path.join(home, "oracle-cache", "golden"), out)
            _, out, _, runs = self.compare(cache=False)
            self.assertEqual(runs, {})
            _, out, _, runs = self.compare("--no-oracle-cache", cache=False)
            self.assertIn("oracle cache off (--no-oracle-cache)", out)
            self.assertEqual(len(runs["plain"]), len(self.cases))
        with mock.patch.dict(os.environ):
            os.environ.pop("TORCHNATIVE_HOME", None)
            _, out, _, runs = self.compare(cache=False)
            self.assertIn("oracle cache off (no --oracle-cache and TORCHNATIVE_HOME unset)", out)
            self.assertEqual(len(runs["plain"]), len(self.cases))

    def test_reuse_oracle_is_the_workdir_cache(self):
        work = os.path.join(self.tmp, "work")
        self.compare("--workdir", work, "--reuse-oracle", cache=False)
        _, out, _, runs = self.compare("--workdir", work, "--reuse-oracle", cache=False)
        self.assertEqual(runs, {})
        self.assertIn(os.path.join(work, "oracle-cache"), out)

    def test_unfingerprintable_oracle_runs_without_cache(self):
        shutil.rmtree(self.site)  # no torch dist-info: no fingerprint
        rc, out, err, runs = self.compare()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("oracle cache off: cannot fingerprint the oracle", out)
        self.assertIn("torch is not installed", out)
        self.assertEqual(len(runs["plain"]), len(self.cases))


class SideHashTest(unittest.TestCase):
    def test_side_hash_follows_local_imports_only(self):
        tmp = tempfile.mkdtemp(prefix="side-hash-test-")
        self.addCleanup(shutil.rmtree, tmp, True)

        def write(name, text):
            with open(os.path.join(tmp, name), "w") as fh:
                fh.write(text)
        write("side.py", "import json\nimport helper\n")
        write("helper.py", "from deeper import x\n")
        write("deeper.py", "x = 1\n")
        write("unrelated.py", "y = 1\n")
        side = os.path.join(tmp, "side.py")
        self.assertEqual([os.path.basename(p) for p in oracle_cache.side_files(side)],
                         ["deeper.py", "helper.py", "side.py"])
        h0 = oracle_cache.side_hash(side)
        write("unrelated.py", "y = 2\n")
        self.assertEqual(oracle_cache.side_hash(side), h0)
        write("deeper.py", "x = 2\n")
        self.assertNotEqual(oracle_cache.side_hash(side), h0)

    def test_run_side_hash_covers_the_case_loader_not_the_case_files(self):
        names = [os.path.relpath(p, fakes.GOLDEN) for p in oracle_cache.side_files(compare.RUN_SIDE)]
        self.assertEqual(names, [os.path.join("cases", "__init__.py"), "run_side.py"])


if __name__ == "__main__":
    unittest.main()
