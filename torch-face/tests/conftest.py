"""The face suite's tiers: a test marked `full` runs only in `scripts/test.sh --full`.

scripts/test-face.sh passes `-m "not full"` when TEST_TIER=gate (the default). The gate keeps at
least one test of every file and of every kind of check; what it leaves out is the longest
repetitions (more optimizers, more world sizes, more dtypes) and the SmolLM2-scale runs whose
behaviour a smaller test in the same file also checks.
"""


def pytest_configure(config):
    config.addinivalue_line("markers", "full: run only in the full tier (scripts/test.sh --full)")
