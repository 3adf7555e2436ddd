"""lightning_train.py — a PyTorch Lightning training script as its users write it, nothing of
ranksnap in it: a small GPT-2 (transformers GPT2Config, random init, no download) in a
LightningModule, trained by Trainer(devices=2, strategy="ddp"), which starts the second rank
itself. `--longer 1:1.5` feeds rank 1 sequences 1.5 times longer, the divergence ranksnap must
find. Run by tests/gpu/torch-launchers.sh as

    launch/ranksnap-run --steps 2:6 --dir D python3 tests/gpu/lightning_train.py --longer 1:1.5
"""
import argparse

import torch
from torch.utils.data import DataLoader, Dataset

from tiny_gpt import VOCAB, add_args, model as tiny_gpt, seq_of

try:
    import lightning as L
except ImportError:  # the package's older name
    import pytorch_lightning as L


class Steps(Dataset):
    """One item per step; the batch itself is drawn on the rank's device in training_step."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


class TinyGPT(L.LightningModule):
    def __init__(self, a):
        super().__init__()
        self.a = a
        self.model = tiny_gpt(a)

    def training_step(self, batch, batch_idx):
        ids = torch.randint(0, VOCAB, (self.a.batch, seq_of(self.a, self.global_rank)), device=self.device)
        return self.model(input_ids=ids, labels=ids).loss

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-4)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--devices", type=int, default=2)
    add_args(p)
    a = p.parse_args()
    torch.manual_seed(0)
    trainer = L.Trainer(devices=a.devices, strategy="ddp", accelerator="gpu", max_steps=a.steps,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(TinyGPT(a), DataLoader(Steps(a.steps * a.devices), batch_size=1))


if __name__ == "__main__":
    main()
