"""``python -m forensics`` is the ``forensics`` command."""

from forensics.cli import main

if __name__ == "__main__":
    main()
