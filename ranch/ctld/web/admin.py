"""The page's admin actions: a node's reboot (WebAdmin.reboot_nodes, `rcontrol reboot`'s handler)
and reservations created and deleted (WebAdmin.reservation, `rcontrol create|delete
reservation`'s), as the token's user, who must be an admin (ctld/rpc/permissions.py's rule)."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ranch.conf.timefmt import parse_minutes
from ranch.ctld import logs
from ranch.ctld.rpc import permissions
from ranch.ctld.web.limits import BodyTooLarge, read_body
from ranch.ctld.web.responses import Json, error
from ranch.protocol import messages as m

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from ranch.ctld.web.webports import Configured, WebAdmin

_REBOOT_KEYS = ("asap", "next_state", "reason")
_RESV_KEYS = ("name", "start", "duration", "nodes", "flags", "users")


class Admin:
    """POST /ui/node/{name}/reboot, /ui/reservations and /ui/reservations/{name}/delete."""

    def __init__(self, configured: Configured, actions: WebAdmin,
                 who: Callable[[Request], tuple[str | None, Response | None]],
                 not_on_disk: Callable[[], Awaitable[str | None]]) -> None:
        self.configured, self.actions = configured, actions
        self._who = who
        self._not_on_disk = not_on_disk  # a write's reply waits for the journal

    async def _admin_body(self, request: Request, what: str, keys: tuple[str, ...]
                          ) -> tuple[str, dict[str, Any], Response | None]:
        """(the admin's name, the JSON body, None) or ("", {}, the refusal)."""
        user, refused = self._who(request)
        if refused is not None:
            return "", {}, refused
        why = permissions.http_write_refusal(self.configured.config, user or "", what)
        if why is not None:
            logs.event("http admin action refused", logging.WARNING, user=user, request=what)
            return "", {}, error(403, why)
        try:
            raw = await read_body(request)
            body = orjson.loads(raw) if raw.strip() else {}
        except BodyTooLarge as exc:
            return "", {}, error(413, str(exc), headers={"connection": "close"})
        except orjson.JSONDecodeError as exc:
            return "", {}, error(400, f"request body is not JSON: {exc}")
        if not isinstance(body, dict):
            return "", {}, error(400, "request body must be a JSON object")
        for key in body:
            if key not in keys:
                return "", {}, error(400, f"unknown field {key!r} (fields: {', '.join(keys)})",
                                     key)
        return user or "", body, None

    async def reboot(self, request: Request) -> Response:
        """`rcontrol reboot [ASAP] [nextstate=RESUME|DOWN] [reason=...] NODE`."""
        name = request.path_params["name"]
        user, body, refused = await self._admin_body(request, f"reboot {name}", _REBOOT_KEYS)
        if refused is not None:
            return refused
        reason, nxt = body.get("reason"), body.get("next_state")
        if not isinstance(reason, (str, type(None))) or not isinstance(nxt, (str, type(None))):
            return error(400, "reason and next_state must be strings")
        result = self.actions.reboot_nodes(m.RebootNodes(
            node_names=name, asap=bool(body.get("asap")), next_state=nxt or None,
            reason=reason or None, user=user))
        doc = {"ok": result.ok, "changed": list(result.changed),
               "errors": [{"error": e} for e in result.errors], "user": user}
        if result.changed and (why := await self._not_on_disk()) is not None:
            return error(500, why)
        if not result.ok:
            logs.event("http reboot refused", logging.WARNING, user=user, node=name,
                       error="; ".join(result.errors[:3]))
        return Json(doc, status_code=200 if result.ok else 400)

    async def create_reservation(self, request: Request) -> Response:
        """`rcontrol create reservation ReservationName= StartTime= Duration= Nodes= Flags=
        Users=`: start is epoch seconds or "now", duration Slurm's time forms or minutes."""
        user, body, refused = await self._admin_body(request, "create reservation", _RESV_KEYS)
        if refused is not None:
            return refused
        start_word = body.get("start", "now")
        if start_word in ("now", "", None):
            start = time.time()
        elif isinstance(start_word, (int, float)):
            start = float(start_word)
        else:
            return error(400, 'start is epoch seconds or "now"', "start")
        try:
            minutes = parse_minutes(str(body.get("duration") or ""))
        except ValueError as exc:
            return error(400, f"Invalid duration {body.get('duration')!r}: {exc}", "duration")
        lists = {}
        for key in ("flags", "users"):
            value = body.get(key) or []
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                return error(400, f"{key} is a list of names", key)
            lists[key] = tuple(v.upper() if key == "flags" else v for v in value)
        msg = m.ReservationRequest(
            action="create", name=str(body.get("name") or ""), start=start,
            duration=-1 if minutes is None else minutes, nodes=str(body.get("nodes") or "") or None,
            flags=lists["flags"], users=lists["users"], user=user)
        return await self._answer(self.actions.reservation(msg), user, "create")

    async def delete_reservation(self, request: Request) -> Response:
        name = request.path_params["name"]
        user, _, refused = await self._admin_body(request, f"delete reservation {name}", ())
        if refused is not None:
            return refused
        reply = self.actions.reservation(m.ReservationRequest(action="delete", name=name,
                                                              user=user))
        return await self._answer(reply, user, "delete")

    async def _answer(self, reply: m.ReservationReply, user: str, action: str) -> Response:
        doc = {"ok": reply.ok, "name": reply.name, "user": user,
               "errors": [{"error": e} for e in reply.errors]}
        if reply.ok and (why := await self._not_on_disk()) is not None:
            return error(500, why)
        if not reply.ok:
            logs.event(f"http {action} reservation refused", logging.WARNING, user=user,
                       error="; ".join(reply.errors[:3]))
        return Json(doc, status_code=200 if reply.ok else 400)

    def routes(self) -> list[Route]:
        return [
            Route("/ui/node/{name}/reboot", self.reboot, methods=["POST"]),
            Route("/ui/reservations", self.create_reservation, methods=["POST"]),
            Route("/ui/reservations/{name}/delete", self.delete_reservation, methods=["POST"]),
        ]
