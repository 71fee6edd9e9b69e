"""BERT pretraining data as an Apache Beam pipeline: the one implementation behind
recipes/create_pretraining_data.py, on the DirectRunner here (in process, or local worker
processes) and unchanged on Dataflow, Flink or Spark.

Stages (each a step of `keras_bert.data.pretraining_data`, the algorithm's one home):

    input files -> raw documents (read_raw_documents)       -- a file per element
    -> tokenized documents, keyed by content (tokenize_document, document_key)
    -> grouped by document_group -> instances with sort keys (create_group_instances)
    -> by shard (shard_of) -> one TFRecord file per shard, sorted by key (write_shard)
    -> the JSON summary (summary_from_stats over instance_stats), written last

Every random draw of a document derives from the seed and the document's content, and every
order from hashes, so the records do not depend on the runner, the number of workers, the order
of the input files or of the documents in them. Random next segments come from documents of the
same group: one group (the default) is google-research/bert's rule, the whole corpus; at the
scale of Wikipedia, more groups spread instance creation over workers (each group is held in one
worker's memory; NVIDIA's pipeline makes the same trade with its 1,472 shards).
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Sequence

import apache_beam as beam

from keras_bert import beam as beam_pipelines
from keras_bert import fileio
from keras_bert.data import pretraining_data as pd

LOG_EVERY_DOCUMENTS = 10_000
logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True, kw_only=True)
class PretrainingDataSettings(pd.InstanceSettings):
    """What the pipeline makes (the recipe's flags of the same names): how instances are made,
    and from what."""

    vocab_file: str
    do_lower_case: bool = True
    input_format: str = "text"

    def check(self) -> None:
        """Raises ValueError naming a setting out of range."""
        super().check()
        if self.input_format not in ("text", "wikitext"):
            raise ValueError(
                f"input_format must be 'text' or 'wikitext', got {self.input_format!r}"
            )


class _Vocabulary:
    """The tokenizer and vocabulary of a worker, built once per DoFn instance (`setup`)."""

    def __init__(self, settings: PretrainingDataSettings):
        self.settings = settings
        self.tokenizer = None

    def setup(self) -> None:
        from keras_bert.tokenization import FullTokenizer

        s = self.settings
        self.tokenizer = FullTokenizer(s.vocab_file, do_lower_case=s.do_lower_case)
        self.vocab = self.tokenizer.vocab
        self.vocab_words = list(self.vocab.keys())


class _TokenizeDocuments(beam.DoFn):
    def __init__(self, settings: PretrainingDataSettings):
        super().__init__()
        self.vocabulary = _Vocabulary(settings)
        self.count = 0

    def setup(self):
        self.vocabulary.setup()

    def process(self, raw_document):
        sentences = pd.tokenize_document(raw_document, self.vocabulary.tokenizer.tokenize)
        self.count += 1
        if self.count % LOG_EVERY_DOCUMENTS == 0:
            logger.info("pretraining data: tokenized %d documents in this worker", self.count)
        if sentences:
            key = pd.document_key(sentences)
            yield (
                pd.document_group(key, self.vocabulary.settings.num_document_groups),
                (
                    key,
                    sentences,
                ),
            )


class _CreateInstances(beam.DoFn):
    def __init__(self, settings: PretrainingDataSettings, num_shards: int):
        super().__init__()
        self.vocabulary = _Vocabulary(settings)
        self.num_shards = num_shards

    def setup(self):
        self.vocabulary.setup()

    def process(self, group_and_documents):
        group, keyed_documents = group_and_documents
        s = self.vocabulary.settings
        made = pd.create_group_instances(list(keyed_documents), self.vocabulary.vocab_words, s)
        logger.info("pretraining data: group %d made %d instances", group, len(made))
        for key, instance in made:
            yield pd.shard_of(key, self.num_shards), (key, instance)


class _WriteShards(beam.DoFn):
    def __init__(self, settings: PretrainingDataSettings, output_files: Sequence[str]):
        super().__init__()
        self.vocabulary = _Vocabulary(settings)
        self.output_files = list(output_files)

    def setup(self):
        self.vocabulary.setup()

    def process(self, shard_and_instances):
        shard, keyed = shard_and_instances
        keyed = sorted((ki for ki in keyed if ki is not None), key=lambda ki: ki[0])
        s = self.vocabulary.settings
        count = pd.write_shard(
            self.output_files[shard],
            (instance for _, instance in keyed),
            self.vocabulary.vocab,
            s.max_seq_length,
            s.max_predictions_per_seq,
        )
        stats = collections.Counter()
        for _, instance in keyed:
            stats.update(pd.instance_stats(instance))
        yield shard, count, dict(stats)


def _write_summary(shard_results, num_documents, output_files, summary_path, config) -> dict:
    """The last step: summed statistics and per-shard counts as the JSON summary."""
    stats = collections.Counter()
    counts = {}
    for shard, count, shard_stats in shard_results:
        stats.update(shard_stats)
        counts[shard] = count
    summary = pd.summary_from_stats(stats, num_documents=num_documents)
    summary["shards"] = {
        fileio.basename(path): counts.get(i, 0) for i, path in enumerate(output_files)
    }
    # Seconds are kept out of the summary so that a rerun writes identical bytes.
    pd.write_summary({"config": config, "summary": summary}, summary_path)
    return summary


def _write_summary_once(_, **kwargs) -> dict:
    return _write_summary(**kwargs)


def build(
    pipeline,
    input_files: Sequence[str],
    output_files: Sequence[str],
    settings: PretrainingDataSettings,
    summary_path: str,
    config: dict,
):
    """Adds the pretraining-data stages to `pipeline` (an `apache_beam.Pipeline`).

    Returns:
        the PCollection holding the summary dict once written (one element).
    """
    settings.check()
    num_shards = len(output_files)
    documents = (
        pipeline
        | "InputFiles" >> beam.Create(list(input_files))
        | "ReadDocuments" >> beam.FlatMap(pd.read_raw_documents, settings.input_format)
        | "SpreadDocuments" >> beam.Reshuffle()
        | "Tokenize" >> beam.ParDo(_TokenizeDocuments(settings))
    )
    num_documents = documents | "CountDocuments" >> beam.combiners.Count.Globally()
    instances = (
        documents
        | "GroupDocuments" >> beam.GroupByKey()
        | "CreateInstances" >> beam.ParDo(_CreateInstances(settings, num_shards))
    )
    # Every shard gets a (possibly empty) file: one None per shard joins the instances.
    every_shard = pipeline | "EveryShard" >> beam.Create([(i, None) for i in range(num_shards)])
    shard_results = (
        (instances, every_shard)
        | "WithEveryShard" >> beam.Flatten()
        | "GroupShards" >> beam.GroupByKey()
        | "WriteShards" >> beam.ParDo(_WriteShards(settings, output_files))
    )
    return (
        pipeline
        | "Summary" >> beam.Create([None])
        | "WriteSummary"
        >> beam.Map(
            _write_summary_once,
            shard_results=beam.pvalue.AsList(shard_results),
            num_documents=beam.pvalue.AsSingleton(num_documents),
            output_files=list(output_files),
            summary_path=summary_path,
            config=config,
        )
    )


def run(
    input_files: Sequence[str],
    output_files: Sequence[str],
    settings: PretrainingDataSettings,
    summary_path: str,
    config: dict,
    pipeline_options=None,
) -> dict:
    """Builds and runs the pipeline to completion; returns the summary it wrote.

    Args:
        pipeline_options: Beam PipelineOptions (default: the DirectRunner in this process).

    Raises:
        fileio.UserFileError: an input file that is not UTF-8, naming it, the byte offset and the
            line (a worker's error reaches the runner wrapped in the runner's own exception;
            after a failed run the inputs are decoded again here to name the file in one line).
    """
    settings.check()
    try:
        with beam_pipelines.create_pipeline(pipeline_options) as pipeline:
            build(pipeline, input_files, output_files, settings, summary_path, config)
    except Exception:
        for path in input_files:
            fileio.read_user_text(path)  # raises UserFileError for a file that is not UTF-8
        raise
    return fileio.read_json(summary_path)["summary"]
