"""Coverage-guided runs of the fuzz targets (atheris, libFuzzer; requirements-fuzz.txt).

    python -m tests.fuzz.run rest_json --runs=1000000 --max_total_time=3600
    python -m tests.fuzz.run grpc_predict --max_total_time=600 --merge

Starts libFuzzer on `TARGETS[<target>]` of one of `TARGET_MODULES` (the `serving` and
`keras_bert` packages and the targets instrumented for coverage) in a child process, seeded with
tests/fuzz/corpus/<target>/. New corpus entries go to <out>/<target>/corpus/, findings (the input
and libFuzzer's `crash-*` / `timeout-*` / `oom-*` file) to <out>/<target>/, its log to
<out>/<target>/fuzz.log; `--merge` then copies the run's new entries (each one libFuzzer kept
for new coverage, named by its SHA-1) into the tree's corpus (libFuzzer's own -merge=1 re-runs
argv[0], which under `python -m` is not an executable). The last line printed, also written to
<out>/<target>/summary.json, gives executions, seconds and findings. libFuzzer stops at the
first finding; replay it with `python -m tests.fuzz.run <target> --replay=<file>`.
Exit status: 0 with no finding, 1 with one.
"""

import argparse
import importlib
import json
import pathlib
import random
import re
import subprocess
import sys
import time

CORPUS = pathlib.Path(__file__).parent / "corpus"
# libFuzzer dictionaries (-dict): tests/fuzz/dicts/<target>.dict where one helps.
DICTS = pathlib.Path(__file__).parent / "dicts"
# libFuzzer's -timeout: a hang (the 1 s CPU budget of an input is the targets' own check).
HANG_TIMEOUT_S = 30
RSS_LIMIT_MB = 6144
# The modules whose `TARGETS` (name -> target(data: bytes)) this runner runs; names are unique.
TARGET_MODULES = (
    "tests.fuzz.serving_targets",
    "tests.fuzz.config_targets",
    "tests.fuzz.reader_targets",
)


def targets() -> dict:
    """Target name -> its function, over every module of TARGET_MODULES."""
    found = {}
    for name in TARGET_MODULES:
        found.update(importlib.import_module(name).TARGETS)
    return found


def _child(target, libfuzzer_args):
    """In the child process: instrument, then hand control to libFuzzer (never returns)."""
    import atheris  # only the coverage-guided runs need it (requirements-fuzz.txt)

    with atheris.instrument_imports(include=["serving", "keras_bert", "tests.fuzz"]):
        from tests.fuzz import serving_targets

        fn = targets()[target]
    if target in serving_targets.TARGETS and target != "rest_json":
        serving_targets.servables.server()  # built once, before the first input
    request_class = serving_targets.GRPC_REQUESTS.get(target)
    if request_class is None:
        atheris.Setup([sys.argv[0], *libfuzzer_args], fn)
    else:
        atheris.Setup(
            [sys.argv[0], *libfuzzer_args], fn, custom_mutator=_proto_mutator(request_class)
        )
    atheris.Fuzz()


def _proto_mutator(request_class):
    """libFuzzer's custom mutator for a target fed a `request_class` message's wire bytes: half
    the time a field-level mutation of the parsed message (`tests.fuzz.live.mutate_message`:
    hostile values, grown or cleared repeated fields and maps, deeper), so that mutants reach
    past the parser; else libFuzzer's own byte mutation."""
    import atheris  # as in _child

    from tests.fuzz import live

    def mutator(data, max_size, seed):
        rng = random.Random(seed)
        if rng.random() < 0.5:
            try:
                message = request_class.FromString(data)
            except Exception:  # not a message: a byte mutation instead
                message = None
            if message is not None:
                for _ in range(rng.randint(1, 3)):
                    live.mutate_message(message, rng)
                out = message.SerializeToString()
                if len(out) <= max_size:
                    return out
        return atheris.Mutate(data, max_size)

    return mutator


def _replay(target, path):
    targets()[target](pathlib.Path(path).read_bytes())
    print(f"{path}: no finding")


def _libfuzzer_args(args, out):
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    flags = [
        f"-artifact_prefix={out}/",
        f"-timeout={HANG_TIMEOUT_S}",
        f"-rss_limit_mb={RSS_LIMIT_MB}",
        "-print_final_stats=1",
    ]
    if args.runs:
        flags.append(f"-runs={args.runs}")
    if args.max_total_time:
        flags.append(f"-max_total_time={args.max_total_time}")
    if args.max_len:
        flags.append(f"-max_len={args.max_len}")
    if (DICTS / f"{args.target}.dict").exists():
        flags.append(f"-dict={DICTS / f'{args.target}.dict'}")
    return [*flags, str(corpus), str(CORPUS / args.target)]


def _summary(target, log_text, seconds, out):
    runs = re.findall(r"stat::number_of_executed_units:\s+(\d+)", log_text)
    if not runs:
        runs = re.findall(r"^#(\d+)\s", log_text, re.MULTILINE)
    findings = sorted(
        p.name for p in out.iterdir() if p.name.startswith(("crash-", "timeout-", "oom-"))
    )
    return {
        "target": target,
        "executions": int(runs[-1]) if runs else 0,
        "seconds": round(seconds),
        "findings": findings,
        "new_corpus_entries": len(list((out / "corpus").iterdir())),
    }


def merge_corpus(source: pathlib.Path, tree: pathlib.Path) -> int:
    """Copies the corpus entries of `source` that `tree` lacks; returns how many."""
    have = {p.name for p in tree.iterdir()}
    new = [p for p in sorted(source.iterdir()) if p.name not in have]
    for path in new:
        (tree / path.name).write_bytes(path.read_bytes())
    return len(new)


def _run(args):
    out = pathlib.Path(args.out) / args.target
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "tests.fuzz.run", "--child", args.target, "--"]
    command += _libfuzzer_args(args, out)
    start = time.monotonic()
    with open(out / "fuzz.log", "w") as log:
        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, check=False)
    summary = _summary(args.target, (out / "fuzz.log").read_text(errors="replace"), 0, out)
    summary["seconds"] = round(time.monotonic() - start)
    if args.merge:
        summary["merged_into_tree"] = merge_corpus(out / "corpus", CORPUS / args.target)
    (out / "summary.json").write_text(json.dumps(summary) + "\n")
    print(json.dumps(summary))
    return 1 if summary["findings"] else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("target")
    parser.add_argument("--runs", type=int, default=0, help="executions (0: no limit)")
    parser.add_argument("--max_total_time", type=int, default=0, help="seconds (0: no limit)")
    parser.add_argument("--max_len", type=int, default=0, help="longest input (0: libFuzzer's)")
    parser.add_argument("--out", default="runs/fuzz", help="folder of the run's outputs")
    parser.add_argument("--merge", action="store_true", help="add new coverage to the tree")
    parser.add_argument("--replay", help="run the target once on this file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("libfuzzer_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return _child(args.target, args.libfuzzer_args)
    # Imported here, not at the top: the child must import `serving` inside atheris'
    # instrumentation, which a module-level import would pre-empt.
    known = targets()
    if args.target not in known:
        parser.error(f"unknown target {args.target!r}; targets: {', '.join(known)}")
    if args.replay:
        return _replay(args.target, args.replay)
    return _run(args)


if __name__ == "__main__":
    sys.exit(main())
