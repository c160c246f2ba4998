# torch._C._distributed_c10d on torchnative: the stores, the process group and a CPU backend of
# ours under upstream's unmodified torch.distributed (compiled into the extension and run in that
# module's namespace by lib.rs, after surface.py). Names not defined here stay refusing stand-ins.
#
# Design, briefly:
# - Stores keep bytes under string keys. `HashStore` is one process's; `TCPStore` is a server
#   thread in the master process plus a client connection per store object, speaking a small
#   length-prefixed protocol (every frame checked before use: a bad frame closes that connection,
#   the server goes on).
# - The backend (`ProcessGroupTorchnative`, also answering as `ProcessGroupGloo` so that
#   `init_process_group("gloo")` finds it) connects every pair of ranks once, through addresses
#   published in the group's store. A reader thread per peer drains its socket into an inbox, so a
#   send never waits for the receiver; a receive waits for its message, the peer's end of the
#   connection, or the timeout, whichever comes first, and then says which.
# - Collectives run in call order on one worker thread per backend (upstream's async semantics:
#   `async_op=True` returns a Work at once). Reductions are done by the chunk's owner in rank
#   order, so every rank gets the same bits, whatever the arrival order.

import builtins as _b
import enum as _enum
import os as _os
import socket as _socket
import struct as _struct
import sys as _sys
import threading as _threading
import time as _time
from collections import deque as _deque
from datetime import timedelta as _timedelta

_this = _sys.modules["torch._C._distributed_c10d"]
_stub_getattr = _this.__getattr__

_DistBackendError = _C._DistBackendError  # noqa: F821  (set by lib.rs: torch._C itself)
_DistStoreError = _C._DistStoreError  # noqa: F821
_DistNetworkError = _C._DistNetworkError  # noqa: F821
_DistQueueEmptyError = _C._DistQueueEmptyError  # noqa: F821

_DEFAULT_TIMEOUT = _timedelta(minutes=30)
_DEFAULT_PG_TIMEOUT = _DEFAULT_TIMEOUT
# Upstream's kUnsetTimeout: an option's timeout that defers to the backend's.
_UNSET_TIMEOUT = _timedelta(milliseconds=-1)
_DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024


def _seconds(timeout):
    return timeout.total_seconds() if isinstance(timeout, _timedelta) else _b.float(timeout)


def _as_bytes(value):
    if isinstance(value, _b.str):
        return value.encode()
    if isinstance(value, (_b.bytes, _b.bytearray, _b.memoryview)):
        return _b.bytes(value)
    if isinstance(value, _b.list):  # upstream accepts a list of byte values too
        return _b.bytes(value)
    raise TypeError(f"store values are str or bytes, not {type(value).__name__}")


# ----- debug level, hooks, monitor -----------------------------------------------------------

class DebugLevel(_enum.Enum):
    OFF = 0
    INFO = 1
    DETAIL = 2


DebugLevel.__module__ = "torch._C._distributed_c10d"
_debug_level = [DebugLevel.OFF]


def get_debug_level():
    return _debug_level[0]


def set_debug_level(level):
    _debug_level[0] = level


def set_debug_level_from_env():
    value = _os.environ.get("TORCH_DISTRIBUTED_DEBUG", "OFF").upper()
    if value not in DebugLevel.__members__:
        raise ValueError(f"TORCH_DISTRIBUTED_DEBUG must be OFF, INFO or DETAIL, not {value!r}")
    _debug_level[0] = DebugLevel[value]


class _NoHook:
    """Upstream's health-check, NaN-check and flight-recorder hooks watch collectives from C++;
    the backend here has none to attach, so attaching is a no-op that says so in its type."""

    @classmethod
    def attach(cls, *args, **kwargs):
        return cls()

    def detach(self, *args, **kwargs):
        return None


class HealthCheckHook(_NoHook):
    pass


class NanCheckHook(_NoHook):
    pass


class FlightRecorderHook(_NoHook):
    pass


# ----- reduction kinds and options ---------------------------------------------------------


class _RedOpType(_enum.Enum):
    SUM = 0
    AVG = 1
    PRODUCT = 2
    MIN = 3
    MAX = 4
    BAND = 5
    BOR = 6
    BXOR = 7
    PREMUL_SUM = 8
    UNUSED = 9


_RedOpType.__name__ = _RedOpType.__qualname__ = "RedOpType"


class ReduceOp:
    """A reduction kind. Upstream's Python passes either a `ReduceOp.RedOpType` member
    (`ReduceOp.SUM`) or a `ReduceOp(...)` made of one; both compare equal to the member."""

    RedOpType = _RedOpType

    def __init__(self, op=_RedOpType.SUM):
        self.op = _red_kind(op)

    def __eq__(self, other):
        try:
            return self.op is _red_kind(other)
        except TypeError:
            return NotImplemented

    def __hash__(self):
        return _b.hash(self.op)

    def __repr__(self):
        return f"<ReduceOp.{self.op.name}>"


for _m in _RedOpType:
    setattr(ReduceOp, _m.name, _m)
ReduceOp.__module__ = "torch._C._distributed_c10d"


def _red_kind(op):
    if isinstance(op, _RedOpType):
        return op
    if isinstance(op, ReduceOp):
        return op.op
    raise TypeError(f"expected a torch.distributed.ReduceOp, got {type(op).__name__}")


def _options_class(name, **defaults):
    def __init__(self):
        for key, value in defaults.items():
            setattr(self, key, _b.list(value) if isinstance(value, _b.list) else value)

    return _b.type(name, (), {"__init__": __init__, "__module__": "torch._C._distributed_c10d"})


BroadcastOptions = _options_class("BroadcastOptions", rootRank=0, rootTensor=0, timeout=_UNSET_TIMEOUT, asyncOp=True)
AllreduceOptions = _options_class("AllreduceOptions", reduceOp=_RedOpType.SUM, timeout=_UNSET_TIMEOUT, asyncOp=True,
                                  sparseIndices=None)
AllreduceCoalescedOptions = _b.type("AllreduceCoalescedOptions", (AllreduceOptions,), {})
ReduceOptions = _options_class("ReduceOptions", reduceOp=_RedOpType.SUM, rootRank=0, rootTensor=0,
                               timeout=_UNSET_TIMEOUT, asyncOp=True)
AllgatherOptions = _options_class("AllgatherOptions", timeout=_UNSET_TIMEOUT, asyncOp=True)
GatherOptions = _options_class("GatherOptions", rootRank=0, timeout=_UNSET_TIMEOUT, asyncOp=True)
ScatterOptions = _options_class("ScatterOptions", rootRank=0, timeout=_UNSET_TIMEOUT, asyncOp=True)
ReduceScatterOptions = _options_class("ReduceScatterOptions", reduceOp=_RedOpType.SUM, timeout=_UNSET_TIMEOUT,
                                      asyncOp=True)
BarrierOptions = _options_class("BarrierOptions", device_ids=[], device=None, timeout=_UNSET_TIMEOUT, asyncOp=True)
AllToAllOptions = _options_class("AllToAllOptions", timeout=_UNSET_TIMEOUT, asyncOp=True)
ReconfigureOptions = _options_class("ReconfigureOptions", uuid=0, handles=[], timeout=None, hints={})
_DistributedBackendOptions = _options_class(
    "_DistributedBackendOptions", store=None, group_rank=0, group_size=1, timeout=_DEFAULT_TIMEOUT, group_id="",
    global_ranks_in_group=[], process_group=None, split_from=None, enable_reconfigure=False)


# ----- stores ----------------------------------------------------------------------------------


