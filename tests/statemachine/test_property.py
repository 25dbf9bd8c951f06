"""Random event sequences: the invariants of issue 3 hold after every step."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from ranch.statemachine import events as ev
from ranch.statemachine import names
from ranch.statemachine.errors import InvalidTransition
from ranch.statemachine.model import Base, Flag, initial_state
from ranch.statemachine.policy import Policy
from ranch.statemachine.table import apply

BLOCKING = {Flag.DRAIN, Flag.FAIL, Flag.NO_RESPOND, Flag.POWERED_DOWN, Flag.POWERING_UP,
            Flag.POWERING_DOWN, Flag.INVALID_REG, Flag.PENDING, Flag.REJECTED}

_events = st.one_of(
    st.builds(ev.Registered, st.just(1.0), st.booleans(), st.sampled_from([None, "Low CPUs"]),
              st.booleans(), st.sampled_from([None, 4, 8])),
    st.builds(ev.HeartbeatReceived, st.just(1.0)),
    st.builds(ev.HeartbeatMissed, st.just(1.0)),
    st.builds(ev.ResponseTimeout, st.just(1.0)),
    st.builds(ev.AllocationChanged, st.just(1.0), st.integers(-1, 9)),
    st.builds(ev.AdminUpdate, st.just(1.0), st.sampled_from(ev.ADMIN_REQUESTS),
              st.sampled_from([None, "", "maint", "HC: fake"]), st.sampled_from(["", "bob"])),
    st.builds(ev.HealthResult, st.just(1.0), st.sampled_from(ev.HEALTH_VERDICTS),
              st.sampled_from(["", "HC: disk"])),
    st.builds(ev.SuspendStarted, st.just(1.0)),
    st.builds(ev.SuspendTimeout, st.just(1.0)),
    st.builds(ev.ResumeStarted, st.just(1.0)),
    st.builds(ev.ResumeTimeout, st.just(1.0)),
    st.builds(ev.ShutdownNotice, st.just(1.0)),
    st.builds(ev.ConfigReload, st.just(1.0), st.sampled_from([4, 8]),
              st.sampled_from(["UNKNOWN", "FUTURE", "CLOUD", "DOWN"])),
    st.builds(ev.AwaitApproval, st.just(1.0)),
    st.builds(ev.Approve, st.just(1.0), st.sampled_from(["", "bob"])),
    st.builds(ev.Reject, st.just(1.0), st.sampled_from([None, "", "stranger"]),
              st.sampled_from(["", "bob"])),
    st.builds(ev.Delete, st.just(1.0), st.sampled_from(["", "bob"])),
)


class NodeMachine(RuleBasedStateMachine):
    @initialize(
        config_state=st.sampled_from(["UNKNOWN", "DOWN", "DRAIN", "FAIL", "FUTURE", "CLOUD"]),
        rts=st.sampled_from([0, 1, 2]),
    )
    def start(self, config_state: str, rts: int) -> None:
        self.state = initial_state("n1", 8, config_state, reason=None, now=0.0)
        self.policy = Policy(return_to_service=rts)

    @rule(event=_events)
    def feed(self, event: ev.Event) -> None:
        try:
            self.state, effects = apply(self.state, event, self.policy)
        except InvalidTransition as exc:
            assert "n1" in str(exc)
            return
        assert isinstance(effects, tuple)

    @invariant()
    def blocked_nodes_are_never_schedulable(self) -> None:
        s = self.state
        if s.flags & BLOCKING or s.base in (Base.DOWN, Base.FUTURE, Base.UNKNOWN):
            assert not s.schedulable

    @invariant()
    def idle_iff_nothing_allocated(self) -> None:
        s = self.state
        assert 0 <= s.cpus_alloc <= max(s.cpus_total, s.cpus_alloc)
        if s.base in (Base.IDLE, Base.MIXED, Base.ALLOCATED):
            assert (s.base is Base.IDLE) == (s.cpus_alloc == 0)
        if s.base in (Base.UNKNOWN, Base.FUTURE):
            assert s.cpus_alloc == 0

    @invariant()
    def out_of_service_has_a_reason(self) -> None:
        s = self.state
        if s.base is Base.DOWN or s.flags & {Flag.DRAIN, Flag.FAIL}:
            assert s.reason is not None and s.reason.text

    @invariant()
    def membership_holds(self) -> None:
        """PENDING and REJECTED never run work; a rejected node is DOWN with the admin's reason
        and is never also pending."""
        s = self.state
        if s.flags & {Flag.PENDING, Flag.REJECTED}:
            assert not s.schedulable
        if Flag.REJECTED in s.flags:
            assert Flag.PENDING not in s.flags and s.base is Base.DOWN and s.cpus_alloc == 0
            assert s.reason is not None and s.reason.text
            assert names.compact(s).startswith("rej")
        elif Flag.PENDING in s.flags:
            assert s.cpus_alloc == 0 and names.compact(s).startswith("pend")

    @invariant()
    def every_state_has_names_and_json(self) -> None:
        s = self.state
        assert names.compact(s) and names.long(s) and names.complete(s)
        assert names.from_json(names.to_json(s, full=True)) == s


NodeMachine.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestNodeMachine = NodeMachine.TestCase
