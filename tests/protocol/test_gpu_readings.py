"""A node's GPU readings kept flat (protocol/nodemessages.py GpuReadings): the wire is the list of
GpuMetrics objects it always was, the flat hook takes exactly what cattrs' hooks for that list
take and refuses the rest with their errors (hypothesis draws lists near valid ones and far from
them), and the readings read back as GpuMetrics."""

from __future__ import annotations

import math
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.ctld.nodes.node import pack_metrics, unpack_gpus
from ranch.protocol import codec
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.fasthooks import fast_structure_hook, flat_structure_hook
from ranch.protocol.versions import downgrade

GPUS = (m.GpuMetrics(0, 50.5, 100, 81559, 60.0, 300.0),
        m.GpuMetrics(1, 0.0, 0, 81559, 31.5, 61.25),
        m.GpuMetrics(2, 99.0, 80000, 81559, 88.0, 699.5))
METRICS = m.Metrics(12.5, 3.25, 1000, 515_000, 88.0, GPUS)
BEAT = m.Heartbeat("gpu01", 7, METRICS)


def outcome(hook: Any, raw: Any) -> tuple[str, Any]:
    try:
        return "ok", hook(raw, m.GpuReadings)
    except Exception as exc:  # the message cattrs gives is what decode turns into its error
        return "error", codec._describe(exc)


def test_the_wire_is_a_list_of_gpu_objects_as_before() -> None:
    raw = orjson.loads(codec.encode(BEAT))
    assert raw["metrics"]["gpus"] == [attrs.asdict(g) for g in GPUS]
    assert codec.decode("Heartbeat", codec.encode(BEAT)) == BEAT


def test_readings_read_back_as_gpu_metrics() -> None:
    readings = METRICS.gpus
    assert type(readings) is m.GpuReadings
    assert len(readings) == 3 and bool(readings) and not m.GpuReadings()
    assert list(readings) == list(GPUS)
    assert readings[0] == GPUS[0] and readings[-1] == GPUS[2] and readings[-3] == GPUS[0]
    for bad in (3, -4):
        with pytest.raises(IndexError):
            readings[bad]
    assert m.GpuReadings.of(readings) is readings
    assert m.Metrics(1.0, 0.5, 1, 2, gpus=list(GPUS)) == m.Metrics(1.0, 0.5, 1, 2, gpus=readings)


def test_the_controller_packs_and_unpacks_the_same_figures() -> None:
    packed = pack_metrics(codec.decode("Heartbeat", codec.encode(BEAT)).metrics)
    assert [g["util_pct"] for g in unpack_gpus(packed)] == [g.util_pct for g in GPUS]
    assert [g["mem_used_mib"] for g in unpack_gpus(packed)] == [g.memory_used_mib for g in GPUS]
    assert list(packed[5:]) == [float(x) for x in METRICS.gpus.flat]


def test_an_int_where_a_float_goes_is_taken_as_cattrs_takes_it() -> None:
    raw = codec.converter.unstructure(GPUS)
    raw[1]["power_w"] = 61
    got = codec.converter.structure(raw, m.GpuReadings)
    assert got[1].power_w == 61.0 and type(got[1].power_w) is float


def test_a_flaw_is_named_with_its_place_in_the_heartbeat() -> None:
    raw = codec.converter.unstructure(BEAT)
    raw["metrics"]["gpus"][2]["temperature_c"] = math.inf
    with pytest.raises(ProtocolError) as err:
        codec.decode("Heartbeat", orjson.dumps(raw))
    assert err.value.field == "metrics.gpus.2.temperature_c"


def test_a_whole_list_never_takes_the_slow_path() -> None:
    def slow(raw: Any, cls: type) -> Any:
        raise AssertionError("the list went down cattrs' path")

    hook = flat_structure_hook(m.GpuMetrics, m.GpuReadings, slow)
    assert hook(codec.converter.unstructure(GPUS), m.GpuReadings) == METRICS.gpus
    assert hook([], m.GpuReadings) == m.GpuReadings()


def test_an_older_peer_gets_the_same_list() -> None:
    raw = codec.converter.unstructure(BEAT)
    for version in (1, 3, 5):
        assert downgrade(raw, m.Heartbeat, version)["metrics"]["gpus"] == raw["metrics"]["gpus"]


def test_a_class_of_nested_fields_has_no_flat_hook() -> None:
    with pytest.raises(TypeError):
        flat_structure_hook(m.Metrics, tuple, lambda o, _: o)


def test_a_keyword_only_field_is_given_by_name() -> None:
    @attrs.frozen
    class Mixed:
        a: int
        b: str = attrs.field(kw_only=True)
        c: float = 0.5

    hook_of = codec.converter.get_structure_hook
    slow = hook_of(Mixed)
    fast = fast_structure_hook(Mixed, hook_of, slow)
    assert fast is not slow
    assert fast({"a": 1, "b": "x", "c": 2.5}, Mixed) == Mixed(1, b="x", c=2.5)


# values a peer might put anywhere: the right kinds and every wrong one
ANY_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=5), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))
# and those nearest a valid figure, drawn as often as all the rest
NEAR = st.one_of(st.sampled_from([math.nan, math.inf, -math.inf, True, False, 0, 7, 1.5, -0.0,
                                  "7", 2**63, None]), ANY_SCALAR)
GPU_KEYS = [f.name for f in attrs.fields(m.GpuMetrics)]


@st.composite
def gpu_lists(draw: st.DrawFn) -> Any:
    """GPUS unstructured (or a prefix of it), then a few values replaced or removed, a stray key
    or item added; or something that is not a list of objects at all."""
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(st.one_of(ANY_SCALAR, st.lists(ANY_SCALAR, max_size=3)))
    raw = codec.converter.unstructure(GPUS)[: draw(st.integers(1 if kind < 5 else 0, 3))]
    if kind < 5:  # one figure of a whole list replaced: the flaws nearest to valid
        raw[draw(st.integers(0, len(raw) - 1))][draw(st.sampled_from(GPU_KEYS))] = draw(NEAR)
        return raw
    for _ in range(draw(st.integers(0, 3))):
        if not raw or draw(st.integers(0, 5)) == 0:
            raw.append(draw(st.one_of(ANY_SCALAR, st.dictionaries(st.sampled_from(GPU_KEYS),
                                                                  ANY_SCALAR))))
            continue
        item = raw[draw(st.integers(0, len(raw) - 1))]
        if not isinstance(item, dict) or not item:
            continue
        key = draw(st.sampled_from(sorted(item)))
        action = draw(st.sampled_from(["replace", "replace", "remove", "extra"]))
        if action == "replace":
            item[key] = draw(NEAR)
        elif action == "remove":
            del item[key]
        else:
            item["zz_" + key] = draw(ANY_SCALAR)
    return raw


@settings(max_examples=500, deadline=None)
@given(raw=gpu_lists())
def test_the_flat_hook_and_cattrs_agree_on_any_list(raw: Any) -> None:
    flat = codec.converter.get_structure_hook(m.GpuReadings)
    assert flat.__code__.co_filename.startswith("<flat structure")
    assert outcome(flat, raw) == outcome(codec._gpu_readings, raw)
