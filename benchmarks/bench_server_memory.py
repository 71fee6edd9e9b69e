"""The model server's resident memory, with one model, per added model, and
over repeated version swaps.

Each case is a fresh `python -m serving.server` (`bench_reload_under_load.Server`: a free gRPC
port, REST off, the `latest { num_versions: 1 }` policy) serving copies of one export of the
MiniLM-L6 classifier (real weights, a fixed random 2-class head; `--model_dir` serves another
export, which must hold model.tflite for the LiteRT case). Resident memory is the server process's
`VmRSS` in /proc/<pid>/status (Linux; whether TensorFlow's runtime library is mapped, from
/proc/<pid>/maps), read after `--calls` Predict calls on the `encoded`
signature (1 x 32 random token ids, fewer when the export's max_seq_length is shorter), so every lazily built part is counted; `VmHWM` (the
high-water mark) is printed beside it.

- "SavedModel": the model AVAILABLE, then the calls;
- "SavedModel + a second model": a config reload adds a copy under another name, then calls to
  both: the growth per additional model;
- "LiteRT (--prefer_tflite_model)": the same export served from its model.tflite;
- version swaps: on the SavedModel server, `--cycles` times a new version is published (copied
  under a temporary name, then renamed), loaded, the old one unloaded and its directory deleted,
  then the calls. Resident memory after cycles 0, 1, and every tenth; the growth over all cycles
  and over the second half (per cycle), which a leak keeps positive.

Run (about 5 minutes on 2 cores; appends a section to docs/results/memory.md):

    python -m benchmarks.bench_server_memory

The CI-sized run (tests/benchmarks/test_bench_server_memory.py) uses a tiny core-op model and
`--cycles=3`, and asserts the readings' layout, never their size.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile

from absl import app, flags

from benchmarks import common
from benchmarks.bench_reload_under_load import (
    MODEL_NAME,
    SHADOW_NAME,
    Controller,
    Server,
    model_config,
    publish,
)

CALL_SHAPE = (1, 32)  # cut to the export's max_seq_length when that is shorter


def resident_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid`, in MiB, from /proc/<pid>/status."""
    fields = {}
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024  # kB
    return fields["VmRSS"], fields["VmHWM"]


def tensorflow_mapped(pid: int) -> bool:
    """Whether process `pid` has TensorFlow's runtime library mapped (/proc/<pid>/maps)."""
    return "libtensorflow" in pathlib.Path(f"/proc/{pid}/maps").read_text()


def call_shape(model_dir: pathlib.Path) -> tuple[int, int]:
    """CALL_SHAPE, its length cut to the export's max_seq_length (assets/export_config.json)."""
    config = json.loads((model_dir / "assets" / "export_config.json").read_text())
    return CALL_SHAPE[0], min(CALL_SHAPE[1], int(config["max_seq_length"]))


def call(address: str, names, calls: int, shape: tuple[int, int]) -> None:
    """`calls` Predict calls of `shape` random ids on the `encoded` signature of each model in
    `names`."""
    for name in names:
        predict = common.predict_call(
            address, common.predict_request(name, common.random_batch(*shape), "encoded")
        )
        for _ in range(calls):
            predict()


def available(controller, server, version: int = 1, name: str = MODEL_NAME) -> None:
    """Waits until `version` of `name` is AVAILABLE and no other version is loaded."""
    controller.wait(
        name,
        lambda s: (
            s.get(version) == "AVAILABLE"
            and all(state == "END" for v, state in s.items() if v != version)
        ),
        proc=server.proc,
    )


def serve(model_dir: pathlib.Path, work: pathlib.Path, *flags_: str):
    """A fresh server on a copy of `model_dir` as version 1 under `work`: (server, controller,
    models base)."""
    base = work / "models" / MODEL_NAME
    base.mkdir(parents=True)
    publish(model_dir, base, 1)
    server = Server(base, work, 0.2, *flags_)
    controller = Controller(server.address)
    available(controller, server)
    return server, controller, base


def measure_one(model_dir: pathlib.Path, work: pathlib.Path, calls: int, litert: bool) -> dict:
    """One model, then (SavedModel only) a second one added by a config reload."""
    flags_ = ("--prefer_tflite_model",) if litert else ()
    server, controller, base = serve(model_dir, work, *flags_)
    try:
        call(server.address, [MODEL_NAME], calls, call_shape(model_dir))
        result = {
            "one": resident_mib(server.proc.pid),
            "tensorflow": tensorflow_mapped(server.proc.pid),
        }
        if not litert:
            shadow = work / "models" / SHADOW_NAME
            shadow.mkdir(parents=True)
            publish(model_dir, shadow, 1)
            controller.reload([model_config(MODEL_NAME, base), model_config(SHADOW_NAME, shadow)])
            available(controller, server, name=SHADOW_NAME)
            call(server.address, [MODEL_NAME, SHADOW_NAME], calls, call_shape(model_dir))
            result["two"] = resident_mib(server.proc.pid)
        return result
    finally:
        controller.close()
        server.stop()


