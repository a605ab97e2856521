"""Output files: where an ``-o`` really writes, the check before any work, and the one atomic writer.

Every file forensics writes for the user (snapshots, bench files, env files, fleet files, reports,
``--prom`` files) goes through :func:`atomic_writer` (or :func:`write_atomic`, its one-string form).
The rules, the same for every command (docs/snapshot-format.md, "Output files"):

- **Symbolic links are written through.** ``-o link.json`` where ``link.json`` points at
  ``data/s.json`` replaces ``data/s.json`` (atomically, keeping its mode) and leaves the link as
  it was; a dangling link is written through the same way (its target is created). This is what
  ``cp``, ``sed -i --follow-symlinks`` and most editors do.
- **Devices, FIFOs and sockets are written in place**: ``/dev/null``, ``/dev/stdout``, a named
  pipe, anything reached through ``/proc`` or ``/dev``. Renaming a temp file over them would
  replace the device or pipe with a regular file (as root, ``/dev/null`` itself).
- **A regular file is replaced atomically**: a temp file in the same folder, then a rename; a
  crash never leaves half a file. A new file gets ``0o666 & ~umask`` (never mkstemp's 0600: other
  users of a shared folder read it as they read any other file), a replaced file keeps its mode.
- **A path the system refuses** (a folder the user cannot search, a name over NAME_MAX, a file
  where a folder should be, a loop of links) is one :class:`~forensics.errors.BadInputError` line
  naming the path, the reason (``strerror``) and the option, never an ``OSError`` traceback.

May import ``forensics.errors`` and the standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path
from typing import IO, Iterator

from forensics.errors import BadInputError

MAX_LINKS = 40
"""Links followed before giving up (the kernel's own limit, ``MAXSYMLINKS``)."""
_IN_PLACE_ROOTS = ("/proc/", "/dev/")


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def output_target(path: Path) -> tuple[Path, bool]:
    """Where an output named ``path`` is written, and whether it is written in place.

    Follows symbolic links one at a time (``os.lstat``, ``os.readlink``), as ``open()`` would.

    Returns:
        ``(target, in_place)``: ``target`` is ``path`` itself, or the file its links end at (which
        may not exist yet: a dangling link); ``in_place`` is True when that is not a regular
        file or folder (a device, FIFO, socket) or a link leads through ``/proc`` or ``/dev``
        (``/dev/stdout``): then ``path`` itself is opened and written.

    Raises:
        OSError: the system refuses to look (EACCES on a folder, ENAMETOOLONG, ENOTDIR, ELOOP).
    """
    given = Path(path)
    p = given
    for _ in range(MAX_LINKS):
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            return p, False  # a new file (its folder is checked by the writer)
        if stat.S_ISLNK(st.st_mode):
            if str(p).startswith(_IN_PLACE_ROOTS) or str(os.path.abspath(p)).startswith(
                _IN_PLACE_ROOTS
            ):
                return given, True  # /dev/stdout -> /proc/self/fd/1: whatever fd 1 is
            p = p.parent / os.readlink(p)
            continue
        if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
            return p, False
        return given, True
    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(given))


def written_in_place(path: Path) -> bool:
    """True when ``path`` is written where it is (:func:`output_target`): a device, a FIFO, a socket,
    ``/dev/stdout``; False for a regular file, a new name, or a path the system refuses (the writer
    then names the problem). Never raises."""
    try:
        return output_target(Path(path))[1]
    except OSError:
        return False


def path_error(path: Path, exc: OSError, option: str = "-o", doing: str = "write") -> BadInputError:
    """The one-line error for an ``OSError`` met on an output (or input) path.

    ``doing`` is ``write`` or ``read``. A name over the system's limit says so and how long the
    name is; a missing folder (or a file where a folder should be) reads as :func:`no_folder`;
    anything else is ``PATH: cannot <doing> (<strerror>); choose another <option>``.
    """
    path = Path(path)
    if exc.errno == errno.ENAMETOOLONG:
        longest = max((len(os.fsencode(part)) for part in path.parts), default=0)
        fix = (
            f"choose a shorter {option}" if doing == "write" else "rename it or give a shorter path"
        )
        return BadInputError(
            f"{_short(path)}: file name too long ({longest} bytes; the limit is usually 255 per "
            f"name, 4096 per path); {fix}"
        )
    if doing == "write" and exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return BadInputError(no_folder(path, option))
    fix = f"; choose another {option}" if doing == "write" else ""
    return BadInputError(f"{path}: cannot {doing} ({exc.strerror or exc}){fix}")


def _short(path: Path) -> str:
    """``path`` with any name over 60 characters shown as its start and end (a 300-character name
    would fill the line)."""
    text = str(path)
    return text if len(text) <= 120 else f"{text[:50]}...{text[-50:]}"


