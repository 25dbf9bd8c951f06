"""racctmgr (sacctmgr). Under AccountingStorageType=accounting_storage/slurmdbd rctld keeps the
accounting tree and answers each command line as sacctmgr 22.05 does (ctld/accounts/); this end
sends the line, asks the user sacctmgr's questions here (rctld answers up to the question, then
again with the answer), writes dump's files and reads load's, where sacctmgr would. Without it
(or with no controller named at all) every request is answered as sacctmgr answers on a Slurm
without slurmdbd (refused, exit 1; measured side by side in tests/conformance/test_value_matrix.py),
and tools that look an account up go on without it."""

from __future__ import annotations

import os
import sys

from ranch.cli import sbatch_options as so
from ranch.cli.controller import CONF_ENV, INSTALLED_CONF, SERVER_ENV, Target, run_main
from ranch.cli.slurm_names import prog, version_text

OPTIONS = so.Options((
    so.Opt("associations", "s", so.NO), so.Opt("help", "h", so.NO),
    so.Opt("immediate", "i", so.NO), so.Opt("noheader", "n", so.NO),
    so.Opt("parsable", "p", so.NO), so.Opt("parsable2", "P", so.NO),
    so.Opt("quiet", "Q", so.NO), so.Opt("readonly", "r", so.NO),
    so.Opt("verbose", "v", so.NO), so.Opt("version", "V", so.NO), so.Opt("usage", "", so.NO),
    so.Opt("json", "", so.NO), so.Opt("yaml", "", so.NO),
))
NO_DATABASE = ("You are not running a supported accounting_storage plugin\n"
               "Only 'accounting_storage/slurmdbd' is supported.\n")
ANSWER_S = 30.0  # sacctmgr's commit_check: each question waits this long for a key


def run(argv: list[str]) -> int:
    name = prog("racctmgr")
    # getopt_long permutes: an option may follow the command's words
    flags = [w for w in argv if w.startswith("-") and w != "-"]
    words = [w for w in argv if not (w.startswith("-") and w != "-")]
    try:
        values, _rest = so.parse(flags, options=OPTIONS)
    except so.OptionError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        print(f'Try "{name} --help" for more information', file=sys.stderr)
        return 1
    if values.get("version"):
        print(version_text("racctmgr"))
        return 0
    target = _target()
    if target is None:  # no controller named anywhere: no accounting store either
        sys.stderr.write(NO_DATABASE)
        return 1
    return session(target, words, sorted(k for k, v in values.items() if v))


def _target() -> Target | None:
    from ranch.cli.controller import find_target

    env = os.environ
    if not (env.get(CONF_ENV) or env.get(SERVER_ENV) or os.path.exists(INSTALLED_CONF)):
        return None
    return find_target(None, None, None)


def session(target: Target, words: list[str], options: list[str]) -> int:
    """One command line with rctld: sent, then sent again with each answer the user types at
    a question (rctld keeps nothing until the last answer is in); stdout as it comes."""
    import getpass

    from ranch.cli.controller import request

    body: dict = {"words": words, "options": options, "stdin": None, "final": False,
                  "user": getpass.getuser(), "uid": os.getuid(), **_load_file(words)}
    printed = 0
    while True:
        reply = request(target, "AcctmgrRequest", body, want="AcctmgrReply")
        out = str(reply.get("out") or "")
        sys.stdout.write(out[printed:])
        sys.stdout.flush()
        printed = len(out)
        if not reply.get("waiting"):
            break
        key = _read_key(ANSWER_S)
        if key is None:  # nobody answered in time (or stdin is closed): sacctmgr's timeout
            body["final"] = True
        else:
            body["stdin"] = (body["stdin"] or "") + key
    sys.stderr.write(str(reply.get("err") or ""))
    for path, text in reply.get("files") or ():  # dump: written where racctmgr runs
        with open(path, "w") as f:
            f.write(text)
    return int(reply.get("rc") or 0)


def _load_file(words: list[str]) -> dict:
    """load's file, read here as sacctmgr reads it: {"files": [(path, text)]} or
    {"unreadable": [(path, why)]}; nothing for any other command."""
    from ranch.assoc.acctmgr_session import load_path

    path = load_path(words)
    if not path:
        return {}
    try:
        with open(path) as f:
            return {"files": [(path, f.read())]}
    except OSError as exc:
        return {"unreadable": [(path, exc.strerror or str(exc))]}


def _read_key(wait: float) -> str | None:
    """One character of stdin within `wait` seconds (None: none came, or end of file)."""
    import select

    try:
        fd = sys.stdin.fileno()
        ready, _, _ = select.select([fd], [], [], wait)
    except (AttributeError, OSError, ValueError):
        return None
    if not ready:
        return None
    data = os.read(fd, 1)
    return data.decode("latin-1") if data else None


def main(argv: list[str] | None = None) -> int:
    return run_main("racctmgr", run, argv)


if __name__ == "__main__":
    sys.exit(main())
