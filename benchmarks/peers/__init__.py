"""The peers the benchmarks measure ours against, each in its own process (README.md here), and
what the inference peers' load commands share."""

from benchmarks import common


def check_command(msg: dict, commands=("encoder",), **choices) -> None:
    """Raises ValueError unless msg["cmd"] is one of `commands` and, for each key of `choices`,
    msg[key] is one of its values."""
    if msg["cmd"] not in commands:
        raise ValueError(f"unknown command {msg['cmd']!r}")
    for key, allowed in choices.items():
        if msg.get(key) not in allowed:
            raise ValueError(f"{key} must be one of {allowed}, got {msg.get(key)!r}")


def fixed_input(msg: dict) -> dict:
    """The input a load command times: `common.random_batch` of its "batch", "seq" and "seed"
    (default 0)."""
    return common.random_batch(msg["batch"], msg["seq"], msg.get("seed", 0))
