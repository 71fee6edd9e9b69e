"""Fuzz targets for every data reader: `target(data: bytes)`. The first byte picks the reader's
options (format, columns, split, flags: `OPTIONS`), the rest is the file, read by the function
the recipes call.

A finding (`tests.fuzz.user_files`, `tests.fuzz.serving_targets.Finding`) is an exception other
than the reader's documented ones (the `Raises:` of its docstring; the recipes turn those into
one line: `keras_bert.cli`, recipes/evaluate.py), more than `CPU_LIMIT_S` of CPU on one input, a
file read differently with a byte-order mark or Windows line ends, or a wrong answer to the
property each target states (a label outside its task's set, an answer not at its offset, a row
silently shortened, ...).

Targets (`TARGETS`):
    glue_tsv             data.glue.read_tsv_file, every task and split
    own_data             data.text_files.read_text_file (.csv / .tsv / .jsonl), then the
                         classification pipeline's labels (file_labels_from_examples, label_ids)
    conll                data.conll.read_conll
    squad_json           data.squad.read_squad_examples (v1.1 and v2.0)
    swag_csv             data.swag.read_swag
    batch_rows           batch_prediction.rows.check_columns and read_rows (.csv / .tsv /
                         .jsonl), each row's output line (records.prediction_json / error_json)
    gate_json            evaluation.release_gate.read_gate, then evaluate_gate
    behaviour_templates  evaluation.behaviour.read_template_file
    vocab                tokenization.FullTokenizer on a vocab.txt, then a tokenized text
    bert_config          config.BertConfig.from_json_file (ours, Google's, Hugging Face's)

Run one with `python -m tests.fuzz.run <target>`; tests/fuzz/test_file_targets.py replays the
corpus (tests/fuzz/corpus/<target>/); `python -m tests.fuzz.reader_targets` rewrites its seeds.
"""

import dataclasses
import itertools
import json
import math
import pathlib

import numpy as np

from keras_bert import fileio
from keras_bert.batch_prediction import records, rows
from keras_bert.config import BertConfig
from keras_bert.data import conll, glue, labels, squad, swag, text_files
from keras_bert.evaluation import behaviour, release_gate
from keras_bert.tokenization import FullTokenizer
from tests.fuzz import seeds as seed_files
from tests.fuzz.byte_source import ByteSource
from tests.fuzz.serving_targets import Finding, timed
from tests.fuzz.user_files import same_with_bom_and_crlf

CORPUS = pathlib.Path(__file__).parent / "corpus"
DOCUMENTED = (ValueError, FileNotFoundError)

OPTIONS = {
    "glue_tsv": [
        (task, split, on_error)
        for task in sorted(glue.TASKS)
        for split in glue.TASKS[task].splits
        for on_error in ("raise", "warn")
    ],
    "own_data": list(
        itertools.product(
            (".csv", ".tsv", ".jsonl"), (None, "text_b"), ("label", None), (False, True)
        )
    ),
    "squad_json": [False, True],
    "swag_csv": [True, False],
    "batch_rows": list(
        itertools.product((".csv", ".tsv", ".jsonl"), (None, "text_b"), (None, "id"))
    ),
}


def _options(target: str, data: bytes):
    """(the options the first byte picks, the file's bytes)."""
    source = ByteSource(data)
    return source.pick(OPTIONS[target]), source.rest()


def _finite(value, what):
    if not isinstance(value, float) or not math.isfinite(value):
        raise Finding(f"{what} {value!r} is not a finite number")


@timed
def glue_tsv(data: bytes):
    (task_name, split, on_error), content = _options("glue_tsv", data)
    task = glue.get_task(task_name)

    def read(path):
        return glue.read_tsv_file(path, task_name, split, on_error=on_error)

    kind, examples = same_with_bom_and_crlf(read, content, DOCUMENTED, "input.tsv")
    for e in examples if kind == "ok" else []:
        if split.startswith("test"):
            if e.label is not None:
                raise Finding(f"a test split row with a label: {e}")
        elif task.is_regression:
            _finite(e.label, "regression label")
        elif e.label not in task.labels:
            raise Finding(f"label {e.label!r} is not one of {task.labels}")


