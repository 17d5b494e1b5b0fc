"""Files in and out: raw .bin inputs read whole and checked, and outputs written all or nothing
(temporaries beside the targets, fsynced, renamed into place; a failure changes nothing and says so).
Every file lngb writes (run's outputs, traces, sweeps, plots) goes through write_outputs."""
import errno
import os
import secrets
import shutil
import stat
import sys

import numpy as np

from .errors import InvalidArgumentError, LngbError

def read_bin(what, path, shape, dtype):
    """The .bin file at `path` as a `shape` array of `dtype`. A regular file must hold exactly that
    many bytes; a pipe or character device (e.g. bash's `<(gen)`) must yield exactly that many."""
    dtype = np.dtype(dtype)
    if any(d < 0 for d in shape):
        raise InvalidArgumentError(f"{what}: shape {shape} has a negative dimension")
    nbytes = int(np.prod(shape)) * dtype.itemsize
    try:
        file = open(path, "rb")
    except IsADirectoryError:
        raise IsADirectoryError(errno.EISDIR, f"{what} file {path} is a directory, not a .bin "
                                "file") from None
    except OSError as err:
        raise _os_error(err, f"cannot read {what} file {path}: {_why(err)}") from None
    with file:
        st = os.fstat(file.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, f"{what} file {path} is a directory, not a .bin "
                                    "file")
        size = st.st_size
        if not stat.S_ISREG(st.st_mode) or size == nbytes:
            data = file.read(nbytes + 1)  # one byte more: a file that grew meanwhile, a long stream
            size = len(data) if len(data) <= nbytes else f"more than {nbytes}"
    if size != nbytes:
        raise LngbError(f"{what} file {path} has {size} bytes; shape {shape} of "
                        f"{dtype.name} needs {nbytes}")
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


def _os_error(err, message):
    """An OSError with err's errno (so OSError() picks the same subclass: PermissionError, ...)
    and `message`, which says which file failed and in what state the outputs are."""
    return OSError(message) if err.errno is None else OSError(err.errno, message)


def _why(err):
    return err.strerror or str(err)


def _remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_all(fd, data):
    """os.write until every byte is written (a short write is no error; no progress is)."""
    view = memoryview(data).cast("B")
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "a write made no progress")
        view = view[written:]


def _unique_name(directory, name, suffix, create):
    """create(path) on a fresh hidden name beside the output (it raises FileExistsError if taken)."""
    for _ in range(100):
        path = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.{suffix}")
        try:
            return path, create(path)
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, f"no free temporary name in {directory}")


def _as_bytes(data):
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data).tobytes()  # the bytes ndarray.tofile writes
    return bytes(data)


_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


