"""Listings asked of each controller in turn, as a poller would, each reply a JSON line in OUT:
when it was sent and received, what answered (JobList, or an Error's code), the `state_age` it
states and the job ids it lists. Runs until the file STOP exists.

    python tests/ha/readpoll.py OUT STOP KEY_FILE HOST:PORT [HOST:PORT...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import orjson

PAUSE = 0.05  # seconds between two asks of one poller


def main() -> int:
    from ranch.protocol.client import ControllerUnreachable, parse_address, request_raw

    out_path, stop, key_file, *hosts = sys.argv[1:]
    key = Path(key_file).read_bytes()
    addrs = [parse_address(h, 6817) for h in hosts]
    i = 0
    with open(out_path, "ab", buffering=0) as out:
        while not Path(stop).exists():
            addr = addrs[i % len(addrs)]
            i += 1
            sent = time.time()
            try:
                got, reply = request_raw(addr, key, "GetJobs", {}, timeout=3.0,
                                         connect_timeout=1.0)
            except (ControllerUnreachable, OSError) as exc:
                got, reply = "unreachable", {"code": str(exc)}
            rec: dict[str, object] = {"host": addr[0], "sent": sent, "got": got,
                                      "received": time.time()}
            if got == "JobList":
                rec["age"] = reply.get("state_age", 0.0)
                rec["jobs"] = [j["job_id"] for j in reply.get("jobs", ())]  # type: ignore[union-attr]
            else:
                rec["code"] = reply.get("code")
            out.write(orjson.dumps(rec) + b"\n")
            time.sleep(PAUSE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
