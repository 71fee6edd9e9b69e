"""Running a command the tests need to succeed: one place for "it exited 0, else show why"."""

import subprocess


def run_checked(command, timeout: float, **run) -> subprocess.CompletedProcess:
    """`subprocess.run(command)` with its output captured as text, waiting at most `timeout`
    seconds; `run`: more subprocess.run arguments (cwd, env). Returns the finished process once it
    has exited 0 (else the tail of its stderr is the assertion's message)."""
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **run)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc
