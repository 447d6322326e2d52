"""Files on disk: inputs that must be regular files, outputs that must not alias them.

Every reader opens its input through :func:`require_file`, so a missing
path, a directory or a device gets a message saying which. Every command
checks its output paths here before it reads or computes anything
(:func:`check_output`), and writes each output through
:func:`atomic_path`: a temporary file beside the target, renamed over it only
when complete, created with the mode the umask gives any new file (0644 under
umask 022) so results stay readable to a group on a shared cluster.

An output that is the same file as an input (same path after resolution, a
symbolic link to it, or a hard link) is refused: inputs are never overwritten.

A temporary file is named ``.<target>.<host>.<pid>.<random>.tmp``, so that a
later run can tell a leftover of a killed writer (same host, process gone)
from the file of a writer still at work, perhaps another run started in the
same folder at the same time (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import socket
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import InputError


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # elsewhere: set and restore (not thread-safe, fine for a CLI)
    os.umask(mask)
    return mask


def require_file(path: str | Path, what: str = "file") -> Path:
    """``path`` as a Path when it is an existing regular file (or a link to one)."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        raise InputError(path, "file", "no such file") from None
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a loop of links
        raise InputError(path, "file", f"cannot be opened ({getattr(exc, 'strerror', None) or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        raise InputError(path, "file", f"is a directory, not {what}")
    if not stat.S_ISREG(info.st_mode):
        raise InputError(path, "file", f"is not a regular file (a device, pipe or socket), not {what}")
    return path


def same_file(a: str | Path, b: str | Path) -> bool:
    """True when ``a`` and ``b`` name one file: equal after resolution, or one inode (hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def check_output(path: str | Path, inputs: Iterable[str | Path | None] = (), option: str = "--out") -> None:
    """Refuse an output path that aliases an input or cannot be written, before any work.

    Raises :class:`InputError` naming ``option`` when ``path`` is an input (by
    path, symlink or hard link), an existing directory, lies under a file, or
    in a folder this process cannot write.
    """
    if str(path) == "":
        raise InputError("''", option, "an empty path names no file")
    path = Path(path)
    if "\0" in str(path):
        raise InputError(repr(str(path)), option, "a path cannot hold a NUL byte")
    if len(os.fsencode(path.name)) > 255 or len(os.fsencode(os.path.abspath(path))) >= 4096:
        raise InputError(path, option, "the name or path is longer than the file system allows")
    for source in inputs:
        if source is not None and same_file(path, source):
            raise InputError(path, option, f"is the same file as the input {source}; inputs are never overwritten")
    if path.is_dir():
        raise InputError(path, option, "is a directory; name a file to write")
    if path.exists() and not path.is_file():  # replacing /dev/null or a FIFO would break the system
        raise InputError(path, option, "is a device, pipe or socket, not a file to write")
    folder = Path(os.path.abspath(path)).parent
    while not folder.exists() and not folder.is_symlink():
        folder = folder.parent
    if not folder.is_dir():
        raise InputError(path, option, f"{folder} is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise InputError(path, option, f"folder {folder} is not writable")


@contextlib.contextmanager
def atomic_path(path: str | Path, option: str = "--out") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it over ``path`` on success.

    The temporary file is removed on any failure, so no partial output is left;
    a folder that cannot be created or written is an :class:`InputError`.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        prefix = f".{path.name}.{_host()}.{os.getpid()}."
        if len(os.fsencode(prefix)) > 255 - 12:  # no room for the writer: the age rule alone applies
            prefix = f".{path.name}."
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(path, option, f"cannot write here ({exc.strerror or exc})") from None
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp creates 0600; a finished output follows the umask
        yield tmp_path
        try:
            os.replace(tmp_path, path)
        except OSError as exc:
            raise InputError(path, option, f"cannot replace ({exc.strerror or exc})") from None
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


# A temporary file untouched this long is a leftover even when its writer cannot be checked (another
# host of a cluster, or a name without pid and host): no write of ours pauses for a day.
STALE_AFTER_SECONDS = 24 * 3600


def _host() -> str:
    """This host's name as it goes into temporary file names: no dots (the name is split on them)."""
    return socket.gethostname().split(".")[0].replace(os.sep, "_")[:63] or "localhost"


def temporary_writer(temporary: str | Path, target: str | Path) -> tuple[str, int] | None:
    """(host, pid) of the process that made ``temporary`` for ``target``, or None if its name does not say."""
    name = Path(temporary).name
    prefix = f".{Path(target).name}."
    if not (name.startswith(prefix) and name.endswith(".tmp")):
        return None
    fields = name[len(prefix):-len(".tmp")].split(".")
    if len(fields) != 3 or not fields[1].isdigit():  # host, pid, mkstemp's random part
        return None
    return fields[0], int(fields[1])


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # it exists, owned by someone else
        return False
    return False


def is_stale_temporary(temporary: str | Path, target: str | Path, *, now: float | None = None,
                       stale_after: float = STALE_AFTER_SECONDS) -> bool:
    """True when the writer of ``temporary`` is provably gone: it ran on this host and its process no
    longer exists, or the file has not changed for ``stale_after`` seconds.

    A live pid is trusted even if the number was reused: keeping a leftover costs disk space until it
    grows old, deleting a live writer's file destroys another run's work.
    """
    writer = temporary_writer(temporary, target)
    if writer is not None and writer[0] == _host() and _process_gone(writer[1]):
        return True
    try:
        age = (time.time() if now is None else now) - Path(temporary).stat().st_mtime
    except FileNotFoundError:  # its writer renamed or removed it meanwhile
        return False
    return age > stale_after


def remove_stale_temporaries(target: str | Path) -> list[Path]:
    """Delete the temporary files beside ``target`` whose writer is gone; return them.

    Two runs in one folder (Snakemake's lock does not always stop the second) may write the same
    output at once, so a temporary file is never taken for a leftover merely because it exists.
    """
    target = Path(target)
    removed = []
    if target.parent.is_dir():
        for temporary in target.parent.glob(f".{glob.escape(target.name)}.*.tmp"):
            if is_stale_temporary(temporary, target):
                temporary.unlink(missing_ok=True)
                removed.append(temporary)
    return removed


_HASH_BLOCK = 32 << 20


def sha256_file(path: str | Path) -> str:
    """The SHA-256 of a file's bytes, as hex.

    Read in blocks of 32 MiB into one buffer: the hash runs without the interpreter lock, and
    taken in a thread beside Python work (a command hashes its input while it reads it and starts
    the GPU) it waits for the lock twice a block, not thirty-two times as with 1 MiB blocks.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size  # 0 for a pipe
        buffer = memoryview(bytearray(min(_HASH_BLOCK, size) if size else 1 << 20))
        while got := fh.readinto(buffer):
            digest.update(buffer[:got])
    return digest.hexdigest()
