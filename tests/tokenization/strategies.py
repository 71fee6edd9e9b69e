"""hypothesis strategies for the tokenizer properties: any Unicode text, weighted toward what
BERT's tokenizers treat specially (PITFALLS.md, Tokenization).

`texts` joins words of these kinds with separators of every whitespace category:
- any code point but a surrogate (so control, format and private-use characters too);
- characters picked from the special cases: controls and format characters (deleted), combining
  marks (stripped when uncased), CJK ideographs (split one by one), punctuation, final sigma,
  NFKC-sensitive letters (ß, ligatures, full-width, super- and subscripts), emoji, tags;
- a literal special token ("[MASK]", "[SEP]", ...), which user text must never inject;
- long words around the 200-character limit, of one-byte and of multi-byte characters.
"""

import os

from hypothesis import strategies as st


def examples(default: int) -> int:
    """A property's max_examples: `default` in the suite; a long run sets
    KERAS_BERT_PROPERTY_EXAMPLES (docs/results/hardening.md, "Fuzzing: data readers, config
    files, tokenizers")."""
    return int(os.environ.get("KERAS_BERT_PROPERTY_EXAMPLES", default))


any_char = st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=("Cs",))
special_char = st.one_of(
    st.sampled_from(
        list(
            " \t\n\r\x00\x0b\x0c\x1c\x85\u00a0\u1680\u2028\u2029\u202f\u3000\u200b\u200d\ufffd"
            "\ufeff\u00ad\u0301\u0338\u0323\u20dd.,!?[]#$^`~\u00bf\u03a3\u03c3\u03c2"
            "AaÉéßİıǅﬁﬃＦ²₂½…″中カ한😀\U000e0041\U00020000\uf900"
        )
    ),
    st.characters(categories=("Cc", "Cf", "Mn", "Me", "Mc", "Zs", "Zl", "Zp", "Pd", "Po", "So")),
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK unified ideographs
)
SEPARATORS = " \t\n\r\u00a0\u3000\u2028\u2029\x85\x0b\x0c\u1680\u2003\u200b"
SPECIAL_TOKENS = ["[MASK]", "[SEP]", "[CLS]", "[UNK]", "[PAD]", "[mask]", "##ing", "[MASK]s"]

_run = st.text(alphabet=st.one_of(any_char, special_char), max_size=24)
_long_word = st.builds(
    lambda unit, n, tail: unit * n + tail,
    st.sampled_from(["a", "é", "ab", "x\u0301", "ß", "\U0001d49c", "Σ"]),
    st.integers(95, 210),
    st.sampled_from(["", "s", "é", "!"]),
)
# Long words are rarer than the rest: the reference spends about 12 ms on one.
_word = st.one_of(*[_run] * 6, st.sampled_from(SPECIAL_TOKENS), _long_word)
texts = st.builds(
    lambda words, seps: "".join(w + s for w, s in zip(words, seps)),
    st.lists(_word, max_size=10),
    st.lists(st.sampled_from(SEPARATORS), min_size=10, max_size=10),
)