class _KeyValue:
    """The state behind a store: bytes under keys, and waiting for keys to appear."""

    def __init__(self):
        self.data = {}
        self.queues = {}
        self.changed = _threading.Condition()

    def wait_for(self, keys, timeout_s):
        deadline = _time.monotonic() + timeout_s
        with self.changed:
            while True:
                missing = [k for k in keys if k not in self.data]
                if not missing:
                    return None
                left = deadline - _time.monotonic()
                if left <= 0:
                    return missing
                self.changed.wait(left)

    def run(self, op, args, timeout_s):
        """One store operation: (status, results). The TCP server, HashStore and FileStore all
        call this, so the kinds of store cannot differ."""
        d = self.data
        if op in ("get", "wait", "multi_get"):
            keys = [k.decode() for k in args]
            missing = self.wait_for(keys, timeout_s)
            if missing is not None:
                return "timeout", [m.encode() for m in missing]
            with self.changed:
                return "ok", ([d[k] for k in keys] if op != "wait" else [])
        with self.changed:
            try:
                if op == "set":
                    d[args[0].decode()] = args[1]
                    result = []
                elif op == "multi_set":
                    for k, v in _b.zip(args[0::2], args[1::2]):
                        d[k.decode()] = v
                    result = []
                elif op == "add":
                    key = args[0].decode()
                    value = _b.int(d.get(key, b"0").decode()) + _b.int(args[1].decode())
                    d[key] = _b.str(value).encode()
                    result = [d[key]]
                elif op == "append":
                    key = args[0].decode()
                    d[key] = d.get(key, b"") + args[1]
                    result = []
                elif op == "compare_set":
                    key, expected, desired = args[0].decode(), args[1], args[2]
                    if key not in d:
                        if expected == b"":
                            d[key] = desired
                        result = [d.get(key, expected)]
                    elif d[key] == expected:
                        d[key] = desired
                        result = [desired]
                    else:
                        result = [d[key]]
                elif op == "check":
                    result = [b"1" if all(k.decode() in d for k in args) else b"0"]
                elif op == "delete_key":
                    result = [b"1" if d.pop(args[0].decode(), None) is not None else b"0"]
                elif op == "num_keys":
                    result = [_b.str(_b.len(d)).encode()]
                elif op == "list_keys":
                    result = [k.encode() for k in d]
                elif op == "queue_push":
                    self.queues.setdefault(args[0].decode(), _deque()).append(args[1])
                    result = []
                elif op == "queue_len":
                    result = [_b.str(_b.len(self.queues.get(args[0].decode(), ()))).encode()]
                elif op == "queue_pop":
                    key, block = args[0].decode(), args[1] == b"1"
                    deadline = _time.monotonic() + timeout_s
                    while not self.queues.get(key):
                        left = deadline - _time.monotonic()
                        if not block:
                            return "empty", [args[0]]
                        if left <= 0:
                            return "timeout", [args[0]]
                        self.changed.wait(left)
                    result = [self.queues[key].popleft()]
                else:
                    return "error", [f"unknown store operation {op!r}".encode()]
            except (ValueError, IndexError, UnicodeDecodeError) as e:
                return "error", [f"bad arguments to {op}: {e}".encode()]
            self.changed.notify_all()
            return "ok", result


class Store:
    """The store interface upstream's Python (and users' subclasses) program against."""

    def __init__(self, *args, **kwargs):
        self._timeout = _DEFAULT_TIMEOUT

    @property
    def timeout(self):
        return self._timeout

    def set_timeout(self, timeout):
        self._timeout = timeout

    def _call(self, op, args, timeout=None):
        raise NotImplementedError(f"{type(self).__name__}.{op} is not implemented")

    def _checked(self, op, args, timeout=None):
        timeout = self._timeout if timeout is None else timeout
        status, out = self._call(op, [_as_bytes(a) for a in args], _seconds(timeout))
        if status == "ok":
            return out
        if status == "timeout":
            keys = ", ".join(k.decode(errors="replace") for k in out)
            raise _DistStoreError(f"{type(self).__name__}.{op}: timed out after {_seconds(timeout):g} s "
                                  f"waiting for keys: {keys}")
        if status == "empty":
            raise _DistQueueEmptyError(f"{type(self).__name__}.queue_pop: queue {out[0].decode()!r} is empty")
        raise _DistStoreError(f"{type(self).__name__}.{op}: " + b"".join(out).decode(errors="replace"))

    def set(self, key, value):
        self._checked("set", [key, value])

    def get(self, key):
        return self._checked("get", [key])[0]

    def add(self, key, value):
        return _b.int(self._checked("add", [key, _b.str(_b.int(value))])[0])

    def append(self, key, value):
        self._checked("append", [key, value])

    def compare_set(self, key, expected_value, desired_value):
        return self._checked("compare_set", [key, expected_value, desired_value])[0]

    def check(self, keys):
        return self._checked("check", _b.list(keys))[0] == b"1"

    def wait(self, keys, timeout=None):
        self._checked("wait", _b.list(keys), timeout)

    def multi_get(self, keys):
        return self._checked("multi_get", _b.list(keys))

    def multi_set(self, keys, values):
        if _b.len(keys) != _b.len(values):
            raise ValueError(f"multi_set: {len(keys)} keys but {len(values)} values")
        self._checked("multi_set", [x for kv in _b.zip(keys, values) for x in kv])

    def delete_key(self, key):
        return self._checked("delete_key", [key])[0] == b"1"

    def num_keys(self):
        return _b.int(self._checked("num_keys", [])[0])

    def list_keys(self):
        return [k.decode() for k in self._checked("list_keys", [])]

    def queue_push(self, key, value):
        self._checked("queue_push", [key, value])

    def queue_pop(self, key, block=True):
        return self._checked("queue_pop", [key, "1" if block else "0"])[0]

    def queue_len(self, key):
        return _b.int(self._checked("queue_len", [key])[0])

    def has_extended_api(self):
        return True

    def _tn_local_host(self):
        """The address this process is reached at by the store's other users."""
        return _os.environ.get("TORCHNATIVE_DIST_HOST", "127.0.0.1")


Store.__module__ = "torch._C._distributed_c10d"


class HashStore(Store):
    """A store within one process (threads share it)."""

    def __init__(self):
        super().__init__()
        self._kv = _KeyValue()

    def _call(self, op, args, timeout_s):
        return self._kv.run(op, args, timeout_s)


class FakeStore(HashStore):
    pass


class PrefixStore(Store):
    def __init__(self, prefix, store):
        super().__init__()
        self._prefix = prefix
        self._store = store
        self._timeout = store.timeout

    @property
    def underlying_store(self):
        return self._store

    def _key(self, key):
        return f"{self._prefix}/{key}"

    @property
    def timeout(self):
        return self._store.timeout

    def set_timeout(self, timeout):
        self._store.set_timeout(timeout)

    def set(self, key, value):
        self._store.set(self._key(key), value)

    def get(self, key):
        return self._store.get(self._key(key))

    def add(self, key, value):
        return self._store.add(self._key(key), value)

    def append(self, key, value):
        self._store.append(self._key(key), value)

    def compare_set(self, key, expected_value, desired_value):
        return self._store.compare_set(self._key(key), expected_value, desired_value)

    def check(self, keys):
        return self._store.check([self._key(k) for k in keys])

    def wait(self, keys, timeout=None):
        if timeout is None:
            self._store.wait([self._key(k) for k in keys])
        else:
            self._store.wait([self._key(k) for k in keys], timeout)

    def multi_get(self, keys):
        return self._store.multi_get([self._key(k) for k in keys])

    def multi_set(self, keys, values):
        self._store.multi_set([self._key(k) for k in keys], values)

    def delete_key(self, key):
        return self._store.delete_key(self._key(key))

    def num_keys(self):
        return self._store.num_keys()

    def queue_push(self, key, value):
        self._store.queue_push(self._key(key), value)

    def queue_pop(self, key, block=True):
        return self._store.queue_pop(self._key(key), block)

    def queue_len(self, key):
        return self._store.queue_len(self._key(key))

    def _tn_local_host(self):
        inner = getattr(self._store, "_tn_local_host", None)
        return inner() if inner else Store._tn_local_host(self)


# The store's wire format: a frame is a u32 item count, then per item a u32 length and its bytes.
# A request's first item is the operation, its second the timeout in milliseconds; a reply's first
# item is the status. Limits keep a bad peer from making the server allocate without bound.
_MAX_ITEMS = 1 << 20
_MAX_ITEM_BYTES = 1 << 31


