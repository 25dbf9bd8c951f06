"""The page's node panel, job page and job buttons: the records rinfo, rqueue and rcontrol read,
cut by the reader's rights as the CLI's are (PrivateData), with the actions the transition tables
accept (ctld/web/actions.py); a job command goes through Jobs.cancel/control, rcancel's and
rcontrol's own path, as the token's user."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
import trio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.conf import hostlist
from ranch.ctld import logs
from ranch.ctld.jobs.store import view_of
from ranch.ctld.rights import Identity, may_act_on
from ranch.ctld.rpc import permissions
from ranch.ctld.state import bulkfiles
from ranch.ctld.web import grid
from ranch.ctld.web.actions import JOB_ACTIONS, job_actions, node_actions, reboot_offered
from ranch.ctld.web.responses import Json, error, is_number
from ranch.protocol import messages as m
from ranch.protocol.codec import converter
from ranch.protocol.outputpath import expand_path
from ranch.protocol.records import job_json, node_json

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ranch.ctld.jobs.jobrecord import Job
    from ranch.ctld.site import Site
    from ranch.ctld.web.webports import WebJobs, WebNodes

SCRIPT_LINES = 20  # the first lines of a batch script the job page shows
_LIVE = ("RUNNING", "CONFIGURING", "COMPLETING", "SUSPENDED")


class Pages:
    """Routes of the page's views; the auth checks and job records are ctld/web/app.py Web's
    (passed in: this module must not import the one that mounts it)."""

    def __init__(self, nodes: WebNodes, jobs: WebJobs, site: Site,
                 read_refusal: Callable[..., Response | None],
                 reader: Callable[[Request], Identity | None],
                 who: Callable[[Request], tuple[str | None, Response | None]],
                 job_records: Callable[[tuple[int, ...]], tuple[float, list[dict]]],
                 not_on_disk: Callable[[], Awaitable[str | None]]) -> None:
        self.nodes, self.jobs = nodes, jobs
        self.site = site  # its state_dir keeps the job scripts (ctld/state/bulkfiles.py)
        self._read_refusal, self._reader, self._who = read_refusal, reader, who
        self._job_records = job_records
        self._not_on_disk = not_on_disk  # a write's reply waits for the journal

    # -- a node: its record, its valid requests, its jobs, its GPUs one row each ----------

    async def node(self, request: Request) -> Response:
        if (refused := self._read_refusal(request, "nodes")) is not None:
            return refused
        name = request.path_params["name"]
        rec = next((r for r in self.nodes.snapshot(metrics=True).nodes if r["name"] == name),
                   None)
        node = self.nodes.nodes.get(name)
        if rec is None or node is None:
            return error(404, f"Node {name} not found", "name")
        reader = self._reader(request)
        _, records = self._job_records(())
        mine = [j for j in records if j["state"] in _LIVE and j.get("nodes")
                and name in hostlist.expand(j["nodes"])]
        seen = permissions.visible_jobs(self.nodes.config, reader, mine)
        # A reader with a token that is no admin's gets no buttons: node requests need one.
        may_write = reader is None or reader.admin
        return Json({
            "node": node_json(rec), "metrics": rec.get("metrics"),
            "health_note": grid.health_note(rec),
            "actions": (node_actions(node.state, self.nodes.policy) + (
                ["REBOOT"] if self.nodes.config.reboot.program
                and reboot_offered(node.state, self.nodes.policy) else [])) if may_write else [],
            "may_write": may_write,
            "jobs": [_node_job(j, name) for j in seen],
            "hidden_jobs": len(mine) - len(seen),
            "gpus": _hide_holders(_gpu_rows(rec, node.hardware, node.cfg.gpus, mine),
                                  {j["job_id"] for j in seen}),
        }, headers={"Cache-Control": "no-cache"})

    # -- a job ---------------------------------------------------------------------------

    async def job(self, request: Request) -> Response:
        if (refused := self._read_refusal(request)) is not None:
            return refused
        ident = request.path_params["job_id"]
        if not is_number(ident):
            return error(400, f"Invalid job id specified: {ident}", "job_id")
        now, records = self._job_records((int(ident),))
        reader = self._reader(request)
        records = permissions.visible_jobs(self.nodes.config, reader, records)
        job = self.jobs.store.jobs.get(int(ident))
        if not records or job is None:
            return error(404, f"Invalid job id specified: {ident} (no such job)", "job_id")
        rec = records[0]
        owner = reader is not None and may_act_on(reader, rec.get("uid", -2), rec.get("user", ""))
        doc = job_json(rec)
        doc.update({
            "steps": rec.get("steps") or [],
            "gpu_indices": rec.get("gpu_indices") or {},
            "held": rec.get("held") or "",
            "batch": bool(rec.get("batch_flag", 1)),  # 0: an allocation (ralloc, rrun)
            "stdout_path": expand_path(rec.get("stdout") or "", rec),
            "stderr_path": expand_path(rec.get("stderr") or rec.get("stdout") or "", rec),
            "now": now or time.time(),
            "script": await self._script_head(job) if owner else None,
            "script_hidden": None if owner else (
                "the script is shown to its owner and admins: give your token" if reader is None
                else f"the script is shown to its owner and admins, not to {reader.name}"),
            "actions": job_actions(view_of(job), owner, bool(reader and reader.admin)),
            "signed_in": None if reader is None else reader.name,
            # rqueue --why's answer for a pending job (the page's Why block)
            "why": await self._why(job.id) if rec["state"] == "PENDING" else None,
        })
        return Json(doc, headers={"Cache-Control": "no-cache"})

    async def _why(self, job_id: int, only_uid: int = -1) -> dict | None:
        if self.jobs.why is None:
            return None
        got = await self.jobs.why(m.GetWhy(job_id, only_uid))
        return None if isinstance(got, m.Error) else converter.unstructure(got)

    async def why(self, request: Request) -> Response:
        """GET /api/v1/jobs/{id}/why: rqueue --why's answer, to whom rqueue would give it
        (PrivateData=jobs: the job's owner and admins; no token then: nobody)."""
        if (refused := self._read_refusal(request)) is not None:
            return refused
        ident = request.path_params["job_id"]
        if not is_number(ident):
            return error(400, f"Invalid job id specified: {ident}", "job_id")
        reader = self._reader(request)
        only = -1
        if "jobs" in self.nodes.config.access.private_data and not (reader and reader.admin):
            only = reader.uid if reader is not None else -2  # no token: no job is theirs
        doc = await self._why(int(ident), only)
        if doc is None:
            return error(404, f"Invalid job id specified: {ident} (no such job)", "job_id")
        return Json({"why": doc}, headers={"Cache-Control": "no-cache"})

    async def _script_head(self, job: Job) -> str:
        if job.req.allocation:
            return ""  # ralloc/rrun: an allocation has no batch script
        state_dir = self.site.state_dir
        script = job.req.script
        if job.bulk_on_disk and state_dir is not None:  # ctld/state/bulkfiles.py's files
            try:  # a file read (up to MB) off the event loop
                script = (await trio.to_thread.run_sync(
                    bulkfiles.read_packed, state_dir, job.id, job.bulk_at)
                    if job.bulk_at is not None
                    else await trio.to_thread.run_sync(bulkfiles.read, state_dir, job.id))[0]
            except (OSError, ValueError) as exc:
                return f"(the script cannot be read: {exc})"
        return "\n".join(script.splitlines()[:SCRIPT_LINES])

    async def act(self, request: Request) -> Response:
        """POST /ui/job/{id}/{action}: cancel, hold, release or requeue, as the token's user."""
        user, refused = self._who(request)
        if refused is not None:
            return refused
        ident, action = request.path_params["job_id"], request.path_params["action"]
        if not is_number(ident):
            return error(400, f"Invalid job id specified: {ident}", "job_id")
        if action not in JOB_ACTIONS:
            return error(400, f"unknown action {action!r}; valid: {', '.join(JOB_ACTIONS)}",
                          "action")
        who: Identity = permissions.identify_name(self.nodes.config, user or "")
        ids = (int(ident),)
        if action == "cancel":
            result = self.jobs.cancel(
                m.CancelJobs(job_ids=ids, user=who.name, uid=who.uid), who)
        else:
            result = self.jobs.control(
                m.JobControl(action=action, job_ids=ids, user=who.name, uid=who.uid), who)
        doc = {"ok": result.ok, "job_ids": list(result.job_ids),
               "errors": [{"error": e} for e in result.errors], "user": who.name}
        if result.job_ids and (why := await self._not_on_disk()) is not None:
            return error(500, why, "job_id")
        if result.ok:
            return Json(doc)
        logs.event("http job command refused", logging.WARNING, user=who.name, job=ident,
                   action=action, error="; ".join(result.errors[:3]))
        denied = any("permission denied" in e.lower() for e in result.errors)
        return Json(doc, status_code=403 if denied else 400)

    def routes(self) -> list[Route]:
        return [
            Route("/ui/node/{name}", self.node),
            Route("/ui/job/{job_id}", self.job),
            Route("/ui/job/{job_id}/{action}", self.act, methods=["POST"]),
            Route("/api/v1/jobs/{job_id}/why", self.why),
        ]


def _node_job(j: dict, name: str) -> dict[str, Any]:
    """One line of a node's job table: what rqueue -w NODE shows, and its GPUs there."""
    return {"job_id": j["job_id"], "name": j.get("name", ""), "user": j.get("user", ""),
            "state": j["state"], "start_time": j.get("start_time"),
            "time_limit": j.get("time_limit"),
            "gpus": (j.get("gpu_indices") or {}).get(name, [])}


def _hide_holders(rows: list[dict], seen: set[int]) -> list[dict]:
    """A GPU held by a job the reader may not see (PrivateData=jobs) shows as "held", not
    free and not by its id, as rqueue hides the job itself."""
    return [{**r, "job": "held"} if r["job"] is not None and r["job"] not in seen else r
            for r in rows]


def _gpu_rows(rec: dict, hardware: Any, configured: int, jobs: list[dict]) -> list[dict]:
    """The node's GPUs, one row each: what registration reported (model), what the last
    heartbeat carried (the figures /metrics exports as DCGM_FI_DEV_*), which job holds it, and
    what the health check said about it."""
    infos: dict[int, dict] = {}
    if hardware is not None:
        try:
            for i, g in enumerate(orjson.loads(hardware.json()).get("gpus") or ()):
                infos[int(g.get("index", i))] = g
        except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
            infos = {}
    live = {g["index"]: g for g in ((rec.get("metrics") or {}).get("gpus") or ())}
    holder = {idx: j["job_id"] for j in jobs
              for idx in (j.get("gpu_indices") or {}).get(rec["name"], ())}
    health = rec.get("health") or {}
    lines = [health.get("message") or "", *(health.get("warnings") or ())]
    rows = []
    for idx in sorted(set(range(configured)) | set(infos) | set(live)):
        info, g = infos.get(idx, {}), live.get(idx, {})
        marks = [f"gpu{idx}", str(info.get("pci_bus_id") or "\0").lower()]
        said = [x for x in lines if x and any(k in x.lower() for k in marks)]
        rows.append({
            "index": idx, "model": info.get("name") or "", "uuid": info.get("uuid") or "",
            "job": holder.get(idx), "util_pct": g.get("util_pct"),
            "mem_used_mib": g.get("mem_used_mib"),
            "mem_total_mib": g.get("mem_total_mib") or info.get("memory_total_mib"),
            "temp_c": g.get("temp_c"), "health": "; ".join(said) or ("ok" if g else "no data"),
        })
    return rows
