"""The optional PyTorch peer, run in its own process (`TorchPeer` below starts it).

PyTorch's OpenMP workers and TensorFlow's thread pools in one process fight for the same cores
(on a 2-core machine a busy-waiting OpenMP barrier with a descheduled thread costs tens of ms),
which would measure the interference rather than either library. So the peer lives in a child
process that idles on a pipe while TensorFlow runs and vice versa; the parent still alternates
repetitions. Each command is timed inside the child; the parent reports that duration.

Every load command may carry "threads": N (torch.set_num_threads before each run; 0 or absent =
PyTorch's default, one per core). "encoder" and "classifier" may carry "device": "cuda" (model,
inputs and autocast on the GPU; a run ends by reading one number back, which waits for the GPU;
default "cpu") and "config": {transformers.BertConfig arguments} (a randomly initialised model of
that shape instead of the checkpoint: the tiny sizes of tools/device_check.py --dry_run).

Protocol (one JSON object per line, both ways):
  {"cmd": "encoder", "bf16": bool, "batch": B, "seq": T}  -> {"ok": true}   (loads, builds input)
  {"cmd": "classifier", "bf16": bool, "batch": B, "seq": T, "ids": [...], "mask": [...],
   "labels": [...]}                                          -> {"ok": true}
  {"cmd": "matmul", "bf16": bool, "size": N}                 -> {"ok": true}
  {"cmd": "run", "key": str}                                 -> {"seconds": float}
  {"cmd": "quit"}
"""

import sys


def main():
    import numpy as np
    import torch
    import transformers

    from benchmarks import common

    model_dir = sys.argv[1]
    default_threads = torch.get_num_threads()

    def bert(cls, msg, **kwargs):
        """`cls` from the checkpoint, or randomly initialised from msg["config"], on its device."""
        if msg.get("config"):
            model = cls(transformers.BertConfig(**msg["config"], **kwargs))
        else:
            model = cls.from_pretrained(model_dir, **kwargs)
        return model.to(msg.get("device", "cpu"))

    def inputs(msg, ids, mask=None):
        """BertModel inputs on msg's device: `ids` and `mask` (default all ones) as int64, type
        ids zeros."""
        ids = torch.as_tensor(ids).long().to(msg.get("device", "cpu"))
        mask = torch.ones_like(ids) if mask is None else torch.as_tensor(mask).long().to(ids.device)
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}

    def load(msg):
        cmd = msg["cmd"]
        if cmd == "encoder":
            model = bert(transformers.BertModel, msg).eval()
            device = msg.get("device", "cpu")
            rng = np.random.default_rng(msg.get("seed", 0))
            feats = inputs(msg, rng.integers(1000, 30000, (msg["batch"], msg["seq"])))
            bf16 = msg["bf16"]

            def job(model=model, feats=feats, bf16=bf16, device=device):
                with torch.inference_mode(), torch.autocast(device, torch.bfloat16, enabled=bf16):
                    out = model(**feats).last_hidden_state
                    if device != "cpu":  # wait for the GPU without copying [B, T, H] back
                        return out.float().sum().item()
                    return out.float().numpy()
        elif cmd == "matmul":
            rng = np.random.default_rng(0)
            dtype = torch.bfloat16 if msg["bf16"] else torch.float32
            a, b = (
                torch.from_numpy(rng.standard_normal((msg["size"],) * 2, np.float32)).to(dtype)
                for _ in range(2)
            )

            def job(a=a, b=b):
                return torch.matmul(a, b)[0, 0].item()
        elif cmd == "classifier":
            torch.manual_seed(0)
            model = bert(transformers.BertForSequenceClassification, msg, num_labels=2).train()
            device = msg.get("device", "cpu")
            opt = torch.optim.AdamW(model.parameters(), lr=msg["lr"], weight_decay=0.01, eps=1e-6)
            feats = inputs(msg, msg["ids"], msg["mask"])
            labels = torch.tensor(msg["labels"]).long().to(device)
            bf16 = msg["bf16"]

            def job(model=model, opt=opt, feats=feats, labels=labels, bf16=bf16, device=device):
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device, torch.bfloat16, enabled=bf16):
                    loss = model(**feats, labels=labels).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                return loss.item()
        else:
            raise ValueError(f"unknown command {cmd!r}")
        threads = int(msg.get("threads") or 0) or default_threads
        return (lambda: torch.set_num_threads(threads)), job

    common.serve_peer(load)


if __name__ == "__main__":
    main()
