"""Fixtures of the Python package's tests: one LLM on the default model, shared by the session.

The package is the one the build made (ctest sets PYTHONPATH=build/python) or an installed one;
without it or without the default model every test skips, saying why. VOSTI_TEST_DEVICE=cuda
runs them on the GPU (the CLI and the server they compare with too).
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "server"))  # server_harness

try:
    import vosti
except ImportError as e:  # pragma: no cover - depends on the build
    vosti = None
    _import_error = str(e)


def default_model():
    return os.environ.get("VOSTI_DEFAULT_MODEL") or (vosti.default_model_path() if vosti else "")


@pytest.fixture(scope="session")
def model_path():
    if vosti is None:
        pytest.skip(f"the vosti package does not import ({_import_error}); build with -DVOSTI_PYTHON=ON")
    path = default_model()
    if not os.path.exists(path):
        pytest.skip(f"no default model at {path}: run scripts/fetch-model")
    return path


@pytest.fixture(scope="session")
def device():
    return os.environ.get("VOSTI_TEST_DEVICE", "cpu")


@pytest.fixture(scope="session")
def llm(model_path, device):
    return vosti.LLM(model_path, device=device, num_threads=2, max_num_seqs=32)


@pytest.fixture(scope="session")
def vosti_bin():
    path = os.environ.get("VOSTI_BIN") or os.path.join(REPO, "build", "vosti")
    if not os.path.exists(path):
        pytest.skip(f"no vosti binary at {path}")
    return path
