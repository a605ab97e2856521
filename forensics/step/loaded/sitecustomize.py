"""Records which source files a Python process of the user's step loaded (forensics bench, issue 13).

``forensics bench --cmd/--callable`` prepends this folder to ``PYTHONPATH`` and sets
``FORENSICS_LOADED_DIR`` to a temporary folder, so every Python process of the step --
the command itself, ``torchrun``/``multiprocessing`` spawn workers (they inherit the
environment) and forked ``multiprocessing`` children -- writes, when it exits, one file
``<pid>.txt`` there: the ``__file__`` of every module in ``sys.modules`` that is not
under the interpreter's prefixes (the standard library and installed packages), one
real path a line, ``<pid>.pkgs``: the top-level names of the installed packages (under a
``site-packages`` or ``dist-packages`` folder) it imported, one a line, and ``<pid>.path``: the folders
on its ``sys.path`` (real paths, in order, this folder left out), where its distributions' metadata
lives. The benchmark keeps their unions as the result's ``loaded_files``, ``loaded_packages`` and
``python_paths``;
``forensics diff`` ranks a commit that touches only files the step never loaded lower.

The user's own ``sitecustomize`` (if any, later on ``sys.path``) still runs: it is
found without this folder and executed. Nothing here may raise: a failure to record
is a missing list, never a broken step. Standard library only.
"""

import atexit
import os
import sys

_DIR = os.environ.get("FORENSICS_LOADED_DIR", "")
_HERE = os.path.dirname(os.path.abspath(__file__))
_AT_START = frozenset(sys.modules)
"""Modules every process has before the step's code runs: the interpreter's own, and what the ``.pth``
files of site-packages import at start-up (setuptools' ``_distutils_hack``, namespace packages). They
are not packages the step imported."""


def _skip_prefixes():
    out = set()
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, getattr(sys, "base_exec_prefix", "")):
        if p:
            out.add(os.path.realpath(p) + os.sep)
    return tuple(sorted(out))


def _module_file(mod):
    """The module's source path: ``__file__``, else its loader's ``path``. The interpreter deletes
    ``__file__`` of the script it ran (``python step.py``) once the script returns, before atexit, so the
    step's own script is found only through ``__main__.__loader__.path`` (absolute since Python 3.9)."""
    f = getattr(mod, "__file__", None)
    if isinstance(f, str):
        return f
    return getattr(getattr(mod, "__loader__", None), "path", None)


def _write():
    if not _DIR:
        return
    try:
        skip = _skip_prefixes()
        files = set()
        packages = set()
        for name, mod in list(sys.modules.items()):
            f = _module_file(mod)
            if (
                not isinstance(f, str)
                or not os.path.isabs(f)
                or not f.endswith((".py", ".so", ".pyd"))
            ):
                continue  # torch._classes and the like carry a bare file name, not a path
            real = os.path.realpath(f)
            if real.startswith(_HERE + os.sep):
                continue
            if real.startswith(skip) or "site-packages" in real or "dist-packages" in real:
                if (
                    ("site-packages" in real or "dist-packages" in real)
                    and isinstance(name, str)
                    and name not in _AT_START
                ):
                    packages.add(name.split(".", 1)[0])  # an installed package the step imported
                if real.startswith(skip):
                    continue
            files.add(real)
        path = os.path.join(_DIR, f"{os.getpid()}.txt")
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write("\n".join(sorted(files)) + "\n")
        os.replace(path + ".tmp", path)
        path = os.path.join(_DIR, f"{os.getpid()}.pkgs")
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write("\n".join(sorted(packages)) + "\n")
        os.replace(path + ".tmp", path)
        folders = []
        for p in sys.path:
            real = os.path.realpath(p or os.curdir)
            if real != _HERE and real not in folders and os.path.isdir(real):
                folders.append(real)
        path = os.path.join(_DIR, f"{os.getpid()}.path")
        with open(path + ".tmp", "w", encoding="utf-8") as fh:
            fh.write("\n".join(folders) + "\n")
        os.replace(path + ".tmp", path)
    except Exception:
        pass


class _AfterFork:
    """A forked multiprocessing child skips atexit (os._exit); multiprocessing's own finalizers run instead."""

    def __call__(self, _obj=None):
        try:
            from multiprocessing import util

            util.Finalize(None, _write, exitpriority=0)
        except Exception:
            pass


_after_fork = _AfterFork()


def _install():
    if not _DIR:
        return
    atexit.register(_write)
    try:
        from multiprocessing import util

        util.register_after_fork(_after_fork, _AfterFork.__call__)
    except Exception:
        pass


def _chain_user_sitecustomize():
    try:
        import importlib.machinery
        import importlib.util

        rest = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(_HERE)]
        spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
        if (
            spec is None
            or spec.origin is None
            or os.path.realpath(spec.origin) == os.path.realpath(__file__)
        ):
            return
        mod = importlib.util.module_from_spec(spec)
        sys.modules["_forensics_user_sitecustomize"] = mod
        spec.loader.exec_module(mod)  # type: ignore[union-attr]
    except Exception:
        pass


_install()
_chain_user_sitecustomize()
