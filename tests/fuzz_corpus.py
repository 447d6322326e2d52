"""Building blocks for the hostile-input suite (tests/test_fuzz_inputs.py).

Three things live here, none of which needs hypothesis:

* a tiny pickle *emitter* that writes protocol-2 opcodes by hand, so a test can
  put any value (negative strides, a float ``T``, an unknown storage class)
  where a torch export has a tensor, without torch and without registering
  fake ``torch`` modules in ``sys.modules`` for the whole test session;
* :class:`CliWorker`, a long-lived child process that runs
  ``battus.cli.main(argv)`` on request. A memory-safety bug in a reader ends
  in SIGSEGV; in-process it would take pytest down with it, in the worker it is
  one failed example and a restarted worker. The worker is started once, so
  the import and Numba cache loading (seconds) are paid once, not per example;
* :func:`snapshot`, the state of a folder (every file's sha256, every link's
  target), so a test can tell exactly what a command created or changed.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import select
import stat
import struct
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# --------------------------------------------------------------------------
# pickle emitter
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class Global:
    """``GLOBAL module name``: a class or function the unpickler must resolve."""

    module: str
    name: str


@dataclass(frozen=True)
class Call:
    """``func(*args)`` through ``REDUCE``."""

    func: Any
    args: tuple


@dataclass(frozen=True)
class PersId:
    """A persistent id (``BINPERSID``); torch uses it for tensor storages."""

    pid: Any


@dataclass(frozen=True)
class NewObj:
    """``cls.__new__(cls)`` then ``BUILD state`` (how protocol 2 pickles plain objects)."""

    cls: Any
    state: Any


def emit(obj: Any) -> bytes:
    """Protocol-2 opcodes for ``obj`` (no memo: every value is written in full)."""
    out = bytearray(b"\x80\x02")
    _emit(obj, out)
    out += b"."
    return bytes(out)


def _emit(obj: Any, out: bytearray) -> None:
    if obj is None:
        out += b"N"
    elif obj is True:
        out += b"\x88"
    elif obj is False:
        out += b"\x89"
    elif isinstance(obj, int):
        if -(2**31) <= obj < 2**31:
            out += b"J" + struct.pack("<i", obj)
        else:
            body = pickle.encode_long(obj)
            if len(body) < 256:
                out += b"\x8a" + bytes([len(body)]) + body
            else:
                out += b"\x8b" + struct.pack("<i", len(body)) + body
    elif isinstance(obj, float):
        out += b"G" + struct.pack(">d", obj)
    elif isinstance(obj, str):
        raw = obj.encode("utf-8", "surrogatepass")
        out += b"X" + struct.pack("<I", len(raw)) + raw
    elif isinstance(obj, bytes):  # SHORT_BINBYTES / BINBYTES (protocol 3 opcodes, accepted anyway)
        out += (b"C" + bytes([len(obj)]) if len(obj) < 256 else b"B" + struct.pack("<I", len(obj))) + obj
    elif isinstance(obj, tuple):
        out += b"("
        for item in obj:
            _emit(item, out)
        out += b"t"
    elif isinstance(obj, list):
        out += b"]("
        for item in obj:
            _emit(item, out)
        out += b"e"
    elif isinstance(obj, dict):
        out += b"}("
        for key, value in obj.items():
            _emit(key, out)
            _emit(value, out)
        out += b"u"
    elif isinstance(obj, Global):
        out += b"c" + obj.module.encode() + b"\n" + obj.name.encode() + b"\n"
    elif isinstance(obj, Call):
        _emit(obj.func, out)
        _emit(tuple(obj.args), out)
        out += b"R"
    elif isinstance(obj, PersId):
        _emit(obj.pid, out)
        out += b"Q"
    elif isinstance(obj, NewObj):
        _emit(obj.cls, out)
        out += b")\x81"
        _emit(obj.state, out)
        out += b"b"
    else:  # a bug in the test, not in battus
        raise TypeError(f"cannot emit {type(obj).__name__}")


# torch storage classes and the numpy dtype of their raw bytes (those battus knows)
STORAGE_DTYPES = {
    "LongStorage": "<i8", "IntStorage": "<i4", "ShortStorage": "<i2", "CharStorage": "i1",
    "ByteStorage": "u1", "BoolStorage": "?", "FloatStorage": "<f4", "DoubleStorage": "<f8",
    "HalfStorage": "<f2",
}
# real torch storage classes battus does not know, and names torch never had
UNKNOWN_STORAGES = ["BFloat16Storage", "ComplexFloatStorage", "QInt8Storage", "UntypedStorage", "Storage",
                    "LongStorage\nx", "os"]


@dataclass
class Tensor:
    """What ``torch._utils._rebuild_tensor_v2`` receives; every field may be a lie."""

    storage_class: str
    key: str
    numel: Any
    offset: Any
    size: Any
    stride: Any
    storage_module: str = "torch"

    def to_pickle(self) -> Call:
        storage = PersId(("storage", Global(self.storage_module, self.storage_class), self.key, "cpu", self.numel))
        hooks = Call(Global("collections", "OrderedDict"), ())
        return Call(Global("torch._utils", "_rebuild_tensor_v2"),
                    (storage, self.offset, self.size, self.stride, False, hooks))


def contiguous_stride(size: tuple[int, ...]) -> tuple[int, ...]:
    stride, acc = [], 1
    for s in reversed(size):
        stride.append(acc)
        acc *= max(s, 1)
    return tuple(reversed(stride))


def data_object(mapping: dict) -> NewObj:
    """A ``torch_geometric.data.Data`` as torch_geometric 2.x pickles it (``_store._mapping``)."""
    tensors = {k: (v.to_pickle() if isinstance(v, Tensor) else v) for k, v in mapping.items()}
    store = NewObj(Global("torch_geometric.data.storage", "GlobalStorage"), {"_mapping": tensors})
    return NewObj(Global("torch_geometric.data.data", "Data"), {"_store": store})


def pt_archive(payload: bytes, storages: dict[str, bytes], prefix: str = "archive") -> bytes:
    """A torch zip archive: ``<prefix>/data.pkl``, ``<prefix>/data/<key>``, ``<prefix>/version``."""
    path = Path(tempfile.mkstemp(suffix=".zip")[1])
    try:
        with zipfile.ZipFile(path, "w") as zf:
            zf.writestr(f"{prefix}/data.pkl", payload)
            for key, raw in storages.items():
                zf.writestr(f"{prefix}/data/{key}", raw)
            zf.writestr(f"{prefix}/version", "3\n")
        return path.read_bytes()
    finally:
        path.unlink()


@dataclass
class PtSpec:
    """A ``.pt`` export described field by field: Data mapping plus the raw storages."""

    mapping: dict
    storages: dict[str, bytes]
    prefix: str = "archive"

    def to_bytes(self) -> bytes:
        return pt_archive(emit(data_object(self.mapping)), self.storages, self.prefix)


def tensor_of(array: np.ndarray, key: str, storage_class: str | None = None) -> tuple[Tensor, bytes]:
    """A valid contiguous tensor record for ``array`` and its storage bytes."""
    by_dtype = {np.dtype(v).str: k for k, v in STORAGE_DTYPES.items()}
    array = np.array(array, order="C")  # not ascontiguousarray: it turns a 0-d T into shape (1,)
    cls = storage_class or by_dtype[array.dtype.newbyteorder("<").str if array.dtype.itemsize > 1
                                    else array.dtype.str]
    size = tuple(int(s) for s in array.shape)
    return Tensor(cls, key, int(array.size), 0, size, contiguous_stride(size)), array.tobytes()


def valid_pt(n: int, T: int, arcs: list[tuple[int, int]], y: np.ndarray, *, t_as_tensor: bool = True,
             num_nodes: Any = "same") -> PtSpec:
    """A well-formed export: ``edge_index`` (2, m) int64, ``y`` (n, T+1) as torch stores it, ``T``, ``num_nodes``.

    ``y`` is stored transposed with strides (1, n), as in the canonical files,
    so the reader's stride handling is exercised even on valid input.
    """
    ei = np.array(arcs, dtype=np.int64).reshape(-1, 2).T.copy()
    edge, edge_raw = tensor_of(ei, "1")
    yt = np.ascontiguousarray(y.T.astype(np.int64))  # (T+1, n) contiguous -> (n, T+1) view
    y_tensor = Tensor("LongStorage", "2", int(yt.size), 0, (n, T + 1), (1, n))
    mapping: dict = {"edge_index": edge, "y": y_tensor}
    storages = {"1": edge_raw, "2": yt.tobytes()}
    if t_as_tensor:
        t_tensor, t_raw = tensor_of(np.array(T, dtype=np.int64), "3")
        mapping["T"], storages["3"] = t_tensor, t_raw
    else:
        mapping["T"] = T
    mapping["num_nodes"] = n if num_nodes == "same" else num_nodes
    return PtSpec(mapping, storages)


# --------------------------------------------------------------------------
# the CLI in a worker process
# --------------------------------------------------------------------------

# The worker keeps the protocol on private copies of fds 0 and 1 and points fds
# 1 and 2 at per-request files, so whatever the command prints (from Python or
# from C: HDF5, Numba) is captured exactly as a terminal would see it. The
# address-space limit turns "allocates terabytes" into a prompt MemoryError
# (a traceback, hence a failure) instead of swapping the CI machine to death.
_SERVER = r"""
import json, os, resource, sys, traceback, warnings
try:  # die with the test process (Linux): an interrupted pytest must not leave a worker computing
    import ctypes, signal
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
except Exception:
    pass