def measure_swaps(model_dir: pathlib.Path, work: pathlib.Path, calls: int, cycles: int) -> list:
    """[(cycle, VmRSS MiB)] over `cycles` version swaps on a SavedModel server: cycle 0 (the first
    version), 1, every tenth and the last."""
    server, controller, base = serve(model_dir, work)
    readings = []
    try:
        for cycle in range(cycles + 1):
            if cycle:
                publish(model_dir, base, cycle + 1)
                available(controller, server, cycle + 1)
                shutil.rmtree(base / str(cycle))
            call(server.address, [MODEL_NAME], calls, call_shape(model_dir))
            if cycle in (0, 1, cycles) or cycle % 10 == 0:
                readings.append((cycle, resident_mib(server.proc.pid)[0]))
    finally:
        controller.close()
        server.stop()
    return readings


def run_benchmark(model_dir: pathlib.Path, work: pathlib.Path, calls: int, cycles: int) -> dict:
    """Every case, each in a fresh server under `work`."""
    saved = measure_one(model_dir, work / "saved_model", calls, litert=False)
    litert = measure_one(model_dir, work / "litert", calls, litert=True)
    swaps = measure_swaps(model_dir, work / "swaps", calls, cycles)
    half = next(rss for cycle, rss in swaps if cycle >= cycles // 2)
    return {
        "saved_model": saved["one"],
        "second_model": saved["two"],
        "litert": litert["one"],
        "tensorflow_loaded": {"saved_model": saved["tensorflow"], "litert": litert["tensorflow"]},
        "swaps": swaps,
        "swap_growth_mib": swaps[-1][1] - swaps[0][1],
        "second_half_mib_per_cycle": (swaps[-1][1] - half) / max(cycles - cycles // 2, 1),
    }


def report(result: dict, cycles: int) -> str:
    def mib(x: float) -> str:
        return f"{x:,.0f}"

    saved, second, litert = result["saved_model"], result["second_model"], result["litert"]
    loaded = {k: "yes" if v else "no" for k, v in result["tensorflow_loaded"].items()}
    table = common.markdown_table(
        ["server", "resident MiB (VmRSS)", "peak MiB (VmHWM)", "TensorFlow runtime loaded"],
        [
            ("SavedModel, one model", mib(saved[0]), mib(saved[1]), loaded["saved_model"]),
            ("SavedModel, a second model added", mib(second[0]), mib(second[1]), "yes"),
            (
                "LiteRT (--prefer_tflite_model), one model",
                mib(litert[0]),
                mib(litert[1]),
                loaded["litert"],
            ),
        ],
    )
    swaps = common.markdown_table(
        ["version swaps done", "resident MiB"], [(c, mib(r)) for c, r in result["swaps"]]
    )
    return (
        f"{table}\n\nPer additional model: {mib(second[0] - saved[0])} MiB. LiteRT against "
        f"SavedModel, one model: {litert[0] - saved[0]:+,.0f} MiB.\n\n{swaps}\n\n"
        f"Growth over {cycles} version swaps: {result['swap_growth_mib']:+,.1f} MiB; over the "
        f"second half {result['second_half_mib_per_cycle']:+,.2f} MiB per swap.\n"
    )


TOPIC = "memory"
FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string(
        "model_dir",
        None,
        "Version dir of an export holding model.tflite (default: export MiniLM-L6 with LiteRT).",
    )
    flags.DEFINE_integer("calls", 20, "Predict calls before each reading.", lower_bound=1)
    flags.DEFINE_integer("cycles", 50, "Version swaps (publish, load, unload).", lower_bound=1)
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    desc = common.machine_description(["grpcio", "tensorflow", "ai-edge-litert"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = common.served_model_dir(FLAGS.model_dir, tmp / "export", litert="float32")
        result = run_benchmark(model_dir, tmp / "run", FLAGS.calls, FLAGS.cycles)
    body = report(result, FLAGS.cycles) + (
        f"\n{FLAGS.model_dir or 'MiniLM-L6 classifier (22.7M parameters, float32)'}, "
        f"{FLAGS.calls} calls of {CALL_SHAPE[0]} x {CALL_SHAPE[1]} on `encoded` before each "
        "reading; each case a fresh server.\n"
    )
    common.report(TOPIC, "Server resident memory", body, desc, FLAGS.append)


if __name__ == "__main__":
    define_flags()
    app.run(main)
