"""The long live-server fuzz: a real `python -m serving.server --prefer_tflite_model` on loopback
serving SavedModels (clf, reg, echo, hp2, swag: tests/fuzz/servables.py) and a LiteRT model
(`lite`: a tiny exported TextClassifier whose version holds model.tflite), attacked in rounds
by schemathesis over docs/openapi.yaml and by the protobuf-mutating gRPC client
(tests/fuzz/live.py) until --requests requests or --max_seconds have gone. After each round a
good request must still be answered; the server's resident memory and the size of its metrics
are recorded.

    python -m tools.fuzz_live_server --requests=100000 --out=runs/fuzz_live

Prints one JSON line per round and a final summary (also <out>/summary.json, written whole at the
end, a SIGTERM included; an earlier run's is removed first): requests sent per port, status
counts, findings (written to <out>/findings/), seconds, server RSS before and after. --out is a
local directory (the server reads the models from it); its models/ are built anew each run.
Exit status 1 when a target was missed (a finding, each also one stderr line, or a server that
died), 3 when the program itself failed (a traceback), 2 for flags that cannot run; a SIGTERM
stops the server and schemathesis and ends with 143.
"""

import argparse
import json
import pathlib
import shutil
import sys
import time
import urllib.request

import numpy as np
from tensorflow_serving.apis import predict_pb2

from benchmarks import common, serving_harness
from keras_bert import fileio
from keras_bert.cli import check_not_empty
from keras_bert.training.arg_flags import check_input_file
from tests.fuzz import live, servables
from tests.serving.conftest import ServerProcess
from tests.serving.test_grpc_api import predict_request, prediction_stub

MODELS = list(servables.MODELS) + ["lite"]
VOCAB = "vocab/bert-base-uncased-vocab.txt"


def build(base: pathlib.Path, vocab_file: str) -> pathlib.Path:
    """The models and their ModelServerConfig under `base`; returns the config's path."""
    from tests.export.conftest import tiny_classifier  # builds a keras_bert task (slow import)

    config = servables.build_models(base)
    model = tiny_classifier(3, ["negative", "neutral", "positive"], "sst3", 3, vocab_file)
    model.export(base, "lite", litert="float32")  # base/lite/<version>/model.tflite
    lite = f'config {{ name: "lite" base_path: "{base / "lite"}" model_platform: "tensorflow" }}'
    config = config.rstrip().rstrip("}") + lite + "\n}\n"
    (base / "models.config").write_text(config)
    return base / "models.config"


def lite_seeds() -> dict:
    """PredictRequests to the LiteRT model's `encoded` signature (the gRPC seeds name clf)."""
    request = predict_pb2.PredictRequest()
    request.model_spec.name, request.model_spec.signature_name = "lite", "encoded"
    ids = {"input_word_ids": [[101, 2023, 102]], "input_mask": [[1, 1, 1]]}
    ids["input_type_ids"] = [[0, 0, 0]]
    one = predict_request("lite", "encoded", **{k: _int32(v) for k, v in ids.items()})
    return {"grpc_predict": [request.SerializeToString(), one.SerializeToString()]}


def _int32(rows):
    return np.array(rows, np.int32)


def _rss_bytes(pid) -> int:
    rss = serving_harness.proc_status(pid).get("VmRSS")  # "1234 kB"
    return int(rss.split()[0]) * 1024 if rss else 0


def _still_answers(server) -> float:
    """Seconds a good Predict and a good REST call take now (raises when either fails)."""
    start = time.monotonic()
    with prediction_stub(server.grpc_target) as stub:
        stub.Predict(predict_request(text=["still serving"], text_b=[""]), timeout=60)
    body = json.dumps({"instances": ["ok"]}).encode()
    with urllib.request.urlopen(server.rest_url + "/v1/models/reg:predict", body, 60) as r:
        assert r.status == 200
    return time.monotonic() - start


