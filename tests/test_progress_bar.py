"""progress_bar: plain lines off a terminal, never carriage returns."""

import io

from keras_bert.progress import progress_bar


def test_off_a_terminal_each_update_is_one_plain_line():
    stream = io.StringIO()
    for _ in progress_bar(
        range(5), desc="work", unit="item", stream=stream, log_interval_s=0.0, miniters=1
    ):
        pass
    out = stream.getvalue()
    assert "\r" not in out and "\x1b" not in out
    lines = out.splitlines()
    assert lines[0].startswith("work:") and "0/5" in lines[0]
    assert "5/5" in lines[-1] and len(lines) >= 2


def test_disabled_bar_writes_nothing():
    stream = io.StringIO()
    assert list(progress_bar([1, 2], stream=stream, disable=True)) == [1, 2]
    assert stream.getvalue() == ""
