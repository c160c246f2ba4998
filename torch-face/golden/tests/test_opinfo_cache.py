"""opinfo_sweep.py's oracle cache, with a fake oracle (tests/fake_side.py): no torch.

Run: python3 -m unittest discover -s torch-face/golden/tests
"""
import json
import os
import re
import shutil
import tempfile
import unittest

import fakes
import fake_side
import opinfo_sweep

CACHED = re.compile(r"oracle results: (\d+) OpInfos from the cache, (\d+) computed")


class OpinfoCacheTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="opinfo-cache-test-")
        self.site = fakes.make_site(self.tmp)
        self.runs = 0

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sweep(self, *extra, oracle_env=None):
        """(rc, stdout, stderr, OpInfo keys the oracle ran, per-OpInfo rows)."""
        self.runs += 1
        log = os.path.join(self.tmp, "log%d" % self.runs)
        out_json = os.path.join(self.tmp, "o%d.json" % self.runs)
        argv = ["--oracle", fakes.side_cmd("oracle", self.site, log, **(oracle_env or {})),
                "--face", fakes.side_cmd("face", None, log),
                "--oracle-cache", os.path.join(self.tmp, "cache"), "--samples", "2",
                "--dtypes", "float32,float64", "--json", out_json,
                "--workdir", os.path.join(self.tmp, "work%d" % self.runs)] + list(extra)
        rc, out, err = fakes.run_main(opinfo_sweep.main, argv)
        ran = fakes.oracle_runs(log, "opinfo_side.py").get("oracle")
        rows = None
        if os.path.exists(out_json):
            with open(out_json) as fh:
                rows = json.load(fh)["opinfos"]
        return rc, out, err, ran, rows

    def counts(self, out):
        m = CACHED.search(out)
        self.assertIsNotNone(m, out)
        return int(m.group(1)), int(m.group(2))

    def test_warm_cache_runs_no_oracle_and_gives_the_same_rows(self):
        n = len(fake_side.OPINFOS)
        rc, out, err, ran, rows1 = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual((self.counts(out), ran), ((0, n), fake_side.OPINFOS))
        rc, out, err, ran, rows2 = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual((self.counts(out), ran), ((n, 0), None))
        self.assertEqual(rows1, rows2)
        self.assertEqual({r["status"] for r in rows2}, {"pass"})

    def test_a_filter_runs_only_what_the_cache_lacks(self):
        self.sweep("--filter", "^(abs|add)$")
        rc, out, err, ran, rows = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(ran, [k for k in fake_side.OPINFOS if k not in ("abs", "add")])
        self.assertEqual([r["opinfo"] for r in rows], fake_side.OPINFOS)  # op_db order

    def test_other_samples_or_dtypes_recompute(self):
        self.sweep()
        _, out, _, ran, _ = self.sweep("--samples", "3")
        self.assertEqual(ran, fake_side.OPINFOS)
        _, out, _, ran, _ = self.sweep("--dtypes", "float32")
        self.assertEqual(ran, fake_side.OPINFOS)

    def test_an_opinfo_that_timed_out_is_not_cached(self):
        self.sweep(oracle_env={"FAKE_TIMEOUT_AT": "mul"})
        _, out, _, ran, _ = self.sweep()
        self.assertEqual(ran, ["mul"])


if __name__ == "__main__":
    unittest.main()
