"""The peers the benchmarks measure ours against (PyTorch / Hugging Face, ONNX Runtime, OpenVINO,
a second TensorFlow process), each run in its own process; see README.md in this folder."""
