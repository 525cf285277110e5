"""Where the compiled kernels' machine code is cached, and how a kernel module is loaded so that
no cache problem ever stops a fit.

numba writes a kernel's machine code beside its source (``__pycache__``), else in the user's
cache directory; a read-only install run with an unwritable HOME has neither, and numba then
refuses to compile at all. :func:`load_kernel_module` therefore tries, in order: numba's own
places (beside the source, then the platform's user cache directory), a private per-user
directory under the temporary directory, and compiling in memory (nothing written). A damaged
entry (an interrupted write, a full disk) is discarded and compiled again. Each fallback is
said once, in one :class:`KernelCacheWarning`.

The first load holds a file lock, so that processes starting together compile once and the
others read the cache. The lock lives in that private directory (mode 0700, owned by the user,
opened without following links); where it cannot be taken, the load goes on without it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import stat
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from types import ModuleType

try:
    import fcntl
except ImportError:  # not POSIX: no lock, concurrent first loads each compile
    fcntl = None

__all__ = ["load_kernel_module", "on_disk", "private_dir", "KernelCacheWarning"]

_MEMORY = ""  # the last place: no cache directory at all
_on_disk = True  # read by the kernel modules' decorators while they are imported
_loading = threading.Lock()


class KernelCacheWarning(UserWarning):
    """The compiled kernels' cache was not where numba looks first, or was damaged."""


def on_disk() -> bool:
    """Whether the kernel module now being imported may cache its machine code on disk
    (``cache=on_disk()`` in its decorators; ``False`` while compiling in memory).

    >>> on_disk()  # no kernel module is being compiled in memory now
    True
    """
    return _on_disk


def private_dir() -> str | None:
    """``<tmp>/mixfold-<uid>``: this user's directory (mode 0700, made if missing), or ``None``
    where what is there is not a directory of this user's that only they can open (a planted
    link or directory) or none can be made.

    >>> folder = private_dir()
    >>> folder is None or (os.stat(folder).st_mode & 0o777, os.stat(folder).st_uid) == (
    ...     0o700, os.getuid())
    True
    """
    path = os.path.join(tempfile.gettempdir(), f"mixfold-{os.getuid()}")
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    mine = stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
    return path if mine and not st.st_mode & 0o077 else None


def load_kernel_module(name: str) -> ModuleType:
    """Import the kernel module ``name`` (compiling its kernels, or reading them from the cache)
    under the first-load lock, at the first place that works; raises only when even compiling
    in memory fails (numba itself broken)."""
    source = importlib.util.find_spec(name).origin
    with _loading, _first_load_lock():
        refused: list[str] = []
        for place in _places():
            with _caching_at(place):
                fresh = place == _MEMORY or not _entries(source)
            try:
                module = _import_at(name, source, place)
            except Exception as exc:  # any failure of this place: the next one
                refused.append(f"{_describe(place)} ({type(exc).__name__}: {exc})")
                if place == _MEMORY:
                    raise
                continue
            if refused and fresh:  # said when the fallback is first filled, not every process
                warnings.warn(f"mixfold: the compiled kernels of {name} could not be cached in "
                              f"{refused[0]}; they are {_describe(place)}", KernelCacheWarning,
                              stacklevel=3)
            return module
    raise AssertionError("unreachable: the last place raises")


def _places() -> Iterator[str | None]:
    yield None  # numba's own choice (NUMBA_CACHE_DIR, beside the source, the user cache)
    private = private_dir()
    if private is not None:
        yield os.path.join(private, "numba-cache")
    yield _MEMORY


def _describe(place: str | None) -> str:
    if place is None:
        return "numba's cache directories (beside the source, then the user cache directory)"
    return "compiled in memory (nothing written)" if place == _MEMORY else f"cached in {place}"


def _import_at(name: str, source: str, place: str | None) -> ModuleType:
    """Import ``name`` with numba caching at ``place``; a damaged entry there is discarded and
    the import tried once more."""
    with _caching_at(place):
        try:
            return importlib.import_module(name)
        except OSError:  # an unwritable or full directory: nothing to discard
            sys.modules.pop(name, None)
            raise
        except Exception as exc:
            sys.modules.pop(name, None)
            if _compile_error(exc):  # the kernel's own source is wrong: no cache to blame
                raise
            discarded = _discard_entries(source) if place != _MEMORY else []
            if not discarded:
                raise
            names = ", ".join(os.path.basename(p) for p in discarded)
            warnings.warn(f"mixfold: the compiled-kernel cache of {name} was damaged "
                          f"({type(exc).__name__}: {exc}); discarded {names} in "
                          f"{os.path.dirname(discarded[0])} and compiling again",
                          KernelCacheWarning, stacklevel=5)
        return importlib.import_module(name)


def _compile_error(exc: Exception) -> bool:
    """Whether numba refused the kernel's source (a typing or lowering error): a developer's
    bug that discarding the cache would only hide behind a 'damaged' warning."""
    errors = sys.modules.get("numba.core.errors")
    return errors is not None and isinstance(exc, errors.NumbaError)


@contextlib.contextmanager
def _caching_at(place: str | None) -> Iterator[None]:
    """numba caches at ``place`` during the block only (the user's own kernels keep theirs)."""
    global _on_disk
    import numba

    saved = numba.config.CACHE_DIR
    if place:
        numba.config.CACHE_DIR = place
    _on_disk = place != _MEMORY
    try:
        yield
    finally:
        numba.config.CACHE_DIR = saved
        _on_disk = True


def _entries(source: str) -> list[str]:
    """The cache entries (index and data files) of the kernels defined in ``source`` where numba
    now looks for them (none where it cannot cache)."""
    from numba.core import caching

    stem = os.path.splitext(os.path.basename(source))[0] + "."
    try:
        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # (renamed in 0.68)
        for locator in impl._locator_classes:  # numba's own search order
            found = locator.from_function(_entries, source)
            if found is not None:
                folder = found.get_cache_path()
                return [os.path.join(folder, f) for f in sorted(os.listdir(folder))
                        if f.startswith(stem) and f.endswith((".nbi", ".nbc"))]
    except (AttributeError, OSError):  # another numba's internals, a vanished directory
        pass
    return []


def _discard_entries(source: str) -> list[str]:
    """Delete :func:`_entries` of ``source``; returns their paths."""
    entries = _entries(source)
    for path in entries:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    return entries


@contextlib.contextmanager
def _first_load_lock() -> Iterator[None]:
    """An exclusive lock on ``numba.lock`` in :func:`private_dir`, released at the end; none
    where it cannot be opened or taken (the load then runs unlocked: at worst two processes
    both compile)."""
    fd = _open_lock()
    try:
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)  # released when the descriptor closes
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _open_lock() -> int | None:
    folder = private_dir()
    if fcntl is None or folder is None:
        return None
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    except OSError:
        return None
    try:  # a link, a directory or another user's file planted there: no lock
        return os.open("numba.lock", os.O_RDWR | os.O_CREAT | nofollow, 0o600, dir_fd=dir_fd)
    except OSError:
        return None
    finally:
        os.close(dir_fd)