@timed
def own_data(data: bytes):
    (suffix, text_b, label, regression), content = _options("own_data", data)

    def read(path):
        examples = text_files.read_text_file(path, "text", text_b, label, regression)
        if label and not regression:
            names = text_files.file_labels_from_examples(examples)
            labels.label_ids([e.label for e in examples], names, path)
        return examples

    kind, examples = same_with_bom_and_crlf(read, content, DOCUMENTED, "input" + suffix)
    for e in examples if kind == "ok" else []:
        if not isinstance(e.text_a, str) or not (text_b is None or isinstance(e.text_b, str)):
            raise Finding(f"texts that are not strings: {e}")
        if regression and label:
            _finite(e.label, "regression label")
    if kind == "ok" and suffix != ".jsonl":
        _check_whole_records(content, suffix)


def _check_whole_records(content: bytes, suffix: str):
    """A CSV / TSV file that was read holds no record with fewer or more fields than its
    header (such a row's texts would be silently empty or cut)."""
    text = content.decode("utf-8-sig")
    _, read = fileio.csv_records(text, "input", "," if suffix == ".csv" else "\t")
    for number, row in read:
        if None in row or None in row.values():
            raise Finding(f"line {number}: a record of another width than its header was read")


@timed
def conll_target(data: bytes):
    kind, sentences = same_with_bom_and_crlf(conll.read_conll, data, DOCUMENTED, "input.txt")
    for s in sentences if kind == "ok" else []:
        if not s.words or len(s.words) != len(s.tags):
            raise Finding(f"sentence of {len(s.words)} words and {len(s.tags)} tags")
        if conll.to_iob2(s.tags) != list(s.tags):
            raise Finding(f"tags not in IOB2: {s.tags}")


def _read_with_option(target: str, data: bytes, reader, name: str):
    """(the option, the outcome of `reader(path, option)` on the file after the option bytes):
    `same_with_bom_and_crlf` of a file `name`."""
    option, content = _options(target, data)
    return option, same_with_bom_and_crlf(
        lambda path: reader(path, option), content, DOCUMENTED, name
    )


@timed
def squad_json(data: bytes):
    _, (kind, examples) = _read_with_option(
        "squad_json",
        data,
        lambda path, v2: squad.read_squad_examples(path, version_2_with_negative=v2),
        "input.json",
    )
    for e in examples if kind == "ok" else []:
        for text, start in e.answers:
            if not isinstance(start, int) or e.context[start : start + len(text)] != text:
                raise Finding(f"question {e.qas_id!r}: answer {text!r} is not at {start}")


@timed
def swag_csv(data: bytes):
    require_labels, (kind, examples) = _read_with_option(
        "swag_csv",
        data,
        lambda path, labelled: swag.read_swag(path, require_labels=labelled),
        "input.csv",
    )
    for e in examples if kind == "ok" else []:
        if len(e.endings) != 4 or not all(isinstance(t, str) for t in e.endings):
            raise Finding(f"endings {e.endings!r}")
        if e.label not in ((0, 1, 2, 3) if require_labels else (0, 1, 2, 3, None)):
            raise Finding(f"label {e.label!r}")


@timed
def batch_rows(data: bytes):
    (suffix, text_b, key), content = _options("batch_rows", data)
    columns = rows.Columns("text", text_b, key)

    def read(path):
        rows.check_columns(path, columns)
        return list(rows.read_rows(0, path, columns))

    kind, items = same_with_bom_and_crlf(read, content, (ValueError,), "input" + suffix)
    for item in items if kind == "ok" else []:
        if isinstance(item, rows.RowError):
            line = records.error_json(item, item.reason, key)
        else:
            line = records.prediction_json(item, {"probabilities": np.float32([0.25])}, key)
        try:
            json.loads(line.encode("utf-8"))
        except (UnicodeEncodeError, ValueError) as e:
            raise Finding(f"output line {line!r} is not UTF-8 JSON: {e}") from e


METRICS = {"accuracy": 0.75, "f1": {"macro": 0.5, "per_class": {"a": 0.25}}, "loss": 1.5}


@timed
def gate_json(data: bytes):
    kind, gate = same_with_bom_and_crlf(
        lambda path: release_gate.read_gate(path, None), data, DOCUMENTED, "gate.json"
    )
    if kind == "ok":
        checks, _ = gate
        record = release_gate.evaluate_gate(checks, METRICS)
        json.dumps(record, allow_nan=False)


