"""The evidence pack of a `SpanQuestionAnswerer` on a SQuAD JSON file (SPEC section 9).

Data: the file `keras_bert.data.squad.read_squad_examples` reads for training, v1.1 or v2.0 as
the model was trained (`version_2_with_negative` of its export config / saved task). Every
question goes to the model's `serving_default` as (question, context); its `answer_text` is the
prediction (the signature windows the context and, for v2.0, answers "" when the null score
beats the best span by more than the model's `null_score_diff_threshold`).

Metrics: the official SQuAD evaluators of tf-models-official, called as they are
(`keras_bert.metrics.squad`): v1.1 exact match and F1; v2.0 exact and F1 with the HasAns /
NoAns splits, at the threshold the model uses (reported; the signature gives no best non-null
answer, so the official threshold sweep is not run here: `recipes/run_squad.py` reports it).
Per question, the official per-question scores (v1.1 `_metric_max_over_ground_truths`, v2.0
`_get_raw_scores`: their means are the headline) give exact match and F1 per bucket of question
word, context length and answer length, the error rates per slice (an error: not an exact
match), the failure catalogue (lowest F1 first) and the paired bootstrap of `--compare`.

Behaviour: the built-in invariance tests (`span_qa_invariance`) perturb the question and keep the
context; a row fails when the answer text changes. No template tests: they name a classifier's
labels.
"""

from __future__ import annotations

import numpy as np
from official.nlp.tools import squad_evaluate_v1_1, squad_evaluate_v2_0

from keras_bert.data.glue import InputExample
from keras_bert.data.squad import read_squad_examples
from keras_bert.evaluation import failure_catalogue as fc
from keras_bert.evaluation.behaviour import INVARIANCE_ROWS, PERTURBATIONS, invariance_of
from keras_bert.evaluation.eval_data import DataError, EvalData, token_statistics
from keras_bert.evaluation.kinds.evidence_kind import EvidenceKind, own_format, register
from keras_bert.evaluation.report_writer import Num, Table, keyed_rows
from keras_bert.metrics import squad

QUESTION_WORDS = ("what", "which", "who", "whom", "whose", "when", "where", "why", "how")
CONTEXT_BUCKETS = (100, 150, 200, 300)  # upper edges, inclusive, in whitespace words
ANSWER_BUCKETS = (1, 2, 3, 5, 10)
BUCKET_FAMILIES = ("question word", "context length (words)", "answer length (words)")
CONTEXT_CHARS = 300  # of a context shown in the failure table (metrics.json: the question id)
# The failure table (`report_sections.failure_table`): (header, failure field, is a number).
FAILURE_COLUMNS = (
    ("row", "row", True),
    ("question id", "guid", False),
    ("question", "text", False),
    (f"context (first {CONTEXT_CHARS} characters)", "text_b", False),
    ("gold", "gold", False),
    ("predicted", "predicted", False),
    ("F1", "f1", True),
    ("score", "score", True),
)


def question_word(question: str) -> str:
    """The first of QUESTION_WORDS among the question's words (lower-cased), else "other"."""
    words = [w.strip("?,.;:!\"'()").lower() for w in question.split()]
    return next((w for w in words if w in QUESTION_WORDS), "other")


def bucket(n: int, edges) -> str:
    """ "1", "2", "4-5", ..., ">10" (an edge of its own when consecutive) for a count."""
    lower = 0
    for upper in edges:
        if n <= upper:
            return str(upper) if upper == lower + 1 else f"{lower + 1}-{upper}"
        lower = upper
    return f">{edges[-1]}"


