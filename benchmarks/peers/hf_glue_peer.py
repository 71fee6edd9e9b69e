"""The Hugging Face GLUE peer of `recipes/run_classifier.py` (`hf_peers.glue`; README.md)."""

import hf_peers  # this folder's, beside the script (run as one)

if __name__ == "__main__":
    hf_peers.glue()