@timed
def behaviour_templates(data: bytes):
    def read(path):
        return behaviour.read_template_file(path, ["negative", "positive"])

    kind, tests = same_with_bom_and_crlf(read, data, DOCUMENTED, "templates.jsonl")
    for test in tests if kind == "ok" else []:
        if not test["texts"] or not all(isinstance(t, str) for t in test["texts"]):
            raise Finding(f"a test without texts: {test}")


@timed
def vocab(data: bytes):
    def read(path):
        tokenizer = FullTokenizer(path)
        return tokenizer.vocab, tokenizer.tokenize("Unaffable naïve [MASK] 中文 x" + "a" * 201)

    kind, value = same_with_bom_and_crlf(read, data, DOCUMENTED, "vocab.txt")
    if kind == "ok" and not all(t in value[0] or t == "[UNK]" for t in value[1]):
        raise Finding(f"tokens outside the vocabulary: {value[1]}")


@timed
def bert_config(data: bytes):
    kind, config = same_with_bom_and_crlf(
        BertConfig.from_json_file, data, DOCUMENTED, "bert_config.json"
    )
    if kind != "ok":
        return
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.type == "int" and type(value) is not int:
            raise Finding(f"{field.name}={value!r} accepted for an int field")
    if BertConfig.from_dict(config.to_dict()) != config:
        raise Finding(f"{config} does not survive to_dict / from_dict")


conll_target.__name__ = "conll"
TARGETS = {
    fn.__name__: fn
    for fn in (
        glue_tsv,
        own_data,
        conll_target,
        squad_json,
        swag_csv,
        batch_rows,
        gate_json,
        behaviour_templates,
        vocab,
        bert_config,
    )
}


# ------------------------------------------------------------------ seeds
READERS = pathlib.Path(__file__).parents[1] / "corpus" / "readers"  # the readers' test files
HOSTILE = sorted(p.name for p in READERS.glob("hostile_*"))
# Two questions on the first sentences of the first SQuAD v2.0 dev paragraph ("Normans"),
# shortened; SQuAD is CC BY-SA 4.0 (Rajpurkar et al., 2018), see ../shared/data/README.md.
_SQUAD_CONTEXT = (
    "The Normans (Norman: Nourmands; French: Normands; Latin: Normanni) were the people who in "
    "the 10th and 11th centuries gave their name to Normandy, a region in France."
)
SQUAD = {
    "version": "v2.0",
    "data": [
        {
            "title": "Normans",
            "paragraphs": [
                {
                    "context": _SQUAD_CONTEXT,
                    "qas": [
                        {
                            "question": "In what country is Normandy located?",
                            "id": "68cf05f67fd29c6f129fe2fb9",
                            "answers": [{"text": "France", "answer_start": 159}],
                            "is_impossible": False,
                        },
                        {
                            "plausible_answers": [{"text": "Normans", "answer_start": 4}],
                            "question": "Who gave their name to Normandy in the 1000's and 1100's",
                            "id": "c42edddd0f45b968cc4c512e5",
                            "answers": [],
                            "is_impossible": True,
                        },
                    ],
                }
            ],
        }
    ],
}
SWAG_HEADER = (
    "video-id,fold-ind,startphrase,sent1,sent2,gold-source,ending0,ending1,ending2,ending3"
)


def _file(name: str) -> bytes:
    return (READERS / name).read_bytes()


def with_option(target: str, option, content: bytes) -> bytes:
    index = OPTIONS[target].index(option)
    width = 1 if len(OPTIONS[target]) <= 256 else 2
    return index.to_bytes(width, "little") + content


