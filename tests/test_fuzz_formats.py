"""The file-format fuzzer (benchmarks/fuzz.py) in the default suite: a few hundred inputs per
parser, fixed seed. Its long runs (10^5 inputs and more per parser) are in docs/benchmarks.md,
"Fuzzing"."""

import importlib.util
import random
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "fuzz.py"
_spec = importlib.util.spec_from_file_location("rbscope_bench_fuzz", _PATH)
fuzz = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fuzz)


@pytest.mark.parametrize("target", sorted(fuzz.TARGETS))
def test_fuzz_smoke(target):
    crashes, hangs = fuzz.run(target, 200, seed=7, limit=10.0)
    assert crashes == {} and hangs == {}


def test_the_fuzzer_finds_what_it_should():
    """The mutations reach the defects of the last sweep: 4 301-digit integers, non-UTF-8
    bytes, deep nesting and huge numbers are among the inputs."""
    rng = random.Random(3)
    seed = fuzz.TARGETS["labelled"][1]()
    seen = {"digits": False, "utf8": False, "deep": False, "huge": False}
    for _ in range(2000):
        data = fuzz._mutate(rng, seed, "json", [seed])
        seen["digits"] |= b"4" * 4301 in data or b"0" * 4000 in data
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            seen["utf8"] = True
        seen["deep"] |= b"[" * 500 in data
        seen["huge"] |= b"2147483648" in data or b"9" * 25 in data
    assert all(seen.values()), seen
    # The TOML writer round-trips what the tree mutations build.
    doc = {"a": 1, "t": {"x": [1, 2.5, "s", True]}, "run": [{"k": "v"}, {"k": {"i": -3}}]}
    assert fuzz.tomllib.loads(fuzz.to_toml(doc).decode()) == doc
