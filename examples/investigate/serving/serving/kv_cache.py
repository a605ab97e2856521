"""KV-cache block writes for the serving step."""

import torch

STAGE_COPY = False


def write_block(nbytes, device):
    """Allocate a block of ``nbytes``, fill it, and let it go (freed when it leaves scope)."""
    block = torch.empty(nbytes, dtype=torch.uint8, device=device)
    block.fill_(1)
    if STAGE_COPY:
        staged = block.clone()  # a staged copy for the asynchronous writer
        staged.add_(1)
    return None
