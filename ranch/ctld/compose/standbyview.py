"""What a standby answers the listings from (issue 47): a controller built from the state its
follower read from etcd, restored and never started (no timers, no nodes, no scheduling), so
that rqueue, rinfo and `rcontrol show job|node` read the leader's own code over the same
records (ctld/pair/standbyreads.py decides when to rebuild it and states the age)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ranch.conf.model import ClusterConfig
from ranch.ctld import logs
from ranch.ctld.compose import assemble
from ranch.ctld.rpc.routes import jobs_listing
from ranch.ctld.rpc.wire import Prebuilt
from ranch.protocol import messages as m


def standby_view(config: ClusterConfig) -> Callable[[dict[str, Any]], Callable[[Any], Any]]:
    """`build(state)`: the view of a saved state (the snapshot with the journal laid over it);
    the view answers GetJobs and GetSnapshot as the leader's routes do (None: anything else)."""

    def build(doc: dict[str, Any]) -> Callable[[Any], Any]:
        log = logging.getLogger(logs.LOGGER_NAME)
        level = log.level
        log.setLevel(max(level, logging.WARNING))  # a rebuild is not a restart: no INFO lines
        try:
            ctl = assemble(config)
            ctl.restore(doc)
        finally:
            log.setLevel(level)

        def answer(msg: Any) -> Any:
            if type(msg) is m.GetJobs:
                return jobs_listing(ctl.jobs, None, msg)  # type: ignore[arg-type]
            if type(msg) is m.GetSnapshot:
                return Prebuilt("Snapshot", ctl.views.body(metrics=msg.metrics,
                                                           fields=msg.fields))
            return None

        return answer

    return build
