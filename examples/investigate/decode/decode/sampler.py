"""Next-token selection for the decode step."""

import torch


def next_token(hidden, weight):
    """Greedy next token: logits over the vocabulary, softmax, argmax."""
    logits = hidden @ weight.t()
    probs = torch.softmax(logits, dim=-1)
    return probs.argmax(dim=-1)
