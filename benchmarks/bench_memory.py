"""Peak resident memory of our fine-tuning runs and exports, and of keras-hub's and the Hugging
Face Trainer's fine-tuning at the same settings, each a command line in its own process (method:
docs/results/memory.md), on `common.data_dir()`. About 6 minutes on 2 cores:

    python -m benchmarks.bench_memory [--contenders=sst2,savedmodel] [--work_dir=<dir>] [--noappend]

`--contenders` picks a subset of `KEYS` (the exports read the sst2 run: run it first, in the same
`--work_dir`).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import common

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
    work, data, python = pathlib.Path(work_dir), pathlib.Path(data_dir), sys.executable
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
    start = time.perf_counter()
    with log_path.open("w", encoding="utf-8") as log:
        subprocess.run(
            [sys.executable, "-c", LAUNCHER, str(result_path), *argv],
            cwd=common.REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    seconds = time.perf_counter() - start
    result = json.loads(result_path.read_text(encoding="utf-8"))
    return result["maxrss_kib"] * 1024, seconds, result["code"]


def define_flags() -> None:
    flags.DEFINE_list("contenders", list(KEYS), f"Subset of {', '.join(KEYS)}, run in that order.")
    flags.DEFINE_integer("squad_questions", 200, "run_squad --max_train_examples.", lower_bound=1)
    flags.DEFINE_integer("sst2_examples", 160, "run_classifier --max_train_examples.")
    flags.DEFINE_string("work_dir", None, "Where runs and exports go (default: a temp dir).")
    flags.DEFINE_bool("append", True, common.append_help(TOPIC))


def main(argv):
    del argv
    unknown = sorted(set(FLAGS.contenders) - set(KEYS))
    if unknown:
        raise app.UsageError(f"--contenders: unknown {unknown}; choose from {list(KEYS)}")
    desc = common.machine_description()
    work_dir = pathlib.Path(FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_memory_"))
    work_dir.mkdir(parents=True, exist_ok=True)
    data_dir = common.data_dir().resolve()
    table = commands(work_dir, data_dir, FLAGS.squad_questions, FLAGS.sst2_examples)
    wanted = [k for k in KEYS if k in FLAGS.contenders]
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
    body = common.markdown_table(["contender", "peak RSS MiB", "wall s", "status"], rows)
    note = (
        f"Command: `python -m benchmarks.bench_memory --contenders={','.join(wanted)} "
        f"--squad_questions={FLAGS.squad_questions} --sst2_examples={FLAGS.sst2_examples}`; "
        "peak RSS is `os.wait4`'s ru_maxrss of each contender's own process; wall seconds are "
        "not a timing result."
    )
    title = "Peak resident memory (bench_memory)"
    common.report(TOPIC, title, body, desc, FLAGS.append, notes=[note])


if __name__ == "__main__":
    define_flags()
    app.run(main)
