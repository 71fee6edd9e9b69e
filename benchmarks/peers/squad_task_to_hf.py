"""A trained SQuAD task as a transformers `BertForQuestionAnswering` directory: our weights scored
through the PyTorch SQuAD peer's windows and post-processing (README.md here).

    python -m benchmarks.peers.squad_task_to_hf --model_dir=runs/squad_v1 --output_dir=runs/squad_v1_hf
    <torch venv>/bin/python benchmarks/peers/hf_squad_peer.py --model_dir=runs/squad_v1_hf \
        --validation_file=<squad_peer_data heldout.json> --output_dir=runs/squad_v1_hf_scored
    python -m benchmarks.peers.squad_peer_data --mode=score --input_file=... --holdout_fraction=0.5 \
        --predictions_dir=runs/squad_v1_hf_scored
"""

import numpy as np
import safetensors.numpy
from absl import app, flags

from benchmarks import common
from keras_bert import cli, fileio
from keras_bert.checkpoints import huggingface
from keras_bert.checkpoints.saver import save_encoder
from keras_bert.tasks.loading import load_task
from keras_bert.tasks.span_question_answerer import SpanQuestionAnswerer

QA_WEIGHT, QA_BIAS = "qa_outputs.weight", "qa_outputs.bias"


def write_squad_task_hf(task, directory: str) -> str:
    """Writes the `SpanQuestionAnswerer` `task` to `directory` as a BertForQuestionAnswering
    directory (README.md here); returns `directory`. ValueError: the task has no preprocessor."""
    pre = task.require_preprocessor("a BertForQuestionAnswering directory")
    # The vocabulary as the preprocessor holds it (its vocab_file may be gone or remote)
    vocab_file = fileio.join(directory, "vocab.txt")
    config_file = fileio.join(directory, huggingface.CONFIG_FILE)
    fileio.makedirs(directory)
    if fileio.exists(config_file):
        fileio.remove(config_file)
    fileio.write_bytes(vocab_file, ("\n".join(pre.vocabulary) + "\n").encode("utf-8"))
    save_encoder(task.encoder, directory, vocab_file, pre.do_lower_case, format="huggingface")
    config = fileio.read_json(config_file) | {"architectures": ["BertForQuestionAnswering"]}
    fileio.remove(config_file)  # until the head is in the weights file
    weights = fileio.join(directory, huggingface.WEIGHTS_FILE)
    tensors = safetensors.numpy.load(fileio.read_bytes(weights))
    kernel = np.asarray(task.span_logits.kernel.numpy(), np.float32)  # [hidden, 2]
    tensors[QA_WEIGHT] = np.ascontiguousarray(kernel.T)  # safetensors writes the array's buffer
    tensors[QA_BIAS] = np.asarray(task.span_logits.bias.numpy(), np.float32)
    fileio.write_bytes(weights, safetensors.numpy.save(tensors, metadata={"format": "pt"}))
    fileio.write_json(config_file, config)
    return directory


def define_flags() -> None:
    flags.DEFINE_string("model_dir", None, "A run_squad.py output_dir (or its saved task file).")
    flags.DEFINE_string("output_dir", None, "Where the BertForQuestionAnswering directory goes.")
    flags.mark_flags_as_required(["model_dir", "output_dir"])
    common.existing("model_dir")


def main(argv):
    del argv
    task = load_task(flags.FLAGS.model_dir)
    if not isinstance(task, SpanQuestionAnswerer):
        raise app.UsageError(f"--model_dir holds a {type(task).__name__}, not a SQuAD task")
    print(write_squad_task_hf(task, flags.FLAGS.output_dir))


if __name__ == "__main__":
    define_flags()
    cli.run(main)
