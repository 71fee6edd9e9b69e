"""Measure a model on your own held-out data: the evaluation evidence pack (SPEC section 9).

    python recipes/evaluate.py --model=runs/sst2 --data=dev.tsv --text_column=sentence \
        --label_column=label --output_dir=eval/sst2 [--slice_column=source] [--eval_batch_size=32] \
        [--server=localhost:8500] [--machine_cost_per_hour=1.20] [--compare=models/student/1]
    python recipes/evaluate.py --predictions=preds/sst2 --data=dev.tsv --output_dir=eval/sst2

--model (and --compare) is a SavedModel version directory (`<base>/<name>/<version>`), a saved task
(`.keras`) or a fine-tuning --output_dir. --server sends the predictions over gRPC to a running
server (ours or TensorFlow Serving) that serves --model; --server_model_name names it there.
--predictions scores a batch prediction's output (recipes/batch_predict.py) instead of running a
model: the same metrics, joined to --data by the key column it recorded (or row order); latency
and cost are not measured then (docs/batch_prediction.md).
Writes metrics.json, report.md, report.html (self-contained) and PNG plots to --output_dir.
See docs/evaluation.md.
"""

import sys

from absl import flags

from keras_bert.evaluation import behaviour, comparison, evidence_pack, model_record, predictors
from keras_bert.evaluation import recorded_predictions
from keras_bert.evaluation import data_health, provenance, release_gate, report_sections
from keras_bert.evaluation import report_writer
from keras_bert.cli import fail_usage, require_reachable_flags, run
from keras_bert.training import arg_flags, args, argument_set
from keras_bert.training.flag_dependencies import check_flag_partners

F = flags
F.DEFINE_string(
    "model", None, "SavedModel version dir, .keras task file or fine-tuning output_dir."
)
F.DEFINE_string(
    "compare", None, "A second model (same forms as --model) compared on the same data."
)
F.DEFINE_string(
    "predictions",
    None,
    "A batch prediction's output dir (recipes/batch_predict.py), scored instead of --model.",
)
F.DEFINE_string(
    "data",
    None,
    "Held-out labelled file: .csv, .tsv or .jsonl (classification, regression); a CoNLL file "
    "(NER), SQuAD JSON (span QA) or SWAG CSV (multiple choice): the model's family decides.",
)
F.DEFINE_string("text_column", "text", "Text column (JSON key).")
F.DEFINE_string("text_b_column", None, "Second text column (pair tasks).")
F.DEFINE_string("label_column", "label", "Gold label column: label names or ids of the model.")
F.DEFINE_string("slice_column", None, "Optional column whose values group the errors.")
F.DEFINE_string("output_dir", None, "Where the reports go (created).")
F.DEFINE_string(
    "train_data", None, "The training file (same text columns): held-out rows found in it."
)
F.DEFINE_string("server", None, "host:port of a running gRPC server serving --model.")
F.DEFINE_string("server_model_name", None, "Model name on --server (default: the export's name).")
F.DEFINE_string("compare_server_model_name", None, "Model name of --compare on --server.")
F.DEFINE_float(
    "machine_cost_per_hour", None, "Machine price per hour, for cost per 1,000 predictions."
)
F.DEFINE_integer(
    "bootstrap_samples", 1000, "Bootstrap resamples for --compare confidence intervals."
)
F.DEFINE_integer("seed", 0, "Bootstrap seed.")
F.DEFINE_string(
    "behaviour_tests", None, "JSONL file of minimum-functionality / directional template tests."
)
F.DEFINE_integer(
    "invariance_rows", 200, "Held-out rows the built-in invariance perturbations run on (0: none)."
)
F.DEFINE_string(
    "gate", None, "Release gate JSON (value / change thresholds): writes BLESSED or NOT_BLESSED."
)
F.DEFINE_string("baseline", None, "A previous report dir, for the gate's change thresholds.")
F.DEFINE_boolean("progress", True, "Show a progress bar.")
REQUIRED = ("data", "output_dir")
F.mark_flags_as_required(REQUIRED)
# The prediction batch of the fine-tuning recipes (latency is per batch); this program's
# --batch_size is still accepted, with a warning.
EvaluateArgs = argument_set.fields_of(
    "EvaluateArgs",
    args.TrainingArgs,
    {"eval_batch_size": {"default": 32, "deprecated_name": "batch_size"}},
)
arg_flags.define_program_flags(EvaluateArgs)
FLAGS = F.FLAGS


