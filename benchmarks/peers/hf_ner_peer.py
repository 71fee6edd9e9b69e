"""The Hugging Face CoNLL-2003 NER peer of `recipes/run_ner.py` (`hf_peers.ner`; README.md)."""

import hf_peers  # this folder's, beside the script (run as one)

if __name__ == "__main__":
    hf_peers.ner()
