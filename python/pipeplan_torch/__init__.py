"""PyTorch in the loop for pipeplan: profile a model, probe a topology, run a plan and check it.

Command line: ``python3 -m pipeplan_torch profile|probe|run`` or the
``pipeplan-torch`` entry point of the pip package (see docs/torch.md). Uses only
torch (1.13 or 2.x) and the standard library.
"""

__version__ = "0.1.0"
