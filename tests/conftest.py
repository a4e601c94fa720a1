"""Shared pytest fixtures for the rbscope tests."""

import importlib.util
import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent

# The cocotb benches and their runner live in `cocotb_tests/` at the repository root, which is not
# an installed package; make `import cocotb_tests.runner` work from any test.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

def load_benchmark(name):
    """Load ``benchmarks/<name>.py`` (not a package) as module ``name``, registered in
    ``sys.modules`` (Dask's workers and pickling find it by that name)."""
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


#: Root of the per-test cocotb build directories (kept between runs so unchanged designs are not
#: rebuilt; `make clean` removes it).
COCOTB_BUILD_ROOT = REPO_ROOT / "build" / "cocotb"


@pytest.fixture
def cocotb_build_dir(request: pytest.FixtureRequest) -> Path:
    """Return a build directory owned by this test (and parametrisation) alone.

    The path depends only on the test's node id, so a second run reuses the build, and two
    pytest-xdist workers never share one.
    """
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.nodeid).strip("_")
    path = COCOTB_BUILD_ROOT / name
    path.mkdir(parents=True, exist_ok=True)
    return path
