"""Peak resident memory of our fine-tuning runs and exports, and of keras-hub's and the Hugging
Face Trainer's fine-tuning at the same settings, each a command line in its own process; then
(`server`) the model server's VmRSS / VmHWM after --calls Predict calls: one model, a second added
by a config reload, LiteRT (`--prefer_tflite_model`), over --cycles version swaps, each a fresh
server on the MiniLM-L6 classifier's export (or `--model_dir`, with model.tflite). Method:
docs/results/memory.md. About 11 minutes on 2 cores, on `common.data_dir()`:

    python -m benchmarks.bench_memory [--contenders=sst2,savedmodel,server] [--work_dir=<dir>]

`--contenders` picks a subset of `KEYS` and `server` (the exports read the sst2 run: run it first,
in the same `--work_dir`).
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

from absl import flags

from benchmarks import common, serving_harness
from keras_bert import cli

TOPIC = "memory"
FLAGS = flags.FLAGS
KEYS = tuple(  # the contenders, in the order they must run
    "tensorflow squad sst2 sst2_bf16 keras_hub_sst2 keras_hub_sst2_bf16 hf_sst2 hf_sst2_bf16 "
    "savedmodel litert litert_int8".split()
)
PEER_KEYS = ("hf_sst2", "hf_sst2_bf16")  # run by the peer interpreter, which needs:
PEER_MODULES = ("torch", "transformers", "accelerate")
# keras-hub's BertTextClassifier (bench_finetune's) fitted one epoch on the first N SST-2
# sentences, padded to 128 as its preprocessor pads, batch 32, under the dtype policy given.
KERAS_HUB_FIT = """
import sys
from absl import flags
from benchmarks import bench_finetune, common
flags.FLAGS(["keras_hub_fit"])
texts, labels = common.sst2_sentences("train", int(sys.argv[1]))
x = common.keras_hub_inputs(common.featurize(texts, 128))
model = bench_finetune.model("keras-hub", sys.argv[2])
model.fit(x, labels.astype("int32"), batch_size=32, epochs=1, verbose=0)
"""
# A small fresh Python that runs the contender as its child and writes the child's ru_maxrss and
# exit status: a child spawned straight from a large process starts with that process's size as
# its high-water mark (docs/results/memory.md).
LAUNCHER = """
import json, os, pathlib, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
result = {"maxrss_kib": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}
pathlib.Path(sys.argv[1]).write_text(json.dumps(result))
"""


def commands(work_dir, data_dir, squad_questions: int, sst2_examples: int) -> dict:
    """key -> (label, argv) of each contender, in the order they must run."""
    work, data, python = pathlib.Path(work_dir), common.DataPath(data_dir), sys.executable
    squad_file = data / "squad" / "dev-v1.1.json"
    sst2_run = [f"--max_train_examples={sst2_examples}", "--max_eval_examples=64"]
    sst2_run += ["--max_seq_length=128", "--num_train_epochs=1"]
    sst2 = [python, "recipes/run_classifier.py", "--task_name=sst2", f"--data_dir={data / 'glue'}"]
    sst2 += [f"--init_checkpoint={common.PRESET}", "--train_batch_size=32", "--verbose=0"]
    sst2 += sst2_run
    hf = [common.peer_python(), "benchmarks/peers/hf_glue_peer.py", *sst2_run]
    hf += [f"--model_dir={common.model_dir()}", f"--data_dir={data / 'glue' / 'sst2'}"]
    hf += ["--per_device_train_batch_size=32"]
    squad = [python, "recipes/run_squad.py", f"--init_checkpoint={common.PRESET}"]
    squad += [f"--train_file={squad_file}", f"--predict_file={squad_file}"]
    squad += ["--holdout_fraction=0.5", f"--max_train_examples={squad_questions}"]
    squad += ["--max_eval_examples=20", "--num_train_epochs=0.3", "--verbose=0"]
    hub = [python, "-c", KERAS_HUB_FIT, str(sst2_examples)]
    mixed_bf16 = "--mixed_precision=mixed_bfloat16"
    export = [python, "-m", "export", f"--model_dir={work / 'sst2'}", "--model_name=sst2"]
    argv = {
        "tensorflow": [python, "-c", "import tensorflow"],
        "squad": [*squad, f"--output_dir={work / 'squad'}"],
        "sst2": [*sst2, f"--output_dir={work / 'sst2'}"],
        "sst2_bf16": [*sst2, mixed_bf16, f"--output_dir={work / 'sst2_bf16'}"],
        "keras_hub_sst2": [*hub, "float32"],
        "keras_hub_sst2_bf16": [*hub, "mixed_bfloat16"],
        "hf_sst2": [*hf, f"--output_dir={work / 'hf_sst2'}"],
        "hf_sst2_bf16": [*hf, "--bf16", f"--output_dir={work / 'hf_sst2_bf16'}"],
        "savedmodel": [*export, f"--export_dir={work / 'saved'}"],
        "litert": [*export, f"--export_dir={work / 'tflite'}", "--export_tflite"],
        "litert_int8": [*export, f"--export_dir={work / 'int8'}", "--export_quantize=int8"],
    }
    sizes = f"{sst2_examples} sentences, batch 32 x 128"
    hub, hf = "keras-hub BertTextClassifier fit", "Hugging Face Trainer (hf_glue_peer)"
    labels = {
        "tensorflow": "import tensorflow",
        "squad": f"run_squad, {squad_questions} questions, batch 32 x 384",
        "sst2": f"run_classifier SST-2, {sizes}",
        "sst2_bf16": f"run_classifier SST-2, {sizes}, mixed_bfloat16",
        "keras_hub_sst2": f"{hub}, {sizes} (padded)",
        "keras_hub_sst2_bf16": f"{hub}, {sizes} (padded), mixed_bfloat16",
        "hf_sst2": f"{hf}, {sizes}",
        "hf_sst2_bf16": f"{hf}, {sizes}, --bf16 autocast",
        "savedmodel": "export, SavedModel",
        "litert": "export --export_tflite (LiteRT float32)",
        "litert_int8": "export --export_quantize=int8 (LiteRT int8)",
    }
    return {key: (labels[key], argv[key]) for key in KEYS}


def peak_rss(argv: list, log_path) -> tuple[int, float, int]:
    """(peak resident bytes, wall seconds, exit status) of `argv` run in a fresh process, its
    output in `log_path`."""
    env = dict(os.environ, PYTHONPATH=str(common.REPO), TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    log_path = pathlib.Path(log_path)
    result_path = log_path.with_name(log_path.name + ".rusage.json")
    launched = [sys.executable, "-c", LAUNCHER, str(result_path), *argv]
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:  # the launcher's output and its child's
        subprocess.run(launched, cwd=common.REPO, env=env, stdout=log, stderr=log, check=True)
    seconds = time.perf_counter() - start
    result = json.loads(result_path.read_text(encoding="utf-8"))
    return result["maxrss_kib"] * 1024, seconds, result["code"]


MODEL_NAME, SHADOW_NAME = "bench_memory", "bench_memory_shadow"
CALL_SHAPE = (1, 32)  # cut to the export's max_seq_length when that is shorter
POLL = "--file_system_poll_wait_seconds=0.2"


def resident_mib(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of process `pid`, in MiB."""
    fields = serving_harness.proc_status(pid)
    return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))  # from kB


