"""The fuzz targets of the files a user gives (tests.fuzz.config_targets: the server's text-proto
configs; tests.fuzz.reader_targets: every data reader) over their saved corpus
(tests/fuzz/corpus/<target>/: seeds from the readers' and the server's tests, past findings as
finding-*) and over hypothesis' splices of it. A target raises on a finding (an undocumented
error, more than 1 s of CPU on one input, a file read differently with a byte-order mark or
Windows line ends, a broken property), so each case fails with the finding's own message."""

import json
import pathlib

import hypothesis
import hypothesis.strategies as st
import pytest

from tests.fuzz import config_targets, reader_targets, seeds
from tests.tokenization import strategies

CORPUS = pathlib.Path(__file__).parent / "corpus"
TARGETS = {**config_targets.TARGETS, **reader_targets.TARGETS}


def _corpus(target):
    return sorted((CORPUS / target).iterdir())


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_the_saved_corpus_replays_without_a_finding(target):
    files = _corpus(target)
    assert len(files) >= 3, f"no seed corpus for {target}"
    for path in files:
        try:
            TARGETS[target](path.read_bytes())
        except Exception as e:
            raise AssertionError(f"{target}: {path.name}: {e}") from e


def test_the_reader_seeds_are_what_the_seed_writer_writes():
    for target, items in reader_targets.seeds().items():
        names = {p.name for p in (CORPUS / target).glob("seed-*")}
        want = {f"seed-{seeds.digest(b)}" for b in items if len(b) <= seeds.MAX_SEED_BYTES}
        assert names == want, f"{target}: rerun python -m tests.fuzz.reader_targets"


@pytest.mark.parametrize("target", sorted(TARGETS))
@hypothesis.settings(max_examples=20, deadline=None, derandomize=True)
@hypothesis.given(data=st.data())
def test_splices_of_the_corpus_give_no_finding(target, data):
    """A corpus entry with a generated stretch of bytes in place of one of its own stretches."""
    entry = data.draw(st.sampled_from(_corpus(target))).read_bytes()
    start = data.draw(st.integers(0, len(entry)))
    end = data.draw(st.integers(start, min(len(entry), start + 64)))
    inserted = data.draw(st.binary(max_size=32) | st.text(max_size=16).map(str.encode))
    TARGETS[target](entry[:start] + inserted + entry[end:])


# ------------------------------------------------------------ structure-aware JSON (hypothesis)
# libFuzzer's byte mutations rarely keep JSON valid; these build files of each reader's shape
# with any value (wrong types, huge or non-finite numbers, lone surrogates) in any field.
_leaf = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats()
    | st.text(max_size=8)
    | st.just([])
    | st.just({})
)


def _shaped(fields: dict):
    """A JSON object with each of `fields` (name -> strategy of a good value) present or not,
    holding a good value or any leaf."""
    return st.fixed_dictionaries({}, optional={k: v | _leaf for k, v in fields.items()})


_text = st.text(max_size=20)
_answer = _shaped({"text": _text, "answer_start": st.integers(-3, 30)})
_qa = _shaped(
    {
        "id": _text,
        "question": _text,
        "answers": st.lists(_answer, max_size=2),
        "is_impossible": st.booleans(),
    }
)
_paragraph = _shaped({"context": _text, "qas": st.lists(_qa, max_size=2)})
_squad = _shaped({"data": st.lists(_shaped({"paragraphs": st.lists(_paragraph, max_size=2)}))})
_check = _shaped(
    {"metric": st.sampled_from(["accuracy", "f1.macro", "f1.per_class.*", "loss", "x.y"])}
    | {k: st.floats() for k in ("min", "max", "max_decrease", "max_increase")}
)
_bert_config = _shaped(
    {
        k: st.integers(-2, 70)
        for k in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size")
    }
    | {"num_hidden_layers": st.integers(0, 3), "dropout_rate": st.floats(-1, 2)}
    | {"model_type": st.sampled_from(["bert", "gpt2"]), "hidden_act": st.sampled_from(["gelu"])}
)
_template = _shaped(
    {
        "name": _text,
        "type": st.sampled_from(["mft", "inv", "dir", "other"]),
        "template": st.sampled_from(["I {verb} it.", "{x}", "{", "plain"]),
        "verb": st.lists(_text, max_size=3),
        "texts": st.lists(_text, max_size=3),
        "label": st.sampled_from(["positive", "negative", 0, 1, 2]),
        "direction": st.sampled_from(["up", "down", "sideways"]),
        "append": _text,
    }
)
JSON_FILES = {
    "squad_json": _squad.map(lambda v: json.dumps(v).encode()),
    "gate_json": _shaped({"checks": st.lists(_check, max_size=3)}).map(
        lambda v: json.dumps(v).encode()
    ),
    "bert_config": _bert_config.map(lambda v: json.dumps(v).encode()),
    "behaviour_templates": st.lists(_template, max_size=3).map(
        lambda vs: "".join(json.dumps(v) + "\n" for v in vs).encode()
    ),
}


@pytest.mark.parametrize("target", sorted(JSON_FILES))
@hypothesis.settings(max_examples=strategies.examples(60), deadline=None, derandomize=True)
@hypothesis.given(data=st.data())
def test_generated_json_files_give_no_finding(target, data):
    content = data.draw(JSON_FILES[target])
    if target in reader_targets.OPTIONS:
        option = data.draw(st.sampled_from(reader_targets.OPTIONS[target]))
        content = reader_targets.with_option(target, option, content)
    TARGETS[target](content)
