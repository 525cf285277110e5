"""Output files: written beside their target and renamed into place only when complete.

Every file mixfold writes (a model, a checkpoint, the CLI's predictions, per-row scores and
plots) goes through :func:`atomic_output`: a temporary file in the target's folder, flushed to
disk, then renamed over the target, so a reader sees the old file or the new one, never a half
of either, even if the writer fails on a later block or is killed mid-write. Before any work
starts, :func:`check_destination` refuses a target that is one of the inputs (the same file by
device and inode, whatever the path says), a folder, or a file in a folder that is missing or
not writable.

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
>>> with atomic_output(path) as fh:
...     _ = fh.write("complete")
>>> open(path).read()
'complete'
>>> try:
...     with atomic_output(path) as fh:
...         _ = fh.write("half")
...         raise RuntimeError("a later block failed")
... except RuntimeError:
...     pass
>>> open(path).read(), os.listdir(os.path.dirname(path))
('complete', ['out.txt'])
"""

from __future__ import annotations

import errno
import glob
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, stale temporary files are left alone
    fcntl = None  # type: ignore[assignment]

__all__ = ["atomic_output", "check_destination", "locked_temporary"]

_TEMPORARY = ".{name}.mixfold-{tag}.tmp"


def check_destination(path: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (),
                      option: str = "--out") -> None:
    """Refuse, before any work, an output ``path`` that is one of ``inputs`` (or a file inside
    an input folder), a folder, or a file whose folder is missing or not writable.

    Raises ``OSError`` (``FileExistsError``, ``IsADirectoryError``, ``FileNotFoundError``,
    ``PermissionError``) with one line naming ``option``. A character device or a FIFO (a
    pipe, ``/dev/null``) is written as a stream and is accepted unless it is an input.

    >>> import os, tempfile
    >>> data = os.path.join(tempfile.mkdtemp(), "data.csv")
    >>> _ = open(data, "w").write("x\\n1\\n")
    >>> check_destination(os.path.join(os.path.dirname(data), ".", "data.csv"), [data])
    Traceback (most recent call last):
    ...
    FileExistsError: --out '...data.csv' is the input '...data.csv': writing it would destroy it
    """
    target = Path(os.path.realpath(path))
    try:
        mine = os.stat(target)
    except FileNotFoundError:
        mine = None
    for source in inputs:
        if mine is not None and _is_input(mine, source):
            raise FileExistsError(f"{option} {str(path)!r} is the input {str(source)!r}: "
                                  f"writing it would destroy it")
    if mine is not None and stat.S_ISDIR(mine.st_mode):
        raise IsADirectoryError(f"{option} {str(path)!r} is a folder, not a file")
    if mine is not None and (stat.S_ISCHR(mine.st_mode) or stat.S_ISFIFO(mine.st_mode)):
        return  # streamed into, never replaced: its folder need not be writable
    folder = target.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{option} {str(path)!r}: the folder {str(folder)!r} does not "
                                f"exist")
    try:  # a real file, not os.access: root ignores modes but not a read-only file system
        fd, probe = locked_temporary(target)
    except OSError as err:
        raise PermissionError(f"{option} {str(path)!r}: the folder {str(folder)!r} is not "
                              f"writable ({err.strerror}; the file is written beside its "
                              f"target, then renamed)") from None
    os.close(fd)
    os.unlink(probe)


def _is_input(mine: os.stat_result, source: str | os.PathLike) -> bool:
    """Whether the file ``mine`` is ``source`` or one of the files of the folder ``source``."""
    try:
        theirs = os.stat(source)
    except OSError:
        return False
    if (theirs.st_dev, theirs.st_ino) == (mine.st_dev, mine.st_ino):
        return True
    if not stat.S_ISDIR(theirs.st_mode):
        return False
    for folder, _, files in os.walk(source):
        for name in files:
            try:
                found = os.stat(os.path.join(folder, name))
            except OSError:
                continue
            if (found.st_dev, found.st_ino) == (mine.st_dev, mine.st_ino):
                return True
    return False


@contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w",
                  what: str = "a file") -> Iterator[IO[Any]]:
    """A file object whose contents replace ``path`` only when the block ends without error.

    A regular file (or a new path) is written to a temporary file in the same folder, flushed
    (fsync), then renamed over it; the new file keeps the old file's permissions, or gets the
    umask for a new path. A symbolic link is followed and its target replaced. A character
    device or a FIFO is written as a stream, never replaced; a socket, a block device or a
    folder is refused with an ``OSError`` saying it cannot hold ``what``. On an error the
    temporary file is removed and the target is as it was. The temporary file is named
    ``.<name>.mixfold-<random>.tmp``; one left behind by a killed writer is removed by the next
    write of the same path.
    """
    target = Path(os.path.realpath(path))  # a symlink's target is what the user means to write
    try:
        old_mode: int | None = os.stat(target).st_mode
    except FileNotFoundError:
        old_mode = None
    if old_mode is not None and not stat.S_ISREG(old_mode):
        with _special_stream(target, old_mode, mode, what, Path(path)) as fh:
            yield fh
        return
    _remove_stale_temporaries(target)
    fd, tmp = locked_temporary(target)
    try:
        with os.fdopen(fd, mode) as fh:  # closing it releases the lock
            if old_mode is not None:  # keep a file's permissions (a private model stays private)
                os.fchmod(fh.fileno(), stat.S_IMODE(old_mode))
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
    _fsync_directory(target.parent)


@contextmanager
def _special_stream(target: Path, mode: int, open_mode: str, what: str,
                    path: Path) -> Iterator[IO[Any]]:
    """Stream into a character device or a FIFO; refuse any other non-regular file."""
    if not (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)):
        kind = ("a directory" if stat.S_ISDIR(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a block device" if stat.S_ISBLK(mode) else "not a regular file")
        raise OSError(errno.EINVAL, f"cannot write {what} to {kind}", str(path))
    try:  # non-blocking open: a FIFO nobody reads is an error, not a hang
        fd = os.open(target, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except OSError as err:
        if err.errno == errno.ENXIO:
            raise OSError(errno.ENXIO, "no process is reading from this FIFO", str(path)) \
                from None
        raise
    os.set_blocking(fd, True)
    with os.fdopen(fd, open_mode) as fh:
        yield fh


def locked_temporary(target: Path) -> tuple[int, str]:
    """A new temporary file beside ``target`` (permissions from the umask), opened and held
    under an exclusive lock for as long as it is open: the lock tells live writers from dead."""
    while True:
        tmp = str(target.with_name(_TEMPORARY.format(name=target.name,
                                                     tag=secrets.token_hex(4))))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                     0o666)
        if fcntl is None:
            return fd, tmp
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:  # a cleaner may have removed it before the lock was taken: start over
            if os.stat(tmp).st_ino == os.fstat(fd).st_ino:
                return fd, tmp
        except FileNotFoundError:
            pass
        os.close(fd)


def _remove_stale_temporaries(target: Path) -> None:
    """Remove temporary files of ``target`` whose writer is gone (nobody holds their lock)."""
    if fcntl is None:
        return
    pattern = _TEMPORARY.format(name=glob.escape(target.name), tag="*")
    for stale in glob.glob(os.path.join(glob.escape(str(target.parent)), pattern)):
        try:
            fd = os.open(stale, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.unlink(stale)
        except OSError:  # locked: a live writer's file
            pass
        finally:
            os.close(fd)


def _fsync_directory(directory: Path) -> None:
    try:  # makes the rename itself durable; not every platform can open a directory
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
