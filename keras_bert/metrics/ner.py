"""Entity-level NER scores with seqeval (the conlleval definition used for CoNLL-2003).

An entity counts as correct only when its type and both boundaries match exactly. Both tag
sequences are first converted to IOB2 (`keras_bert.data.conll.to_iob2`), so IOB1 input and
predictions with a stray `I-` after `O` (which conlleval reads as the start of an entity) are
scored the same way as conlleval scores them.
"""

from __future__ import annotations

from seqeval import metrics as seqeval_metrics

from keras_bert.data.conll import to_iob2


def _checked(true_tags, pred_tags):
    true_tags, pred_tags = [list(t) for t in true_tags], [list(p) for p in pred_tags]
    if len(true_tags) != len(pred_tags):
        raise ValueError(f"{len(true_tags)} true sentences but {len(pred_tags)} predicted")
    for i, (t, p) in enumerate(zip(true_tags, pred_tags)):
        if len(t) != len(p):
            raise ValueError(f"sentence {i}: {len(t)} true tags but {len(p)} predicted")
    return [to_iob2(t) for t in true_tags], [to_iob2(p) for p in pred_tags]


def entity_scores(true_tags, pred_tags) -> dict:
    """Micro-averaged entity precision, recall and F1, plus per-type figures.

    Args:
        true_tags: list of sentences, each a list of str tags (IOB1 or IOB2).
        pred_tags: the predictions, same shape.

    Returns:
        dict: "precision", "recall", "f1" (floats in [0, 1]; 0.0 when undefined), "accuracy"
        (token-level), "num_true_entities", "num_pred_entities", and "per_type": {type:
        {"precision", "recall", "f1", "support"}}.

    Raises:
        ValueError: different numbers of sentences, or of tags within a sentence.
    """
    y_true, y_pred = _checked(true_tags, pred_tags)
    any_entity = any(t != "O" for s in y_true + y_pred for t in s)
    report = (
        seqeval_metrics.classification_report(y_true, y_pred, output_dict=True, zero_division=0)
        if any_entity
        else {}
    )
    per_type = {
        name: {
            "precision": float(v["precision"]),
            "recall": float(v["recall"]),
            "f1": float(v["f1-score"]),
            "support": int(v["support"]),
        }
        for name, v in report.items()
        if not name.endswith(" avg")
    }
    kw = {"zero_division": 0}
    return {
        "precision": float(seqeval_metrics.precision_score(y_true, y_pred, **kw)),
        "recall": float(seqeval_metrics.recall_score(y_true, y_pred, **kw)),
        "f1": float(seqeval_metrics.f1_score(y_true, y_pred, **kw)),
        "accuracy": float(seqeval_metrics.accuracy_score(y_true, y_pred)) if y_true else 0.0,
        "num_true_entities": sum(v["support"] for v in per_type.values()),
        "num_pred_entities": sum(t.startswith("B-") for s in y_pred for t in s),
        "per_type": per_type,
    }
