"""The results files: every topic of `common.TOPICS` has its file under docs/results/ and its row
in the index (benchmarks/RESULTS.md), every script that appends names a topic of them, and
`append_results` adds a section to the topic's file without touching what is there."""

import ast
import os
import pathlib
import re

import pytest

from benchmarks import common
from tests.recipes.recipe_process import refusal_lines

REPO = pathlib.Path(__file__).resolve().parents[2]
INDEX = REPO / "benchmarks" / "RESULTS.md"


def test_each_topic_has_its_file_with_a_title_and_a_row_in_the_index():
    index = INDEX.read_text(encoding="utf-8")
    rows = re.findall(
        r"^\| ([\w-]+) \| \[([\w-]+\.md)\]\(\.\./docs/results/([\w-]+\.md)\) \|", index, re.M
    )
    assert rows == [(t, f"{t}.md", f"{t}.md") for t in common.TOPICS]
    files = sorted(p.name for p in common.RESULTS_DIR.glob("*.md"))
    assert files == sorted(f"{t}.md" for t in common.TOPICS)
    for topic in common.TOPICS:
        lines = common.results_file(topic).read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# ") and lines[1] == "" and lines[2], topic
    assert "\n## " not in index.split("## Adding a result", 1)[1]  # results go to topic files


def scripts_that_append() -> list[pathlib.Path]:
    return sorted(
        p
        for folder in ("benchmarks", "tools")
        for p in (REPO / folder).glob("*.py")
        if re.search(r'DEFINE_bool\w*\(\s*"append"', p.read_text())
    )


def test_every_script_that_appends_names_a_topic_and_appends_to_it():
    scripts = scripts_that_append()
    assert len(scripts) == 9
    for script in scripts:
        tree = ast.parse(script.read_text(encoding="utf-8"))
        topics = [
            node.value.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["TOPIC"]
        ]
        assert len(topics) == 1 and topics[0] in common.TOPICS, script.name
        calls = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("report", "append_results", "append_help")
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "common"
        ]
        assert sorted(c.func.attr for c in calls) in (
            ["append_help", "report"],
            ["append_help", "append_results"],
        ), script.name
        assert all(isinstance(c.args[0], ast.Name) and c.args[0].id == "TOPIC" for c in calls)


def test_results_file_names_the_topics_when_it_does_not_know_one():
    assert common.results_file("memory") == REPO / "docs" / "results" / "memory.md"
    assert common.append_help("serving") == "Append the results to docs/results/serving.md."
    with pytest.raises(ValueError) as caught:
        common.results_file("RESULTS")
    assert str(caught.value) == (
        "unknown results topic 'RESULTS': one of tokenizers, pretraining, encoder, fine-tuning, "
        "serving, targets, accuracy, export-litert, device, beam, memory, hardening"
    )


def test_append_results_adds_a_section_after_what_is_there(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "load_average", lambda: "0.10 0.20 0.30")
    desc = {
        "cpu": "m",
        "logical_cores": 2,
        "cpu_flags": {"avx2": True, "amx_tile": False},
        "os": "Linux",
        "python": "3.11.7",
        "versions": "numpy 2.4.6",
        "git_commit": "abc1234",
        "date": "2026-12-05 18:00 UTC",
        "load_average": "1.00 2.00 3.00",
    }
    path = tmp_path / "memory.md"
    path.write_text("# Memory\n\nWhat it measures.\n\n## An earlier section\n\nits text\n")
    common.append_results("memory", "Peak resident memory (bench_memory)", "| a |\n\n", desc, path)
    assert path.read_text() == (
        "# Memory\n\nWhat it measures.\n\n## An earlier section\n\nits text\n"
        "\n## Peak resident memory (bench_memory)\n\n"
        "- Machine: m, 2 logical cores; avx2=yes, amx_tile=no\n"
        "- OS Linux, Python 3.11.7; numpy 2.4.6\n- Commit abc1234, 2026-12-05 18:00 UTC\n"
        "- Load average (1/5/15 min) before: 1.00 2.00 3.00; after: 0.10 0.20 0.30\n\n| a |\n"
    )
    missing = tmp_path / "new.md"
    common.append_results("beam", "A title", "body", desc, missing)
    assert missing.read_text().startswith("# Results: beam\n\n## A title\n")


