"""Distillation: the loss against its formula, the student's copied layers, and on a tiny config
the student's agreement with the teacher rising over training."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_bert
from keras_bert.training import student as d
from keras_bert.training import trainer
from keras_bert.training.families import distillation
from keras_bert.training.families.distillation import DistillArgs
from tests.evaluation.tiny_task import TEXTS, tiny_classifier

POS, NEG, OTHER = (
    "good great best fun fine".split(),
    "bad awful worst dull slow".split(),
    "film movie plot acting story cast music".split(),
)


def test_loss_is_hinton_soft_plus_hard():
    rng = np.random.default_rng(0)
    teacher, student = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    labels = np.array([0, 2, 1, 1])
    t, alpha = 3.0, 0.3

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    p, q = softmax(teacher / t), softmax(student / t)
    kl = (p * (np.log(p) - np.log(q))).sum(-1)
    hard = -np.log(softmax(student)[np.arange(4), labels])
    expected = alpha * t * t * kl + (1 - alpha) * hard
    y_true = np.concatenate([labels[:, None], teacher], 1).astype("float32")
    got = d.DistillationLoss(t, alpha).call(tf.constant(y_true), tf.constant(student, tf.float32))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5)
    same = d.DistillationLoss(t, 1.0)(y_true, teacher.astype("float32"))
    assert float(same) == pytest.approx(0, abs=1e-6)  # student = teacher: no soft loss


def test_bad_settings(tmp_path):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        d.DistillationLoss(0.0, 0.5)
    with pytest.raises(ValueError) as e:
        DistillArgs(teacher="t", output_dir="o", task_name="sst2", alpha=1.5)
    assert str(e.value) == "--alpha must be in [0, 1], got 1.5"
    with pytest.raises(ValueError) as e:
        DistillArgs(teacher="t", output_dir="o", temperature=0.0)
    assert str(e.value) == "--temperature must be > 0, got 0.0"
    with pytest.raises(ValueError) as e:
        DistillArgs(teacher="t", output_dir="o")
    assert str(e.value) == "give --task_name (GLUE) or both --train_file and --dev_file"
    with pytest.raises(ValueError) as e:
        DistillArgs(
            teacher="t",
            output_dir="o",
            task_name="sst2",
            student_preset="bert_tiny",
            student_layers=2,
        )
    assert str(e.value) == "--student_preset excludes --student_layers / --layer_map"
    with pytest.raises(ValueError) as e:
        DistillArgs(teacher=str(tmp_path / "none"), output_dir="o", task_name="sst2")
    assert str(e.value) == f"--teacher {tmp_path / 'none'}: no such file or directory"
    with pytest.raises(ValueError, match="student layers must be in"):
        d.layer_map_for(2, 3)


def test_layer_map_takes_one_layer_out_of_two():
    assert d.layer_map_for(12, 6) == [0, 2, 4, 6, 8, 10]
    assert d.layer_map_for(6, 3) == [0, 2, 4]
    assert d.layer_map_for(6, 2) == [0, 3]


def test_student_copies_the_teachers_layers(uncased_vocab):
    teacher = tiny_classifier(uncased_vocab, seed=2, num_layers=3)
    student = d.student_from_teacher(teacher, layer_map=[0, 2])
    assert student.encoder.bert_config.num_layers == 2
    for s, t in zip(student.encoder.transformer_layers, (0, 2)):
        for a, b in zip(s.get_weights(), teacher.encoder.transformer_layers[t].get_weights()):
            np.testing.assert_array_equal(a, b)
    for a, b in zip(
        student.classifier.get_weights() + student.encoder.embeddings.get_weights(),
        teacher.classifier.get_weights() + teacher.encoder.embeddings.get_weights(),
    ):
        np.testing.assert_array_equal(a, b)
    assert (
        student.label_names == teacher.label_names and student.preprocessor is teacher.preprocessor
    )
    full = d.student_from_teacher(teacher, layer_map=[0, 1, 2])  # all layers: the same function
    np.testing.assert_allclose(full.predict(TEXTS), teacher.predict(TEXTS), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="must name layers of the teacher"):
        d.student_from_teacher(teacher, layer_map=[0, 3])


def rule_rows(rng, n):
    """Texts of sentiment words; label pos when positive words are at least as many."""
    rows = []
    for _ in range(n):
        words = list(rng.choice(POS + NEG + OTHER, rng.integers(2, 8)))
        pos = sum(w in POS for w in words) >= sum(w in NEG for w in words)
        rows.append({"text": " ".join(words), "label": "pos" if pos else "neg"})
    return rows


def trained_teacher(vocab, rows, path):
    """A 4-layer H=16 classifier fitted to the rule (small init, 20 epochs of Adam)."""
    teacher = tiny_classifier(
        vocab, seed=4, num_classes=2, label_names=["neg", "pos"], num_layers=4
    )
    rng = np.random.default_rng(3)
    for w in teacher.weights:
        if len(w.shape) > 1:
            w.assign(rng.normal(0, 0.02, w.shape).astype("float32"))
        else:
            w.assign((np.ones if "gamma" in w.path else np.zeros)(w.shape, "float32"))
    teacher.compile(
        optimizer=keras.optimizers.Adam(3e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    x = teacher.encode_texts([r["text"] for r in rows])
    teacher.fit(
        x,
        np.array([r["label"] == "pos" for r in rows], int),
        epochs=20,
        batch_size=16,
        verbose=0,
        shuffle=False,
    )
    teacher.save(path)
    return teacher


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def distillation_data(uncased_vocab, tmp_path_factory):
    keras.utils.set_random_seed(0)
    base = tmp_path_factory.mktemp("distill")
    rng = np.random.default_rng(0)
    train, dev = rule_rows(rng, 96), rule_rows(rng, 48)
    trained_teacher(uncased_vocab, train, base / "teacher.keras")
    return {
        "teacher": str(base / "teacher.keras"),
        "train": write_rows(base / "train.jsonl", train),
        "dev": write_rows(base / "dev.jsonl", dev),
        "base": base,
    }


@pytest.mark.slow
def test_student_agreement_with_the_teacher_rises(distillation_data, tmp_path):
    args = DistillArgs(
        teacher=distillation_data["teacher"],
        output_dir=str(tmp_path / "out"),
        train_file=distillation_data["train"],
        dev_file=distillation_data["dev"],
        student_layers=1,
        temperature=2.0,
        alpha=0.5,
        learning_rate=3e-3,
        num_train_epochs=4,
        train_batch_size=16,
        warmup_proportion=0.0,
        weight_decay=0.0,
        verbose=0,
    )
    # The student before training: the teacher's first layer with its embeddings and head.
    teacher = keras_bert.load_task(distillation_data["teacher"])
    texts, _ = distillation.load_examples(args)
    untrained = d.agreement(
        d.logits_of(d.student_from_teacher(teacher, 1), texts, 64), d.logits_of(teacher, texts, 64)
    )
    result = trainer.run(distillation.FAMILY, args)
    assert result["family"] == "distillation" and result["monitor"] == "dev_accuracy"
    run = result["runs"][0]
    evaluations = run["epochs"]
    assert [e["epoch"] for e in evaluations] == [1, 2, 3, 4]  # no epoch-0 entry
    assert set(evaluations[0]) == {
        "epoch",
        "train_loss",
        "dev_accuracy",
        "dev_agreement",
        "train_agreement",
        "loss",
    }
    assert run["steps"] == 24 and run["num_train_epochs"] == 4.0  # 96 rows / 16, given: not raised
    assert evaluations[-1]["train_agreement"] > untrained
    assert evaluations[-1]["train_agreement"] >= 0.95
    assert result["teacher"]["dev_accuracy"] > 0.7  # the teacher learned the rule
    assert result["teacher"]["path"] == distillation_data["teacher"]
    assert result["student"]["layers"] == 1 and result["teacher"]["layers"] == 4
    assert result["student"]["parameters"] < result["teacher"]["parameters"]
    assert (result["train_examples"], result["dev_examples"]) == (96, 48)
    saved = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert saved["runs"][0]["epochs"] == evaluations and "history" not in saved
    assert (tmp_path / "out" / "best_model.keras").is_file()
    # The best: the highest dev accuracy, ties to the lower dev loss, then the later evaluation.
    best = max(evaluations, key=lambda e: (e["dev_accuracy"], -e["loss"], e["epoch"]))
    assert result["best"] == best and saved["best"] == best
    dev = [json.loads(line) for line in open(distillation_data["dev"])]
    probs = result["task"].predict([r["text"] for r in dev])
    gold = np.array([r["label"] == "pos" for r in dev])
    assert np.mean(probs.argmax(1) == gold) == pytest.approx(best["dev_accuracy"])


@pytest.mark.slow
def test_student_from_a_pretrained_preset(uncased_vocab):
    from keras_bert import from_pretrained

    teacher = tiny_classifier(uncased_vocab, seed=2)
    student = d.student_from_preset(teacher, "minilm_l6_h384_uncased")
    cfg = student.encoder.bert_config
    assert (cfg.num_layers, cfg.hidden_size) == (6, 384)
    assert student.label_names == teacher.label_names and student.num_classes == 3
    assert student.preprocessor.max_seq_length == teacher.preprocessor.max_seq_length
    reference = from_pretrained("minilm_l6_h384_uncased")
    for a, b in zip(student.encoder.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert student.predict(TEXTS[:2]).shape == (2, 3)
