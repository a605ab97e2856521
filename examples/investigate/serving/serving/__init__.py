"""The stand-in serving package of the investigate scenarios."""