def call_shape(model_dir: pathlib.Path) -> tuple[int, int]:
    """CALL_SHAPE, its length cut to the export's max_seq_length (assets/export_config.json)."""
    return CALL_SHAPE[0], min(CALL_SHAPE[1], serving_harness.export_max_seq_length(model_dir))


def memory_server(model_dir, work, calls: int, *flags):
    """`serving_harness.serve` of `model_dir` and a function making `calls` Predict calls of
    `call_shape` ids on `encoded` of each model it names."""
    batch = common.random_batch(*call_shape(model_dir))
    server = serving_harness.serve(model_dir, work, MODEL_NAME, POLL, *flags)

    def call(*names):
        for name in names:
            request = serving_harness.predict_request(name, batch, "encoded")
            predict = serving_harness.predict_call(server.address, request)
            for _ in range(calls):
                predict()

    return server, call


def server_memory(model_dir: pathlib.Path, work: pathlib.Path, calls: int, cycles: int) -> dict:
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


def server_report(result: dict, cycles: int, calls: int, model: str, shape: tuple) -> str:
    """The server section: `server_memory`'s `result` of `calls` calls of `shape` on `model`."""
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
        f"second half {result['second_half_mib_per_cycle']:+,.2f} MiB per swap.\n\n{model}, "
        f"{calls} calls of {shape[0]} x {shape[1]} on `encoded` before each reading; "
        "each case a fresh server.\n"
    )