def read_squad_data(path, info, slice_column=None) -> EvalData:
    """A SQuAD JSON file as `EvalData` (`reference`: "examples", "dataset" for the official
    evaluators, "version_2"). `gold_names` (v2.0): "answerable" / "unanswerable".

    `truncated` flags a question longer than the model's `max_query_length` (cut); the context
    is windowed, never cut.

    Raises:
        DataError: no such file, not SQuAD JSON, unanswerable questions for a v1.1 model, no
            question, or a slice column (SQuAD JSON has none).
    """
    if slice_column:
        raise DataError("--slice_column does not apply to a SQuAD file")
    version_2 = bool(info.settings.get("version_2_with_negative"))
    try:
        examples = read_squad_examples(path, version_2)
    except (ValueError, FileNotFoundError, KeyError) as e:
        raise DataError(f"{e} (the model is a SQuAD v{'2.0' if version_2 else '1.1'} model)")
    if not examples:
        raise DataError(f"{path}: no question")
    questions, contexts = [e.question for e in examples], [e.context for e in examples]
    rows = [InputExample(e.qas_id, e.question, e.context) for e in examples]
    lengths, _, unknown = token_statistics(
        info.vocabulary, info.do_lower_case, info.max_seq_length, questions, contexts
    )
    question_lengths = token_statistics(
        info.vocabulary, info.do_lower_case, info.max_seq_length, questions
    )[0]
    max_query = int(info.settings.get("max_query_length", info.max_seq_length))
    gold_names = (
        ["unanswerable" if e.is_impossible else "answerable" for e in examples]
        if version_2
        else None
    )
    return EvalData(
        str(path),
        rows,
        np.zeros(len(rows), np.int64),
        gold_names,
        None,
        None,
        lengths,
        question_lengths - 2 > max_query,
        unknown,
        inputs={"question": questions, "context": contexts},
        reference={
            "examples": examples,
            "dataset": squad.dataset_of(examples),
            "version_2": version_2,
        },
    )


def train_texts(path) -> list[str]:
    """A SQuAD training file's questions, each joined to its context by a space (as
    `EvalData.joined_texts`, for `data_health.leakage`)."""
    return [f"{e.question} {e.context}" for e in read_squad_examples(path, True)]


def per_question_scores(dataset: list, predictions: dict, version_2: bool) -> dict:
    """qas_id -> (exact, f1) in percent, by the official evaluator's own per-question functions."""
    if version_2:
        exact, f1 = squad_evaluate_v2_0._get_raw_scores(dataset, predictions)
        return {q: (100.0 * exact[q], 100.0 * f1[q]) for q in exact}
    out = {}
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                gold = [a["text"] for a in qa["answers"]]
                pred = predictions.get(qa["id"], "")
                out[qa["id"]] = tuple(
                    100.0
                    * float(squad_evaluate_v1_1._metric_max_over_ground_truths(fn, pred, gold))
                    for fn in (
                        squad_evaluate_v1_1._exact_match_score,
                        squad_evaluate_v1_1._f1_score,
                    )
                )
    return out


def squad_metrics(sums: np.ndarray) -> dict:
    """Exact match and F1 (percent) from summed per-question counts [..., 3] (exact, F1, n)."""
    return {"exact_match": sums[..., 0] / sums[..., 2], "f1": sums[..., 1] / sums[..., 2]}