def open_model(path, server_model_name):
    try:
        return predictors.open_predictor(path, FLAGS.server, server_model_name)
    except (FileNotFoundError, TypeError) as e:
        fail_usage(str(e))


def read_data(info, text_column, text_b_column):
    try:
        return evidence_pack.read_data(
            FLAGS.data,
            info,
            text_column,
            text_b_column,
            FLAGS.label_column,
            FLAGS.slice_column,
        )
    except evidence_pack.DataError as e:
        fail_usage(str(e))


def read_behaviour_tests(info):
    """--behaviour_tests' tests for a model with `info`'s labels (None without the flag)."""
    if not FLAGS.behaviour_tests:
        return None
    refusal = evidence_pack.template_tests_refusal(info.task_type)
    if refusal:
        fail_usage(f"--behaviour_tests: {refusal}")
    try:
        return behaviour.read_template_file(FLAGS.behaviour_tests, info.label_names)
    except (FileNotFoundError, ValueError) as e:
        fail_usage(f"--behaviour_tests: {e}")


def evaluate_one(predictor, batch_size, data=None, tests=None):
    """Reads --data for `predictor` (unless given) and evaluates it in batches of `batch_size`,
    with the behavioural tests of a classifier, an NER or a multiple-choice model; returns
    (EvalData, result)."""
    if data is None:
        data = read_data(predictor.info, FLAGS.text_column, FLAGS.text_b_column)
    result = evidence_pack.evaluate(
        predictor, data, batch_size, FLAGS.machine_cost_per_hour, FLAGS.progress
    )
    result["behaviour"] = evidence_pack.run_predictor(
        predictor, data, tests, FLAGS.invariance_rows, FLAGS.seed, batch_size
    )
    if result["behaviour"] is None:
        del result["behaviour"]
    return data, result


def evaluate_recorded(gate):
    """--predictions: the result of a batch prediction's recorded outputs on --data. The text
    columns default to the ones the batch prediction read. --baseline is checked first."""
    try:
        recorded = recorded_predictions.read(FLAGS.predictions)
        check_baseline(gate, recorded.info, recorded.path)
        config = recorded.summary["config"]
        text_column = FLAGS.text_column if FLAGS["text_column"].present else config["text_column"]
        text_b_column = FLAGS.text_b_column or config.get("text_b_column")
        data = read_data(recorded.info, text_column, text_b_column)
        outputs = recorded_predictions.aligned_outputs(recorded, FLAGS.data, len(data.examples))
        result = evidence_pack.evaluate_outputs(recorded.info, recorded.path, data, outputs)
    except (FileNotFoundError, ValueError) as e:  # DataError is a ValueError
        fail_usage(str(e))
    result["latency"] = {
        "measured": False,
        "path": recorded.path,
        "reason": "scored from recorded batch predictions; run evaluate.py --model for latency "
        "and cost",
    }
    return data, result, recorded.summary["model_dir"]