def define_flags() -> None:
    names = [*KEYS, "server"]
    flags.DEFINE_list("contenders", names, f"Subset of {', '.join(names)}, in that order.")
    flags.register_validator("contenders", lambda v: set(v) <= set(names), "unknown name")
    flags.DEFINE_integer("squad_questions", 200, "run_squad --max_train_examples.", lower_bound=1)
    flags.DEFINE_integer("sst2_examples", 160, "run_classifier --max_train_examples.")
    flags.DEFINE_string(
        "work_dir", None, "Local dir of the runs (default: a temp dir, kept on failure)."
    )
    flags.DEFINE_string("model_dir", None, "server: version dir of an export with model.tflite.")
    flags.DEFINE_integer("calls", 20, "server: Predict calls before each reading.", lower_bound=1)
    flags.DEFINE_integer("cycles", 50, "server: version swaps to make.", lower_bound=1)
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))
    common.bounds(sst2_examples=1)
    common.existing("model_dir")


def runs_section(wanted: list) -> tuple:
    """(title, table, notes): the `wanted` contenders' peak resident memory, in KEYS order."""
    work_dir = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_memory_"))
    work_dir.mkdir(parents=True, exist_ok=True)
    data_dir = common.data_dir()
    table = commands(work_dir, data_dir, FLAGS.squad_questions, FLAGS.sst2_examples)
    peer_error = None  # the Trainer needs accelerate beside torch and transformers
    if set(PEER_KEYS) & set(wanted):
        peer_error = common.python_has(common.peer_python(), PEER_MODULES)
    rows = []
    for key in wanted:
        label, cmd = table[key]
        if key in PEER_KEYS and peer_error:
            print(f"{label}: skipped: {peer_error} (KERAS_BERT_PEER_PYTHON needs {PEER_MODULES})")
            rows.append([label, "", "", f"skipped: {peer_error}"])
            continue
        peak, seconds, code = peak_rss(cmd, work_dir / f"{key}.log")
        status = "ok" if code == 0 else f"exit {code} (log: {work_dir / key}.log)"
        print(f"{label}: {peak / 2**20:,.0f} MiB peak resident, {seconds:.0f} s, {status}")
        rows.append([label, f"{peak / 2**20:,.0f}", f"{seconds:.0f}", status])
    if not FLAGS.work_dir and all(row[-1] == "ok" or "skipped" in row[-1] for row in rows):
        shutil.rmtree(work_dir)  # a temporary one, no log to read
    body = common.markdown_table(["contender", "peak RSS MiB", "wall s", "status"], rows)
    note = (
        f"Command: `python -m benchmarks.bench_memory --contenders={','.join(wanted)} "
        f"--squad_questions={FLAGS.squad_questions} --sst2_examples={FLAGS.sst2_examples}`; "
        "peak RSS is `os.wait4`'s ru_maxrss of each contender's own process; wall seconds are "
        "not a timing result."
    )
    return "Peak resident memory (bench_memory)", body, [note]


def server_section() -> tuple:
    """(title, body, no notes): every server case, on `--model_dir` or a fresh export."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        export = serving_harness.served_model_dir(FLAGS.model_dir, tmp / "export", litert="float32")
        result = server_memory(export, tmp / "run", FLAGS.calls, FLAGS.cycles)
        shape = call_shape(export)
    model = FLAGS.model_dir or "MiniLM-L6 classifier (22.7M parameters, float32)"
    report = server_report(result, FLAGS.cycles, FLAGS.calls, model, shape)
    return "Server resident memory", report, ()


def main(argv):
    del argv
    desc = common.machine_description(["grpcio", "ai-edge-litert"])
    wanted = [k for k in KEYS if k in FLAGS.contenders]
    sections = [lambda: runs_section(wanted)] if wanted else []
    sections += [server_section] if "server" in FLAGS.contenders else []
    for section in sections:
        title, body, notes = section()
        common.report(TOPIC, title, body, desc, FLAGS.append, notes=notes)


if __name__ == "__main__":
    define_flags()
    cli.run(main)