def _recv_exact(sock, n):
    """`n` bytes from `sock`. Up to 16 MiB they are read into one allocation; beyond, the buffer
    grows as bytes arrive, so a peer's claimed length alone allocates nothing large."""
    if n <= 1 << 24:
        parts, left = [], n
        while left:
            chunk = sock.recv(left, _socket.MSG_WAITALL)
            if not chunk:
                raise ConnectionError(f"connection closed with {left} of {n} bytes still to come")
            parts.append(chunk)
            left -= _b.len(chunk)
        return parts[0] if _b.len(parts) == 1 else b"".join(parts)
    buf = _b.bytearray()
    while _b.len(buf) < n:
        start = _b.len(buf)
        want = _b.min(n - start, 1 << 24)
        buf.extend(_b.bytes(want))
        got = sock.recv_into(_b.memoryview(buf)[start:], want, _socket.MSG_WAITALL)
        del buf[start + got:]
        if got == 0:
            raise ConnectionError(f"connection closed with {n - start} of {n} bytes still to come")
    return _b.bytes(buf)


def _send_frame(sock, items):
    parts = [_struct.pack("<I", _b.len(items))]
    for item in items:
        parts.append(_struct.pack("<I", _b.len(item)))
        parts.append(item)
    sock.sendall(b"".join(parts))


def _recv_frame(sock):
    (count,) = _struct.unpack("<I", _recv_exact(sock, 4))
    if count > _MAX_ITEMS:
        raise ValueError(f"frame of {count} items (at most {_MAX_ITEMS})")
    items = []
    for _ in _b.range(count):
        (length,) = _struct.unpack("<I", _recv_exact(sock, 4))
        if length > _MAX_ITEM_BYTES:
            raise ValueError(f"item of {length} bytes (at most {_MAX_ITEM_BYTES})")
        items.append(_recv_exact(sock, length))
    return items


