"""The model server's resident memory (VmRSS / VmHWM) after --calls Predict calls: one model, a
second added by a config reload, LiteRT (`--prefer_tflite_model`), and over --cycles version
swaps, each a fresh server on the MiniLM-L6 classifier's export (or `--model_dir`, with
model.tflite). Method: docs/results/memory.md. About 5 minutes on 2 cores:

    python -m benchmarks.bench_server_memory
"""

from __future__ import annotations

import json
import pathlib
import tempfile

from absl import app, flags

from benchmarks import common, serving_harness

TOPIC = "memory"
FLAGS = flags.FLAGS
MODEL_NAME, SHADOW_NAME = "bench_memory", "bench_memory_shadow"
CALL_SHAPE = (1, 32)  # cut to the export's max_seq_length when that is shorter
POLL = "--file_system_poll_wait_seconds=0.2"


def resident_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid`, in MiB."""
    fields = serving_harness.proc_status(pid)
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # from kB


def call_shape(model_dir: pathlib.Path) -> tuple[int, int]:
    """CALL_SHAPE, its length cut to the export's max_seq_length (assets/export_config.json)."""
    config = json.loads((model_dir / "assets" / "export_config.json").read_text())
    return CALL_SHAPE[0], min(CALL_SHAPE[1], int(config["max_seq_length"]))


def memory_server(model_dir, work, calls: int, *flags):
    """`serving_harness.serve` of `model_dir` and a function making `calls` Predict calls of
    `call_shape` ids on `encoded` of each model it names."""
    server = serving_harness.serve(model_dir, work, MODEL_NAME, POLL, *flags)
    batch = common.random_batch(*call_shape(model_dir))

    def call(*names):
        for name in names:
            request = serving_harness.predict_request(name, batch, "encoded")
            predict = serving_harness.predict_call(server.address, request)
            for _ in range(calls):
                predict()

    return server, call


def run_benchmark(model_dir: pathlib.Path, work: pathlib.Path, calls: int, cycles: int) -> dict:
    """Every case of the server's resident memory, each on a fresh server under `work`."""
    result = {}
    for case, flags_ in (("saved_model", ()), ("litert", ("--prefer_tflite_model",))):
        server, call = memory_server(model_dir, work / case, calls, *flags_)
        with server:
            call(MODEL_NAME)
            result[case] = resident_mib(server.proc.pid)
            maps = pathlib.Path(f"/proc/{server.proc.pid}/maps").read_text()
            result.setdefault("tensorflow_loaded", {})[case] = "libtensorflow" in maps
            if not flags_:  # a second model, added by a config reload
                shadow = serving_harness.stage_model(model_dir, work / case, SHADOW_NAME)
                server.controller.reload({MODEL_NAME: server.base, SHADOW_NAME: shadow})
                server.controller.wait_version(SHADOW_NAME, 1, proc=server.proc)
                call(MODEL_NAME, SHADOW_NAME)
                result["second_model"] = resident_mib(server.proc.pid)
    server, call = memory_server(model_dir, work / "swaps", calls)
    swaps = []
    with server:
        for cycle in range(cycles + 1):
            if cycle:
                server.swap_version(model_dir, cycle + 1)
            call(MODEL_NAME)
            if cycle in (0, 1, cycles) or cycle % 10 == 0:
                swaps.append((cycle, resident_mib(server.proc.pid)[0]))
    half = next(rss for cycle, rss in swaps if cycle >= cycles // 2)
    result["swaps"], result["swap_growth_mib"] = swaps, swaps[-1][1] - swaps[0][1]
    result["second_half_mib_per_cycle"] = (swaps[-1][1] - half) / max(cycles - cycles // 2, 1)
    return result


def report(result: dict, cycles: int) -> str:
    mib = "{:,.0f}".format
    saved, second, litert = result["saved_model"], result["second_model"], result["litert"]
    loaded = {k: "yes" if v else "no" for k, v in result["tensorflow_loaded"].items()}
    cases = [
        ("SavedModel, one model", saved, loaded["saved_model"]),
        ("SavedModel, a second model added", second, "yes"),
        ("LiteRT (--prefer_tflite_model), one model", litert, loaded["litert"]),
    ]
    headers = ["server", "resident MiB (VmRSS)", "peak MiB (VmHWM)", "TensorFlow runtime loaded"]
    table = common.markdown_table(headers, [(n, mib(r), mib(p), tf) for n, (r, p), tf in cases])
    rows = [(cycle, mib(rss)) for cycle, rss in result["swaps"]]
    swaps = common.markdown_table(["version swaps done", "resident MiB"], rows)
    return (
        f"{table}\n\nPer additional model: {mib(second[0] - saved[0])} MiB. LiteRT against "
        f"SavedModel, one model: {litert[0] - saved[0]:+,.0f} MiB.\n\n{swaps}\n\n"
        f"Growth over {cycles} version swaps: {result['swap_growth_mib']:+,.1f} MiB; over the "
        f"second half {result['second_half_mib_per_cycle']:+,.2f} MiB per swap.\n"
    )


def define_flags():
    flags.DEFINE_string("model_dir", None, "Version dir of an export holding model.tflite.")
    flags.DEFINE_integer("calls", 20, "Predict calls before each reading.", lower_bound=1)
    flags.DEFINE_integer("cycles", 50, "Version swaps (publish, load, unload).", lower_bound=1)
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    desc = common.machine_description(["grpcio", "tensorflow", "ai-edge-litert"])
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        model_dir = serving_harness.served_model_dir(
            FLAGS.model_dir, tmp / "export", litert="float32"
        )
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
