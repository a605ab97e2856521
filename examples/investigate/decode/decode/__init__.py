"""The stand-in decode package of the remembered-baseline scenarios."""
