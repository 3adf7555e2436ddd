"""hf_trainer_train.py — a Hugging Face Trainer script as its users write it, nothing of ranksnap
in it: a small GPT-2 (GPT2Config, random init, no download) trained by transformers.Trainer on
random token ids, under `accelerate launch --multi_gpu --num_processes 2`. `--longer 1:1.5` makes
rank 1's examples 1.5 times longer (a dataset whose length depends on the rank, as a
length-bucketed sampler can give one rank the long sequences). Run by tests/gpu/torch-launchers.sh as

    launch/ranksnap-run --steps 2:6 --dir D accelerate launch --multi_gpu --num_processes 2 \
        tests/gpu/hf_trainer_train.py --longer 1:1.5
"""
import argparse
import os
import tempfile

import torch
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

from tiny_gpt import VOCAB, add_args, model as tiny_gpt, seq_of


class RandomTokens(Dataset):
    def __init__(self, n, seq, vocab):
        self.n, self.seq, self.vocab = n, seq, vocab

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        ids = torch.randint(0, self.vocab, (self.seq,), generator=g)
        return {"input_ids": ids, "labels": ids}


def main():
    p = argparse.ArgumentParser()
    add_args(p)
    a = p.parse_args()
    rank = int(os.environ.get("RANK", 0))  # accelerate launch starts its ranks as torchrun does
    torch.manual_seed(0)
    model = tiny_gpt(a)
    args = TrainingArguments(output_dir=tempfile.mkdtemp(prefix="hf-trainer-"), max_steps=a.steps,
                             per_device_train_batch_size=a.batch, learning_rate=1e-4,
                             report_to=[], save_strategy="no", logging_steps=1000,
                             dataloader_num_workers=0, disable_tqdm=True)
    Trainer(model=model, args=args,
            train_dataset=RandomTokens(a.steps * a.batch * 4, seq_of(a, rank), VOCAB)).train()


if __name__ == "__main__":
    main()
