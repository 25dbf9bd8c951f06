"""What the slurmrestd comparison needs: JWTs signed as slurmrestd's clients sign them, the field
names and types of two answers compared recursively, and an answer checked against the OpenAPI
schema slurmrestd serves (GET /openapi/v3)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jwt(key: bytes, user: str, life: int = 600, alg: str = "HS256") -> str:
    """An HS256 JWT with slurm's claims (sun, exp, iat), as `scontrol token` makes one."""
    now = int(time.time())
    head = _b64(json.dumps({"alg": alg, "typ": "JWT"}).encode())
    body = _b64(json.dumps({"exp": now + life, "iat": now, "sun": user}).encode())
    sig = _b64(hmac.new(key, f"{head}.{body}".encode(), hashlib.sha256).digest())
    return f"{head}.{body}.{sig}"


# job_resources' maps keyed by socket and core numbers, not by field names
ID_MAPS = frozenset({"sockets", "cores"})


def shape_diff(slurm: Any, ranch: Any, nullable: frozenset[str], path: str = "") -> list[str]:
    """Where `ranch` differs from `slurm` in field names or types, recursively. A null on one
    side against a value on the other is a difference unless the field's name is in `nullable`
    (slurmrestd prints null for a value slurmctld holds as NO_VAL, which depends on the run)."""
    if slurm is None or ranch is None:
        if (slurm is None) == (ranch is None) or path.rsplit(".", 1)[-1] in nullable:
            return []
        return [f"{path}: slurmrestd {slurm!r}, Ranch {ranch!r}"]
    if type(slurm) is not type(ranch):
        return [f"{path}: slurmrestd {type(slurm).__name__} {slurm!r}, Ranch "
                f"{type(ranch).__name__} {ranch!r}"]
    if isinstance(slurm, dict) and path.rsplit(".", 1)[-1] in ID_MAPS:
        # keyed by ids (socket and core numbers): the ids are values, their entries compared
        return shape_diff(list(slurm.values()), list(ranch.values()), nullable, path + "[]")
    if isinstance(slurm, dict):
        out = [f"{path}.{k}: only slurmrestd has it" for k in slurm if k not in ranch]
        out += [f"{path}.{k}: only Ranch has it" for k in ranch if k not in slurm]
        for k in slurm:
            if k in ranch:
                out += shape_diff(slurm[k], ranch[k], nullable, f"{path}.{k}")
        return out
    if isinstance(slurm, list) and slurm and ranch:
        out = []
        for i, (a, b) in enumerate(zip(slurm, ranch, strict=False)):
            out += shape_diff(a, b, nullable, f"{path}[{i}]")
        return out
    return []


def schema_errors(spec: dict, path: str, method: str, doc: Any) -> set[tuple[str, str]]:
    """(where, what) of every way `doc` breaks the schema slurmrestd's spec gives the answer of
    METHOD PATH (its first response with a schema)."""
    import jsonschema

    op = spec["paths"][path][method]
    schema = None
    for resp in op["responses"].values():
        content = resp.get("content", {}).get("application/json", {})
        if "schema" in content:
            schema = content["schema"]
            break
    assert schema is not None, f"{method} {path}: the spec gives no schema"
    whole = {**schema, "components": spec["components"]}
    validator = jsonschema.Draft7Validator(whole)
    # list positions read as "*": one job's or node's error is the same error in another's
    return {(".".join("*" if isinstance(p, int) else str(p) for p in e.absolute_path),
             str(e.validator)) for e in validator.iter_errors(doc)}
