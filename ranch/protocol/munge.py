"""MUNGE credentials (AuthType=auth/munge): encode and decode through the local munged.

libmunge is called through ctypes (no fork: about a tenth of a millisecond per credential); where
libmunge.so.2 is missing, the `munge`/`unmunge` programs of the same package are run instead
(bench/munge_cost.py measures both). The socket is MUNGE's default unless given (Slurm's
`AuthInfo=socket=PATH`).
"""

from __future__ import annotations

import ctypes
import os

TYPE_CHECKING = False  # typing and collections stay off a command's start
if TYPE_CHECKING:
    from collections.abc import Mapping
    from subprocess import CompletedProcess

# ctypes.util, shutil and subprocess are imported where needed: a command pays for them only on
# the rare paths (no soname, no libmunge), not at every start.

DEFAULT_SOCKET = "/run/munge/munge.socket.2"
SOCKET_ENV = "RANCH_MUNGE_SOCKET"
_OPT_SOCKET = 8  # munge_opt_t MUNGE_OPT_SOCKET (munge.h)
# munge_err_t values that name a credential's fault (munge.h); the rest are munged's or ours.
CRED_REPLAYED = 17
CRED_EXPIRED = 15
CRED_REWOUND = 16
_ERROR_NAMES = {
    1: "EMUNGE_SNAFU", 2: "EMUNGE_BAD_ARG", 3: "EMUNGE_BAD_LENGTH", 4: "EMUNGE_OVERFLOW",
    5: "EMUNGE_NO_MEMORY", 6: "EMUNGE_SOCKET", 7: "EMUNGE_TIMEOUT", 8: "EMUNGE_BAD_CRED",
    9: "EMUNGE_BAD_VERSION", 10: "EMUNGE_BAD_CIPHER", 11: "EMUNGE_BAD_MAC",
    12: "EMUNGE_BAD_ZIP", 13: "EMUNGE_BAD_REALM", 14: "EMUNGE_CRED_INVALID",
    15: "EMUNGE_CRED_EXPIRED", 16: "EMUNGE_CRED_REWOUND", 17: "EMUNGE_CRED_REPLAYED",
    18: "EMUNGE_CRED_UNAUTHORIZED",
}
MAX_CRED_CHARS = 8 << 10  # a credential with a 32-byte payload is about 200 characters


class MungeError(Exception):
    """munged refused or could not be asked; `code` is munge_err_t (0 when not munged's)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code

    @property
    def name(self) -> str:
        return _ERROR_NAMES.get(self.code, "")


class Decoded:
    __slots__ = ("gid", "payload", "uid")

    def __init__(self, uid: int, gid: int, payload: bytes) -> None:
        self.uid, self.gid, self.payload = uid, gid, payload


def socket_path(configured: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """AuthInfo's socket beats RANCH_MUNGE_SOCKET beats MUNGE's default."""
    environ = os.environ if env is None else env
    return configured or environ.get(SOCKET_ENV) or DEFAULT_SOCKET


def parse_auth_info(text: str | None) -> dict[str, str]:
    """Slurm's `AuthInfo=socket=PATH,ttl=N,...` as a dict; words without `=` map to ""."""
    out: dict[str, str] = {}
    for part in (text or "").split(","):
        key, _, value = part.strip().partition("=")
        if key:
            out[key.strip().lower()] = value.strip()
    return out


# None: not looked for yet; False: looked for, not installed.
_lib: ctypes.CDLL | bool | None = None
_libc: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL | None:
    """libmunge through ctypes, or None when it is not installed."""
    global _lib, _libc
    if _lib is None:
        try:  # the soname first: find_library runs ldconfig, which costs a command ~15 ms
            lib = ctypes.CDLL("libmunge.so.2")
        except OSError:
            from ctypes.util import find_library

            name = find_library("munge")
            try:
                found = ctypes.CDLL(name) if name else None
            except OSError:
                found = None
            if found is None:
                _lib = False
                return None
            lib = found
        if lib is None:
            _lib = False
            return None
        lib.munge_ctx_create.restype = ctypes.c_void_p
        lib.munge_ctx_destroy.argtypes = [ctypes.c_void_p]
        lib.munge_ctx_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
        lib.munge_ctx_set.restype = ctypes.c_int
        lib.munge_ctx_strerror.argtypes = [ctypes.c_void_p]
        lib.munge_ctx_strerror.restype = ctypes.c_char_p
        lib.munge_strerror.argtypes = [ctypes.c_int]
        lib.munge_strerror.restype = ctypes.c_char_p
        lib.munge_encode.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                     ctypes.c_char_p, ctypes.c_int]
        lib.munge_encode.restype = ctypes.c_int
        lib.munge_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_void_p),
                                     ctypes.POINTER(ctypes.c_int),
                                     ctypes.POINTER(ctypes.c_uint32),
                                     ctypes.POINTER(ctypes.c_uint32)]
        lib.munge_decode.restype = ctypes.c_int
        _libc = ctypes.CDLL(None)
        _libc.free.argtypes = [ctypes.c_void_p]
        _lib = lib
    return _lib if isinstance(_lib, ctypes.CDLL) else None


