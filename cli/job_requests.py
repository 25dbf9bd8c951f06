"""The job commands' requests to rctld: the same fast raw path as rinfo's, but a refusal keeps
its own words (and the field it names) so that each command can say it its way."""

from __future__ import annotations

from cli.controller import CliError, Target, _check_reachable, _unreachable


class Refused(Exception):
    """The controller answered with an Error: `message` as it wrote it."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.field = field


def request(target: Target, type_name: str, body: dict, *, want: str,
            timeout: float = 30.0) -> dict:
    """One request; Refused for an Error reply, CliError for everything else that went wrong."""
    from protocol.auth import KeyFileError, load_key
    from protocol.client import ControllerUnreachable, request_raw
    from protocol.rawframe import FrameError

    try:
        key = load_key(target.key_path)
    except KeyFileError as exc:
        _check_reachable(target)  # without a controller the key is moot
        raise CliError(str(exc)) from None
    try:
        got, reply = request_raw((target.host, target.port), key, type_name, body,
                                 timeout=timeout)
    except ControllerUnreachable as exc:
        raise _unreachable(target, exc.reason) from None
    except FrameError as exc:
        raise CliError(f"controller at {target.address}: {exc.code}: {exc.message}") from None
    if got == "Error":
        raise Refused(reply.get("message") or reply.get("code") or "no reason given",
                      reply.get("field") or "")
    if got != want:
        raise CliError(f"unexpected reply {got} from {target.address} (wanted {want})")
    return reply


def fetch_jobs(target: Target, ids: tuple[int, ...] = ()) -> tuple[float, list[dict]]:
    """(generated_at, job records) from the controller."""
    try:
        body = request(target, "GetJobs", {"job_ids": list(ids)}, want="JobList")
    except Refused as exc:
        raise CliError(exc.message) from None
    try:
        return float(body.get("generated_at") or 0.0), list(body["jobs"])
    except (KeyError, TypeError) as exc:
        raise CliError(f"malformed JobList reply: missing {exc}") from None


def parse_job_ids(words: list[str], jobs: list[dict] | None = None) -> tuple[int, ...]:
    """Job ids as users write them: "12", "12_3" (array task), comma lists."""
    out: list[int] = []
    for word in words:
        for part in word.split(","):
            part = part.strip()
            if not part:
                continue
            base, sep, task = part.partition("_")
            if not base.isdigit() or (sep and not task.isdigit()):
                raise CliError(f"Invalid job id specified: {part}", code=1)
            if not sep:
                out.append(int(base))
                continue
            if jobs is None:
                raise CliError(f"Invalid job id specified: {part}")
            hits = [j["job_id"] for j in jobs
                    if j.get("array_job_id") == int(base) and j.get("array_task_id") == int(task)]
            if not hits:
                raise CliError(f"Invalid job id specified: {part}")
            out += hits
    return tuple(out)
