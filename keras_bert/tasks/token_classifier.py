"""`TokenClassifier`: one tag per word (CoNLL-2003 NER, BERT section 4.3 / 5.3, table 7).

Words and word pieces (BERT section 4.3): each word is tokenized on its own; the FIRST piece of a
word carries the word's label and is the position its tag is predicted from; the other pieces,
`[CLS]`, `[SEP]` and padding carry label -100 and are ignored by the loss. A word that tokenizes to
zero pieces (e.g. only a format character) keeps its slot and is tagged `O` (PITFALLS: NER).

Windows: a sentence whose pieces do not fit `max_seq_length - 2` is cut into windows of that many
pieces, starting every `doc_stride` pieces (so consecutive windows overlap by
`window - doc_stride` pieces), until the last piece is covered. A first piece seen by several
windows is labelled (training) and read (prediction) only in the window where it has the most
context, `min(pieces left of it, pieces right of it) + 0.01 x window length`, ties to the earlier
window: the "max context" rule of google-research/bert `run_squad.py::_check_is_max_context`,
the same code as SQuAD's (`keras_bert.data.windows`). No word is lost; every word gets exactly
one tag. All of this runs in the TensorFlow graph (`window_words`), so `predict`, training data
and the exported `serving_default` signature share one implementation.

"Whitespace word": `tf.strings.split` on ASCII whitespace (space, tab, newline, CR, FF, VT).

Feature-based mode (BERT section 5.3, table 7): `feature_mode` freezes the encoder and feeds one
of `FEATURE_MODES` (per piece) to a 2-layer BiLSTM, then the same dense tag layer.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from keras_bert.data import windows as windows_lib
from keras_bert.layers.dropout import BertDropout
from keras_bert.layers.initializers import truncated_normal
from keras_bert.saved_model.token_classifier_signatures import TokenClassifierServingModule
from keras_bert.tasks.task import INPUT_NAMES, Task
from keras_bert.tokenization.bert_preprocessor import pack_ragged

IGNORE_LABEL = -100
FEATURE_MODES = (
    "embeddings",
    "last",
    "second_to_last",
    "sum_last_four",
    "concat_last_four",
    "sum_all",
)
MIN_LAYERS = {"second_to_last": 2, "sum_last_four": 4, "concat_last_four": 4}


def _piece_table(preprocessor, words: tf.RaggedTensor, window: int) -> dict:
    """Flat per-piece facts of a batch of word lists (all int64 except `ids`)."""
    words = words.with_row_splits_dtype(tf.int64)
    pieces = preprocessor.tokenize(words.flat_values).with_row_splits_dtype(tf.int64)
    pieces = pieces[:, :window]  # a word longer than a window keeps its first `window` pieces
    word_sentence = words.value_rowids()  # [NW]
    word_in_sentence = tf.range(tf.shape(word_sentence, out_type=tf.int64)[0]) - tf.gather(
        words.row_starts(), word_sentence
    )  # [NW]
    piece_word = pieces.value_rowids()  # [NP] global word
    num_pieces = tf.shape(piece_word, out_type=tf.int64)[0]
    offset_in_word = tf.range(num_pieces) - tf.gather(pieces.row_starts(), piece_word)
    sentence_pieces = tf.math.unsorted_segment_sum(
        pieces.row_lengths(), word_sentence, words.nrows()
    )  # [B]
    return {
        "ids": tf.cast(pieces.flat_values, tf.int32),
        "sentence": tf.gather(word_sentence, piece_word),
        "word": tf.gather(word_in_sentence, piece_word),
        "is_first": tf.equal(offset_in_word, 0),
        "sentence_pieces": sentence_pieces,
        "sentence_start": tf.cumsum(sentence_pieces, exclusive=True),
        "num_pieces": num_pieces,
    }


def _ragged(rows, dtype) -> tf.RaggedTensor:
    """list of lists (possibly all empty) -> RaggedTensor [len(rows), (n)] of `dtype`."""
    flat = [x for row in rows for x in row]
    return tf.RaggedTensor.from_row_lengths(
        tf.constant(flat, dtype, shape=[len(flat)]), tf.constant([len(r) for r in rows], tf.int64)
    )


def window_words(preprocessor, words: tf.RaggedTensor, doc_stride: int) -> dict:
    """Word lists -> model inputs, one row per window (module docstring), in graph.

    Args:
        preprocessor: the task's `BertPreprocessor` (tokenizer, special ids, max_seq_length T).
        words: tf.string RaggedTensor [B, (W)], each item one word.
        doc_stride: int in [1, T - 2], pieces between the starts of consecutive windows.

    Returns:
        dict: `input_word_ids`, `input_mask`, `input_type_ids` int32 [N, T] (N windows, a
        sentence with no pieces has none); `word_index` int32 [N, T], the index within its
        sentence of the word whose tag is read at that position, -1 elsewhere; `sentence_index`
        int32 [N], the sentence of each window; `num_words` int32 [B].

    Raises:
        ValueError: doc_stride outside [1, T - 2].
    """
    window = preprocessor.max_seq_length - 2
    if not 1 <= int(doc_stride) <= window:  # a larger stride would skip pieces
        raise ValueError(
            f"doc_stride must be in [1, max_seq_length - 2 = {window}], got {doc_stride}"
        )
    t = _piece_table(preprocessor, words, window)
    w = windows_lib.graph_window_spans(t["sentence_pieces"], window, doc_stride, keep_empty=False)
    win_sentence = w["sequence"]  # [N]
    g, max_context = windows_lib.graph_max_context(
        tf.gather(t["sentence_start"], win_sentence) + w["start"], w["length"], t["num_pieces"]
    )  # [N, (len)] global piece ids
    labelled = tf.logical_and(max_context.flat_values, tf.gather(t["is_first"], g.flat_values))
    word_index = tf.where(labelled, tf.gather(t["word"], g.flat_values), -1)
    word_index = g.with_flat_values(tf.cast(word_index, tf.int32))
    ids = g.with_flat_values(tf.gather(t["ids"], g.flat_values))
    packed = pack_ragged(
        ids,
        None,
        preprocessor.max_seq_length,
        preprocessor.cls_id,
        preprocessor.sep_id,
        preprocessor.pad_id,
    )
    edge = -tf.ones([tf.size(win_sentence), 1], tf.int32)
    packed["word_index"] = tf.concat([edge, word_index, edge], axis=1).to_tensor(
        default_value=-1, shape=[None, preprocessor.max_seq_length]
    )
    packed["sentence_index"] = tf.cast(win_sentence, tf.int32)
    packed["num_words"] = tf.cast(words.row_lengths(), tf.int32)
    return packed


def trim_windows(windows: dict, minimum: int = 2) -> dict:
    """Cuts every [N, T] tensor of `window_words` to the longest window (padding changes nothing)."""
    longest = tf.reduce_max(tf.concat([tf.reduce_sum(windows["input_mask"], axis=1), [minimum]], 0))
    return {
        k: v[:, :longest] if k in INPUT_NAMES + ("word_index",) else v for k, v in windows.items()
    }


def window_labels(windows: dict, tag_ids: tf.RaggedTensor) -> tf.Tensor:
    """int32 [N, T] training labels: the word's tag id at its labelled position, else -100.

    Args:
        windows: `window_words` output.
        tag_ids: int32 RaggedTensor [B, (W)] of tag ids, aligned with the words.
    """
    tag_ids = tag_ids.with_row_splits_dtype(tf.int64)
    starts = tf.gather(tag_ids.row_starts(), windows["sentence_index"])[:, tf.newaxis]
    index = tf.maximum(tf.cast(windows["word_index"], tf.int64), 0) + starts
    labels = tf.gather(tf.cast(tag_ids.flat_values, tf.int32), index)
    return tf.where(windows["word_index"] >= 0, labels, IGNORE_LABEL)


def words_to_tags(windows: dict, tag_ids: tf.Tensor, outside_id: int) -> tf.Tensor:
    """int tag ids [N, T] per position -> int32 [B, W_max] per word (`outside_id` for words with
    no piece and for padding)."""
    mask = windows["word_index"] >= 0
    index = tf.stack(
        [
            tf.boolean_mask(
                windows["sentence_index"][:, tf.newaxis] + tf.zeros_like(windows["word_index"]),
                mask,
            ),
            tf.boolean_mask(windows["word_index"], mask),
        ],
        axis=1,
    )
    batch = tf.size(windows["num_words"])
    width = tf.reduce_max(tf.concat([windows["num_words"], [0]], 0))
    values = tf.cast(tf.boolean_mask(tag_ids, mask), tf.int32) + 1
    scattered = tf.scatter_nd(index, values, tf.stack([batch, width]))
    return tf.where(scattered > 0, scattered - 1, outside_id)


@keras.saving.register_keras_serializable(package="keras_bert")
class TokenClassifier(Task):
    """Tags every word of a sentence (NER): a dense layer on each first piece (BERT section 4.3).

    Args:
        encoder: a `BertEncoder`.
        label_names: list of str tags in id order (e.g. `keras_bert.data.conll.label_names`);
            must hold "O" (the tag of words without pieces).
        dropout_rate: float in [0, 1), dropout on the per-piece vectors.
        initializer_range: float, stddev of the truncated-normal tag-layer kernel.
        doc_stride: int in [1, max_seq_length - 2], pieces between window starts; None:
            half a window (module docstring). A config saved with its older name
            `window_stride` loads as this (`from_config`).
        feature_mode: None (fine-tune everything) or one of `FEATURE_MODES` (frozen encoder,
            BiLSTM on "embeddings", "last", "second_to_last", "sum_last_four",
            "concat_last_four" or "sum_all" of the hidden layers; BERT table 7).
        lstm_units: int >= 1, units per direction of each BiLSTM layer (feature mode; paper 768).
        lstm_layers: int >= 1, BiLSTM layers (feature mode; paper 2).
        preprocessor: the `BertPreprocessor` (see `Task`); `predict` on strings needs it.

    Call args:
        inputs: dict of `input_word_ids`, `input_mask`, `input_type_ids`, int32 [B, T].
        training: bool.

    Returns:
        float32 [B, T, num_tags] logits per position (read only at first pieces).

    Raises:
        ValueError: no label_names, no "O" among them, a bad stride, dropout, feature_mode (or
            one needing more layers than the encoder has) or LSTM size.
    """

    task_type = "token_classification"

    def __init__(
        self,
        encoder,
        label_names,
        dropout_rate=0.1,
        initializer_range=0.02,
        doc_stride=None,
        feature_mode=None,
        lstm_units=768,
        lstm_layers=2,
        preprocessor=None,
        **kwargs,
    ):
        kwargs.pop("is_pair", None)
        label_names = [str(x) for x in (label_names or [])]
        if "O" not in label_names:
            raise ValueError(
                f"label_names must include 'O' (the tag of words without pieces), got {label_names}"
            )
        if not 0.0 <= dropout_rate < 1.0:
            raise ValueError(f"dropout_rate must be in [0, 1), got {dropout_rate}")
        if feature_mode is not None and feature_mode not in FEATURE_MODES:
            raise ValueError(
                f"feature_mode must be None or one of {FEATURE_MODES}, got {feature_mode!r}"
            )
        needed, have = MIN_LAYERS.get(feature_mode, 1), encoder.bert_config.num_layers
        if have < needed:
            raise ValueError(
                f"feature_mode={feature_mode!r} needs >= {needed} encoder layers, "
                f"the encoder has {have}"
            )
        if int(lstm_units) < 1 or int(lstm_layers) < 1:
            raise ValueError(
                f"lstm_units and lstm_layers must be >= 1, got {lstm_units}, {lstm_layers}"
            )
        super().__init__(
            encoder, preprocessor=preprocessor, label_names=label_names, is_pair=False, **kwargs
        )
        window = None if preprocessor is None else preprocessor.max_seq_length - 2
        if doc_stride is not None and not (1 <= int(doc_stride) <= (window or int(doc_stride))):
            raise ValueError(
                f"doc_stride must be in [1, max_seq_length - 2 = {window}], got {doc_stride}"
            )
        self.doc_stride = None if doc_stride is None else int(doc_stride)
        self.dropout_rate, self.initializer_range = float(dropout_rate), float(initializer_range)
        self.feature_mode, self.lstm_units, self.lstm_layers = (
            feature_mode,
            int(lstm_units),
            int(lstm_layers),
        )
        self.outside_id = label_names.index("O")
        self.dropout = BertDropout(self.dropout_rate, name="dropout")
        self.lstms = []
        if not encoder.built:
            encoder.build()  # variables first: `trainable` only reaches existing ones
        encoder.pooler.trainable = False  # tags never read the pooled [CLS] (no gradient)
        if feature_mode is not None:
            encoder.trainable = False
            self.lstms = [
                keras.layers.Bidirectional(
                    keras.layers.LSTM(self.lstm_units, return_sequences=True), name=f"bilstm_{i}"
                )
                for i in range(self.lstm_layers)
            ]
        self.tagger = keras.layers.Dense(
            len(label_names),
            kernel_initializer=truncated_normal(self.initializer_range),
            dtype="float32",
            name="tags",
        )

    @property
    def num_tags(self) -> int:
        return len(self.label_names)

    def stride(self) -> int:
        """The doc_stride in use: pieces between window starts (default half a window, at least
        1)."""
        window = self.require_preprocessor("windowing").max_seq_length - 2
        return self.doc_stride or max(1, window // 2)

    def features(self, inputs, training=None):
        """Per-piece vectors [B, T, H] (fine-tuning: `sequence_output`) or the frozen feature of
        `feature_mode` ([B, T, 4H] for "concat_last_four")."""
        if self.feature_mode is None:
            return self.encoder(inputs, training=training)["sequence_output"]
        if self.feature_mode == "embeddings":
            return self.encoder.embeddings(
                tf.cast(inputs["input_word_ids"], tf.int32),
                tf.cast(inputs["input_type_ids"], tf.int32),
                training=False,
            )
        layers = self.encoder(inputs, training=False)["encoder_outputs"]
        pick = {
            "last": lambda: layers[-1],
            "second_to_last": lambda: layers[-2],
            "sum_last_four": lambda: tf.add_n(layers[-4:]),
            "concat_last_four": lambda: tf.concat(layers[-4:], axis=-1),
            "sum_all": lambda: tf.add_n(layers),
        }
        return pick[self.feature_mode]()

    def default_loss(self):
        """Per-token softmax cross-entropy over the positions with a label (IGNORE_LABEL: word
        continuations, [CLS]/[SEP], padding and context outside a window's own span)."""
        return keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, ignore_class=IGNORE_LABEL
        )

    def call(self, inputs, training=None):
        x = self.features(inputs, training=training)
        if self.lstms:
            x = tf.stop_gradient(x)
            mask = tf.cast(inputs["input_mask"], tf.bool)
            for lstm in self.lstms:
                x = lstm(x, mask=mask, training=training)
        return self.tagger(self.dropout(x, training=training))  # [B, T, num_tags] float32

    def encode_words(self, words: tf.RaggedTensor, preprocessor=None) -> dict:
        """`window_words` with `preprocessor` (default: the task's) and the task's stride."""
        preprocessor = preprocessor or self.require_preprocessor("tagging words")
        return window_words(preprocessor, words, self.stride())

    def tag_ids_of_words(self, words: tf.RaggedTensor, preprocessor=None) -> tuple:
        """tf.string RaggedTensor [B, (W)] -> (int32 [B, W_max] tag ids, int32 [B] word counts),
        in graph or eagerly; padding positions hold the "O" id."""
        windows = trim_windows(self.encode_words(words, preprocessor))
        logits = self._logits({k: windows[k] for k in INPUT_NAMES})
        tag_ids = words_to_tags(
            windows, tf.argmax(logits, axis=-1, output_type=tf.int32), self.outside_id
        )
        return tag_ids, windows["num_words"]

    def _logits(self, inputs):
        """The model on int32 [N, T] inputs (training=False); eagerly, one traced function."""
        if tf.executing_eagerly():
            if getattr(self, "_logits_step", None) is None:
                spec = {k: tf.TensorSpec([None, None], tf.int32) for k in INPUT_NAMES}
                self._logits_step = tf.function(
                    lambda x: self(x, training=False), input_signature=[spec]
                )
            return self._logits_step(inputs)
        return self(inputs, training=False)

    def training_windows(self, word_lists, tag_lists, batch_size=256) -> tuple[dict, np.ndarray]:
        """Labelled sentences -> (model inputs, labels) as numpy, one row per window.

        Args:
            word_lists: list of B lists of str words; tag_lists: the tags (str, in
                `label_names`), same lengths.

        Returns:
            (dict of int32 [N, max_seq_length] `input_word_ids` / `input_mask` / `input_type_ids`,
            int32 labels [N, max_seq_length]: the word's tag id at its first piece, -100 else).

        Raises:
            ValueError: a tag not in label_names, or a sentence whose tag count differs from its
                word count (naming the sentence).
        """
        index = {name: i for i, name in enumerate(self.label_names)}
        for i, (words, tags) in enumerate(zip(word_lists, tag_lists)):
            if len(words) != len(tags):
                raise ValueError(f"sentence {i}: {len(words)} words but {len(tags)} tags")
            unknown = sorted(set(tags) - set(index))
            if unknown:
                raise ValueError(
                    f"sentence {i}: tags {unknown} not in label_names {self.label_names}"
                )

        @tf.function(
            input_signature=[
                tf.RaggedTensorSpec([None, None], tf.string, 1, tf.int64),
                tf.RaggedTensorSpec([None, None], tf.int32, 1, tf.int64),
            ]
        )
        def step(words, tags):
            windows = self.encode_words(words)
            return {k: windows[k] for k in INPUT_NAMES}, window_labels(windows, tags)

        parts = []
        for start in range(0, len(word_lists), batch_size):
            words = _ragged([list(w) for w in word_lists[start : start + batch_size]], tf.string)
            tags = _ragged(
                [[index[t] for t in ts] for ts in tag_lists[start : start + batch_size]], tf.int32
            )
            windows, labels = step(words, tags)
            parts.append(({k: windows[k].numpy() for k in INPUT_NAMES}, labels.numpy()))
        features = {k: np.concatenate([p[0][k] for p in parts]) for k in INPUT_NAMES}
        return features, np.concatenate([p[1] for p in parts])

    def predict_word_lists(self, word_lists, batch_size=32) -> list[list[str]]:
        """Lists of words (e.g. CoNLL tokens) -> one tag per word, as lists of str."""
        names = np.array(self.label_names, dtype=object)
        out = []
        for start in range(0, len(word_lists), batch_size):
            chunk = [list(w) for w in word_lists[start : start + batch_size]]
            ids = self.tag_ids_of_words(_ragged(chunk, tf.string))[0].numpy()
            out.extend(list(names[ids[i, : len(w)]]) for i, w in enumerate(chunk))
        return out

    def predict_texts(self, texts, texts_b=None, batch_size=32):
        """Sentences -> list (one per sentence) of lists of str tags, one per whitespace word
        (ASCII whitespace, as `tf.strings.split`); [] for a sentence without words."""
        del texts_b
        if not texts:
            return []
        split = tf.strings.split(tf.constant(texts, tf.string))
        word_lists = [[w.decode("utf-8") for w in row] for row in split.to_list()]
        return self.predict_word_lists(word_lists, batch_size=batch_size)

    def serving_module(self, preprocessor):
        return TokenClassifierServingModule(self, preprocessor)

    def export_metadata(self) -> dict:
        return super().export_metadata() | {
            "doc_stride": self.stride(),
            "feature_mode": self.feature_mode,
        }

    def get_config(self):
        config = super().get_config()
        config.pop("is_pair", None)
        config.update(
            {
                "dropout_rate": self.dropout_rate,
                "initializer_range": self.initializer_range,
                "doc_stride": self.doc_stride,
                "feature_mode": self.feature_mode,
                "lstm_units": self.lstm_units,
                "lstm_layers": self.lstm_layers,
            }
        )
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if "window_stride" in config:  # saved before the setting took SPEC's name, doc_stride
            config["doc_stride"] = config.pop("window_stride")
        return super().from_config(config)
