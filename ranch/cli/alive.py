"""rrun's "alive" words to rctld while the step of an allocation of its own runs, said from the
step I/O's poll loop (cli/step_io.py) instead of a thread: rctld ends an allocation whose holder
is silent for InactiveLimit seconds (ctld/jobs/inactive.py), as slurmctld ends srun's."""

from __future__ import annotations

# seconds between words; the first is said at once, since rctld fails an allocation whose
# holder does not speak soon after it starts
ALIVE_INTERVAL = 1.0
TYPE_CHECKING = False
if TYPE_CHECKING:
    from ranch.cli.controller import Target
    from ranch.protocol.client import RawCall

CONNECT_TIMEOUT = 1.0  # a controller that does not take the connection by then: next time


class Alive:
    """One JobControl "alive" at a time for `job_id`, its answer read when the loop sees it
    come; once rctld says the job ended, no more (as the thread this replaced stopped). A word
    unanswered, refused at the connect or answered by a standby sends the next one to the next
    SlurmctldHost: after a takeover the new controller hears the holder (issue 32)."""

    def __init__(self, target: Target, job_id: int, every: float = ALIVE_INTERVAL) -> None:
        from ranch.cli.allocation import _who
        from ranch.cli.credential import signer

        first = (target.host, target.port)
        self.order = [first] + [(h, p) for _, h, p in target.controllers if (h, p) != first]
        self.at = 0
        self.key, self.munge = signer(target)
        self.body = {"action": "alive", "job_ids": [job_id], **_who()}
        self.every = every
        self.call: RawCall | None = None  # the word in flight
        self.ended = False  # rctld said the job is over
        self.heard = False  # the last answer came from the controller that serves

    @property
    def addr(self) -> tuple[str, int]:
        return self.order[self.at]

    def _next(self) -> None:
        self.at = (self.at + 1) % len(self.order)

    def first(self) -> None:
        """The first word, answered before the step is asked for: rctld starts the job's
        launch on its nodes once the holder spoke, and a step asked for before would find
        it not yet running there. Each controller in turn until the serving one answers."""
        for _ in self.order:
            self.send()
            self.receive()  # blocks at most CONNECT_TIMEOUT for the answer
            if self.heard or self.ended:
                return

    def send(self) -> None:
        """Say it again (an earlier word still unanswered is given up, and the next goes to
        the next controller)."""
        from ranch.protocol.client import RawCall

        if self.call is not None:
            self._next()
        self.close()
        if self.ended:
            return
        try:
            self.call = RawCall(self.addr, self.key, "JobControl", self.body,
                                timeout=CONNECT_TIMEOUT, munge=self.munge)
        except Exception:  # unreachable, munged away: the next word may pass elsewhere
            self.call = None
            self._next()

    def fileno(self) -> int:
        return self.call.fileno() if self.call is not None else -1

    def receive(self) -> None:
        """The answer came: read it (an Error or a broken reply only means: say it again)."""
        call, self.call = self.call, None
        self.heard = False
        if call is None:
            return
        try:
            kind, reply = call.reply()
        except Exception:  # as the thread did: only "it ended" stops the words
            self._next()
            return
        finally:
            call.close()
        if kind == "Error" and reply.get("code") == "standby":
            self._next()
            return
        self.heard = True
        from ranch.cli.allocation import ALREADY_DONE

        errors = reply.get("errors") or ()
        if kind == "JobResult" and not reply.get("ok") and isinstance(errors, list) \
                and any(ALREADY_DONE in str(e) for e in errors):
            self.ended = True

    def close(self) -> None:
        if self.call is not None:
            self.call.close()
            self.call = None
