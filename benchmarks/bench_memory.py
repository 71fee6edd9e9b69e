"""Peak resident memory (`os.wait4`'s ru_maxrss, each contender a command line in its own fresh
process started from a small launcher) of our fine-tuning runs and exports, and of keras-hub's and
the Hugging Face Trainer's fine-tuning at the same settings (method: docs/results/memory.md).
The data is $KERAS_BERT_DATA_DIR (squad/dev-v1.1.json, glue/sst2). About 6 minutes on 2 cores:

    python -m benchmarks.bench_memory

`--contenders` picks a subset by key (`KEYS`; the exports need the sst2 run first, in the same
`--work_dir`). `--noappend` only prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks import common

REPO = common.REPO
KEYS = (
    "tensorflow",
    "squad",
    "sst2",
    "sst2_bf16",
    "keras_hub_sst2",
    "keras_hub_sst2_bf16",
    "hf_sst2",
    "hf_sst2_bf16",
    "savedmodel",
    "litert",
    "litert_int8",
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


def commands(work_dir: str, data_dir: str, squad_questions: int, sst2_examples: int) -> dict:
    """key -> (label, argv) of each contender, in the order they must run."""
    python = sys.executable
    squad_file = os.path.join(data_dir, "squad", "dev-v1.1.json")
    sst2_dir = os.path.join(work_dir, "sst2")
    export = [python, "-m", "export", f"--model_dir={sst2_dir}", "--model_name=sst2"]
    sst2 = [
        python,
        "recipes/run_classifier.py",
        "--task_name=sst2",
        f"--data_dir={os.path.join(data_dir, 'glue')}",
        f"--init_checkpoint={common.PRESET}",
        "--max_seq_length=128",
        "--train_batch_size=32",
        f"--max_train_examples={sst2_examples}",
        "--max_eval_examples=64",
        "--num_train_epochs=1",
        "--verbose=0",
    ]
    hf = [
        common.peer_python(),
        "benchmarks/peers/hf_glue_peer.py",
        f"--model_dir={common.model_dir()}",
        f"--data_dir={os.path.join(data_dir, 'glue', 'sst2')}",
        "--max_seq_length=128",
        "--per_device_train_batch_size=32",
        f"--max_train_examples={sst2_examples}",
        "--max_eval_examples=64",
        "--num_train_epochs=1",
    ]
    sizes = f"{sst2_examples} sentences, batch 32 x 128"
    return {
        "tensorflow": ("import tensorflow", [python, "-c", "import tensorflow"]),
        "squad": (
            f"run_squad, {squad_questions} questions, batch 32 x 384",
            [
                python,
                "recipes/run_squad.py",
                f"--init_checkpoint={common.PRESET}",
                f"--train_file={squad_file}",
                f"--predict_file={squad_file}",
                "--holdout_fraction=0.5",
                f"--max_train_examples={squad_questions}",
                "--max_eval_examples=20",
                "--num_train_epochs=0.3",
                "--verbose=0",
                f"--output_dir={os.path.join(work_dir, 'squad')}",
            ],
        ),
        "sst2": (f"run_classifier SST-2, {sizes}", [*sst2, f"--output_dir={sst2_dir}"]),
        "sst2_bf16": (
            f"run_classifier SST-2, {sizes}, mixed_bfloat16",
            [
                *sst2,
                "--mixed_precision=mixed_bfloat16",
                f"--output_dir={os.path.join(work_dir, 'sst2_bf16')}",
            ],
        ),
        "keras_hub_sst2": (
            f"keras-hub BertTextClassifier fit, {sizes} (padded)",
            [python, "-c", KERAS_HUB_FIT, str(sst2_examples), "float32"],
        ),
        "keras_hub_sst2_bf16": (
            f"keras-hub BertTextClassifier fit, {sizes} (padded), mixed_bfloat16",
            [python, "-c", KERAS_HUB_FIT, str(sst2_examples), "mixed_bfloat16"],
        ),
        "hf_sst2": (
            f"Hugging Face Trainer (hf_glue_peer), {sizes}",
            [*hf, f"--output_dir={os.path.join(work_dir, 'hf_sst2')}"],
        ),
        "hf_sst2_bf16": (
            f"Hugging Face Trainer (hf_glue_peer), {sizes}, --bf16 autocast",
            [*hf, "--bf16", f"--output_dir={os.path.join(work_dir, 'hf_sst2_bf16')}"],
        ),
        "savedmodel": (
            "export, SavedModel",
            [*export, f"--export_dir={os.path.join(work_dir, 'saved')}"],
        ),
        "litert": (
            "export --export_tflite (LiteRT float32)",
            [*export, f"--export_dir={os.path.join(work_dir, 'tflite')}", "--export_tflite"],
        ),
        "litert_int8": (
            "export --export_quantize=int8 (LiteRT int8)",
            [*export, f"--export_dir={os.path.join(work_dir, 'int8')}", "--export_quantize=int8"],
        ),
    }


# A small fresh Python that runs the contender as its child and writes the child's ru_maxrss and
# exit status: a child spawned straight from a large process starts with that process's size as
# its high-water mark (docs/results/memory.md).
LAUNCHER = """
import json, os, subprocess, sys
proc = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(proc.pid, 0)
with open(sys.argv[1], "w") as f:
    json.dump({"maxrss_kib": usage.ru_maxrss, "code": os.waitstatus_to_exitcode(status)}, f)
