"""A small GPT-style transformer for pipeplan_torch: token and position embedding, four
pre-norm decoder blocks (causal self-attention and a GELU MLP), and a language-model head.

    python3 -m pipeplan_torch profile examples/torch/gpt.py:build -o gpt.model.json

Plain torch, nothing downloaded; the data are seeded random token sequences, so the loss
measures nothing but the plumbing. No dropout and no batch-wide normalisation, so that a
pipeline run equals single-process training on the same global batch (run --check).
"""

import collections
import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 64
CONTEXT = 16
WIDTH = 32
HEADS = 2
BLOCKS = 4


class Embedding(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Parameter(0.02 * torch.randn(CONTEXT, WIDTH))

    def forward(self, tokens):
        return self.tokens(tokens) + self.positions[: tokens.shape[1]]


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(WIDTH)
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH)
        self.proj = nn.Linear(WIDTH, WIDTH)
        self.norm2 = nn.LayerNorm(WIDTH)
        self.mlp = nn.Sequential(nn.Linear(WIDTH, 4 * WIDTH), nn.GELU(),
                                 nn.Linear(4 * WIDTH, WIDTH))

    def attention(self, x):
        batch, length, width = x.shape
        q, k, v = self.qkv(x).split(width, dim=2)
        shape = (batch, length, HEADS, width // HEADS)
        q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(2, 3) / math.sqrt(width // HEADS)
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).triu(1)
        weights = scores.masked_fill(causal, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, length, width))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.out(self.norm(x))


def make_micro_batch(batch_size, index):
    """Micro-batch `index`: random token sequences (seeded by the index) and, as targets,
    the same sequences shifted by one token."""
    generator = torch.Generator().manual_seed(1000 + index)
    tokens = torch.randint(0, VOCAB, (batch_size, CONTEXT + 1), generator=generator)
    return tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def build():
    torch.manual_seed(17)
    layers = [("embed", Embedding())]
    layers += [(f"block{i}", Block()) for i in range(BLOCKS)]
    layers.append(("head", Head()))
    return nn.Sequential(collections.OrderedDict(layers)), make_micro_batch, loss_fn