def absl_programs() -> list[pathlib.Path]:
    """The programs of benchmarks/ and tools/ that parse absl flags."""
    folders = ("benchmarks", "benchmarks/peers", "tools")
    paths = [p for folder in folders for p in sorted((REPO / folder).glob("*.py"))]
    return [p for p in paths if "from absl import" in p.read_text(encoding="utf-8")]


def test_every_absl_program_of_benchmarks_and_tools_runs_through_cli_run():
    # cli.run ends a refused flag in one line with exit 2, where absl's app.run prints several
    programs = absl_programs()
    assert len(programs) >= 17
    for path in programs:
        calls = {
            f"{node.func.value.id}.{node.func.attr}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.attr in ("run", "run_with_targets")
        }
        assert "app.run" not in calls, path.name
        through_cli = {"cli.run", "common.run_with_targets"} & calls  # the latter calls cli.run
        assert through_cli or "__main__" not in path.read_text(), path.name


@pytest.mark.parametrize(
    "module, flag, refusal",
    [
        ("benchmarks.bench_tokenizers", "--batch_size=0", "flag --batch_size=0: must be >= 1"),
        ("benchmarks.bench_serving", "--seconds=0", "flag --seconds=0.0: must be > 0"),
        # part 2 runs --calls // 10 blocks of 10: fewer than 10 made no block to take a median of
        ("benchmarks.bench_rest", "--calls=9", "flag --calls=9: must be >= 10"),
    ],
)
def test_a_count_or_a_duration_out_of_bounds_is_refused_in_one_line(module, flag, refusal):
    assert refusal_lines(module, flag) == [f"{module.split('.')[-1]}.py: error: {refusal}"]


def test_data_dir_keeps_a_uri_as_given_and_joins_under_it(monkeypatch):
    # pathlib made gs://bucket/data gs:/bucket/data; nothing is read
    monkeypatch.setenv("KERAS_BERT_DATA_DIR", "gs://bucket/data")
    assert common.data_dir() == "gs://bucket/data"
    assert common.data_dir() / "glue" / "sst2" == "gs://bucket/data/glue/sst2"
    assert f"--data_dir={common.data_dir() / 'glue'}" == "--data_dir=gs://bucket/data/glue"
    assert common.data_dir("gs://other/d") / "vocab" == "gs://other/d/vocab"
    monkeypatch.setenv("KERAS_BERT_DATA_DIR", "data")  # a local one: absolute
    assert common.data_dir() / "glue" == os.path.join(os.getcwd(), "data", "glue")


def test_alternate_says_warmed_up_only_after_a_warm_up(capsys):
    calls = []
    times = common.alternate({"a": lambda: calls.append("a")}, repetitions=2, warmup=0)
    assert calls == ["a", "a"] and len(times["a"]) == 2
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["  round 1/2", "  round 2/2"]
    common.alternate({"a": lambda: calls.append("a")}, repetitions=1, warmup=1)
    assert capsys.readouterr().out.splitlines()[0] == "  warmed up a"
    assert calls == ["a"] * 4


@pytest.mark.parametrize(
    "module, args, refusal",
    [
        ("bench_litert", ["--model_dir=/nonexistent"], "flag --model_dir=/nonexistent"),
        ("bench_tokenizers", ["--data_dir=/nonexistent"], "flag --data_dir=/nonexistent"),
        (
            "peers.squad_task_to_hf",
            ["--model_dir=/nonexistent", "--output_dir={out}"],
            "flag --model_dir=/nonexistent",
        ),
        (
            "peers.ner_peer_data",
            ["--data_dir=/nonexistent", "--output_dir={out}"],
            "flag --data_dir=/nonexistent",
        ),
        (
            "peers.ner_peer_data",
            ["--mode=score", "--gold_file=/nonexistent", "--predictions_file=/nonexistent2"],
            "flag --gold_file=/nonexistent: no such file or directory; "
            "flag --predictions_file=/nonexistent2",
        ),
        ("peers.squad_peer_data", ["--input_file=/nonexistent"], "flag --input_file=/nonexistent"),
    ],
)
def test_an_input_path_that_names_nothing_is_refused_in_one_line(module, args, refusal, tmp_path):
    out = tmp_path / "out"
    lines = refusal_lines(f"benchmarks.{module}", *(a.format(out=out) for a in args))
    assert lines == [f"{module.split('.')[-1]}.py: error: {refusal}: no such file or directory"]
    assert not out.exists()  # refused before anything is written
