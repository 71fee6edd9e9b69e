"""The Hugging Face / PyTorch GLUE peer of `recipes/run_classifier.py`:
`hf_peers.glue` (see hf_peers.py)."""

import hf_peers  # this folder's, beside the script (run as one)

if __name__ == "__main__":
    hf_peers.glue()
