"""POST /slurm/v0.0.38/job/submit's body (v0.0.38_job_submission) turned into the SubmitJob that
rbatch sends, for the user the request proved; a field it cannot carry is refused, not dropped."""

from __future__ import annotations

import os
import signal as signals
from typing import Any

from ranch.ctld.rights import Identity
from ranch.protocol import messages as m

# slurmrestd's own numbers for its refusals (slurm_errno.h)
ESLURM_ENVIRONMENT_MISSING = 2127
ESLURM_REST_FAIL_PARSING = 9001


class SubmitRefused(Exception):
    """The body cannot be a job: [(errno, words)], slurmrestd's errors for it."""

    def __init__(self, errors: list[tuple[int, str]]) -> None:
        super().__init__("; ".join(w for _, w in errors))
        self.errors = errors


_STR = {"name": "name", "partition": "partition", "account": "account", "qos": "qos",
        "comment": "comment", "wckey": "wckey", "array": "array", "dependency": "dependency",
        "constraints": "constraint", "standard_output": "stdout",
        "standard_error": "stderr", "standard_input": "input", "mail_user": "mail_user",
        "open_mode": "open_mode"}
_INT = {"tasks": "ntasks", "cpus_per_task": "cpus_per_task", "memory_per_node": "mem_mib",
        "memory_per_cpu": "mem_per_cpu", "memory_per_gpu": "mem_per_gpu", "nice": "nice",
        "tasks_per_node": "ntasks_per_node"}
_BOOL = {"requeue": "requeue", "hold": "hold",
         "kill_on_invalid_dependency": "kill_on_invalid_dep"}
# taken and acted on in `job` below
_OWN = {"environment", "current_working_directory", "nodes", "time_limit", "begin_time",
        "argv", "exclusive", "mail_type", "gpus", "gpus_per_node", "gpus_per_task",
        "get_user_environment", "minimum_nodes", "oversubscribe", "signal"}


def job(body: Any, who: Identity) -> m.SubmitJob:
    """The SubmitJob for `body` (its `script` and `job`), submitted as `who`."""
    if not isinstance(body, dict) or not isinstance(body.get("script"), str):
        raise SubmitRefused([(ESLURM_REST_FAIL_PARSING,
                              "Failure during parsing: the body needs a script (a string)")])
    if "jobs" in body:
        raise SubmitRefused([(ESLURM_REST_FAIL_PARSING, "Failure during parsing: "
                              "heterogeneous jobs (jobs) are not supported by Ranch")])
    props = body.get("job") or {}
    if not isinstance(props, dict):
        raise SubmitRefused([(ESLURM_REST_FAIL_PARSING, "Failure during parsing: job must be "
                              "an object (v0.0.38_job_properties)")])
    errors: list[tuple[int, str]] = []
    fields: dict[str, Any] = {}
    for key, value in props.items():
        try:
            _take(key, value, fields)
        except (TypeError, ValueError, KeyError) as exc:
            errors.append((ESLURM_REST_FAIL_PARSING, f"{key}: {exc}"))
    env = props.get("environment")
    if not env:
        errors.insert(0, (ESLURM_ENVIRONMENT_MISSING, "environment must be set"))
    if errors:  # slurmrestd ends a refused body's errors with this one
        raise SubmitRefused([*errors, (ESLURM_REST_FAIL_PARSING, "Failure during parsing")])
    workdir = fields.pop("workdir", None) or "/tmp"  # slurmrestd's own default
    for key in ("stdout", "stderr", "input"):
        if fields.get(key) and not fields[key].startswith("/"):
            fields[key] = os.path.join(workdir, fields[key])
    return m.SubmitJob(script=body["script"], user=who.name, uid=who.uid, gid=who.gid,
                       workdir=workdir, submit_host=os.uname().nodename, **fields)


def _take(key: str, value: Any, fields: dict[str, Any]) -> None:
    if key in _STR:
        fields[_STR[key]] = _of(value, str)
    elif key in _INT:
        fields[_INT[key]] = _of(value, int)
    elif key in _BOOL:
        fields[_BOOL[key]] = _of(value, bool)
    elif key == "environment":
        fields["env"] = _environment(value)
    elif key == "current_working_directory":
        fields["workdir"] = _of(value, str)
    elif key == "nodes":  # v0.0.38: [min, max] or a count
        counts = value if isinstance(value, list) else [value]
        low, *high = (_of(v, int) for v in counts)
        fields["num_nodes"] = low
        if high and high[-1] != low:
            fields["max_nodes"] = high[-1]
    elif key == "time_limit":  # minutes
        minutes = _of(value, int)
        fields["time_limit"] = minutes or None
        fields["time_limit_s"] = float(minutes * 60) if minutes else None
    elif key == "begin_time":  # seconds since the epoch
        fields["begin_time"] = float(_of(value, int)) or None
    elif key == "argv":
        fields["argv"] = tuple(_of(v, str) for v in _of(value, list))
    elif key == "exclusive":
        word = _of(value, str).lower()
        if word in ("user", "mcs"):
            fields["oversubscribe"] = word.upper()
        fields["exclusive"] = word not in ("", "false", "no", "oversubscribe")
    elif key == "oversubscribe":
        fields["oversubscribe"] = "YES" if _of(value, bool) else ""
    elif key == "mail_type":
        fields["mail_type"] = tuple(w.strip().upper() for w in _of(value, str).split(",")
                                    if w.strip())
    elif key in ("gpus", "gpus_per_node"):  # per node, as rbatch resolves --gpus on one node
        fields["gpus"] = int(_of(value, str).rpartition(":")[2])
    elif key == "gpus_per_task":
        fields["gpus_per_task"] = int(_of(value, str).rpartition(":")[2])
    elif key == "signal":  # [B:]SIG[@TIME]
        text = _of(value, str)
        batch = text.startswith("B:")
        sig, _, when = text.removeprefix("B:").partition("@")
        num = int(sig) if sig.isdigit() else int(
            signals.Signals["SIG" + sig.upper().removeprefix("SIG")])
        fields.update(warn_signal=num, warn_time=int(when or 60), warn_batch=batch)
    elif key in ("get_user_environment", "minimum_nodes"):
        _of(value, bool)  # accepted; Ranch passes the environment given (docs/slurm-compat.md)
    else:
        raise ValueError("not supported by Ranch (docs/slurm-compat.md lists the fields taken)")


def _environment(value: Any) -> tuple[tuple[str, str], ...]:
    """v0.0.38 takes an object of NAME: value; clients also send ["NAME=value", ...]."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _of(v, str)) for k, v in value.items()))
    if isinstance(value, list):
        pairs = []
        for item in value:
            name, sep, text = _of(item, str).partition("=")
            if not sep:
                raise ValueError(f"{item!r} is not NAME=value")
            pairs.append((name, text))
        return tuple(sorted(pairs))
    raise TypeError("an object of NAME: value")


def _of(value: Any, kind: type) -> Any:
    if kind is int and isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if kind is int and isinstance(value, bool):
        raise TypeError("an integer, not a boolean")
    if not isinstance(value, kind):
        raise TypeError(f"{value!r} is not a{'n' if kind is int else ''} {kind.__name__}")
    return value
