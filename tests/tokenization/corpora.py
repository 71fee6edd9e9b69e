"""Text corpora shared by the tokenization tests: hard strings and real data readers."""

import csv
import json

HARD_STRINGS = [
    # accents, both cases
    "naïve café",
    "Naïve Café",
    "NAÏVE CAFÉ",
    "Ångström résumé über Øre",
    "ÀÉÎÕÜ àéîõü ñÑ çÇ",
    "e\u0301 combining acute",
    "A\u030a\u0323 stacked marks",
    "\u0301leading mark",
    # CJK + Latin, kana, Korean
    "你好world",
    "中文English混合123",
    "日本語のテキスト",
    "カタカナ ひらがな",
    "한국어 텍스트입니다",
    "\uf900\ufa0d compat ideographs",
    "\U00020000\U0002a6df ext B",
    # emoji
    "I ❤️ NY 😀👍🏽",
    "👨‍👩‍👧 family",
    "flag 🇫🇷",
    # zero-width / format / control characters, NUL, U+FFFD
    "zero\u200bwidth",
    "soft\u00adhyphen",
    "join\u200djoiner",
    "bom\ufeffinside",
    "rtl\u200fmark",
    "tab\tnew\nline\rcr",
    "bell\x07char",
    "nul\x00byte",
    "replace\ufffdchar",
    "\x00\x01\x02",
    "esc\x1bseq",
    "\x85next line",
    "line\u2028sep\u2029para",
    "tag\U000e0041chars",
    # word length limit (200 code points)
    "a" * 200,
    "a" * 201,
    "é" * 200,
    "é" * 201,
    "b" * 199 + "\u0301",
    "x " + "ab" * 101 + " y",
    # empty / whitespace only
    "",
    " ",
    "   \t\n ",
    "\u3000\u00a0\u2003",
    # punctuation runs
    "Hello!!! ...what?!",
    "--==**&&^^%%$$##@@",
    "«quoted» „german“ ‘single’",
    "a.b,c;d:e",
    "[MASK] [SEP] [CLS] [UNK]",
    "“smart quotes” — em-dash – en-dash",
    "¿Qué? ¡Sí!",
    # NBSP and other spaces
    "non\u00a0breaking",
    "thin\u2009space",
    "ideographic\u3000space",
    "narrow\u202fnbsp",
    # numbers with separators
    "1,234,567.89",
    "3.14159 2,5 1 000 000",
    "12:30pm 2020-01-01",
    "$100 €50 ¥1000 £5",
    # case-folding differences (NFKC vs reference)
    "ﬃ ligature",
    "Straße",
    "ＦＵＬＬ ｗｉｄｔｈ",
    "x² H₂O",
    "ΟΔΟΣ ΟΔΟΣ.",
    "İstanbul",
    "ǅemal",
    "Ⅻ roman",
    "℃ ㎏",
    "a≠b",
    "ΣΑΣ Σ",
    "µ micro",
    "ﬁnal",
    # misc scripts
    "Привет мир",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "Γειά σου Κόσμε",
    "unaffable",
    "unwanted running jumped",
    "supercalifragilisticexpialidocious",
]


def sst2_dev(data_dir):
    with open(data_dir / "glue" / "sst2" / "dev.tsv", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [r[0] for r in rows[1:]]


def squad_contexts(data_dir, n=2000):
    with open(data_dir / "squad" / "dev-v1.1.json", encoding="utf-8") as f:
        data = json.load(f)["data"]
    out = [p["context"] for a in data for p in a["paragraphs"]]
    return out[:n]


def conll_dev_sentences(data_dir):
    sents, cur = [], []
    with open(data_dir / "conll2003" / "valid.txt", encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                if cur:
                    sents.append(" ".join(cur))
                cur = []
                continue
            tok = line.split(" ")[0]
            if tok == "-DOCSTART-":
                continue
            cur.append(tok)
    if cur:
        sents.append(" ".join(cur))
    return sents
