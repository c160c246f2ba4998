"""Random numbers after torch.manual_seed: the face must reproduce upstream's CPU generator
(mt19937 and its per-distribution transforms, including the vectorized path upstream takes
for 16+ contiguous elements) value for value.  Sizes below and above 16 are both here."""
from ._lib import case

FAM = "random"
FDTS = ("float32", "float64", "float16", "bfloat16")
SEEDS = (0, 42, 2**32 + 5)


def gen():
    cs = []
    for seed in SEEDS:
        pre = "torch.manual_seed(%d)\n" % seed
        for dt in FDTS:
            d = "torch.%s" % dt
            for name, expr, ops in (
                    ("randn-5", "torch.randn(5, dtype=%s)" % d, ["aten::randn"]),
                    ("randn-32", "torch.randn(4, 8, dtype=%s)" % d, ["aten::randn"]),
                    ("randn-17", "torch.randn(17, dtype=%s)" % d, ["aten::randn"]),
                    ("rand-5", "torch.rand(5, dtype=%s)" % d, ["aten::rand"]),
                    ("rand-40", "torch.rand(40, dtype=%s)" % d, ["aten::rand"]),
                    ("normal_", "torch.empty(6, dtype=%s).normal_(2.0, 0.5)" % d, ["aten::normal_"]),
                    ("normal_-20", "torch.empty(20, dtype=%s).normal_()" % d, ["aten::normal_"]),
                    ("normal-tensors", "torch.normal(torch.arange(4, dtype=%s), torch.full((4,), 0.25, dtype=%s))" % (d, d),
                     ["aten::normal.Tensor_Tensor"]),
                    ("normal-float-tensor", "torch.normal(1.0, torch.full((3,), 2.0, dtype=%s))" % d, ["aten::normal.float_Tensor"]),
                    ("normal-size", "torch.normal(0.5, 2.0, (2, 3), dtype=%s)" % d, ["aten::normal.float_float"]),
                    ("uniform_", "torch.empty(7, dtype=%s).uniform_(-2, 3)" % d, ["aten::uniform_"]),
                    ("uniform_-24", "torch.empty(24, dtype=%s).uniform_()" % d, ["aten::uniform_"]),
                    ("bernoulli", "torch.bernoulli(torch.tensor([0.0, 0.25, 0.5, 0.75, 1.0, 0.1], dtype=%s))" % d, ["aten::bernoulli"]),
                    ("bernoulli_-p", "torch.empty(20, dtype=%s).bernoulli_(0.3)" % d, ["aten::bernoulli_.float"]),
                    ("bernoulli-p-arg", "torch.bernoulli(torch.empty(5, dtype=%s), 0.6)" % d, ["aten::bernoulli.p"]),
                    ("exponential_", "torch.empty(6, dtype=%s).exponential_(1.5)" % d, ["aten::exponential_"]),
                    ("geometric_", "torch.empty(6, dtype=%s).geometric_(0.3)" % d, ["aten::geometric_"]),
                    ("cauchy_", "torch.empty(6, dtype=%s).cauchy_()" % d, ["aten::cauchy_"]),
                    ("log_normal_", "torch.empty(6, dtype=%s).log_normal_()" % d, ["aten::log_normal_"]),
                    ("random_-range", "torch.empty(8, dtype=%s).random_(0, 10)" % d, ["aten::random_.from"]),
                    ("random_-to", "torch.empty(8, dtype=%s).random_(5)" % d, ["aten::random_.to"]),
                    ("randn_like", "torch.randn_like(torch.zeros(2, 3, dtype=%s))" % d, ["aten::randn_like"]),
                    ("rand_like", "torch.rand_like(torch.zeros(3, 2, dtype=%s).t())" % d, ["aten::rand_like"]),
                    ("multinomial-1", "torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=%s), 1)" % d, ["aten::multinomial"]),
                    ("multinomial-norepl", "torch.multinomial(torch.tensor([1.0, 2.0, 3.0, 4.0, 0.0], dtype=%s), 3)" % d, ["aten::multinomial"]),
                    ("multinomial-repl", "torch.multinomial(torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 1.0]], dtype=%s), 6, replacement=True)" % d, ["aten::multinomial"]),
                    ("sequence", "(torch.randn(3, dtype=%s), torch.rand(2, dtype=%s), torch.randint(0, 5, (4,)), torch.randn(20, dtype=%s))" % (d, d, d),
                     ["aten::randn", "aten::rand", "aten::randint.low"]),
            ):
                cs.append(case("random/%s/%s/seed%d" % (name, dt, seed), pre + "out = %s\n" % expr, ops, FAM))
        for name, expr, ops in (
                ("randint", "torch.randint(0, 10, (6,))", ["aten::randint.low"]),
                ("randint-high-only", "torch.randint(7, (2, 3))", ["aten::randint"]),
                ("randint-neg", "torch.randint(-5, 5, (20,), dtype=torch.int32)", ["aten::randint.low"]),
                ("randint-big", "torch.randint(0, 2**40, (5,))", ["aten::randint.low"]),
                ("randint-uint8", "torch.randint(0, 256, (9,), dtype=torch.uint8)", ["aten::randint.low"]),
                ("randint-float", "torch.randint(3, 9, (5,), dtype=torch.float32)", ["aten::randint.low"]),
                ("randint_like", "torch.randint_like(torch.zeros(4, dtype=torch.int16), 3, 100)", ["aten::randint_like.low_dtype"]),
                ("randperm-10", "torch.randperm(10)", ["aten::randperm"]),
                ("randperm-100", "torch.randperm(100)", ["aten::randperm"]),
                ("randperm-int32", "torch.randperm(7, dtype=torch.int32)", ["aten::randperm"]),
                ("randperm-0", "torch.randperm(0)", ["aten::randperm"]),
                ("random_-int64", "torch.empty(6, dtype=torch.int64).random_()", ["aten::random_"]),
                ("random_-uint8", "torch.empty(6, dtype=torch.uint8).random_()", ["aten::random_"]),
                ("random_-bool", "torch.empty(6, dtype=torch.bool).random_()", ["aten::random_"]),
                ("bernoulli-int-out", "torch.empty(8, dtype=torch.int64).bernoulli_(0.5)", ["aten::bernoulli_.float"]),
                ("generator", "(lambda g: (torch.randn(4, generator=g), torch.rand(3, generator=g), torch.randn(2)))(torch.Generator().manual_seed(7))",
                 ["aten::randn.generator", "aten::rand.generator"]),
                ("rng-state-roundtrip", "(lambda s: (torch.rand(3), torch.set_rng_state(s), torch.rand(3))[::2])(torch.get_rng_state())",
                 ["aten::rand"]),
                ("rng-state-bytes", "torch.get_rng_state()[:64]", []),
                ("initial_seed", "torch.initial_seed()", []),
                ("fork-rng", "(torch.rand(2), torch.random.fork_rng().__enter__() and None, torch.rand(2))", ["aten::rand"]),
                ("dropout-default", "torch.nn.functional.dropout(torch.ones(20), 0.5)", ["aten::dropout"]),
                ("shuffle-by-randperm", "torch.arange(10)[torch.randperm(10)]", ["aten::randperm", "aten::index.Tensor"]),
        ):
            cs.append(case("random/%s/seed%d" % (name, seed), pre + "out = %s\n" % expr, ops, FAM, exact=True))
    return cs


CASES = gen()