limit = int(os.environ.get("BATTUS_FUZZ_AS_LIMIT", str(8 << 30)))
if limit > 0:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
proto_in = os.fdopen(os.dup(0), "r")
proto_out = os.fdopen(os.dup(1), "w")
saved_out, saved_err = os.dup(1), os.dup(2)
devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(devnull, 0)
from battus.cli import main
import battus.pipeline, battus.io, battus.hermes, battus.simulate, battus.score  # noqa: F401 (warm imports)
proto_out.write("ready\n"); proto_out.flush()
for line in proto_in:
    req = json.loads(line)
    # a fresh process shows each warning once: forget those already shown
    for mod in list(sys.modules.values()):
        reg = getattr(mod, "__warningregistry__", None)
        if isinstance(reg, dict):
            reg.clear()
    sys.stdout.flush(); sys.stderr.flush()
    out_fd = os.open(req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    err_fd = os.open(req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(out_fd, 1); os.dup2(err_fd, 2); os.close(out_fd); os.close(err_fd)
    os.chdir(req["cwd"])
    try:
        rc = main(req["argv"])
        rc = 0 if rc is None else rc
    except SystemExit as exc:  # what the interpreter would turn into an exit status
        code = exc.code
        if code is None:
            rc = 0
        elif isinstance(code, int):
            rc = code
        else:
            print(code, file=sys.stderr)
            rc = 1
    except BaseException:  # an uncaught exception: the interpreter prints it and exits 1
        traceback.print_exc()
        rc = 1
    try:
        sys.stdout.flush(); sys.stderr.flush()
    except Exception:
        pass
    os.dup2(saved_out, 1); os.dup2(saved_err, 2)
    proto_out.write(json.dumps({"rc": rc}) + "\n"); proto_out.flush()
"""


@dataclass
class Result:
    argv: list[str]
    rc: int | None  # exit status; negative = killed by that signal; None = timed out
    stdout: str
    stderr: str

    @property
    def stderr_lines(self) -> list[str]:
        # lines as a terminal shows them: str.splitlines() would also split at \x1c-\x1e, \x85, ...
        return [line for line in self.stderr.split("\n") if line.strip()]

    def describe(self) -> str:
        status = "timed out" if self.rc is None else (f"signal {-self.rc}" if self.rc < 0 else f"exit {self.rc}")
        return f"battus {' '.join(self.argv)}\n  -> {status}\n  stderr: {self.stderr[-3000:]!r}"


class CliWorker:
    """Runs ``battus.cli.main(argv)`` in a child process; survives the child's death."""

    def __repr__(self) -> str:  # shown in every falsifying example: keep it short
        return "CliWorker()"

    def __init__(self, scratch: Path, timeout: float = 60.0) -> None:
        self.scratch = Path(scratch)
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self._count = 0

    def _start(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, text=True, bufsize=1,
        )
        ready = self._readline(600.0)
        if ready != "ready":
            self.close()
            raise RuntimeError(f"fuzz worker did not start: {ready!r}")

    def _readline(self, timeout: float) -> str | None:
        assert self.proc is not None and self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None
        line = self.proc.stdout.readline()
        return line.strip() if line else ""

    def run(self, argv: list[str], cwd: Path) -> Result:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        self._count += 1
        out = self.scratch / f"{self._count}.out"
        err = self.scratch / f"{self._count}.err"
        request = {"argv": [str(a) for a in argv], "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        line = self._readline(self.timeout)
        rc: int | None
        if line:
            rc = int(json.loads(line)["rc"])
        elif line is None:  # hung: kill it, report a timeout, start afresh next time
            self.close()
            rc = None
        else:  # the worker died mid-command: a crash (signal) or a hard exit
            code = self.proc.wait()
            rc = code if code < 0 else (code or 1)
            self.proc = None
        text_out = out.read_text(errors="replace") if out.exists() else ""
        text_err = err.read_text(errors="replace") if err.exists() else ""
        for f in (out, err):
            f.unlink(missing_ok=True)
        return Result([str(a) for a in argv], rc, text_out, text_err)

    def close(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


# --------------------------------------------------------------------------
# folder snapshots
# --------------------------------------------------------------------------


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def snapshot(root: Path) -> dict[str, tuple]:
    """Every entry under ``root`` (links not followed): kind plus content hash or link target."""
    found: dict[str, tuple] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                found[rel] = ("link", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                found[rel] = ("dir",)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = ("file", sha256(path))
            else:
                found[rel] = ("other", stat.S_IFMT(st.st_mode))
    return found
