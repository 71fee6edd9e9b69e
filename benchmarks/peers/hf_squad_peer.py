"""The Hugging Face SQuAD peer of `recipes/run_squad.py` (`hf_peers.squad`; README.md)."""

import hf_peers  # this folder's, beside the script (run as one)

if __name__ == "__main__":
    hf_peers.squad()