class _StoreServer:
    """The master's store: a listening socket and a thread per client connection."""

    def __init__(self, host, port):
        self.kv = _KeyValue()
        try:
            self.sock = _socket.create_server((host, port), reuse_port=False, backlog=128)
        except OSError as e:
            raise _DistNetworkError(
                f"TCPStore: the server socket could not listen on {host}:{port}: {e.strerror or e}") from None
        self.port = self.sock.getsockname()[1]
        self.closed = False
        _threading.Thread(target=self._accept, name="torchnative-store-accept", daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
            _threading.Thread(target=self._serve, args=(conn,), name="torchnative-store-client", daemon=True).start()

    def _serve(self, conn):
        try:
            while True:
                items = _recv_frame(conn)
                if _b.len(items) < 2:
                    raise ValueError("a request needs an operation and a timeout")
                op = items[0].decode()
                timeout_s = _b.int(items[1].decode()) / 1000.0
                status, out = self.kv.run(op, items[2:], timeout_s)
                _send_frame(conn, [status.encode(), *out])
        except (OSError, ValueError, ConnectionError, UnicodeDecodeError, _struct.error):
            pass  # a client that left or sent a bad frame: drop its connection only
        finally:
            conn.close()

    def close(self):
        self.closed = True
        self.sock.close()


class TCPStore(Store):
    def __init__(self, host_name, port, world_size=None, is_master=False, timeout=_DEFAULT_TIMEOUT,
                 wait_for_workers=True, multi_tenant=False, master_listen_fd=None, use_libuv=None):
        super().__init__()
        if master_listen_fd is not None:
            raise NotImplementedError("TCPStore(master_listen_fd=...) is not implemented in torchnative")
        self._timeout = timeout
        self._host = host_name
        self._world_size = world_size
        self._server = _StoreServer(host_name, port) if is_master else None
        self._port = self._server.port if self._server else port
        self._lock = _threading.Lock()
        self._sock = self._connect(_seconds(timeout))
        if world_size is not None and world_size > 0:
            # One bookkeeping key, counted by num_keys as upstream counts its own.
            self.add("/tn/workers_joined", 1)
            if is_master and wait_for_workers:
                self._wait_for_workers(world_size, _seconds(timeout))

    def _connect(self, timeout_s):
        deadline = _time.monotonic() + timeout_s
        while True:
            try:
                sock = _socket.create_connection((self._host, self._port), timeout=_b.max(1.0, timeout_s))
                sock.settimeout(None)
                sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
                return sock
            except OSError as e:
                if _time.monotonic() >= deadline:
                    raise _DistNetworkError(
                        f"TCPStore: could not connect to {self._host}:{self._port} within "
                        f"{timeout_s:g} s: {e.strerror or e}") from None
                _time.sleep(0.05)

    def _wait_for_workers(self, world_size, timeout_s):
        deadline = _time.monotonic() + timeout_s
        while True:
            joined = self.add("/tn/workers_joined", 0)
            if joined >= world_size:
                return
            if _time.monotonic() >= deadline:
                raise _DistStoreError(f"TCPStore: timed out after {timeout_s:g} s waiting for {world_size} "
                                      f"workers; {joined} joined")
            _time.sleep(0.01)

    def _call(self, op, args, timeout_s):
        with self._lock:
            try:
                _send_frame(self._sock, [op.encode(), _b.str(_b.int(timeout_s * 1000)).encode(), *args])
                reply = _recv_frame(self._sock)
            except (OSError, ConnectionError, ValueError) as e:
                raise _DistNetworkError(f"TCPStore {self._host}:{self._port}: {op} failed: the connection "
                                        f"to the store failed ({e})") from None
        if not reply:
            raise _DistNetworkError(f"TCPStore {self._host}:{self._port}: {op}: empty reply")
        return reply[0].decode(), reply[1:]

    @property
    def host(self):
        return self._host

    @property
    def port(self):
        return self._port

    @property
    def libuvBackend(self):
        return False

    def _tn_local_host(self):
        override = _os.environ.get("TORCHNATIVE_DIST_HOST")
        return override or self._sock.getsockname()[0]

    def __del__(self):
        try:
            self._sock.close()
        except Exception:  # noqa: BLE001  (interpreter shutdown)
            pass


class FileStore(Store):
    """A store in a file several processes open (file:// rendezvous). Each operation locks the
    file, reads its whole state, applies itself and writes the state back; blocking reads poll.
    The file is checked record by record before use: a damaged or foreign file is an error that
    names it. When the last of `numWorkers` users is gone the file is removed, as upstream's is."""

    _MAGIC = b"torchnative-filestore 1\n"
    _USERS = "/tn/filestore_users"
    # The operations that may change the state (written back when they succeed).
    _WRITES = {"set", "multi_set", "add", "append", "compare_set", "delete_key", "queue_push", "queue_pop"}

    def __init__(self, path, numWorkers=-1):
        super().__init__()
        self.path = _os.fspath(path)
        self._num_workers = numWorkers
        self._closed = False
        self.add(self._USERS, 1)

    def _load(self, f):
        data = f.read()
        kv = _KeyValue()
        if not data:
            return kv
        if not data.startswith(self._MAGIC):
            raise _DistStoreError(f"FileStore {self.path}: not a torchnative store file")
        pos, n = _b.len(self._MAGIC), _b.len(data)
        try:
            while pos < n:
                kind = data[pos]
                (klen,) = _struct.unpack_from("<I", data, pos + 1)
                key = data[pos + 5:pos + 5 + klen].decode()
                pos += 5 + klen
                (vlen,) = _struct.unpack_from("<I", data, pos)
                value = data[pos + 4:pos + 4 + vlen]
                if kind not in (0, 1) or _b.len(key.encode()) != klen or _b.len(value) != vlen:
                    raise ValueError("record past the end of the file")
                pos += 4 + vlen
                if kind == 0:
                    kv.data[key] = value
                else:
                    kv.queues.setdefault(key, _deque()).append(value)
        except (ValueError, UnicodeDecodeError, _struct.error, IndexError) as e:
            raise _DistStoreError(f"FileStore {self.path}: damaged at byte {pos}: {e}") from None
        return kv

    def _save(self, f, kv):
        parts = [self._MAGIC]
        for kind, items in ((0, kv.data.items()), (1, ((k, v) for k, q in kv.queues.items() for v in q))):
            for key, value in items:
                k = key.encode()
                parts += [_b.bytes([kind]), _struct.pack("<I", _b.len(k)), k, _struct.pack("<I", _b.len(value)), value]
        f.seek(0)
        f.truncate()
        f.write(b"".join(parts))
        f.flush()

    def _once(self, op, args):
        import fcntl

        fd = _os.open(self.path, _os.O_RDWR | _os.O_CREAT, 0o600)
        with _os.fdopen(fd, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            kv = self._load(f)
            status, out = kv.run(op, args, 0.0)
            if status == "ok" and op in self._WRITES:
                self._save(f, kv)
            return status, out

    def _call(self, op, args, timeout_s):
        deadline = _time.monotonic() + timeout_s
        while True:
            status, out = self._once(op, args)
            if status != "timeout" or _time.monotonic() >= deadline:
                return status, out
            _time.sleep(0.01)

    def __del__(self):
        # Best effort, as upstream: the last user removes the file.
        try:
            if not self._closed and self.add(self._USERS, -1) == 0 and self._num_workers != 0:
                _os.unlink(self.path)
        except Exception:  # noqa: BLE001  (interpreter shutdown, file already gone)
            pass
        self._closed = True


def _test_python_store(store):
    store.set("key0", "value0")
    if store.get("key0") != b"value0" or store.add("key1", 3) != 3 or store.add("key1", 4) != 7:
        raise RuntimeError("_test_python_store: the store gave wrong answers")


# ----- work ------------------------------------------------------------------------------------


class Work:
    """An operation's handle. `wait` returns True once it is done, or raises its error."""

    def __init__(self, *args, **kwargs):
        self._done = _threading.Event()
        self._error = None
        self._result = []
        self._src = -1
        self._run_on_wait = None

    def _finish(self, result=None, error=None):
        self._result = result if result is not None else []
        self._error = error
        self._done.set()

    def wait(self, timeout=None):
        if self._run_on_wait is not None:
            run, self._run_on_wait = self._run_on_wait, None
            try:
                self._finish(run())
            except BaseException as e:  # noqa: BLE001  (kept for the caller, raised below)
                self._finish(error=e)
        if not self._done.wait(None if timeout is None or _seconds(timeout) < 0 else _seconds(timeout)):
            raise _DistBackendError(f"Work.wait: not done after {_seconds(timeout):g} s")
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._error is None

    def exception(self):
        return self._error

    def result(self):
        self.wait()
        return self._result

    def source_rank(self):
        return self._src

    _source_rank = source_rank

    def synchronize(self):
        self.wait()

    def block_current_stream(self):
        self.wait()

    def _get_sequence_number(self):
        return 0


def _done_work(result=None):
    work = Work()
    work._finish(result)
    return work


# ----- the mesh: a connection to every peer --------------------------------------------------

_KIND_COLLECTIVE, _KIND_P2P = 0, 1
_HEADER = _struct.Struct("<BqQ")  # kind, channel (collective sequence number or p2p tag), length
_HELLO = _struct.Struct("<8sII")  # magic, rank, world size
_MAGIC = b"tnmesh01"


class _PeerClosed(Exception):
    pass


class _Mesh:
    """Connections from this rank to every other rank of one group, with a reader thread per
    peer that files arriving messages by (peer, kind, channel)."""

    def __init__(self, store, rank, size, timeout_s):
        self.rank, self.size = rank, size
        self.inbox = {}
        self.closed_peers = {}
        self.arrived = _threading.Condition()
        self.socks = {}
        self.send_locks = {}
        self.shut = False
        if size == 1:
            return
        host = store._tn_local_host() if hasattr(store, "_tn_local_host") else "127.0.0.1"
        listener = _socket.create_server((host, 0), backlog=size)
        store.set(f"tn_mesh/{rank}", f"{host}:{listener.getsockname()[1]}")
        deadline = _time.monotonic() + timeout_s
        try:
            for peer in _b.range(rank):
                store.wait([f"tn_mesh/{peer}"], _timedelta(seconds=_b.max(0.001, deadline - _time.monotonic())))
                addr = store.get(f"tn_mesh/{peer}").decode()
                peer_host, _, peer_port = addr.rpartition(":")
                sock = _socket.create_connection((peer_host, _b.int(peer_port)),
                                                 timeout=_b.max(1.0, deadline - _time.monotonic()))
                sock.sendall(_HELLO.pack(_MAGIC, rank, size))
                self._adopt(peer, sock)
            listener.settimeout(1.0)
            while _b.len(self.socks) < size - 1:
                if _time.monotonic() >= deadline:
                    waiting = sorted(set(_b.range(size)) - set(self.socks) - {rank})
                    raise _DistNetworkError(f"torchnative c10d: rank {rank} timed out after {timeout_s:g} s "
                                            f"connecting to ranks {waiting}")
                try:
                    sock, _ = listener.accept()
                except _socket.timeout:
                    continue
                sock.settimeout(max(1.0, deadline - _time.monotonic()))
                magic, peer, peer_size = _HELLO.unpack(_recv_exact(sock, _HELLO.size))
                if magic != _MAGIC or peer_size != size or not rank < peer < size or peer in self.socks:
                    sock.close()  # not one of this group's ranks
                    continue
                self._adopt(peer, sock)
        finally:
            listener.close()

    def _adopt(self, peer, sock):
        sock.settimeout(None)
        sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        self.socks[peer] = sock
        self.send_locks[peer] = _threading.Lock()
        _threading.Thread(target=self._read, args=(peer, sock), name=f"torchnative-mesh-{peer}",
                          daemon=True).start()

    def _read(self, peer, sock):
        try:
            while True:
                kind, channel, length = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
                if kind not in (_KIND_COLLECTIVE, _KIND_P2P):
                    raise ValueError(f"unknown message kind {kind}")
                payload = _recv_exact(sock, length)
                with self.arrived:
                    self.inbox.setdefault((peer, kind, channel), _deque()).append(payload)
                    self.arrived.notify_all()
        except (OSError, ConnectionError, ValueError, _struct.error) as e:
            with self.arrived:
                self.closed_peers[peer] = "this rank closed the group" if self.shut else _b.str(e)
                self.arrived.notify_all()

    def send(self, peer, kind, channel, payload):
        sock = self.socks[peer]
        try:
            with self.send_locks[peer]:
                sock.sendall(_HEADER.pack(kind, channel, _b.len(payload)))
                sock.sendall(payload)
        except OSError as e:
            raise _PeerClosed(f"sending to rank {peer} failed: {e}") from None

    def recv(self, peer, kind, channel, deadline):
        """The next message on (peer, kind, channel); `peer` None takes it from any peer."""
        peers = _b.range(self.size) if peer is None else (peer,)
        with self.arrived:
            while True:
                for p in peers:
                    box = self.inbox.get((p, kind, channel))
                    if box:
                        payload = box.popleft()
                        if not box:
                            del self.inbox[(p, kind, channel)]
                        return p, payload
                if peer is not None and peer in self.closed_peers:
                    raise _PeerClosed(f"rank {peer} closed its connection ({self.closed_peers[peer]}): "
                                      "the process exited or failed")
                left = deadline - _time.monotonic()
                if left <= 0:
                    raise TimeoutError
                self.arrived.wait(left)

    def close(self):
        self.shut = True
        for sock in self.socks.values():
            try:
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


# ----- tensors as bytes --------------------------------------------------------------------


def _to_bytes(t):
    return _C._tn_tensor_bytes(t.detach().contiguous())  # noqa: F821


def _from_bytes(data, like):
    if _b.len(data) == 0:
        return like.new_empty(like.shape)
    return _C._tn_tensor_from_bytes(data, like.dtype).view(like.shape)  # noqa: F821


def _write(dst, src):
    # Through detached aliases: collectives write their results outside autograd, as upstream's
    # do (a parameter that requires grad can be all_reduced in place).
    src = src.detach()
    dst.detach().copy_(src if src.shape == dst.shape else src.reshape(dst.shape))


def _reduce(op, tensors, world):
    """`tensors` (rank order) reduced left to right, so every rank computes the same bits."""
    import torch

    kind = _red_kind(op)
    dtype = tensors[0].dtype
    is_bool = dtype == torch.bool
    step = {
        _RedOpType.SUM: torch.logical_or if is_bool else torch.add,
        _RedOpType.AVG: torch.add,
        _RedOpType.PRODUCT: torch.logical_and if is_bool else torch.mul,
        _RedOpType.MIN: torch.logical_and if is_bool else torch.minimum,
        _RedOpType.MAX: torch.logical_or if is_bool else torch.maximum,
        _RedOpType.BAND: torch.bitwise_and,
        _RedOpType.BOR: torch.bitwise_or,
        _RedOpType.BXOR: torch.bitwise_xor,
    }[kind]
    acc = tensors[0]
    for t in tensors[1:]:
        acc = step(acc, t)  # every step keeps the dtype (bool's are the logical ops)
    if kind is _RedOpType.AVG:
        acc = torch.div(acc, world).to(dtype)
    return acc


# ----- the backend -------------------------------------------------------------------------


class Backend:
    """c10d's per-device backend interface. Python backends subclass it."""

    class Options:
        def __init__(self, backend="", timeout=_DEFAULT_TIMEOUT):
            self.backend = backend
            self._timeout = timeout
            self.global_ranks_in_group = []
            self.group_name = ""
            self.use_pg_for_symm_mem_rendezvous = False
            self.enable_reconfigure = False

    def __init__(self, rank, size):
        self._rank, self._size = rank, size
        self.options = Backend.Options("", _DEFAULT_TIMEOUT)

    supports_splitting = False
    supports_coalescing = False
    supports_shrinking = False
    supports_reconfigure = False
    supports_window = False
    supports_abort_hooks = False
    _supports_time_estimate = False

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def name(self):
        return type(self).__name__

    def set_timeout(self, timeout):
        self.options._timeout = timeout

    _set_default_timeout = set_timeout

    def _add_ephemeral_timeout(self, timeout):
        pass

    def _set_sequence_number_for_group(self):
        pass

    def eager_connect_single_device(self, device):
        pass

    def supports_tensor_alloc(self, device):
        return False

    def abort(self):
        self.shutdown()

    def shutdown(self):
        pass


Backend.__module__ = "torch._C._distributed_c10d"


class ProcessGroupTorchnative(Backend):
    """torchnative's CPU backend: every collective of upstream's API over the mesh."""

    _NAME = "torchnative"

    class Options(Backend.Options):
        def __init__(self, timeout=_DEFAULT_TIMEOUT):
            super().__init__("torchnative", timeout)

    def __init__(self, store, rank, size, timeout=_DEFAULT_TIMEOUT, enable_reconfigure=False, **kwargs):
        if not 0 <= rank < size:
            raise ValueError(f"{self._NAME} backend: rank {rank} is outside a group of size {size}")
        super().__init__(rank, size)
        self.options = type(self).Options(timeout=timeout)
        self._mesh = _Mesh(store, rank, size, _seconds(timeout))
        self._seq = 0
        self._jobs = _deque()
        self._jobs_ready = _threading.Condition()
        self._closed = False
        self._worker = _threading.Thread(target=self._work_loop, name="torchnative-c10d", daemon=True)
        self._worker.start()

    def name(self):
        return self._NAME

    # -- running operations

    def _work_loop(self):
        while True:
            with self._jobs_ready:
                while not self._jobs and not self._closed:
                    self._jobs_ready.wait()
                if not self._jobs:
                    return
                fn, work = self._jobs.popleft()
            try:
                work._finish(fn())
            except BaseException as e:  # noqa: BLE001  (handed to the caller through the Work)
                work._finish(error=e)

    def _submit(self, what, opts, body):
        """Runs `body(channel, deadline)` on the worker thread in call order; its errors name
        the operation and this rank."""
        if self._closed:
            raise _DistBackendError(f"{self._NAME} backend: {what} after the process group was destroyed")
        channel = self._seq
        self._seq += 1
        timeout_s = self._timeout_s(opts)
        work = Work()

        def run():
            deadline = _time.monotonic() + timeout_s
            try:
                return body(channel, deadline)
            except (TimeoutError, _PeerClosed) as e:
                raise self._failure(what, e, timeout_s, "a peer (a rank did not join the collective, or exited)") \
                    from None

        with self._jobs_ready:
            self._jobs.append((run, work))
            self._jobs_ready.notify()
        return work

    def _failure(self, what, error, timeout_s, waiting_for):
        """The error a caller sees when a peer did not answer in time or is gone."""
        if isinstance(error, TimeoutError):
            return _DistBackendError(f"{self._NAME} backend: {what} on rank {self._rank} timed out after "
                                     f"{timeout_s:g} s waiting for {waiting_for}")
        return _DistBackendError(f"{self._NAME} backend: {what} on rank {self._rank}: {error}")

    def _timeout_s(self, opts):
        timeout = getattr(opts, "timeout", _UNSET_TIMEOUT) if opts is not None else _UNSET_TIMEOUT
        if timeout is None or _seconds(timeout) < 0:
            timeout = self.options._timeout
        return _seconds(timeout)

    def _send(self, peer, channel, tensor_or_bytes):
        data = tensor_or_bytes if isinstance(tensor_or_bytes, _b.bytes) else _to_bytes(tensor_or_bytes)
        self._mesh.send(peer, _KIND_COLLECTIVE, channel, data)

    def _recv(self, peer, channel, deadline, like, what):
        _, data = self._mesh.recv(peer, _KIND_COLLECTIVE, channel, deadline)
        return self._tensor_from(peer, data, like, what)

    def _tensor_from(self, peer, data, like, what):
        """A message from `peer` as a tensor like `like`, or the error naming both shapes."""
        want = like.numel() * like.element_size()
        if _b.len(data) != want:
            raise _DistBackendError(
                f"{self._NAME} backend: {what}: rank {peer} sent {len(data)} bytes where rank {self._rank} "
                f"expects {want} ({like.dtype}, shape {tuple(like.shape)}): the ranks' tensors differ")
        return _from_bytes(data, like)

    def _check(self, what, tensors):
        import torch

        for t in tensors:
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{self._NAME} backend: {what} takes tensors, got {type(t).__name__}")
            if t.device.type != "cpu":
                raise ValueError(f"{self._NAME} backend: {what}: tensor on {t.device}, this backend is CPU only")
            if t.is_sparse:
                raise NotImplementedError(f"{self._NAME} backend: {what} of a sparse tensor is not implemented")

    def _root(self, what, root):
        if not 0 <= root < self._size:
            raise ValueError(f"{self._NAME} backend: {what}: root rank {root} is outside a group of size "
                             f"{self._size}")
        return root

    def _peer(self, what, peer, role):
        if not 0 <= peer < self._size or peer == self._rank:
            raise ValueError(f"{self._NAME} backend: {what}: invalid {role} rank {peer} (this is rank "
                             f"{self._rank} of {self._size})")

    def _root_with_list(self, what, root, lists, kind):
        """A gather's or scatter's root, checked with the list only the root passes: one list
        of a tensor per rank there, nothing elsewhere."""
        root = self._root(what, root)
        if self._rank == root:
            if _b.len(lists) != 1 or _b.len(lists[0]) != self._size:
                raise ValueError(f"{self._NAME} backend: {what}: the root needs one list of {self._size} {kind}")
            self._check(what, lists[0])
        elif lists and _b.any(lists):
            raise ValueError(f"{self._NAME} backend: {what}: only the root (rank {root}) takes {kind}")
        return root

    # -- collectives (upstream's call forms: lists of tensors and an options object)

    def _allreduce_into(self, tensors, op, channel, deadline, what):
        """Reduce-scatter to chunk owners, then all-gather: each rank owns a contiguous chunk of
        the flat tensor, reduces it over ranks in rank order, and sends it back to every rank."""
        import torch

        flat = torch.cat([t.detach().reshape(-1) for t in tensors]) if _b.len(tensors) > 1 \
            else tensors[0].detach().reshape(-1).clone()
        n, w, r = flat.numel(), self._size, self._rank
        bounds = [(n * i) // w for i in _b.range(w + 1)]
        for peer in _b.range(w):
            if peer != r:
                self._send(peer, channel, flat[bounds[peer]:bounds[peer + 1]])
        mine = flat[bounds[r]:bounds[r + 1]]
        parts = [mine if p == r else self._recv(p, channel, deadline, mine, what) for p in _b.range(w)]
        reduced = _reduce(op, parts, w)
        for peer in _b.range(w):
            if peer != r:
                self._send(peer, channel, reduced)
        for peer in _b.range(w):
            piece = flat[bounds[peer]:bounds[peer + 1]]
            piece.copy_(reduced if peer == r else self._recv(peer, channel, deadline, piece, what))
        offset = 0
        for t in tensors:
            _write(t, flat[offset:offset + t.numel()].view(t.shape))
            offset += t.numel()
        return tensors

    def allreduce(self, tensors, opts=None):
        tensors = _b.list(tensors) if isinstance(tensors, (_b.list, _b.tuple)) else [tensors]
        opts = opts if isinstance(opts, AllreduceOptions) else _with_op(AllreduceOptions(), opts)
        self._check("allreduce", tensors)
        _reduce_check(opts.reduceOp, tensors[0], "allreduce")
        tensors = [_real(t) for t in tensors]
        return self._submit("allreduce", opts,
                            lambda ch, dl: self._allreduce_into(tensors, opts.reduceOp, ch, dl, "allreduce"))

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts or AllreduceCoalescedOptions()
        self._check("allreduce_coalesced", tensors)
        if _b.len({t.dtype for t in tensors}) > 1:
            raise ValueError(f"{self._NAME} backend: allreduce_coalesced needs tensors of one dtype")
        _reduce_check(opts.reduceOp, tensors[0], "allreduce_coalesced")
        tensors = [_real(t) for t in tensors]
        return self._submit("allreduce_coalesced", opts,
                            lambda ch, dl: self._allreduce_into(tensors, opts.reduceOp, ch, dl,
                                                                "allreduce_coalesced"))

    def broadcast(self, tensors, opts=None):
        tensors = _b.list(tensors) if isinstance(tensors, (_b.list, _b.tuple)) else [tensors]
        opts = opts if isinstance(opts, BroadcastOptions) else BroadcastOptions()
        self._check("broadcast", tensors)
        root = self._root("broadcast", opts.rootRank)

        def body(ch, dl):
            t = tensors[opts.rootTensor]
            if self._rank == root:
                for peer in _b.range(self._size):
                    if peer != root:
                        self._send(peer, ch, t)
            else:
                _write(t, self._recv(root, ch, dl, t, "broadcast"))
            return tensors

        return self._submit("broadcast", opts, body)

    def reduce(self, tensors, opts=None):
        opts = opts if isinstance(opts, ReduceOptions) else ReduceOptions()
        self._check("reduce", tensors)
        root = self._root("reduce", opts.rootRank)
        _reduce_check(opts.reduceOp, tensors[0], "reduce")

        def body(ch, dl):
            t = _real(tensors[opts.rootTensor])
            if self._rank != root:
                self._send(root, ch, t)
            else:
                parts = [t if p == root else self._recv(p, ch, dl, t, "reduce") for p in _b.range(self._size)]
                _write(t, _reduce(opts.reduceOp, parts, self._size))
            return tensors

        return self._submit("reduce", opts, body)

    def _gather_all(self, ch, dl, tensor, what):
        """Every rank's `tensor`, in rank order."""
        for peer in _b.range(self._size):
            if peer != self._rank:
                self._send(peer, ch, tensor)
        return [tensor if p == self._rank else self._recv(p, ch, dl, tensor, what) for p in _b.range(self._size)]

    def allgather(self, output_tensors, input_tensors, opts=None):
        self._check("allgather", input_tensors)
        if _b.len(input_tensors) != 1 or _b.len(output_tensors) != 1:
            raise ValueError(f"{self._NAME} backend: allgather takes one input tensor and one output list")
        outs = output_tensors[0]
        if _b.len(outs) != self._size:
            raise ValueError(f"{self._NAME} backend: allgather: {len(outs)} output tensors for a group of "
                             f"{self._size}")
        self._check("allgather", outs)

        def body(ch, dl):
            for out, part in _b.zip(outs, self._gather_all(ch, dl, input_tensors[0], "allgather")):
                _write(out, part)
            return output_tensors

        return self._submit("allgather", opts, body)

    def _allgather_base(self, output, input, opts=None):
        self._check("_allgather_base", [output, input])
        if output.numel() != input.numel() * self._size:
            raise ValueError(f"{self._NAME} backend: all_gather_into_tensor: the output has {output.numel()} "
                             f"elements, {self._size} x the input's {input.numel()} expected")

        def body(ch, dl):
            parts = self._gather_all(ch, dl, input, "all_gather_into_tensor")
            import torch

            _write(output, torch.cat([p.detach().reshape(-1) for p in parts]))
            return [output]

        return self._submit("all_gather_into_tensor", opts, body)

    all_gather_single = _allgather_base

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        works = [self.allgather([outs], [inp], opts) for outs, inp in _b.zip(output_lists, input_list)]
        return _chain(works, output_lists)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._allgather_base(o, i, opts) for o, i in _b.zip(outputs, inputs)]
        return _chain(works, outputs)

    def gather(self, output_tensors, input_tensors, opts=None):
        opts = opts if isinstance(opts, GatherOptions) else GatherOptions()
        self._check("gather", input_tensors)
        root = self._root_with_list("gather", opts.rootRank, output_tensors, "outputs")

        def body(ch, dl):
            t = input_tensors[0]
            if self._rank != root:
                self._send(root, ch, t)
                return []
            outs = output_tensors[0]
            for p, out in _b.enumerate(outs):
                _write(out, t if p == root else self._recv(p, ch, dl, out, "gather"))
            return outs

        return self._submit("gather", opts, body)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts if isinstance(opts, ScatterOptions) else ScatterOptions()
        self._check("scatter", output_tensors)
        root = self._root_with_list("scatter", opts.rootRank, input_tensors, "inputs")

        def body(ch, dl):
            out = output_tensors[0]
            if self._rank == root:
                for p, t in _b.enumerate(input_tensors[0]):
                    if p != root:
                        self._send(p, ch, t)
                _write(out, input_tensors[0][root])
            else:
                _write(out, self._recv(root, ch, dl, out, "scatter"))
            return [out]

        return self._submit("scatter", opts, body)

    def _reduce_scatter_parts(self, ch, dl, inputs, out, op, what):
        for peer in _b.range(self._size):
            if peer != self._rank:
                self._send(peer, ch, inputs[peer])
        mine = inputs[self._rank].detach().reshape(out.shape)
        parts = [mine if p == self._rank else self._recv(p, ch, dl, out, what) for p in _b.range(self._size)]
        _write(out, _reduce(op, parts, self._size))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts if isinstance(opts, ReduceScatterOptions) else ReduceScatterOptions()
        self._check("reduce_scatter", output_tensors)
        inputs = input_tensors[0]
        if _b.len(inputs) != self._size:
            raise ValueError(f"{self._NAME} backend: reduce_scatter: {len(inputs)} inputs for a group of "
                             f"{self._size}")
        self._check("reduce_scatter", inputs)
        _reduce_check(opts.reduceOp, output_tensors[0], "reduce_scatter")

        def body(ch, dl):
            self._reduce_scatter_parts(ch, dl, [_real(t) for t in inputs], _real(output_tensors[0]), opts.reduceOp,
                                       "reduce_scatter")
            return output_tensors

        return self._submit("reduce_scatter", opts, body)

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts if isinstance(opts, ReduceScatterOptions) else ReduceScatterOptions()
        self._check("reduce_scatter_tensor", [output, input])
        if input.numel() != output.numel() * self._size:
            raise ValueError(f"{self._NAME} backend: reduce_scatter_tensor: the input has {input.numel()} "
                             f"elements, {self._size} x the output's {output.numel()} expected")
        _reduce_check(opts.reduceOp, output, "reduce_scatter_tensor")

        def body(ch, dl):
            pieces = _real(input.detach()).reshape(self._size, -1, *((2,) if input.is_complex() else ())).unbind(0)
            self._reduce_scatter_parts(ch, dl, pieces, _real(output), opts.reduceOp, "reduce_scatter_tensor")
            return [output]

        return self._submit("reduce_scatter_tensor", opts, body)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        works = [self._reduce_scatter_base(o, i, opts) for o, i in _b.zip(outputs, inputs)]
        return _chain(works, outputs)

    def alltoall(self, output_tensors, input_tensors, opts=None):
        self._check("alltoall", _b.list(output_tensors) + _b.list(input_tensors))
        if _b.len(output_tensors) != self._size or _b.len(input_tensors) != self._size:
            raise ValueError(f"{self._NAME} backend: all_to_all needs {self._size} inputs and outputs")

        def body(ch, dl):
            for peer in _b.range(self._size):
                if peer != self._rank:
                    self._send(peer, ch, input_tensors[peer])
            for peer, out in _b.enumerate(output_tensors):
                src = input_tensors[peer] if peer == self._rank else \
                    self._recv(peer, ch, dl, out, "all_to_all")
                _write(out, src)
            return output_tensors

        return self._submit("all_to_all", opts, body)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        self._check("all_to_all_single", [output, input])

        def splits(t, sizes, what):
            if not sizes:
                if t.shape[0] % self._size:
                    raise ValueError(f"{self._NAME} backend: all_to_all_single: the {what}'s first dimension "
                                     f"{t.shape[0]} does not divide by the group size {self._size}")
                sizes = [t.shape[0] // self._size] * self._size
            if _b.len(sizes) != self._size or _b.sum(sizes) != (t.shape[0] if t.dim() else 1):
                raise ValueError(f"{self._NAME} backend: all_to_all_single: {what} split sizes {list(sizes)} do "
                                 f"not cover the first dimension {t.shape[0]} in {self._size} parts")
            return _b.list(t.split(_b.list(sizes), 0))

        outs = splits(output, output_split_sizes, "output")
        ins = splits(input, input_split_sizes, "input")
        return self.alltoall(outs, ins, opts)

    all_to_all_single = alltoall_base

    def barrier(self, opts=None):
        import torch

        token = torch.zeros(1, dtype=torch.uint8)

        def body(ch, dl):
            self._gather_all(ch, dl, token, "barrier")
            return []

        return self._submit("barrier", opts if not isinstance(opts, _timedelta) else None, body)

    def monitored_barrier(self, timeout=None, wait_all_ranks=False):
        """Rank 0 hears from every other rank within the timeout, then releases them; the
        ranks that did not come are named (all of them with `wait_all_ranks`), as upstream's."""
        import torch

        opts = BarrierOptions()
        if timeout is not None:
            opts.timeout = timeout
        token = torch.zeros(1, dtype=torch.uint8)
        timeout_ms = _b.int(self._timeout_s(opts) * 1000)

        def body(ch, dl):
            if self._rank != 0:
                self._send(0, ch, token)
                self._recv(0, ch, dl, token, "monitored_barrier")
                return []
            missing = []
            for peer in _b.range(1, self._size):
                try:
                    self._recv(peer, ch, dl, token, "monitored_barrier")
                except (TimeoutError, _PeerClosed):
                    missing.append(peer)
                    if not wait_all_ranks:
                        break
            if missing:
                who = f"Rank {missing[0]}" if _b.len(missing) == 1 else \
                    "Ranks " + ", ".join(_b.str(r) for r in missing)
                raise _DistBackendError(f"[Rank 0]: {who} failed to pass monitoredBarrier in {timeout_ms} ms")
            for peer in _b.range(1, self._size):
                self._send(peer, ch, token)
            return []

        self._submit("monitored_barrier", opts, body).wait()

    # -- point to point: sends complete at once (the peer's reader drains them); receives wait

    def send(self, tensors, dst, tag=0):
        self._check("send", tensors)
        self._peer("send", dst, "destination")
        try:
            for t in tensors:
                self._mesh.send(dst, _KIND_P2P, tag, _to_bytes(t))
        except _PeerClosed as e:
            raise self._failure("send", e, 0, "") from None
        return _done_work(tensors)

    def _recv_work(self, tensors, src, tag, what):
        self._check(what, tensors)
        timeout_s = self._timeout_s(None)
        work = Work()

        def run():
            deadline = _time.monotonic() + timeout_s
            try:
                for t in tensors:
                    peer, data = self._mesh.recv(src, _KIND_P2P, tag, deadline)
                    _write(t, self._tensor_from(peer, data, t, what))
                    work._src = peer
            except (TimeoutError, _PeerClosed) as e:
                raise self._failure(what, e, timeout_s, f"rank {src}") from None
            return tensors

        work._run_on_wait = run
        return work

    def recv(self, tensors, src, tag=0):
        self._peer("recv", src, "source")
        return self._recv_work(tensors, src, tag, "recv")

    def recv_anysource(self, tensors, tag=0):
        return self._recv_work(tensors, None, tag, "recv_anysource")

    def shutdown(self):
        with self._jobs_ready:
            self._closed = True
            self._jobs_ready.notify_all()
        if self._worker.is_alive() and self._worker is not _threading.current_thread():
            self._worker.join(timeout=self.options._timeout.total_seconds())
        self._mesh.close()


class ProcessGroupGloo(ProcessGroupTorchnative):
    """What upstream's Python builds for `gloo`: torchnative's backend, under gloo's name."""

    _NAME = "gloo"

    class Options(ProcessGroupTorchnative.Options):
        def __init__(self, timeout=_DEFAULT_TIMEOUT):
            super().__init__(timeout)
            self.backend = "gloo"
            self._devices = []
            self._threads = 2

    class Device:
        def __init__(self, hostname="", interface=""):
            self.hostname, self.interface = hostname, interface

    @staticmethod
    def create_device(hostname="", interface="", lazy_init=None):
        return ProcessGroupGloo.Device(hostname, interface)

    @staticmethod
    def create_default_device(lazy_init=None):
        return ProcessGroupGloo.Device()


ProcessGroupGloo.__module__ = ProcessGroupTorchnative.__module__ = "torch._C._distributed_c10d"


def _reduce_check(op, tensor, what):
    """Refuses before any message moves, so that no rank is left waiting on one that refused.
    The refusals are gloo's (RuntimeError); complex tensors reduce as their real views, for the
    sums only."""
    kind = _red_kind(op)
    if kind in (_RedOpType.PREMUL_SUM, _RedOpType.UNUSED):
        raise RuntimeError(f"Cannot use ReduceOp.{kind.name} with torchnative's c10d backend")
    if kind is _RedOpType.AVG and not (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise RuntimeError(f"{what}: ReduceOp.AVG needs a floating-point tensor, got {tensor.dtype}")
    if kind in (_RedOpType.BAND, _RedOpType.BOR, _RedOpType.BXOR) and (
            tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        raise RuntimeError(f"Cannot use ReduceOp.{kind.name} with non-integral dtype {tensor.dtype}")
    if tensor.dtype.is_complex and kind not in (_RedOpType.SUM, _RedOpType.AVG):
        raise RuntimeError(f"{what} does not support ReduceOp.{kind.name} on complex tensors")


def _real(t):
    import torch

    return torch.view_as_real(t) if t.is_complex() else t


def _make_nccl_premul_sum(factor):
    """Bound in every upstream build; the reduction it makes is NCCL's, which this backend
    refuses by name when asked to run it."""
    op = ReduceOp(_RedOpType.PREMUL_SUM)
    op.factor = factor
    return op


def _with_op(opts, op):
    if op is not None:
        opts.reduceOp = op
    return opts


def _chain(works, result):
    work = Work()

    def run():
        for w in works:
            w.wait()
        return result

    work._run_on_wait = run
    return work


def _register_torchnative_backend():
    """The entry point (torch.distributed.backends: torchnative) upstream's Backend calls the
    first time a process asks for `torchnative` by name."""
    from torch.distributed import Backend as PyBackend

    def create(opts, backend_options):
        backend = ProcessGroupTorchnative(opts.store, opts.group_rank, opts.group_size, timeout=opts.timeout)
        backend.options.global_ranks_in_group = opts.global_ranks_in_group
        backend.options.group_name = opts.group_id
        return backend

    PyBackend.register_backend("torchnative", create, extended_api=True, devices=["cpu"])


# ----- the process group ---------------------------------------------------------------------


class _ProcessGroupBody:
    """c10d's ProcessGroup: a group's rank, size and name, and its backend per device type;
    each operation goes to the backend of its tensors' device."""

    def __init__(self, *args):
        if _b.len(args) == 3:
            self._store, self._rank, self._size = args
        elif _b.len(args) == 2:
            self._store, (self._rank, self._size) = None, args
        else:
            raise TypeError("ProcessGroup(store, rank, size) or ProcessGroup(rank, size)")
        self._backends = {}
        self._backend_types = {}
        self._default_backend_type = None
        self._group_name = ""
        self._group_desc = ""
        self.bound_device_id = None
        self.use_pg_for_symm_mem_rendezvous = False

    def rank(self):
        return self._rank

    def size(self):
        return self._size

    def get_group_store(self):
        return self._store

    @property
    def group_name(self):
        return self._group_name

    @property
    def group_desc(self):
        return self._group_desc

    def _set_group_name(self, name):
        self._group_name = name

    def _set_group_desc(self, desc):
        self._group_desc = desc

    def _set_default_backend(self, backend_type):
        self._default_backend_type = backend_type

    def _register_backend(self, device, backend_type, backend):
        self._backends[device.type] = backend
        self._backend_types[device.type] = backend_type

    @property
    def _device_types(self):
        import torch

        return [torch.device(d) for d in self._backends]

    def _get_backend(self, device):
        kind = device if isinstance(device, _b.str) else device.type
        if kind not in self._backends:
            raise RuntimeError(f"ProcessGroup {self._group_name!r} has no backend for device type {kind!r} "
                               f"(it has {sorted(self._backends)})")
        return self._backends[kind]

    get_backend = _get_backend

    def _get_backend_name(self):
        names = {b.name() for b in self._backends.values()}
        if _b.len(names) == 1:
            return names.pop()
        if self._default_backend_type is not None:
            return self._default_backend_type.name.lower()
        return "undefined"

    def name(self):
        return self._get_backend_name()

    def _backend_id(self, backend_type):
        for kind, t in self._backend_types.items():
            if t == backend_type:
                return _b.id(self._backends[kind])
        raise RuntimeError(f"ProcessGroup has no backend of type {backend_type}")

    def _has_hooks(self):
        return False

    def _wait_for_pending_works(self):
        pass

    def set_timeout(self, timeout):
        for b in self._backends.values():
            b.set_timeout(timeout)

    def _add_ephemeral_timeout(self, timeout):
        pass

    def shutdown(self):
        for b in self._backends.values():
            b.shutdown()

    def abort(self):
        for b in self._backends.values():
            b.abort()

    def boxed(self):
        return self

    @staticmethod
    def unbox(obj):
        return obj

    def _start_coalescing(self, device):
        raise NotImplementedError("ProcessGroup._start_coalescing (coalesced collectives) is not implemented in "
                                  "torchnative")

    def _end_coalescing(self, device):
        raise NotImplementedError("ProcessGroup._end_coalescing is not implemented in torchnative")

    def __repr__(self):
        return f"<ProcessGroup {self._group_name!r} rank {self._rank} of {self._size}>"

    def _cpu_backend(self, tensors=()):
        for t in tensors:
            return self._get_backend(t.device)
        return self._get_backend("cpu") if "cpu" in self._backends else next(iter(self._backends.values()))


def _first_tensors(args):
    for a in args:
        if hasattr(a, "device"):
            return [a]
        if isinstance(a, (_b.list, _b.tuple)) and a:
            found = _first_tensors(a)
            if found:
                return found
    return []


def _forward(name):
    def method(self, *args, **kwargs):
        return getattr(self._cpu_backend(_first_tensors(args)), name)(*args, **kwargs)

    method.__name__ = name
    return method


for _n in ("broadcast allreduce allreduce_coalesced reduce allgather _allgather_base all_gather_single "
           "allgather_coalesced allgather_into_tensor_coalesced gather scatter reduce_scatter _reduce_scatter_base "
           "reduce_scatter_single reduce_scatter_tensor_coalesced alltoall alltoall_base all_to_all_single barrier "
           "monitored_barrier send recv recv_anysource").split():
    setattr(_ProcessGroupBody, _n, _forward(_n))


def _process_group_class():
    # Upstream's ProcessGroup is a custom class (torch._custom_class_base's metaclass), which
    # distributed_c10d registers as an opaque type at import; that module cannot be imported while
    # torch._C itself is, so the class is made on first use.
    from torch._custom_class_base import CustomClassBaseMeta

    cls = CustomClassBaseMeta("ProcessGroup", (_ProcessGroupBody,), {"__module__": "torch._C._distributed_c10d"})
    cls.BackendType = _enum.Enum("BackendType", "UNDEFINED GLOO NCCL UCC MPI XCCL CUSTOM", start=0)
    return cls


# What upstream's CPU-only builds lack: upstream's Python probes for these by import and must see
# them missing (`is_nccl_available()` and friends), not refusing stand-ins.
_ABSENT_PREFIXES = ("ProcessGroupNCCL", "ProcessGroupXCCL", "ProcessGroupUCC", "ProcessGroupMPI", "NCCLX",
                    "_DEFAULT_PG_NCCL", "_NcclEp", "_nccl", "_nvshmem", "_is_nvshmem")


def __getattr__(name):
    if name == "ProcessGroup":
        _this.ProcessGroup = _process_group_class()
        return _this.ProcessGroup
    if name.startswith(_ABSENT_PREFIXES):
        raise AttributeError(f"module 'torch._C._distributed_c10d' has no attribute '{name}' "
                             "(torchnative is a CPU build)")
    return _stub_getattr(name)


_groups = {}
_current = [None]


def _register_process_group(group_name, pg):
    if group_name in _groups:
        raise ValueError(f"a process group named {group_name!r} is already registered")
    _groups[group_name] = pg


def _resolve_process_group(group_name):
    if group_name not in _groups:
        raise ValueError(f"no process group named {group_name!r} is registered")
    return _groups[group_name]


def _is_process_group_registered(group_name):
    return group_name in _groups


def _unregister_process_group(group_name):
    _groups.pop(group_name, None)


def _unregister_all_process_groups():
    _groups.clear()


def _set_process_group(pg):
    _current[0] = pg


def _current_process_group():
    if _current[0] is None:
        raise RuntimeError("no current process group is set")
    return _current[0]


def _set_global_rank(rank):
    pass


def _broadcast_coalesced(process_group, tensors, buffer_size, src=0):
    opts = BroadcastOptions()
    opts.rootRank = src
    for t in tensors:
        process_group.broadcast([t], opts).wait()


def _verify_params_across_processes(process_group, params, logger=None):
    """DDP's check that every rank holds parameters of the same shapes (upstream's message)."""
    import torch

    meta = torch.tensor([d for p in params for d in (p.dim(), *p.shape)] or [0], dtype=torch.int64)
    size = torch.tensor([meta.numel()], dtype=torch.int64)
    sizes = [torch.zeros_like(size) for _ in _b.range(process_group.size())]
    process_group.allgather([sizes], [size]).wait()
    if _b.len({_b.int(s.item()) for s in sizes}) > 1:
        raise RuntimeError("DDP expects the same number of parameters on every rank")
    metas = [torch.zeros_like(meta) for _ in _b.range(process_group.size())]
    process_group.allgather([metas], [meta]).wait()
    for rank, other in _b.enumerate(metas):
        if not torch.equal(other, meta):
            raise RuntimeError(f"DDP expects the same parameter shapes on every rank; rank {rank} differs")


del _n, _m