"""


def peak_rss(argv: list, log_path: str) -> tuple[int, float, int]:
    """(peak resident bytes, wall seconds, exit status) of `argv` run in a fresh process."""
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="3")
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    result_path = log_path + ".rusage.json"
    start = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        subprocess.run(
            [sys.executable, "-c", LAUNCHER, result_path, *argv],
            cwd=REPO,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    seconds = time.perf_counter() - start
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    return result["maxrss_kib"] * 1024, seconds, result["code"]


TOPIC = "memory"
FLAGS = flags.FLAGS


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
    data_dir = os.environ.get("KERAS_BERT_DATA_DIR")
    if not data_dir:
        raise app.UsageError("set KERAS_BERT_DATA_DIR (squad/dev-v1.1.json, glue/sst2)")
    desc = common.machine_description()
    work_dir = FLAGS.work_dir or tempfile.mkdtemp(prefix="bench_memory_")
    os.makedirs(work_dir, exist_ok=True)
    table = commands(
        work_dir, os.path.abspath(data_dir), FLAGS.squad_questions, FLAGS.sst2_examples
    )
    rows = []
    peer_error = (  # the Trainer needs accelerate beside torch and transformers
        common._python_has(common.peer_python(), PEER_MODULES)
        if set(PEER_KEYS) & set(FLAGS.contenders)
        else None
    )
    for key in (k for k in KEYS if k in FLAGS.contenders):
        label, cmd = table[key]
        if key in PEER_KEYS and peer_error:
            print(f"{label}: skipped: {peer_error} (KERAS_BERT_PEER_PYTHON needs {PEER_MODULES})")
            rows.append([label, "", "", f"skipped: {peer_error}"])
            continue
        log_path = os.path.join(work_dir, f"{key}.log")
        peak, seconds, code = peak_rss(cmd, log_path)
        status = "ok" if code == 0 else f"exit {code} (log: {log_path})"
        print(f"{label}: {peak / 2**20:,.0f} MiB peak resident, {seconds:.0f} s, {status}")
        rows.append([label, f"{peak / 2**20:,.0f}", f"{seconds:.0f}", status])
    body = common.markdown_table(["contender", "peak RSS MiB", "wall s", "status"], rows)
    print(body)
    if FLAGS.append:
        note = (
            "- Command: `python -m benchmarks.bench_memory`; peak RSS is `os.wait4`'s ru_maxrss "
            "of each contender's own process. Wall seconds are from a shared 2-core machine and "
            "are not a timing result.\n\n"
        )
        common.append_results(TOPIC, "Peak resident memory (bench_memory)", note + body, desc)


if __name__ == "__main__":
    define_flags()
    app.run(main)
