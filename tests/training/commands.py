"""Running the package's own command-line modules from the training tests, as a user runs them."""

import os
import pathlib
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]


def run_module(module, *flags, **env):
    """`python -m module flags` in a fresh Python from the repository (the package on
    PYTHONPATH, TensorFlow's C++ logs quiet, `env` added to the environment).

    Returns the finished process, its output captured as text, once it has exited 0 (else the
    tail of its stderr is the assertion's message).
    """
    proc = subprocess.run(
        [sys.executable, "-m", module, *flags],
        env=dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3", **env),
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc
