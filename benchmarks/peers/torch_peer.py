"""The PyTorch peer (Hugging Face `BertModel` on PyTorch), in its own process so that PyTorch's and
TensorFlow's thread pools do not compete (`common.peer` starts it); each command is timed inside
the child. The line protocol and its commands ("encoder", "classifier", "matmul"): README.md here.

    python -m benchmarks.peers.torch_peer MODEL_DIR
"""

import sys


def main():
    import numpy as np
    import torch
    import transformers

    from benchmarks import common, peers

    default_threads = torch.get_num_threads()

    def load(msg):
        peers.check_command(msg, ("encoder", "classifier", "matmul"))
        device, bf16 = msg.get("device", "cpu"), msg["bf16"]

        def bert(cls, **kwargs):  # the checkpoint, or randomly initialised from msg["config"]
            if msg.get("config"):
                return cls(transformers.BertConfig(**msg["config"], **kwargs)).to(device)
            return cls.from_pretrained(sys.argv[1], **kwargs).to(device)

        def inputs(ids, mask=None):  # int64 on the device; mask default all ones, type ids zeros
            ids = torch.as_tensor(ids).long().to(device)
            mask = torch.ones_like(ids) if mask is None else torch.as_tensor(mask).long().to(device)
            return {
                "input_ids": ids,
                "attention_mask": mask,
                "token_type_ids": torch.zeros_like(ids),
            }

        if msg["cmd"] == "encoder":
            model = bert(transformers.BertModel).eval()
            rng = np.random.default_rng(msg.get("seed", 0))
            feats = inputs(rng.integers(1000, 30000, (msg["batch"], msg["seq"])))

            def job():
                with torch.inference_mode(), torch.autocast(device, torch.bfloat16, enabled=bf16):
                    out = model(**feats).last_hidden_state
                    if device != "cpu":  # wait for the GPU without copying [B, T, H] back
                        return out.float().sum().item()
                    return out.float().numpy()
        elif msg["cmd"] == "matmul":
            rng = np.random.default_rng(0)
            dtype = torch.bfloat16 if bf16 else torch.float32
            a, b = (
                torch.from_numpy(rng.standard_normal((msg["size"],) * 2, np.float32)).to(dtype)
                for _ in range(2)
            )

            def job():
                return torch.matmul(a, b)[0, 0].item()
        else:  # "classifier": one AdamW training step
            torch.manual_seed(0)
            model = bert(transformers.BertForSequenceClassification, num_labels=2).train()
            opt = torch.optim.AdamW(model.parameters(), lr=msg["lr"], weight_decay=0.01, eps=1e-6)
            feats = inputs(msg["ids"], msg["mask"])
            labels = torch.tensor(msg["labels"]).long().to(device)

            def job():
                opt.zero_grad(set_to_none=True)
                with torch.autocast(device, torch.bfloat16, enabled=bf16):
                    loss = model(**feats, labels=labels).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                return loss.item()

        threads = int(msg.get("threads") or 0) or default_threads
        return (lambda: torch.set_num_threads(threads)), job

    common.serve_peer(load)


if __name__ == "__main__":
    main()