def evaluate_span_qa(data: EvalData, outputs: dict, info) -> dict:
    """Span QA outputs (`answer_text` [N], `score` [N]) -> official metrics, buckets, failures."""
    examples, version_2 = data.reference["examples"], data.reference["version_2"]
    texts = [t.decode() if isinstance(t, bytes) else str(t) for t in outputs["answer_text"]]
    predictions = {e.qas_id: t for e, t in zip(examples, texts)}
    if len(predictions) != len(examples):
        raise DataError(f"{data.path}: question ids are not unique")
    official = squad.official_scores(data.reference["dataset"], predictions, version_2)
    scores = per_question_scores(data.reference["dataset"], predictions, version_2)
    counts = np.asarray([scores[e.qas_id] for e in examples], np.float64).reshape(-1, 2)
    exact = counts[:, 0] == 100.0
    families = {
        BUCKET_FAMILIES[0]: [question_word(e.question) for e in examples],
        BUCKET_FAMILIES[1]: [bucket(len(e.context.split()), CONTEXT_BUCKETS) for e in examples],
        BUCKET_FAMILIES[2]: [
            bucket(len(e.answers[0][0].split()), ANSWER_BUCKETS) if e.answers else "no answer"
            for e in examples
        ],
    }
    buckets = [
        {
            "family": family,
            "value": value,
            "questions": int(member.sum()),
            "exact_match": float(counts[member, 0].mean()),
            "f1": float(counts[member, 1].mean()),
        }
        for family, value, member in fc.slice_members(families)
    ]
    columns = fc.slice_columns(data.token_lengths, data.truncated, data.gold_names) | families
    score = np.asarray(outputs["score"], np.float64).reshape(-1)
    failures = [
        {
            "row": i,
            "guid": e.qas_id,
            "text": e.question,
            "text_b": e.context[:CONTEXT_CHARS],
            "gold": " | ".join(sorted({a for a, _ in e.answers})) or "(no answer)",
            "predicted": texts[i] or "(no answer)",
            "exact_match": float(counts[i, 0]),
            "f1": float(counts[i, 1]),
            "score": float(score[i]),
            "tokens": int(data.token_lengths[i]),
        }
        for i, e in enumerate(examples)
        if not exact[i]
    ]
    failures.sort(key=lambda r: (r["f1"], -r["score"]))
    result = {
        "headline": {"exact_match": official["exact_match"], "f1": official["f1"]},
        "squad": {"version": "2.0" if version_2 else "1.1"} | official,
        "by_bucket": buckets,
    } | fc.outcome(
        columns,
        exact,
        failures,
        counts,
        squad_metrics,
        texts,
        [e.answers[0][0] if e.answers else "" for e in examples],
    )
    if version_2:
        result["squad"]["null_score_diff_threshold"] = float(
            info.settings.get("null_score_diff_threshold", 0.0)
        )
    return result


def span_qa_blocks(m: dict, prefix: str = "") -> list:
    """The official figures (v2.0: HasAns / NoAns, threshold) and the buckets of one model."""
    s = m["squad"]
    keys = [k for k in s if k not in ("version", "null_score_diff_threshold")]
    blocks = [
        ("h2", f"SQuAD v{s['version']}, official evaluator"),
        "Percentages from tf-models-official's squad_evaluate_v"
        + (
            "2_0 (HasAns: answerable questions, NoAns: unanswerable)"
            if s["version"] == "2.0"
            else "1_1"
        )
        + ".",
        Table(["measure", "value"], [[k, Num(f"{prefix}squad.{k}", s[k])] for k in keys]),
    ]
    if "null_score_diff_threshold" in s:
        blocks.append(
            "Threshold in use: the model answers nothing when the null score exceeds the best "
            "span's score by more than null_score_diff_threshold = "
            f"{s['null_score_diff_threshold']:g} (the model's setting)."
        )
    rows = keyed_rows(f"{prefix}by_bucket", m["by_bucket"], ("questions", "exact_match", "f1"))
    return blocks + [
        ("h2", "By question word, context length and answer length"),
        "Answer length: words of the first gold answer; context length: whitespace words.",
        Table(["bucket", "value", "questions", "exact match", "F1"], rows),
    ]


def span_qa_invariance(predictor, data, rows=INVARIANCE_ROWS, seed=0, batch_size=32) -> list[dict]:
    """`invariance_of` a span QA model on the first `rows` questions (the contexts kept): a row
    fails when the answer text changes (an answer becoming "no answer" included). "name swap" is
    not run: a name changed in the question alone changes what is asked."""
    contexts = data.inputs["context"]

    def answers(rows_, questions):
        inputs = {"question": questions, "context": [contexts[i] for i in rows_]}
        out = predictor.run_inputs(inputs, batch_size, progress=False)[0]
        return [t.decode() if isinstance(t, bytes) else str(t) for t in out["answer_text"]]

    return invariance_of(
        answers,
        data.inputs["question"][:rows],
        seed,
        show=lambda a: repr(a) if a else "no answer",
        perturbations=[n for n in PERTURBATIONS if n != "name swap"],
    )


SPAN_QUESTION_ANSWERING = register(
    EvidenceKind(
        "span_question_answering",
        read=own_format(read_squad_data),
        evaluate=evaluate_span_qa,
        train_texts=lambda path, columns: train_texts(path),
        sections=(span_qa_blocks,),
        failure_columns=lambda m: FAILURE_COLUMNS,
        invariance=span_qa_invariance,
    )
)
