"""Two-process `multi_worker_mirrored` NER fine-tuning on the CPU, checkpoints in the shared output
dir: SIGTERM (a preemption notice) reaches one worker only; both stop after the same batch with
status 143, the chief having saved that step; the rerun of both resumes and ends with the same
metrics.json and kept weights as an uninterrupted two-worker run."""

import json
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_bert.tasks import load_task
from tests.recipes.kill_resume import differences, repeatable
from tests.recipes.recipe_process import REPO, recipe_env, tiny_run_flags


def _free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def _two_workers(flags, out, crash_at_worker_1=None, timeout=600):
    workers = [f"127.0.0.1:{p}" for p in _free_ports(2)]
    procs = []
    for index in range(2):
        env = recipe_env(
            crash_at=crash_at_worker_1 if index == 1 else None,
            TF_CONFIG=json.dumps(
                {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
            ),
        )
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    str(REPO / "recipes" / "run_ner.py"),
                    *flags,
                    f"--output_dir={out}",
                ],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        logs = [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return [p.returncode for p in procs], logs


@pytest.mark.slow
def test_sigterm_on_one_worker_stops_both_and_the_rerun_ends_like_an_uninterrupted_run(
    tmp_path, data_dir, uncased_vocab
):
    flags = [
        f"--data_dir={data_dir / 'conll2003'}",
        *tiny_run_flags(uncased_vocab, 32, 4, 8),
        "--num_train_epochs=2",
        "--evaluations_per_epoch=2",
        "--save_checkpoints_steps=2",
        "--verbose=0",
        "--strategy=multi_worker_mirrored",  # dropout on: bert_tiny's 0.1 and the head's
    ]
    ref, out = tmp_path / "uninterrupted", tmp_path / "preempted"
    codes, logs = _two_workers(flags, ref)
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    codes, logs = _two_workers(flags, out, crash_at_worker_1="train_batch:3:SIGTERM")
    assert codes == [143, 143], logs[0][-3000:] + logs[1][-3000:]
    assert all("preempted (SIGTERM) after step 3" in log for log in logs)
    state = json.loads((out / "checkpoints" / "checkpoint.json").read_text())
    assert (state["step"], state["weights"]) == (3, "ckpt-3.weights.h5") and state["random"]
    assert not (out / "metrics.json").exists()
    codes, logs = _two_workers(flags, out)
    assert codes == [0, 0], logs[0][-3000:] + logs[1][-3000:]
    want = json.loads((ref / "metrics.json").read_text())
    got = json.loads((out / "metrics.json").read_text())
    assert [r["resumed_from_step"] for r in got["runs"]] == [3]
    assert want["runs"][0]["steps"] > 3 and len(want["runs"][0]["epochs"]) == 4
    assert repeatable(got) == repeatable(want), differences(repeatable(got), repeatable(want))
    for a, b in zip(load_task(out).get_weights(), load_task(ref).get_weights()):
        np.testing.assert_array_equal(a, b)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("worker_")) == []
