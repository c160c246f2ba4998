"""arch_sweep.py's oracle cache (records and saved models) and --slice, with a fake side
(tests/fake_arch_side.py): no torch, no transformers.

Run: python3 -m unittest discover -s torch-face/sweep/tests
"""
import json
import os
import re
import shutil
import sys
import tempfile
import unittest
from unittest import mock

TESTS = os.path.dirname(os.path.abspath(__file__))
SWEEP = os.path.dirname(TESTS)
sys.path.insert(0, os.path.join(os.path.dirname(SWEEP), "golden", "tests"))
sys.path.insert(0, SWEEP)

import fakes  # noqa: E402  (torch-face/golden/tests)
import arch_sweep  # noqa: E402
import fake_arch_side  # noqa: E402

FAKE = os.path.join(TESTS, "fake_arch_side.py")
CACHED = re.compile(r"oracle results: (\d+) architectures from the cache, (\d+) computed")

# every model type transformers 5.24.0 maps to a causal-LM class
REAL_TYPES = """afmoe apertus apertus1p5_text arcee aria_text axk1 axk2 bailing_hybrid bamba bart
beam bert bert-generation big_bird bigbird_pegasus biogpt bitnet blenderbot blenderbot-small bloom
blt camembert codegen cohere cohere2 cohere2_moe cohere_compass_text cpmant ctrl cwm data2vec-text
dbrx deepseek_v2 deepseek_v3 deepseek_v32 deepseek_v4 diffllama doge dory dots1 dots3_note
dots3_note_text electra emu3 ernie ernie4_5 ernie4_5_moe exaone exaone4 exaone_moe falcon falcon_h1
falcon_mamba flex_olmo flint fuyu gemma gemma2 gemma3 gemma3_text gemma3n gemma3n_text gemma4
gemma4_assistant gemma4_text gemma4_unified gemma4_unified_assistant gemma4_unified_text git glm
glm4 glm4_moe glm4_moe_lite glm_moe_dsa got_ocr2 gpt-sw3 gpt2 gpt_bigcode gpt_neo gpt_neox
gpt_neox_japanese gpt_oss gptj granite granite_swa granitemoe granitemoe_swa granitemoehybrid
granitemoeshared helium hrm_text hunyuan_v1_dense hunyuan_v1_moe hy_v3 hy_v4 hyperclovax
inkling2_loop_text inkling2_text inkling_text internlm3 iquestcoder jais2 jamba jetmoe kimi_linear
kolibri1 laguna lara_mini lfm2 lfm2_moe lfm3 llama llama4 llama4_text longcat_flash mamba mamba2
marian mbart megatron-bert mellum mimo_v2_flash minicpm3 minimax minimax_m2 minimax_m3_vl_text
ministral ministral3 mistral mixtral mllama modernbert-decoder moshi moss_transcribe_diarize mpt
musicgen musicgen_melody mvp nanochat nemotron nemotron_h olmo olmo2 olmo3 olmo_hybrid olmoe
openai-gpt opt pegasus persimmon phi phi3 phi4_multimodal phimoe plbart prophetnet qwen2 qwen2_moe
qwen3 qwen3_5 qwen3_5_moe qwen3_5_moe_text qwen3_5_text qwen3_moe qwen3_next qwen4_exp
qwen4_exp_text recurrent_gemma reformer rembert roberta roberta-prelayernorm roc_bert roformer rwkv
sarvam_mla sarvam_moe seed_oss smollm3 solar_open stablelm starcoder2 trocr vaultgemma whisper xglm
xlm xlm-roberta xlm-roberta-xl xlnet xlstm xmod youtu zamba zamba2 zaya""".split()
REAL = ["%s/Cls" % t for t in REAL_TYPES] + ["%s/%s" % e for e in arch_sweep.ENCODERS]


class ArchSliceRuleTest(unittest.TestCase):
    def test_keeps_encoders_singled_out_and_every_kind(self):
        types = {n.split("/")[0] for n in REAL}
        kept, info = arch_sweep.slice_archs(REAL, 8)
        for e in arch_sweep.ENCODERS:
            self.assertIn("%s/%s" % e, kept)
        for t in arch_sweep.SINGLED_OUT:
            self.assertIn("%s/Cls" % t, kept)
        kinds = {g for n in REAL for g in arch_sweep.arch_kinds(n, types)}
        self.assertEqual({g for n in kept for g in arch_sweep.arch_kinds(n, types)}, kinds)
        want = {label for label, _ in arch_sweep.SLICE_KINDS} | {
            "composite config", "text part", "other decoder"}
        self.assertEqual({label for what, label in kinds if what == "kind"}, want)
        by_type = {n.split("/")[0]: arch_sweep.arch_kinds(n, types) for n in REAL}
        self.assertIn(("kind", "composite config"), by_type["gemma3"])  # gemma3_text is listed
        self.assertIn(("kind", "text part"), by_type["gemma3_text"])
        self.assertIn(("kind", "mixture of experts"), by_type["mixtral"])
        self.assertIn(("kind", "state space / recurrent"), by_type["mamba"])
        self.assertEqual(by_type["mistral"], [("kind", "other decoder")])
        self.assertLess(len(kept), len(REAL) / 4)
        self.assertEqual(info["total"] - info["kept"], sum(info["left_out"].values()))
        self.assertEqual(kept, arch_sweep.slice_archs(list(REAL), 8)[0])
        self.assertEqual(set(kept), set(arch_sweep.slice_archs(REAL[::-1], 8)[0]))

    def test_hash_alone_would_miss_them(self):
        hashed = [n for n in REAL if arch_sweep.slicing.name_hash(n) % 8 == 0]
        self.assertFalse(all("%s/%s" % e in hashed for e in arch_sweep.ENCODERS))


class ArchCacheTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="arch-sweep-test-")
        self.site = fakes.make_site(self.tmp, dists=("torch", "transformers"))
        self.cache = os.path.join(self.tmp, "cache")
        self.runs = 0

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def sweep(self, *extra, cache=True):
        """(rc, stdout, stderr, {mode: names the oracle ran}, face invocations, json)."""
        self.runs += 1
        log = os.path.join(self.tmp, "log%d" % self.runs)
        out_json = os.path.join(self.tmp, "a%d.json" % self.runs)
        argv = ["--oracle", fakes.side_cmd("oracle", self.site, log, script=FAKE),
                "--face", fakes.side_cmd("face", None, log, script=FAKE),
                "--json", out_json, "--workdir", os.path.join(self.tmp, "work%d" % self.runs)]
        argv += (["--oracle-cache", self.cache] if cache else []) + list(extra)
        rc, out, err = fakes.run_main(arch_sweep.main, argv)
        runs = fakes.oracle_runs(log, "arch_side.py")
        face = [e for e in fakes.read_log(log) if e["role"] == "face"]
        data = None
        if os.path.exists(out_json):
            with open(out_json) as fh:
                data = json.load(fh)
        return rc, out, err, runs, face, data

    def counts(self, out):
        m = CACHED.search(out)
        self.assertIsNotNone(m, out)
        return int(m.group(1)), int(m.group(2))

    def test_warm_cache_builds_nothing_and_the_face_loads_the_cached_models(self):
        n = len(fake_arch_side.ALL)
        rc, out, err, runs, face, first = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (0, n))
        self.assertEqual(len(runs["build"]), n)
        rc, out, err, runs, face, second = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(self.counts(out), (n, 0))
        self.assertEqual(runs, {})
        self.assertEqual(len(face[0]["names"]), n)
        self.assertEqual(first["rows"], second["rows"])
        self.assertEqual({r["category"] for r in second["rows"]}, {"agree"})

    def test_only_reuses_the_full_runs_entries(self):
        self.sweep()
        rc, out, err, runs, face, data = self.sweep("--only", "^(llama|gpt2)$")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(runs, {})
        self.assertEqual([r["arch"] for r in data["rows"]],
                         ["gpt2/Gpt2ForCausalLM", "llama/LlamaForCausalLM"])

    def test_changed_side_script_or_transformers_recomputes(self):
        n = len(fake_arch_side.ALL)
        self.sweep()
        changed = os.path.join(self.tmp, "side", "arch_side.py")
        os.makedirs(os.path.dirname(changed))
        with open(arch_sweep.SIDE) as src, open(changed, "w") as dst:
            dst.write(src.read() + "\n# changed\n")
        with mock.patch.object(arch_sweep, "SIDE", changed):
            _, out, _, runs, _, _ = self.sweep()
        self.assertEqual(self.counts(out), (0, n))
        self.assertEqual(len(runs["build"]), n)
        fakes.write_record(self.site, "transformers", "another")
        _, out, _, runs, _, _ = self.sweep()
        self.assertEqual(self.counts(out), (0, n))

    def test_a_changed_cached_model_is_rebuilt(self):
        self.sweep()
        models = [d for d in os.listdir(self.cache) if d.endswith(".models")]
        root = os.path.join(self.cache, models[0])
        victim = sorted(os.listdir(root))[0]
        with open(os.path.join(root, victim, "weights.json"), "w") as fh:
            fh.write("[0.0]")
        rc, out, err, runs, _, data = self.sweep()
        self.assertEqual(rc, 0, out + err)
        self.assertIn("missing or changed", err)
        self.assertEqual(len(runs["build"]), 1)
        self.assertEqual({r["category"] for r in data["rows"]}, {"agree"})

    def test_slice_runs_the_slice_and_reports_it(self):
        kept, info = arch_sweep.slice_archs(fake_arch_side.ALL, 4)
        report = os.path.join(self.tmp, "r.md")
        rc, out, err, runs, face, data = self.sweep("--slice", "4", "--report", report)
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(runs["build"], kept)
        self.assertEqual(face[0]["names"], kept)
        self.assertEqual([r["arch"] for r in data["rows"]], kept)
        self.assertEqual(data["slice"], info)
        self.assertIn("slice 1/4: %d of %d architectures kept" % (len(kept), len(fake_arch_side.ALL)),
                      out)
        with open(report) as fh:
            self.assertIn("**A slice**", fh.read())

    def test_without_cache_or_slice_the_oracle_runs_as_before(self):
        rc, out, err, runs, face, data = self.sweep("--no-oracle-cache", cache=False)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("oracle cache off (--no-oracle-cache)", out)
        self.assertEqual(len(runs["build"]), len(fake_arch_side.ALL))
        self.assertEqual({r["category"] for r in data["rows"]}, {"agree"})


if __name__ == "__main__":
    unittest.main()