def main(argv):
    del argv
    require_reachable_flags(
        "model",
        "compare",
        "predictions",
        "data",
        "output_dir",
        "train_data",
        "gate",
        "baseline",
        "behaviour_tests",
        required=REQUIRED,
    )
    settings = arg_flags.read_program_flags(EvaluateArgs)
    check_flag_partners("evaluate", settings=settings)
    if FLAGS.machine_cost_per_hour is not None and FLAGS.machine_cost_per_hour < 0:
        fail_usage(f"--machine_cost_per_hour must be >= 0, got {FLAGS.machine_cost_per_hour}")
    if FLAGS.bootstrap_samples < 1:
        fail_usage(f"--bootstrap_samples must be >= 1, got {FLAGS.bootstrap_samples}")
    gate = read_gate()
    if FLAGS.predictions:
        data, metrics, model_dir = evaluate_recorded(gate)
        metrics.pop("predicted")
        add_pack_records(metrics, data, {"model": model_dir}, gate)
        write(metrics, *report_sections.evaluation_report(metrics))
        return
    if not FLAGS.model:
        fail_usage("give --model (a model to run) or --predictions (a batch prediction's output)")
    first = open_model(FLAGS.model, FLAGS.server_model_name)
    check_baseline(gate, first.info, first.path)  # checked before any prediction
    second = None
    if FLAGS.compare:  # checked before any prediction
        second = open_model(FLAGS.compare, FLAGS.compare_server_model_name)
        try:
            model_record.check_comparable(
                model_record.model_record(first.info, first.path),
                model_record.model_record(second.info, second.path),
            )
        except ValueError as e:
            fail_usage(str(e))
    if FLAGS.invariance_rows < 0:
        fail_usage(f"--invariance_rows must be >= 0, got {FLAGS.invariance_rows}")
    tests = read_behaviour_tests(first.info)
    data, result = evaluate_one(first, settings.eval_batch_size, None, tests)
    if second is not None:
        # The same EvalData (examples, gold ids, slices by the first model's token counts), so
        # both models are scored on identical examples and slices.
        result_b = evaluate_one(second, settings.eval_batch_size, data, tests)[1]
        metrics = comparison.compare(data, result, result_b, FLAGS.bootstrap_samples, FLAGS.seed)
        if "behaviour" in result:
            metrics["behaviour"] = behaviour.compare_behaviour(
                result["behaviour"], result_b["behaviour"]
            )
        add_pack_records(metrics, data, {"model": FLAGS.model, "compare": FLAGS.compare})
        title, blocks = comparison.comparison_report(metrics)
    else:
        result.pop("predicted")
        metrics = result
        add_pack_records(metrics, data, {"model": FLAGS.model}, gate)
        title, blocks = report_sections.evaluation_report(metrics)
    write(metrics, title, blocks)


def read_gate():
    """(checks, baseline metrics) of --gate / --baseline, or None without --gate."""
    if not FLAGS.gate:
        return None
    if FLAGS.compare:
        fail_usage("--gate blesses one model: run it without --compare")
    try:
        return release_gate.read_gate(FLAGS.gate, FLAGS.baseline)
    except release_gate.GateError as e:
        fail_usage(str(e))


def check_baseline(gate, info, path):
    """Refuses a --baseline report of another kind of model than `info` (task type, labels,
    metric scale: `model_record.check_comparable`, the rule of --compare)."""
    if gate is None:
        return
    try:
        release_gate.check_baseline(model_record.model_record(info, path), gate[1], FLAGS.baseline)
    except release_gate.GateError as e:
        fail_usage(str(e))


def add_pack_records(metrics, data, models, gate=None):
    """Adds "leakage" (with --train_data), "provenance" and "gate" to the pack's metrics."""
    if FLAGS.train_data:
        task_type = (metrics.get("model") or metrics["models"]["a"])["task_type"]
        try:
            texts = evidence_pack.train_texts(  # in the format of the kind's training files
                FLAGS.train_data, task_type, FLAGS.text_column, FLAGS.text_b_column
            )
            metrics["leakage"] = {"train_file": FLAGS.train_data} | data_health.leakage(
                texts, data.joined_texts
            )
        except (ValueError, FileNotFoundError) as e:
            fail_usage(f"--train_data: {e}")
    metrics["provenance"] = provenance.pack_provenance(data, models, ["python", *sys.argv])
    if gate is not None:
        metrics["gate"] = release_gate.evaluate_gate(gate[0], metrics, gate[1])
        metrics["gate"].update(file=FLAGS.gate, baseline=FLAGS.baseline)


def write(metrics, title, blocks):
    paths = report_writer.write_report(FLAGS.output_dir, title, metrics, blocks)
    print(f"headline: {report_writer.json_ready(metrics['headline'])}")
    print(f"wrote {', '.join(str(p) for p in paths.values())}")
    if "gate" in metrics:
        verdict = release_gate.write_blessing(
            FLAGS.output_dir, metrics["gate"], metrics["provenance"]["models"]["model"]
        )
        if not metrics["gate"]["blessed"]:
            sys.exit(verdict)  # the message on stderr, exit status 1
        print(verdict)


if __name__ == "__main__":
    run(main)
