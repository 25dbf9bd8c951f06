"""protocol/replace.py gives what attrs.evolve gives, for every message class, and leaves any class
whose __init__ does more than set its fields to attrs.evolve itself."""

from __future__ import annotations

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ranch.protocol import messages as m
from ranch.protocol.messages import MESSAGE_TYPES
from ranch.protocol.replace import plain, replace

SUBMIT = m.SubmitJob(user="alice", uid=1000, gid=1000, workdir="/home/alice",
                     script="#!/bin/sh\ntrue\n", env=(("A", "1"), ("B", "2")), hold=True)
FIELDS = [f.name for f in attrs.fields(m.SubmitJob)]


@given(st.lists(st.sampled_from(FIELDS), unique=True, max_size=8), st.data())
@settings(max_examples=200, deadline=None)
def test_a_submission_replaced_equals_one_evolved(names: list[str], data) -> None:
    # each changed field takes another field's value of the same type, or its own default
    pool = {f.name: getattr(SUBMIT, f.name) for f in attrs.fields(m.SubmitJob)}
    changes = {}
    for name in names:
        same = [v for v in pool.values() if type(v) is type(pool[name])]
        changes[name] = data.draw(st.sampled_from(same))
    got = replace(SUBMIT, **changes)
    assert got == attrs.evolve(SUBMIT, **changes)
    assert type(got) is m.SubmitJob and got is not SUBMIT
    assert SUBMIT.user == "alice" and SUBMIT.env == (("A", "1"), ("B", "2"))  # untouched


def test_every_message_class_is_copied_whole() -> None:
    """Each message class with defaults for all its fields: a copy with no change is equal, and
    every field's value is the original's (a slot left unset would raise here)."""
    tried = 0
    for cls in set(MESSAGE_TYPES.values()):
        try:
            inst = cls()
        except TypeError:
            continue
        copy = replace(inst)
        assert copy == inst
        for f in attrs.fields(cls):
            assert getattr(copy, f.name) == getattr(inst, f.name)
        tried += 1
    assert tried >= 10


def test_a_name_the_class_lacks_is_refused_as_evolve_refuses_it() -> None:
    with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
        replace(SUBMIT, nope=1)
    with pytest.raises(TypeError):
        attrs.evolve(SUBMIT, nope=1)


@attrs.frozen
class Checked:
    n: int = attrs.field(validator=attrs.validators.ge(0))


@attrs.frozen
class Derived:
    n: int
    twice: int = 0

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "twice", 2 * self.n)


def test_a_class_whose_init_does_more_goes_through_evolve() -> None:
    assert plain(m.SubmitJob) and plain(m.Ping)
    assert not plain(Checked) and not plain(Derived)
    with pytest.raises(ValueError):  # the validator still runs
        replace(Checked(1), n=-1)
    assert replace(Derived(2), n=5).twice == 10  # and so does __attrs_post_init__
