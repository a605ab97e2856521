"""``python -m forensics`` and the ``forensics`` console script (``forensics.__main__:main``).

The command line is imported inside :func:`main`, not when this module is: multiprocessing's
``spawn`` and ``forkserver`` start methods import the parent's main module again in every worker
they start (as ``__mp_main__``), and the workers of the nccl_env probe need neither click nor the
commands (what importing them cost each worker: docs/benchmarks.md, 'measured phase by phase').
"""


def main() -> None:
    """Run the ``forensics`` command line (:func:`_main`); exits with its code.

    Ctrl-C before the command line handles it itself (while its modules are imported) or after
    (while the helpers left are stopped) is the same one line, ``forensics: error: interrupted``,
    and exit code 130, as during a command; not a traceback.
    """
    try:
        _main()
    except KeyboardInterrupt:
        import sys

        sys.stderr.write("forensics: error: interrupted\n")
        sys.exit(130)


def _main() -> None:
    """Run the ``forensics`` command line (:func:`forensics.cli.run`); exits with its code.

    When the command is done the objects left are frozen (``gc.freeze``): the process is ending,
    and interpreter shutdown would otherwise walk them all with the cyclic collector (the exit's
    time before and after: docs/benchmarks.md, 'measured phase by phase').
    The command has written and closed its files before that;
    ``atexit`` handlers (temporary folders, logging, multiprocessing's helpers) still run after
    it. What it gives up: an object kept alive only by a reference cycle is not finalized at
    shutdown (nothing of forensics' relies on that: its files and folders are closed and removed
    in ``finally`` blocks and ``atexit`` handlers).

    A command that has written and closed everything may also skip the interpreter's teardown
    (:func:`forensics.cli.common.quick_exit`: threads joined, ``atexit`` handlers run, output flushed,
    then ``os._exit`` with the same code); ``forensics snapshot`` without ``--bench`` does.
    """
    import gc

    from forensics.cli import run

    try:
        run()
    except SystemExit as exc:
        gc.freeze()
        from forensics.cli.common import quick_exit

        quick_exit(
            exc.code
        )  # a command that allowed it ends here, without the interpreter's teardown
        raise
    finally:
        gc.freeze()


if __name__ == "__main__":
    main()
