"""Model fingerprints, data provenance and library versions of an evidence pack."""

import hashlib

import pytest

from keras_bert.evaluation import provenance as pv


def saved_model_dir(tmp_path, variables=b"weights-1"):
    d = tmp_path / "sm" / "1"
    (d / "variables").mkdir(parents=True)
    (d / "assets").mkdir()
    (d / "saved_model.pb").write_bytes(b"graph")
    (d / "variables" / "variables.data-00000-of-00001").write_bytes(variables)
    (d / "variables" / "variables.index").write_bytes(b"index")
    (d / "assets" / "vocab.txt").write_text("[PAD]\n")
    return d


def reference_fingerprint(d):
    digest = hashlib.sha256()
    for rel in [
        "saved_model.pb",
        "variables/variables.data-00000-of-00001",
        "variables/variables.index",
    ]:
        data = (d / rel).read_bytes()
        digest.update(rel.encode() + b"\0" + len(data).to_bytes(8, "little") + data)
    return "sha256:" + digest.hexdigest()


def test_saved_model_fingerprint_covers_graph_and_variables_not_assets(tmp_path):
    d = saved_model_dir(tmp_path)
    fp = pv.model_fingerprint(str(d))
    assert fp == {"fingerprint": reference_fingerprint(d), "kind": "SavedModel"}
    assert pv.model_fingerprint(str(d) + "/") == fp
    (d / "assets" / "vocab.txt").write_text("[UNK]\n")
    assert pv.model_fingerprint(d) == fp
    (d / "variables" / "variables.data-00000-of-00001").write_bytes(b"weights-2")
    assert pv.model_fingerprint(d)["fingerprint"] != fp["fingerprint"]


def test_task_file_and_run_dir_fingerprint(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "best_model.keras").write_bytes(b"zip bytes")
    expected = "sha256:" + hashlib.sha256(b"zip bytes").hexdigest()
    assert pv.model_fingerprint(run) == {"fingerprint": expected, "kind": "saved task"}
    assert pv.model_fingerprint(run / "best_model.keras")["fingerprint"] == expected
    with pytest.raises(FileNotFoundError, match="no model to fingerprint"):
        pv.model_fingerprint(tmp_path)


def test_data_provenance_and_versions(tmp_path):
    f = tmp_path / "d.tsv"
    f.write_bytes(b"text\tlabel\na\tpos\nb\tneg\nc\tpos\n")
    assert pv.data_provenance(str(f), 3, ["pos", "neg", "pos"]) == {
        "file": str(f),
        "sha256": hashlib.sha256(f.read_bytes()).hexdigest(),
        "rows": 3,
        "label_distribution": {"neg": 1, "pos": 2},
    }
    versions = pv.library_versions()
    assert versions["cleanlab"] == "2.9.0" and versions["tensorflow"].startswith("2.20")
