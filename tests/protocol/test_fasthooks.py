"""The heartbeat's straight-line hooks (protocol/fasthooks.py) take exactly what cattrs' own
hooks take, build the same messages, and refuse the rest with cattrs' errors: the same input,
both ways, compared (hypothesis draws bodies near valid ones and far from them)."""

from __future__ import annotations

import math
from typing import Any

import attrs
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.protocol import codec
from ranch.protocol import messages as m
from ranch.protocol.errors import ProtocolError
from ranch.protocol.fasthooks import fast_structure_hook

FAST = (m.Metrics, m.Heartbeat)  # a GPU's readings: test_gpu_readings.py

GPU = m.GpuMetrics(0, 50.5, 100, 81559, 60.0, 300.0)
METRICS = m.Metrics(12.5, 3.25, 1000, 515_000, 71.0, (GPU, attrs.evolve(GPU, index=1)))
BEAT = m.Heartbeat("gpu01", 7, METRICS, (1, 2), m.HealthReport("ok"),
                   (m.JobEnd(4, "COMPLETED", started_at=1.0, ended_at=2.0),), ((4, 0),))


def cattrs_hook(cls: type) -> Any:
    """cattrs' generated hook for `cls`, made before ours (its nested hooks cattrs' too)."""
    return codec._CATTRS_HOOKS[cls]


def outcome(hook: Any, raw: Any, cls: type) -> tuple[str, Any]:
    try:
        return "ok", hook(raw, cls)
    except Exception as exc:  # the message cattrs gives is what decode turns into its error
        return "error", codec._describe(exc)


def test_the_converter_uses_the_fast_hooks() -> None:
    for cls in FAST:
        assert codec.converter.get_structure_hook(cls).__code__.co_filename.startswith(
            "<fast structure")


def test_a_whole_reading_never_takes_the_slow_path() -> None:
    def slow(raw: Any, cls: type) -> Any:
        raise AssertionError(f"{cls.__name__} went down cattrs' path")

    hook_of = codec.converter.get_structure_hook
    raw = codec.converter.unstructure(BEAT)
    assert fast_structure_hook(m.Heartbeat, hook_of, slow)(raw, m.Heartbeat) == BEAT
    assert fast_structure_hook(m.Metrics, hook_of, slow)(raw["metrics"], m.Metrics) == METRICS


def test_a_heartbeat_round_trips_and_floats_stay_floats() -> None:
    body = codec.encode(BEAT)
    assert codec.decode("Heartbeat", body) == BEAT
    raw = orjson.loads(body)
    raw["metrics"]["gpus"][0]["util_pct"] = 50  # an int where a float goes: cattrs' way
    got = codec.decode("Heartbeat", orjson.dumps(raw))
    assert got.metrics.gpus[0].util_pct == 50.0
    assert type(got.metrics.gpus[0].util_pct) is float


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, None, "1.5", True])
def test_a_float_that_is_not_a_finite_number_is_refused(value: Any) -> None:
    raw = codec.converter.unstructure(BEAT)
    raw["metrics"]["gpus"][1]["power_w"] = value
    fast = codec.converter.get_structure_hook(m.Heartbeat)
    got = outcome(fast, raw, m.Heartbeat)
    assert got == outcome(cattrs_hook(m.Heartbeat), raw, m.Heartbeat)
    assert got[0] == "error" and got[1][0] == "metrics.gpus.1.power_w"


def test_a_missing_field_takes_its_default_or_cattrs_error() -> None:
    raw = codec.converter.unstructure(BEAT)
    del raw["runs"], raw["metrics"]["max_temperature_c"]
    got = codec.converter.structure(raw, m.Heartbeat)
    assert got.runs == () and got.metrics.max_temperature_c is None
    del raw["seq"]
    with pytest.raises(ProtocolError) as err:
        codec.decode("Heartbeat", orjson.dumps(raw))
    assert err.value.field == "seq"


def test_a_class_with_a_field_outside_init_keeps_cattrs_hook() -> None:
    @attrs.frozen
    class Partly:
        a: int
        b: int = attrs.field(init=False, default=0)

    slow = codec.converter.get_structure_hook(Partly)
    assert fast_structure_hook(Partly, codec.converter.get_structure_hook, slow) is slow


# values a peer might put in any field: the right kinds and every wrong one
ANY_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=5), st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    """BEAT unstructured, then a few of its values (at any depth) replaced or removed, or a
    stray key added."""
    raw = codec.converter.unstructure(BEAT)
    for _ in range(draw(st.integers(0, 3))):
        node, path = raw, []
        while True:
            keys = list(node) if isinstance(node, dict) else list(range(len(node)))
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            path.append(key)
            child = node[key]
            if isinstance(child, dict | list) and child and draw(st.booleans()):
                node = child
                continue
            action = draw(st.sampled_from(["replace", "remove", "extra"]))
            if action == "replace":
                node[key] = draw(ANY_SCALAR)
            elif action == "remove" and isinstance(node, dict):
                del node[key]
            elif isinstance(node, dict):
                node["zz_" + str(key)] = draw(ANY_SCALAR)
            break
    return raw


@settings(max_examples=400, deadline=None)
@given(raw=mutated())
def test_fast_and_cattrs_hooks_agree_on_any_heartbeat(raw: Any) -> None:
    fast = codec.converter.get_structure_hook(m.Heartbeat)
    assert outcome(fast, raw, m.Heartbeat) == outcome(cattrs_hook(m.Heartbeat), raw,
                                                      m.Heartbeat)
