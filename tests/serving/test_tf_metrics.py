"""Stock TF Serving metric names, labels, units and layout (serving/monitoring/tf_metrics.py), in
process and on a real server's /monitoring/prometheus/metrics."""

import urllib.request

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families
from tensorflow_serving.apis import prediction_service_pb2_grpc

from serving.monitoring.tf_metrics import TfServingMetrics, exponential_buckets
from tests.serving.test_grpc_api import predict_request
from tests.serving.test_rest_api import call

LATENCY = ":tensorflow:serving:request_latency"
COUNT = ":tensorflow:serving:request_count"


def test_buckets_are_tf_servings():
    limits = exponential_buckets(10, 1.8, 33)  # util.cc request_latency
    assert len(limits) == 33 and limits[:4] == pytest.approx([10, 18, 32.4, 58.32])
    assert limits[-1] == pytest.approx(10 * 1.8**32)


def test_text_layout():
    metrics = TfServingMetrics()
    metrics.record_request("m", "predict", "GRPC", "OK", 15e-6)  # 15 microseconds: bucket le=18
    metrics.record_request("m", "predict", "GRPC", "OK", 5e-6)  # below the first limit
    metrics.record_request("m", "predict", "REST", "INVALID_ARGUMENT", 0.2)  # counted, no latency
    metrics.record_request("m", "get_model_status", "GRPC", "OK", 1e-3)  # not a recorded API
    metrics.record_batch([0.00015, 0.00005])  # 150 and 50 microseconds in the queue
    lines = metrics.text().splitlines()
    assert f'{COUNT}{{model_name="m",status="INVALID_ARGUMENT"}} 1' in lines
    assert f'{COUNT}{{model_name="m",status="OK"}} 2' in lines
    labels = 'model_name="m",API="Predict",entrypoint="GRPC"'
    assert lines[lines.index(f"# TYPE {LATENCY} histogram") + 1 :][:3] == [
        f'{LATENCY}_bucket{{{labels},le="10"}} 1',
        f'{LATENCY}_bucket{{{labels},le="18"}} 2',
        f'{LATENCY}_bucket{{{labels},le="32.4"}} 2',
    ]
    assert f'{LATENCY}_bucket{{{labels},le="+Inf"}} 2' in lines
    assert f"{LATENCY}_sum{{{labels}}} 20" in lines and f"{LATENCY}_count{{{labels}}} 2" in lines
    assert not any('entrypoint="REST"' in line for line in lines)
    queue = ":tensorflow:serving:batching_session:queuing_latency"
    assert f'{queue}_bucket{{thread_pool_name="batch_threads",le="100"}} 1' in lines
    assert f'{queue}_count{{thread_pool_name="batch_threads"}} 2' in lines
    assert ":tensorflow:serving:batching_session:wrapped_run_count{} 1" in lines
    families = {
        f.name: f for f in text_string_to_metric_families(metrics.text())
    }  # valid exposition
    assert families[LATENCY].type == "histogram" and families[COUNT].type == "counter"


def _scrape(server):
    with urllib.request.urlopen(
        server.rest_url + "/monitoring/prometheus/metrics", timeout=30
    ) as response:
        text = response.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith(":tensorflow:serving:"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_server_exports_stock_names(shared_server):
    before = _scrape(shared_server)
    with grpc.insecure_channel(shared_server.grpc_target) as channel:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
        for _ in range(2):
            stub.Predict(predict_request(text=["metrics"], text_b=[""]), timeout=30)
        with pytest.raises(grpc.RpcError):
            stub.Predict(predict_request(text=["only one input"]), timeout=30)
    assert call(shared_server, "/v1/models/reg:predict", {"instances": ["metrics"]})[0] == 200
    after = _scrape(shared_server)

    def delta(key):
        return after.get(key, 0) - before.get(key, 0)

    assert delta(f'{COUNT}{{model_name="clf",status="OK"}}') == 2
    assert delta(f'{COUNT}{{model_name="clf",status="INVALID_ARGUMENT"}}') == 1
    assert delta(f'{COUNT}{{model_name="reg",status="OK"}}') == 1
    assert delta(f'{LATENCY}_count{{model_name="clf",API="Predict",entrypoint="GRPC"}}') == 2
    assert delta(f'{LATENCY}_count{{model_name="reg",API="Predict",entrypoint="REST"}}') == 1
    assert (
        delta(f'{LATENCY}_bucket{{model_name="clf",API="Predict",entrypoint="GRPC",le="+Inf"}}')
        == 2
    )
