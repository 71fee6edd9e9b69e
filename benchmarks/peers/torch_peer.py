"""The optional PyTorch peer (Hugging Face `BertModel` on PyTorch), run in its own process so that
PyTorch's and TensorFlow's thread pools do not compete (`common.peer` starts it). Each
command is timed inside the child; the parent reports that duration. The line protocol and its
commands ("encoder", "classifier", "matmul"): README.md here. Started as

    python -m benchmarks.peers.torch_peer MODEL_DIR
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
