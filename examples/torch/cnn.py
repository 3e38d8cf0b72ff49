"""A small CNN for pipeplan_torch: four convolution layers and a classifier on 16x16 RGB
images of ten classes.

    python3 -m pipeplan_torch profile examples/torch/cnn.py:build -o cnn.model.json

Plain torch, nothing downloaded; the images and labels are seeded random tensors. No batch
normalisation (its statistics would depend on the micro-batch, so a pipeline run could not
equal single-process training on the global batch: run --check would say so).
"""

import collections

import torch
from torch import nn
from torch.nn import functional as F

CLASSES = 10
SIZE = 16


def conv(channels_in, channels_out, pool):
    layers = [nn.Conv2d(channels_in, channels_out, 3, padding=1), nn.ReLU()]
    if pool:
        layers.append(nn.MaxPool2d(2))
    return nn.Sequential(*layers)


def make_micro_batch(batch_size, index):
    """Micro-batch `index`: random images and labels, seeded by the index."""
    generator = torch.Generator().manual_seed(2000 + index)
    images = torch.randn(batch_size, 3, SIZE, SIZE, generator=generator)
    labels = torch.randint(0, CLASSES, (batch_size,), generator=generator)
    return images, labels


def loss_fn(logits, labels):
    return F.cross_entropy(logits, labels)


def build():
    torch.manual_seed(23)
    layers = collections.OrderedDict([
        ("conv1", conv(3, 16, pool=False)),
        ("conv2", conv(16, 32, pool=True)),
        ("conv3", conv(32, 32, pool=False)),
        ("conv4", conv(32, 64, pool=True)),
        ("classifier", nn.Sequential(nn.Flatten(), nn.Linear(64 * (SIZE // 4) ** 2, CLASSES))),
    ])
    return nn.Sequential(layers), make_micro_batch, loss_fn
