"""compare.py --slice: deterministic, about 1/N, every family and declared overload covered;
and ratchet.py on a slice's verdicts.  Fake sides (tests/fake_side.py): no torch.

Run: python3 -m unittest discover -s torch-face/golden/tests
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import unittest

import fakes
import compare
import ratchet
import slicing
from cases import load_cases


class SliceRuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cases = load_cases()

    def check_covers(self, kept, cases):
        fams = {c["family"] for c in cases}
        ops = {o for c in cases for o in c["ops"]}
        self.assertEqual({c["family"] for c in kept}, fams)
        self.assertEqual({o for c in kept for o in c["ops"]}, ops)

    def test_every_family_and_overload_is_covered(self):
        for n in (8, 1000):
            kept, info = slicing.slice_cases(self.cases, n)
            self.check_covers(kept, self.cases)
            self.assertEqual(info["kept"], len(kept))
            self.assertEqual(info["total"], len(self.cases))
            self.assertEqual(sum(info["left_out"].values()), len(self.cases) - len(kept))
        # 1/1000 by hash alone keeps about 46 cases: coverage needs the added ones
        hashed = [c for c in self.cases if slicing.name_hash(c["name"]) % 1000 == 0]
        self.assertLess(len({o for c in hashed for o in c["ops"]}),
                        len({o for c in self.cases for o in c["ops"]}))

    def test_about_one_in_n(self):
        kept, _ = slicing.slice_cases(self.cases, 8)
        self.assertGreater(len(kept), len(self.cases) / 8 * 0.9)
        self.assertLess(len(kept), len(self.cases) / 8 * 1.3)
        self.assertEqual(len(slicing.slice_cases(self.cases, 1)[0]), len(self.cases))

    def test_deterministic_and_independent_of_order(self):
        a = [c["name"] for c in slicing.slice_cases(self.cases, 8)[0]]
        b = [c["name"] for c in slicing.slice_cases(list(self.cases), 8)[0]]
        self.assertEqual(a, b)
        shuffled = list(self.cases)
        random.Random(1).shuffle(shuffled)
        c = {x["name"] for x in slicing.slice_cases(shuffled, 8)[0]}
        self.assertEqual(set(a), c)

    def test_a_name_keeps_its_fate_when_others_go(self):
        names = [c["name"] for c in self.cases]
        kept = slicing.deterministic_slice(names, 8, lambda x: [])
        fewer = slicing.deterministic_slice(names[::2], 8, lambda x: [])
        self.assertEqual(set(fewer), set(kept) & set(names[::2]))

    def test_same_slice_in_every_process(self):
        """The rule is sha256, not Python's per-process string hash."""
        code = ("import sys; sys.path.insert(0, %r); import slicing; from cases import load_cases; "
                "print(len(slicing.slice_cases(load_cases(['unary']), 8)[0]), "
                "slicing.slice_cases(load_cases(['unary']), 8)[0][5]['name'])" % fakes.GOLDEN)
        kept = slicing.slice_cases(load_cases(["unary"]), 8)[0]
        for seed in ("1", "2"):
            p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               env=dict(os.environ, PYTHONHASHSEED=seed))
            self.assertEqual(p.stdout.split(), [str(len(kept)), kept[5]["name"]], p.stderr)

    def test_bad_n(self):
        with self.assertRaises(ValueError):
            slicing.deterministic_slice(["a"], 0, lambda x: [])


class SliceRunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="golden-slice-test-")
        self.site = fakes.make_site(self.tmp)
        self.log = os.path.join(self.tmp, "log")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def compare(self, *extra, face_env=None):
        argv = ["--oracle", fakes.side_cmd("oracle", self.site, self.log),
                "--face", fakes.side_cmd("face", None, self.log, **(face_env or {})),
                "--oracle-cache", os.path.join(self.tmp, "cache"), "--case-timeout", "20",
                "--workdir", os.path.join(self.tmp, "work")]
        return fakes.run_main(compare.main, argv + list(extra))

    def test_slice_runs_only_the_slice_and_says_so(self):
        cases = load_cases(["unary"])
        kept, info = slicing.slice_cases(cases, 8)
        out_json, report = os.path.join(self.tmp, "v.json"), os.path.join(self.tmp, "r.md")
        rc, out, err = self.compare("--module", "unary", "--slice", "8", "--json", out_json,
                                    "--report", report)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("slice 1/8: %d of %d cases kept; left out %d: unary %d" % (
            len(kept), len(cases), len(cases) - len(kept), len(cases) - len(kept)), out)
        face = [e for e in fakes.read_log(self.log) if e["role"] == "face"]
        self.assertEqual(face[0]["names"], [c["name"] for c in kept])
        self.assertEqual(fakes.oracle_runs(self.log)["plain"], [c["name"] for c in kept])
        with open(out_json) as fh:
            data = json.load(fh)
        self.assertEqual(data["slice"], info)
        self.assertEqual(len(data["cases"]), len(kept))
        with open(report) as fh:
            text = fh.read()
        self.assertIn("--slice 8", text)
        self.assertIn("**A slice**", text)

    def test_wrong_derivatives_accepts_a_slice(self):
        kept, _ = slicing.slice_cases(load_cases(["grad"]), 4)
        rc, out, err = self.compare("--module", "grad", "--wrong-derivatives", "1e-4",
                                    "--slice", "4")
        self.assertEqual(rc, 0, out + err)
        self.assertIn("slice 1/4: %d of " % len(kept), out)
        self.assertIn("%d grad cases" % len(kept), out)
        # the oracle ran once (the perturbed face reuses it), the face twice
        self.assertEqual(len(fakes.oracle_runs(self.log)["plain"]), len(kept))
        face = [e for e in fakes.read_log(self.log) if e["role"] == "face"]
        self.assertEqual([len(e["names"]) for e in face], [len(kept), len(kept)])


class RatchetOnSliceTest(unittest.TestCase):
    """ratchet.py judges only the cases a run holds."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="golden-ratchet-test-")
        self.site = fakes.make_site(self.tmp)
        cases = load_cases(["unary"])
        kept, _ = slicing.slice_cases(cases, 8)
        keep = {c["name"] for c in kept}
        self.inside = [c["name"] for c in kept[:3]]
        self.outside = [c["name"] for c in cases if c["name"] not in keep][:2]
        self.json = os.path.join(self.tmp, "v.json")
        log = os.path.join(self.tmp, "log")
        # the face gets inside[0] and inside[2] wrong
        wrong = ",".join([self.inside[0], self.inside[2]])
        argv = ["--oracle", fakes.side_cmd("oracle", self.site, log),
                "--face", fakes.side_cmd("face", None, log, FAKE_WRONG=wrong),
                "--no-oracle-cache", "--module", "unary", "--slice", "8", "--json", self.json,
                "--workdir", os.path.join(self.tmp, "work")]
        rc, out, err = fakes.run_main(compare.main, argv)
        self.assertEqual(rc, 1, out + err)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def known(self, names):
        path = os.path.join(self.tmp, "known.txt")
        with open(path, "w") as fh:
            fh.write("# test list\n")
            for n in names:
                fh.write("%s\tdisagree\n" % n)
        return path

    def test_absent_listed_cases_are_neither_fixed_nor_regressions(self):
        # listed: inside[0] (still wrong), inside[1] (agrees now), two cases outside the slice
        known = self.known([self.inside[0], self.inside[1]] + self.outside)
        rc, out, err = fakes.run_main(ratchet.main, ["--json", self.json, "--known", known])
        self.assertEqual(rc, 1, out + err)  # inside[2] is a regression
        self.assertIn("4 listed as not agreeing, 2 of them outside this run (not judged)", out)
        self.assertIn("1 of those run agree now", out)
        self.assertIn("1 regressions", out)
        self.assertIn("REGRESSION %s" % self.inside[2], out)
        self.assertIn("(a slice 1/8:", out)
        self.assertNotIn(self.outside[0], out)

    def test_no_regression_passes_and_update_keeps_what_it_did_not_run(self):
        known = self.known([self.inside[0], self.inside[2]] + self.outside)
        rc, out, err = fakes.run_main(ratchet.main, ["--json", self.json, "--known", known])
        self.assertEqual(rc, 0, out + err)
        self.assertIn("0 of those run agree now", out)
        rc, out, err = fakes.run_main(ratchet.main, ["--json", self.json, "--known", known,
                                                     "--update"])
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(set(ratchet.load_known(known)),
                         {self.inside[0], self.inside[2]} | set(self.outside))


if __name__ == "__main__":
    unittest.main()
