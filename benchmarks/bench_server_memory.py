"""The model server's resident memory, with one model, per added model, and over repeated
version swaps.

Each case is a fresh `python -m serving.server` on copies of the MiniLM-L6 classifier's export
(`--model_dir`: another export holding model.tflite): one SavedModel, a second model added by a
config reload, the same export from LiteRT (`--prefer_tflite_model`), and `--cycles` version
swaps; `VmRSS` / `VmHWM` read after `--calls` Predict calls (method: docs/results/memory.md,
"Method"). Run (about 5 minutes on 2 cores; appends to docs/results/memory.md):

    python -m benchmarks.bench_server_memory

tests/benchmarks/test_bench_server_memory.py runs it at a CI size (tiny model, `--cycles=3`).
"""

from __future__ import annotations

import json
import pathlib
import shutil
import tempfile

from absl import app, flags

from benchmarks import common, serving_harness

MODEL_NAME, SHADOW_NAME = "bench_memory", "bench_memory_shadow"
CALL_SHAPE = (1, 32)  # cut to the export's max_seq_length when that is shorter


def resident_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid`, in MiB."""
    fields = serving_harness.proc_status(pid)
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # from kB


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
        predict = serving_harness.predict_call(
            address, serving_harness.predict_request(name, common.random_batch(*shape), "encoded")
        )
        for _ in range(calls):
            predict()


def measure_one(model_dir: pathlib.Path, work: pathlib.Path, calls: int, litert: bool) -> dict:
    """One model, then (SavedModel only) a second one added by a config reload."""
    flags_ = ("--prefer_tflite_model",) if litert else ()
    server, controller, base = serving_harness.serve_version(model_dir, work, MODEL_NAME, 0.2, *flags_)
    pid = server.proc.pid
    try:
        call(server.address, [MODEL_NAME], calls, call_shape(model_dir))
        result = {"one": resident_mib(pid), "tensorflow": tensorflow_mapped(pid)}
        if not litert:
            shadow = serving_harness.stage_model(model_dir, work, SHADOW_NAME)
            controller.reload(
                [serving_harness.model_config(MODEL_NAME, base), serving_harness.model_config(SHADOW_NAME, shadow)]
            )
            controller.wait_version(SHADOW_NAME, 1, proc=server.proc)
            call(server.address, [MODEL_NAME, SHADOW_NAME], calls, call_shape(model_dir))
            result["two"] = resident_mib(pid)
        return result
    finally:
        controller.close()
        server.stop()


def measure_swaps(model_dir: pathlib.Path, work: pathlib.Path, calls: int, cycles: int) -> list:
    """[(cycle, VmRSS MiB)] over `cycles` version swaps on a SavedModel server: cycle 0 (the first
    version), 1, every tenth and the last."""
    server, controller, base = serving_harness.serve_version(model_dir, work, MODEL_NAME, 0.2)
    readings = []
    try:
        for cycle in range(cycles + 1):
            if cycle:
                serving_harness.publish(model_dir, base, cycle + 1)
                controller.wait_version(MODEL_NAME, cycle + 1, proc=server.proc)
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
    cases = [
        ("SavedModel, one model", saved, loaded["saved_model"]),
        ("SavedModel, a second model added", second, "yes"),
        ("LiteRT (--prefer_tflite_model), one model", litert, loaded["litert"]),
    ]
    table = common.markdown_table(
        ["server", "resident MiB (VmRSS)", "peak MiB (VmHWM)", "TensorFlow runtime loaded"],
        [(name, mib(rss), mib(peak), tf) for name, (rss, peak), tf in cases],
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
        model_dir = serving_harness.served_model_dir(FLAGS.model_dir, tmp / "export", litert="float32")
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
