"""Rendering: terminal (rich), HTML and Markdown (Jinja2), JSON. Reads core objects only."""