def _metrics_bytes(server) -> int:
    with urllib.request.urlopen(server.rest_url + "/monitoring/prometheus/metrics", None, 60) as r:
        return len(r.read())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--max_seconds", type=int, default=3600)
    parser.add_argument("--out", default="runs/fuzz_live")
    parser.add_argument(
        "--rest_cases_per_operation",
        type=int,
        default=200,
        help="schemathesis cases per operation in a round (16 operations)",
    )
    parser.add_argument("--grpc_per_round", type=int, default=5000, help="mutated gRPC requests")
    parser.add_argument(
        "--vocab_file", help="Uncased vocab.txt (default: the benchmarks' data directory's)."
    )
    args = parser.parse_args(argv)
    counts = ("requests", "max_seconds", "rest_cases_per_operation", "grpc_per_round")
    for name in counts:
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    if "://" in args.out:
        parser.error(f"--out={args.out}: a local directory (the server reads its models there)")
    try:
        for name in ("out", "vocab_file"):
            check_not_empty(name, getattr(args, name), required=name == "out")
        args.vocab_file = args.vocab_file or str(common.data_dir() / VOCAB)
        check_input_file("vocab_file", args.vocab_file)
        out = pathlib.Path(args.out).resolve()
        (out / "findings").mkdir(parents=True, exist_ok=True)
    except (ValueError, OSError) as e:  # empty, missing, or --out under a file
        parser.error(str(e))
    common.exit_on_sigterm()  # the finally below stops the server; schemathesis dies with its run
    (out / "summary.json").unlink(missing_ok=True)
    shutil.rmtree(out / "models", ignore_errors=True)
    config = build(out / "models", args.vocab_file)
    server = ServerProcess(
        [f"--model_config_file={config}", "--file_system_poll_wait_seconds=0"]
        + ["--prefer_tflite_model"],
        out / "server.log",
    )
    try:
        server.wait_serving()
    except BaseException:  # SIGTERM and Ctrl-C too
        server.stop()
        raise
    start, rounds, totals = time.monotonic(), 0, {"rest": 0, "grpc": 0}
    codes, findings = {}, []
    rss_start, metrics_start = _rss_bytes(server.proc.pid), _metrics_bytes(server)
    st_config = live.write_schemathesis_config(out / "schemathesis.toml", MODELS, [1, 123])
    try:
        while sum(totals.values()) < args.requests and time.monotonic() - start < args.max_seconds:
            code, output = live.run_schemathesis(
                server.rest_url, st_config, args.rest_cases_per_operation, seed=rounds
            )
            cases = [line for line in output.splitlines() if " generated, " in line]
            totals["rest"] += int(cases[-1].split()[0]) if cases else 0
            if code != 0:
                findings.append(f"schemathesis round {rounds}")
                (out / "findings" / f"schemathesis-{rounds}.txt").write_text(output)
            run = live.mutate_grpc(
                server.grpc_target, args.grpc_per_round, seed=rounds, extra=lite_seeds()
            )
            totals["grpc"] += run.sent
            for name, count in run.codes.items():
                codes[name] = codes.get(name, 0) + count
            for i, (target, status, details, data) in enumerate(run.findings):
                findings.append(f"{target} {status}: {details[:200]}")
                (out / "findings" / f"{target}-{rounds}-{i}.bin").write_bytes(data)
            seconds = _still_answers(server)
            print(
                json.dumps(
                    {
                        "round": rounds,
                        "requests": totals,
                        "good_request_seconds": round(seconds, 3),
                        "rss_mb": _rss_bytes(server.proc.pid) >> 20,
                        "findings": len(findings),
                    }
                ),
                flush=True,
            )
            rounds += 1
    finally:
        summary = {
            "requests": totals,
            "grpc_codes": codes,
            "findings": findings,
            "seconds": round(time.monotonic() - start),
            "rss_mb": [rss_start >> 20, _rss_bytes(server.proc.pid) >> 20],
            "metrics_bytes": [metrics_start, _metrics_bytes(server)],
            "server_alive": server.proc.poll() is None,
        }
        server.stop()
        fileio.write_json(str(out / "summary.json"), summary, indent=None)
        print(json.dumps(summary))
    missed = [f"finding {line}" for line in findings]
    if not summary["server_alive"]:
        missed.append("the server died during the run")
    return common.targets_status(missed, "fuzz_live_server")


if __name__ == "__main__":
    sys.exit(common.failing_as_tool(main)())