def _file_seeds() -> dict:
    """target -> [file bytes] of the files the readers' tests read, good and hostile."""
    hostile = [_file(n) for n in HOSTILE]
    squad_json = json.dumps(SQUAD).encode()
    return {
        "glue_tsv": [
            _file("glue_sst2_train.tsv"),
            b"#1 ID\t#2 ID\t#1 String\t#2 String\tQuality\n1\t2\ta b\tc d\t1\n",  # MRPC
            b"index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n",  # RTE
            b"genre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore\n"
            b"main-captions\tMSRvid\t2012test\t0001\tnone\tnone\tA man.\tA man.\t5.000\n",
            b"gj04\t1\t\tOur friends won't buy this analysis.\n",  # CoLA, no header
            b"sentence\tlabel\nnan\tnan\n",
            *hostile,
        ],
        "own_data": [
            _file("own.csv"),
            _file("own.jsonl"),
            b"text\ttext_b\tlabel\na\tb\tpos\nc\td\tneg\n",
            b'text,text_b,label\n"a, b",c,1.5\nd,e,-2\n',
            b"text,text_b,label\nshort\n",
            b'{"text": "a", "text_b": "b", "label": 1}\n{"text": "c", "text_b": null, "label": 0}\n',
            *hostile,
        ],
        "conll": [
            _file("conll.txt"),
            b"EU B-ORG\nrejects O\n\nPeter I-PER\nBlackburn I-PER\n",
            b"word\n",
            b"a B-\n",
            *hostile,
        ],
        "squad_json": [
            squad_json,
            b'{"data": [{"paragraphs": [{"context": "ab", "qas": [{"id": "1", "question": "q",'
            b' "answers": [{"text": "b", "answer_start": "1"}]}]}]}]}',
            b'{"data": [{"paragraphs": [{"context": "ab", "qas": [{"id": "1", "question": "q",'
            b' "answers": [{"text": "b", "answer_start": 1e400}]}]}]}]}',
            b'{"data": {}}',
            *hostile,
        ],
        "swag_csv": [
            f"{SWAG_HEADER},label\nv1,0,A man,A man,walks,gold,in,out,up,down,2\n".encode(),
            f"{SWAG_HEADER}\nv1,0,A man,A man,walks,gold,in,out,up,down\n".encode(),
            f"{SWAG_HEADER},label\nv1,0,A man\n".encode(),
            f"{SWAG_HEADER},label\nv1,0,a,a,b,gold,c,d,e,f,4\n".encode(),
            *hostile,
        ],
        "batch_rows": [
            _file("batch.csv"),
            _file("batch.tsv"),
            _file("batch.jsonl"),
            b'{"id": "r1", "text": "a", "text_b": ["b"]}\n{"id": 3, "text": "\\udce9"}\n',
            *hostile,
        ],
        "gate_json": [
            _file("gate.json"),
            b'{"checks": [{"metric": "f1.per_class.a", "max_drop": 0.1}]}',
            b'{"checks": [{"metric": "loss", "max": 2, "min": 1}]}',
            b'{"checks": [{"metric": "accuracy", "min": NaN}]}',
            *hostile,
        ],
        "behaviour_templates": [
            b'{"name": "negation", "type": "mft", "template": "I {verb} it.", '
            b'"verb": ["like", "love"], "label": "positive"}\n',
            b'{"name": "d", "type": "dir", "texts": ["good"], "append": " not", '
            b'"direction": "down"}\n',
            b'{"name": "i", "type": "inv", "texts": ["a", "b"]}\n[]\n',
            *hostile,
        ],
        "vocab": [
            b"[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nun\n##aff\n##able\nnaive\n",
            b"[PAD]\r\n[UNK]\r\n  a  \n\n##\n",
            *hostile,
        ],
        "bert_config": [
            _file("bert_config.json"),
            b'{"vocab_size": 23, "hidden_size": 8, "num_layers": 1, "num_heads": 2, '
            b'"intermediate_size": 12, "max_sequence_length": 16}',
            b'{"model_type": "bert", "num_hidden_layers": 1, "hidden_size": 8, '
            b'"num_attention_heads": 2, "intermediate_size": 12, "vocab_size": 23, '
            b'"max_position_embeddings": 16, "type_vocab_size": 2, "layer_norm_eps": 1e-12}',
            b'{"hidden_size": 8.5}',
            b"[]",
            *hostile,
        ],
    }


def seeds() -> dict:
    """target -> seed inputs: each file under the first option, the first good file under
    every option."""
    out = {}
    for target, files in _file_seeds().items():
        if target not in OPTIONS:
            out[target] = files
            continue
        first = OPTIONS[target][0]
        out[target] = [with_option(target, first, f) for f in files] + [
            with_option(target, option, files[0]) for option in OPTIONS[target][1:]
        ]
    return out


def write_seeds(corpus=CORPUS) -> dict:
    """Rewrites the seed-* files of every reader target; returns {target: count}."""
    return seed_files.write(corpus, seeds())


if __name__ == "__main__":
    for name, count in write_seeds().items():
        print(f"{name}: {count} seeds")
