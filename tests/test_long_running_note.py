"""A quiet test run names what runs long: its last minutes were bare dots."""

import time
import types

from tests.conftest import _LongRunning


def test_a_test_running_past_the_limit_is_named_until_it_ends(capsys):
    watcher = _LongRunning(every_s=0.05, after_s=0.1)
    watcher.pytest_runtest_logstart("tests/a.py::test_slow", ("tests/a.py", 1, "test_slow"))
    watcher.pytest_runtest_logstart("tests/a.py::test_quick", ("tests/a.py", 2, "test_quick"))
    watcher.pytest_runtest_logreport(
        types.SimpleNamespace(when="teardown", nodeid="tests/a.py::test_quick", failed=False)
    )
    watcher.thread.start()
    deadline = time.monotonic() + 30
    while "test_slow" not in capsys.readouterr().err and time.monotonic() < deadline:
        time.sleep(0.05)
    watcher.pytest_runtest_logreport(
        types.SimpleNamespace(when="teardown", nodeid="tests/a.py::test_slow", failed=False)
    )
    time.sleep(0.2)
    later = capsys.readouterr().err
    watcher.pytest_sessionfinish()
    watcher.thread.join(5)
    assert "test_slow" not in later and "test_quick" not in later
    assert not watcher.thread.is_alive()


def test_the_line_names_the_test_and_its_minutes(capsys):
    watcher = _LongRunning(every_s=0.05, after_s=0.0)
    watcher.running["tests/b.py::test_long"] = time.monotonic() - 180
    watcher.thread.start()
    deadline = time.monotonic() + 30
    err = ""
    while "test_long" not in err and time.monotonic() < deadline:
        time.sleep(0.05)
        err += capsys.readouterr().err
    watcher.pytest_sessionfinish()
    assert "\n[still running, 3 min] tests/b.py::test_long\n" in err