class _Output:
    """One output file: where it really leads and how it is written there.

    Symlinks are followed, as open() follows them: the bytes go where the link points and the link
    stays. A regular file there (or none yet) is replaced atomically: a temporary file beside it,
    written, fsynced, then renamed over it. A character device or FIFO (a link to /dev/null, a named
    pipe a reader waits on) cannot be replaced, so it is written in place, and every write checked.
    Whatever can be checked without writing is checked when the _Output is made."""

    def __init__(self, what, path, data):
        self.what, self.path = what, os.fspath(path)
        self.data = _as_bytes(data)
        self.real = os.path.realpath(self.path)
        self.shown = f"{self.path} (-> {self.real})" if os.path.islink(self.path) else self.path
        self.directory, self.name = os.path.split(self.real)
        try:
            self.st = os.stat(self.real)
        except FileNotFoundError:
            self.st = None  # a new file
        except OSError as err:  # a symlink loop, a directory on the way that can't be searched
            raise _os_error(err, f"{self.shown}: {_why(err)}") from None
        mode = None if self.st is None else self.st.st_mode
        self.in_place = mode is not None and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode))
        if mode is None or stat.S_ISREG(mode):
            self._check_replaceable()
        elif stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, f"{self.shown} is a directory")
        elif not self.in_place:
            raise OSError(errno.EINVAL, f"{self.shown} is neither a regular file nor a character "
                                        "device or FIFO")

    def _check_replaceable(self):
        access = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
        if not os.path.isdir(self.directory):
            raise FileNotFoundError(errno.ENOENT, f"{self.shown}: its directory {self.directory} "
                                                  "does not exist")
        if not os.access(self.directory, os.W_OK | os.X_OK, **access):
            raise PermissionError(errno.EACCES, f"{self.shown}: its directory {self.directory} is "
                                                "not writable")
        if self.st is None:
            return
        if not os.access(self.real, os.W_OK, **access):  # read-only mode, immutable, read-only fs
            raise PermissionError(errno.EACCES, f"{self.shown} is not writable (mode "
                                                f"{stat.S_IMODE(self.st.st_mode):04o})")
        directory = os.stat(self.directory)
        euid = os.geteuid() if hasattr(os, "geteuid") else 0
        if directory.st_mode & stat.S_ISVTX and euid not in (0, self.st.st_uid, directory.st_uid):
            raise PermissionError(errno.EPERM, f"{self.shown} belongs to another user in the sticky "
                                               f"directory {self.directory}: it cannot be replaced")

    def write_temp(self):
        """The bytes in a new file beside the target, on disk; returns its path."""
        temp, fd = _unique_name(self.directory, self.name, "tmp",
                                lambda path: os.open(path, _NEW_FILE_FLAGS, 0o666))  # umask applies
        try:
            try:
                if self.st is not None:  # the replacement keeps the old file's owner and mode
                    if (self.st.st_uid, self.st.st_gid) != tuple(os.fstat(fd))[4:6]:
                        for uid in (self.st.st_uid, -1):  # root; else the group if we may
                            try:
                                os.fchown(fd, uid, self.st.st_gid)
                                break
                            except OSError:
                                pass
                    os.fchmod(fd, stat.S_IMODE(self.st.st_mode))
                _write_all(fd, self.data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            _remove_quietly(temp)
            raise
        return temp

    def write_in_place(self):
        fd = os.open(self.real, os.O_WRONLY | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            _write_all(fd, self.data)
        finally:
            os.close(fd)

    def backup(self):
        """A second name for the file about to be replaced, from which undo() restores it: a hard
        link (the very file), else a copy (same bytes and mode). None if there is no file yet."""
        if self.st is None:
            return None
        try:
            return _unique_name(self.directory, self.name, "old",
                                lambda path: os.link(self.real, path))[0]
        except OSError:  # no hard links on this file system
            pass
        backup, fd = _unique_name(self.directory, self.name, "old",
                                  lambda path: os.open(path, _NEW_FILE_FLAGS, 0o600))
        try:
            os.close(fd)
            shutil.copy2(self.real, backup)
            with open(backup, "rb+") as file:
                os.fsync(file.fileno())
        except BaseException:
            _remove_quietly(backup)
            raise
        return backup

    def undo(self, backup):
        """Put back what the rename replaced (or remove what it created)."""
        if backup is None:
            os.unlink(self.real)
        else:
            os.replace(backup, self.real)


def _sync_directory(directory):
    """fsync a directory, so that renames in it are on disk (a no-op where directories can't be)."""
    try:
        fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def write_outputs(outputs):
    """Write [(what, path, data)] all or nothing (data: bytes, str, or an array's raw bytes).
    Every output is checked first; regular files are written to temporaries beside them (each write
    checked, fsynced) and only then renamed into place one after the other; the gap between the
    renames is covered by a backup of each file renamed over but the last, which puts it back if a
    later rename fails. On any failure the temporaries go and an OSError says what was (not)
    changed."""
    try:
        targets = [_Output(what, path, data) for what, path, data in outputs]
    except OSError as err:
        raise _os_error(err, f"{_why(err)}; no output was changed") from None
    replaced = [t for t in targets if not t.in_place]
    reals = [t.real for t in replaced]
    for t in replaced:
        if reals.count(t.real) > 1:
            raise InvalidArgumentError(f"{' and '.join(u.shown for u in replaced if u.real == t.real)}"
                                       " are the same file; no output was changed")
    changed = []  # what is already changed, said in words

    def state():
        return "; ".join(changed + ["the other outputs were not changed" if changed else
                                    "no output was changed"])

    temps = {}
    placed = []  # (target, backup) renamed into place
    current = None
    try:
        for current in replaced:
            temps[current] = current.write_temp()
        for current in targets:
            if current.in_place:
                current.write_in_place()
                changed.append(f"{current.what} was written to {current.shown} (in place: it "
                               "cannot be undone)")
        for k, current in enumerate(replaced):
            backup = current.backup() if k < len(replaced) - 1 else None
            try:
                os.replace(temps[current], current.real)
            except BaseException:
                if backup is not None:
                    _remove_quietly(backup)
                raise
            del temps[current]
            placed.append((current, backup))
    except BaseException as err:
        for temp in temps.values():
            _remove_quietly(temp)
        for target, backup in reversed(placed):
            try:
                target.undo(backup)
            except OSError as undo_err:
                changed.append(f"{target.what} in {target.shown} is the new one (restoring the old "
                               f"failed: {undo_err})")
        if not isinstance(err, OSError):
            raise
        raise _os_error(err, f"cannot write {current.what} to {current.shown}: {_why(err)}; "
                             f"{state()}") from err
    for _target, backup in placed:
        if backup is not None:
            try:
                os.unlink(backup)
            except OSError as err:
                print(f"lngb: note: could not remove the backup {backup}: {err}",
                      file=sys.stderr)
    try:
        for directory in dict.fromkeys(t.directory for t in replaced):
            _sync_directory(directory)
    except OSError as err:
        raise _os_error(err, f"wrote {' and '.join(t.shown for t in targets)}, but syncing their "
                             f"directory failed ({_why(err)}): the renames may not be on disk") from err


def write_file(what, path, data):
    """One output, written whole or not at all (see write_outputs)."""
    write_outputs([(what, path, data)])
