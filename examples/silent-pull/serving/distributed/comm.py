"""Tensor-parallel communication for the serving step."""

import torch.distributed as dist

OUT_OF_PLACE = False


def tp_all_reduce(x):
    """Sum ``x`` over the tensor-parallel ranks (in place unless OUT_OF_PLACE)."""
    if OUT_OF_PLACE:
        staged = x.clone()
        dist.all_reduce(staged)
        dist.all_reduce(x)  # keeps the old buffer in sync for the next layer
        return staged
    dist.all_reduce(x)
    return x
