"""A gRPC reflection client run as its own process by test_reflection.py: it knows no TF Serving
proto, only what the server's reflection service tells it.

    python tests/serving/reflection_client.py HOST:PORT MODEL

Prints one JSON object: the listed services, each method's request/response type, the fields of
PredictRequest, and the outputs of a Predict call made with a message class built from the
reflected descriptors (text = ["reflection"], text_b = [""]).
"""

import json
import sys

import grpc
from google.protobuf import descriptor_pool, json_format, message_factory
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main(target, model):
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        pool = descriptor_pool.DescriptorPool(database)
        services = sorted(database.get_services())
        methods = {}
        for name in services:
            for m in pool.FindServiceByName(name).methods:
                methods[f"{name}/{m.name}"] = [m.input_type.full_name, m.output_type.full_name]
        request_type = pool.FindMessageTypeByName("tensorflow.serving.PredictRequest")
        request = message_factory.GetMessageClass(request_type)()
        request.model_spec.name = model
        for alias, text in (("text", b"reflection"), ("text_b", b"")):
            tensor = request.inputs[alias]
            tensor.dtype = 7  # DT_STRING
            tensor.tensor_shape.dim.add().size = 1
            tensor.string_val.append(text)
        response_class = message_factory.GetMessageClass(
            pool.FindMessageTypeByName("tensorflow.serving.PredictResponse")
        )
        predict = channel.unary_unary(
            "/tensorflow.serving.PredictionService/Predict",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=response_class.FromString,
        )
        response = predict(request, timeout=30)
    print(
        json.dumps(
            {
                "services": services,
                "methods": methods,
                "predict_request_fields": sorted(f.name for f in request_type.fields),
                "predict_response": json_format.MessageToDict(
                    response, preserving_proto_field_name=True
                ),
                "imported_tensorflow_serving": any(m.startswith("tensorflow") for m in sys.modules),
            }
        )
    )


if __name__ == "__main__":
    main(*sys.argv[1:])