def no_folder(path: Path, option: str = "-o") -> str:
    """The one-line error for an output whose folder is not a folder: missing, or a file of that name."""
    folder = _folder(Path(path))
    try:
        exists = folder.exists()
    except OSError:
        exists = False
    if exists:
        return f"{path}: {folder} is a file, not a folder; choose another {option}"
    return f"{path}: folder {folder} does not exist; create it or choose another {option}"


def _no_folder_through(path: Path, target: Path, option: str) -> str:
    """:func:`no_folder` for ``target``, saying which link led there when ``path`` is a link."""
    line = no_folder(target, option)
    return line if target == path else f"{path} is a link to {line}"


def check_writable(path: Path, option: str = "-o") -> None:
    """Fail now, before any work, if ``path`` cannot be written.

    A regular file (or a new name, or a link's target) is checked by creating and at once removing
    a temp file in its folder, which is what :func:`atomic_writer` will do; an output written in
    place by ``os.access(W_OK)`` (a FIFO is not opened: that would wait for a reader).

    Raises:
        BadInputError: the folder is missing, not searchable or read-only, the name is too long,
            the path is a folder, or the target is not writable.
    """
    path = Path(path)
    try:
        target, in_place = output_target(path)
        if in_place:
            if not stat.S_ISFIFO(os.stat(path).st_mode) and not os.access(path, os.W_OK):
                raise BadInputError(f"{path}: not writable; choose another {option}")
            return
        if target.is_dir():
            raise BadInputError(f"{path}: is a folder; give a file name")
        folder = _folder(target)
        if not folder.is_dir():
            raise BadInputError(_no_folder_through(path, target, option))
        fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(target), suffix=".check", dir=folder)
    except OSError as exc:
        raise path_error(path, exc, option) from None
    os.close(fd)
    _unlink_quietly(tmp)


@contextlib.contextmanager
def atomic_writer(path: Path, option: str = "-o") -> Iterator[IO[str]]:
    """A text file (UTF-8) whose content becomes ``path`` when the block ends without an exception.

    The rules of the module docstring: links written through, devices and FIFOs in place, a regular
    file replaced by a rename of a temp file written in the target's folder (mode kept, or
    ``0o666 & ~umask`` for a new file). On an exception in the block the temp file is removed and
    the old file, if any, is unchanged.

    Raises:
        BadInputError: the path is refused (:func:`path_error`), or a write fails (a full disk, a
            quota): one line, the old file unchanged.
    """
    path = Path(path)
    try:
        target, in_place = output_target(path)
    except OSError as exc:
        raise path_error(path, exc, option) from None
    if in_place:
        try:
            with open(path, "w", encoding="utf-8") as fh:
                yield fh
        except OSError as exc:
            raise BadInputError(
                f"{path}: cannot write ({exc.strerror or exc}); choose another {option}"
            ) from None
        return
    folder = _folder(target)
    try:
        if not folder.is_dir():
            raise BadInputError(_no_folder_through(path, target, option))
        if target.is_dir():
            raise BadInputError(f"{path}: is a folder; give a file name")
        fd, tmp = tempfile.mkstemp(prefix=_tmp_prefix(target), suffix=".tmp", dir=folder)
    except OSError as exc:
        raise path_error(path, exc, option) from None
    try:
        os.fchmod(fd, _file_mode(target))
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            yield fh
        os.replace(tmp, target)
    except OSError as exc:
        _unlink_quietly(tmp)
        raise BadInputError(
            f"{path}: cannot write ({exc.strerror or exc}); the old file, if any, is unchanged"
        ) from None
    except BaseException:
        _unlink_quietly(tmp)
        raise


def write_atomic(path: Path, text: str, option: str = "-o") -> None:
    """Write ``text`` to ``path`` with :func:`atomic_writer` (same rules, same errors)."""
    with atomic_writer(path, option) as fh:
        fh.write(text)


def _tmp_prefix(target: Path) -> str:
    """``.<name>.`` for the temp file beside ``target``, the name cut to 200 bytes so that a name near
    the system's 255-byte limit still leaves room for mkstemp's random part and suffix."""
    name = (
        os.fsencode(target.name)[:200].decode("utf-8", "ignore")
        if len(os.fsencode(target.name)) > 200
        else target.name
    )
    return f".{name}."


def _file_mode(path: Path) -> int:
    """The mode the file at ``path`` gets: an existing regular file's own mode (replacing it keeps it),
    else ``0o666 & ~umask`` as ``open()`` would give (``os.stat``, ``os.umask``); never mkstemp's 0600."""
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
