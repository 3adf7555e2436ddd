"""tiny_gpt.py — what the GPU machine's training scripts share (torch_ddp_train.py,
lightning_train.py, hf_trainer_train.py): their size arguments and a small GPT-2 with random
weights (transformers GPT2Config: nothing to download), with one rank's sequences made longer."""
from transformers import GPT2Config, GPT2LMHeadModel

VOCAB = 8192


def pair(text):
    a, b = text.split(":")
    return int(a), float(b)


def add_args(p):
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--longer", type=pair, help="R:F: rank R's sequences are F times longer")


def seq_of(a, rank):
    """The sequence length rank `rank` trains on."""
    return int(a.seq * a.longer[1]) if a.longer and a.longer[0] == rank else a.seq


def model(a, extra=0):
    """`extra` positions past the longest sequence: the tokens a generate call adds."""
    longest = int(a.seq * max(1.0, a.longer[1])) if a.longer else a.seq
    return GPT2LMHeadModel(GPT2Config(n_layer=a.layers, n_head=8, n_embd=a.width, vocab_size=VOCAB,
                                      n_positions=longest + extra))
