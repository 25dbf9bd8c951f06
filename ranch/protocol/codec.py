"""Message bodies: one cattrs converter (orjson preconf) for every class of ranch.protocol.messages.

orjson was picked by bench/codec_bench.py: fastest round trip for both a heartbeat and a
10,000-node snapshot (figures in the bench's output and the daemons issue's notes).
"""

from __future__ import annotations

import binascii
import math
import typing
from typing import Any

import cattrs
import orjson
from cattrs.cols import homogenous_tuple_structure_factory
from cattrs.preconf.orjson import make_converter

from ranch.protocol.errors import ProtocolError
from ranch.protocol.fasthooks import fast_structure_hook, flat_structure_hook
from ranch.protocol.messages import MESSAGE_TYPES, GpuMetrics, Heartbeat, Metrics
from ranch.protocol.nodemessages import GPU_FIELDS, PER_GPU, GpuReadings
from ranch.protocol.versions import CURRENT, downgrade

converter = make_converter(forbid_extra_keys=False)  # newer peers may send fields we lack


# cattrs coerces by default (bool("false") is True, str(None) is "None", int(1.9) is 1, a string
# is a tuple of characters). A peer's wrong type must be refused, never silently reinterpreted.
def _strict_str(value: Any, _: type) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _strict_bool(value: Any, _: type) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {type(value).__name__}")
    return value


def _strict_int(value: Any, _: type) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"expected an integer, got {type(value).__name__}")
    return value


def _strict_float(value: Any, _: type) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise TypeError(f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value):
        raise ValueError("expected a finite number")
    return float(value)


def _strict_dict(value: Any, _: type) -> dict:
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _is_tuple(cls: Any) -> bool:
    return typing.get_origin(cls) is tuple


def _strict_tuple_factory(cls: Any) -> Any:
    args = typing.get_args(cls)
    if len(args) == 2 and args[1] is Ellipsis:
        inner = homogenous_tuple_structure_factory(cls, converter)

        def structure_homogenous(value: Any, cls: Any) -> tuple:
            if not isinstance(value, list | tuple):
                raise TypeError(f"expected a list, got {type(value).__name__}")
            return inner(value, cls)

        return structure_homogenous
    hooks = [converter.get_structure_hook(arg) for arg in args]

    def structure_fixed(value: Any, _: Any) -> tuple:
        if not isinstance(value, list | tuple) or len(value) != len(hooks):
            raise TypeError(f"expected a list of {len(hooks)} items")
        return tuple(hook(item, arg) for hook, item, arg in zip(hooks, value, args, strict=True))

    return structure_fixed


for _cls, _hook in (
    (str, _strict_str),
    (bool, _strict_bool),
    (int, _strict_int),
    (float, _strict_float),
    (dict, _strict_dict),
):
    converter.register_structure_hook(_cls, _hook)
converter.register_structure_hook_factory(_is_tuple, _strict_tuple_factory)


# bytes (a relay's frames, issue 47) as standard base64: the preconf's base85 is pure Python
# and was a third of rctld's CPU under 10,000 relayed nodes; base64 is C
def _strict_bytes(value: Any, _: type) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"expected base64 text, got {type(value).__name__}")
    return binascii.a2b_base64(value, strict_mode=True)


converter.register_structure_hook(bytes, _strict_bytes)
converter.register_unstructure_hook(bytes, lambda b: binascii.b2a_base64(b, newline=False)
                                    .decode("ascii"))


def _strict_pairs(value: Any, cls: Any) -> tuple[tuple[str, str], ...]:
    """A list of [name, value] string pairs (a job's environment, dozens of them in every
    submission) checked and built in one loop: the generic hooks cost 2 µs a pair. A list
    that is not one goes through them after all, for their error naming the item."""
    if isinstance(value, list | tuple):
        out = []
        for item in value:
            if not isinstance(item, list | tuple) or len(item) != 2:
                break
            name, text = item
            if not isinstance(name, str) or not isinstance(text, str):
                break
            out.append((name, text))
        else:
            return tuple(out)
    return _generic_pairs(value, cls)


_PAIRS = tuple[tuple[str, str], ...]
_generic_pairs = _strict_tuple_factory(_PAIRS)
converter.register_structure_hook_func(lambda cls: cls == _PAIRS, _strict_pairs)


# A node's GPU readings: on the wire a list of GpuMetrics objects, in memory one flat tuple
# (GpuReadings), built without a GpuMetrics; a list the flat hook does not take goes through
# cattrs' own hooks for a list of GpuMetrics, for their result or their error.
_GPU_LIST = tuple[GpuMetrics, ...]


def _gpu_readings(value: Any, _: type) -> GpuReadings:
    return GpuReadings.of(converter.structure(value, _GPU_LIST))


def _gpu_objects(readings: GpuReadings) -> list[dict[str, Any]]:
    flat = readings.flat
    return [dict(zip(GPU_FIELDS, flat[at:at + PER_GPU], strict=True))
            for at in range(0, len(flat), PER_GPU)]


converter.register_structure_hook(
    GpuReadings, flat_structure_hook(GpuMetrics, GpuReadings, _gpu_readings))
converter.register_unstructure_hook(GpuReadings, _gpu_objects)

# The messages every node sends every few seconds take straight-line hooks
# (ranch/protocol/fasthooks.py). cattrs' own are made first, all of them, so that a flaw
# anywhere sends the whole message down cattrs' path, for cattrs' error.
_CATTRS_HOOKS = {cls: converter.get_structure_hook(cls) for cls in (Metrics, Heartbeat)}
for _msg_cls, _slow in _CATTRS_HOOKS.items():
    converter.register_structure_hook(
        _msg_cls, fast_structure_hook(_msg_cls, converter.get_structure_hook, _slow))


def encode(msg: Any, *, version: int = CURRENT) -> bytes:
    """Body bytes of `msg`, without the fields `version` does not know."""
    body = converter.unstructure(msg)
    if version < CURRENT:
        body = downgrade(body, type(msg), version)
    return orjson.dumps(body)


def decode(type_name: str, body: bytes | memoryview) -> Any:
    """The message of type `type_name` from body bytes; raises ProtocolError on any flaw."""
    cls = MESSAGE_TYPES.get(type_name)
    if cls is None:
        raise ProtocolError("unknown_type", f"unknown message type {type_name!r}")
    try:
        raw = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ProtocolError("bad_request", f"{type_name} body is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ProtocolError("bad_request", f"{type_name} body must be an object")
    try:
        return converter.structure(raw, cls)
    except Exception as exc:  # cattrs raises ExceptionGroups, TypeErrors, ValueErrors, ...
        field, why = _describe(exc)
        where = f" field {field!r}" if field else ""
        raise ProtocolError("bad_request", f"{type_name}{where}: {why}", field=field) from None


def _describe(exc: BaseException) -> tuple[str, str]:
    """(dotted field path, reason) of the first problem cattrs found."""
    if isinstance(exc, cattrs.BaseValidationError):
        first = cattrs.transform_error(exc, path="")[0]
        # "invalid value for type, expected int @ .seq" -> ("seq", "invalid value ...")
        why, _, path = first.rpartition(" @ ")
        path = path.lstrip(".").replace("[", ".").replace("]", "")
        return path, why or first
    return "", str(exc) or type(exc).__name__
