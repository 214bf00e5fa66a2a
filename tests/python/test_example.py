"""examples/rl_loop.py runs end to end (it asserts its own bit-exactness checks)."""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_rl_loop_example(model_path, device):
    r = subprocess.run([sys.executable, os.path.join(REPO, "examples", "rl_loop.py"), "--model", model_path,
                        "--device", device, "--steps", "2", "--group", "3", "--max-tokens", "10"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "replayed bit for bit" in r.stdout
