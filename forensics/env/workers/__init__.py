"""Small entry points that forensics starts in fresh processes (``python -m forensics.env.workers.<name>``).

They import only the standard library at module level, so a fresh worker
costs one interpreter start and nothing more.
"""