def available() -> str:
    """How credentials are made here: "libmunge", "programs", or "" (neither is installed)."""
    if _library() is not None:
        return "libmunge"
    import shutil

    if shutil.which("munge") and shutil.which("unmunge"):
        return "programs"
    return ""


class _Ctx:
    """A munge_ctx_t with the socket set; destroyed on exit."""

    def __init__(self, lib: ctypes.CDLL, socket: str | None) -> None:
        self.lib = lib
        self.ctx = lib.munge_ctx_create()
        if not self.ctx:
            raise MungeError("munge_ctx_create failed (out of memory)", 5)
        if socket:
            err = lib.munge_ctx_set(self.ctx, _OPT_SOCKET, os.fsencode(socket))
            if err:
                self._raise(err, f"cannot use munge socket {socket}")

    def _raise(self, err: int, what: str) -> None:
        detail = self.lib.munge_ctx_strerror(self.ctx) or self.lib.munge_strerror(err) or b"?"
        raise MungeError(f"{what}: {detail.decode(errors='replace')}", err)

    def __enter__(self) -> _Ctx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.lib.munge_ctx_destroy(self.ctx)


def encode(payload: bytes = b"", *, socket: str | None = None, use: str = "") -> str:
    """A credential for the calling process's uid/gid carrying `payload` (encrypted with the
    munge key). `use`: "libmunge" or "programs" to force one way (the bench compares them)."""
    lib = _library() if use != "programs" else None
    if lib is None:
        return _encode_program(payload, socket)
    with _Ctx(lib, socket) as c:
        out = ctypes.c_void_p()
        err = lib.munge_encode(ctypes.byref(out), c.ctx, payload, len(payload))
        try:
            if err:
                c._raise(err, f"munge_encode via {socket or DEFAULT_SOCKET}")
            return ctypes.string_at(out.value or 0).decode("ascii")
        finally:
            if out.value and _libc is not None:
                _libc.free(out.value)


def decode(cred: str, *, socket: str | None = None, use: str = "") -> Decoded:
    """The uid, gid and payload munged vouches for; MungeError (with munge's code) when it
    does not: a replayed credential is refused by munged (EMUNGE_CRED_REPLAYED)."""
    if len(cred) > MAX_CRED_CHARS or not cred.isascii():
        raise MungeError(f"credential of {len(cred):,} characters is not one munged made", 8)
    lib = _library() if use != "programs" else None
    if lib is None:
        return _decode_program(cred, socket)
    with _Ctx(lib, socket) as c:
        buf, length = ctypes.c_void_p(), ctypes.c_int()
        uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
        err = lib.munge_decode(cred.encode("ascii"), c.ctx, ctypes.byref(buf),
                               ctypes.byref(length), ctypes.byref(uid), ctypes.byref(gid))
        try:
            if err:
                c._raise(err, "munge credential refused")
            payload = ctypes.string_at(buf.value, length.value) if buf.value else b""
        finally:
            if buf.value and _libc is not None:
                _libc.free(buf.value)
    return Decoded(uid.value, gid.value, payload)


def _run(argv: list[str], data: bytes) -> CompletedProcess[bytes]:
    import subprocess

    try:
        return subprocess.run(argv, input=data, capture_output=True, timeout=10)
    except FileNotFoundError:
        raise MungeError(f"{argv[0]} is not installed (Debian: apt-get install munge)") from None
    except subprocess.TimeoutExpired:
        raise MungeError(f"{argv[0]} did not answer within 10 s", 7) from None


def _encode_program(payload: bytes, socket: str | None) -> str:
    argv = ["munge", *([f"--socket={socket}"] if socket else [])]
    done = _run(argv, payload)
    if done.returncode:
        raise MungeError(f"munge: {done.stderr.decode(errors='replace').strip()}",
                         done.returncode)
    return done.stdout.decode("ascii").strip()


def _decode_program(cred: str, socket: str | None) -> Decoded:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        payload_path = os.path.join(tmp, "payload")
        argv = ["unmunge", "--numeric", "--metadata=-", f"--output={payload_path}",
                *([f"--socket={socket}"] if socket else [])]
        done = _run(argv, cred.encode("ascii"))
        meta = {}
        for line in done.stdout.decode(errors="replace").splitlines():
            key, _, value = line.partition(":")
            meta[key.strip()] = value.strip()
        if done.returncode:
            # --numeric prints STATUS as munge_err_t; its stderr says it in words
            status = meta.get("STATUS", "")
            code = int(status) if status.isdigit() else done.returncode
            said = done.stderr.decode(errors="replace").strip().removeprefix("unmunge: Error: ")
            raise MungeError(f"munge credential refused: {said or _ERROR_NAMES.get(code, code)}",
                             code)
        with open(payload_path, "rb") as f:
            payload = f.read()
    try:
        return Decoded(int(meta["UID"].split()[0]), int(meta["GID"].split()[0]), payload)
    except (KeyError, ValueError, IndexError):
        raise MungeError(f"unmunge printed no UID/GID: {meta}") from None
