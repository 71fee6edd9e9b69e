"""Distribution on CPU: MirroredStrategy over two logical CPUs and a two-worker
MultiWorkerMirroredStrategy on 127.0.0.1, each in real subprocesses (TF's device setup is per process)."""

import json
import os
import pathlib
import socket
import subprocess
import sys

import numpy as np
import pytest

from keras_bert.training import get_strategy

HARNESS = pathlib.Path(__file__).with_name("_distributed_harness.py")
REPO = pathlib.Path(__file__).resolve().parents[2]


def _env(**extra):
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.update(extra)
    return env


def test_get_strategy_default_and_errors():
    assert get_strategy("default").num_replicas_in_sync == 1
    with pytest.raises(ValueError, match="unknown strategy 'horovod'"):
        get_strategy("horovod")


@pytest.mark.slow
def test_mirrored_two_logical_cpus_matches_one_device(tmp_path):
    out = tmp_path / "losses.json"
    proc = subprocess.run(
        [sys.executable, str(HARNESS), "mirrored", str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = json.loads(out.read_text())
    single, mirrored = np.array(losses["single"]), np.array(losses["mirrored"])
    assert len(single) == len(mirrored) == 4
    np.testing.assert_allclose(mirrored, single, rtol=1e-4)
    assert np.all(np.isfinite(single))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_multi_worker_mirrored_two_workers_end_with_same_weights(tmp_path):
    workers = [f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"]
    procs = []
    for index in range(2):
        tf_config = json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(HARNESS), "worker", str(tmp_path / f"w{index}.npz")],
                env=_env(TF_CONFIG=tf_config),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    try:
        outputs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, text in zip(procs, outputs):
        assert p.returncode == 0, text[-3000:]
    w0, w1 = np.load(tmp_path / "w0.npz"), np.load(tmp_path / "w1.npz")
    names = [k for k in w0.files if k.startswith("arr_")]
    assert len(names) > 10 and set(names) == set(w1.files) - {"losses"}
    for k in names:
        np.testing.assert_array_equal(w0[k], w1[k])
    assert len(w0["losses"]) == 4 and np.all(np.isfinite(w0["losses"]))
