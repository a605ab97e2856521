"""``python -m forensics`` is the ``forensics`` command."""

from forensics.cli import run

if __name__ == "__main__":
    run()
