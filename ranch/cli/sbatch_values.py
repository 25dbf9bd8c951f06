"""Readers of sbatch's less common options (--signal, --mail-type, --nice, ...), loaded on use."""

from __future__ import annotations

from ranch.cli.sbatch_options import arg
from ranch.cli.sbatch_request import usage

MAIL_TYPES = ("BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT", "TIME_LIMIT",
              "TIME_LIMIT_90", "TIME_LIMIT_80", "TIME_LIMIT_50", "ARRAY_TASKS")
_MAIL_ALL = ("BEGIN", "END", "FAIL", "REQUEUE", "INVALID_DEPEND", "STAGE_OUT")
HINTS = ("compute_bound", "memory_bound", "multithread", "nomultithread")
NICE_LIMIT = 2147483645  # sbatch: |nice| <= NICE_OFFSET - 3


def fields(v: dict[str, object]) -> dict[str, object]:
    """The SubmitJob fields of the options `v` holds among sbatch_request.VALUE_OPTIONS."""
    out: dict[str, object] = {}
    if "kill-on-invalid-dep" in v:
        out["kill_on_invalid_dep"] = kill_on_invalid(arg(v, "kill-on-invalid-dep"))
    if "nice" in v:
        out["nice"] = nice_value(v["nice"])
    if "mail-type" in v:  # an empty one is sbatch's "Invalid --mail-type specification"
        out["mail_type"] = list(mail_types(arg(v, "mail-type")))
    if "open-mode" in v:
        out["open_mode"] = open_mode(arg(v, "open-mode"))
    if "signal" in v:
        out["warn_signal"], out["warn_time"], out["warn_batch"] = parse_signal(arg(v, "signal"))
    if "hint" in v:
        out["hint"] = hint(arg(v, "hint"))
    if "get-user-env" in v:
        out["get_user_env"] = get_user_env(v["get-user-env"])
    return out


def parse_signal(text: str) -> tuple[int, int, bool]:
    """--signal=[{R|B}:]SIG[@SECS] -> (signal number, seconds before the limit, batch only)."""
    rest = text.strip()
    batch = False
    # exactly sbatch's reading (get_signal_opts): R, then B, then R, then an optional colon
    if rest[:1] in ("R", "r"):
        rest = rest[1:]
    if rest[:1] in ("B", "b"):
        batch, rest = True, rest[1:]
    if rest[:1] in ("R", "r"):
        rest = rest[1:]
    if rest.startswith(":"):
        rest = rest[1:]
    name, at, secs = rest.partition("@")
    num = signal_number(name)
    if num is None:
        raise usage(f"Invalid --signal specification {text!r}: unknown signal {name!r}")
    if not at:
        return num, 60, batch
    # strtol: the empty word is 0, a sign is read, and nothing may follow the number
    from ranch.cli.sbatch_options import strtol_whole

    when = strtol_whole(secs)
    if when is None or not 0 <= when <= 0xFFFF:
        raise usage(f"Invalid --signal specification {text!r}: expected @SECONDS (0-65535)")
    return num, when, batch


def signal_number(name: str) -> int | None:
    """sig_name2num as get_signal_opts uses it: a number (any, kept as a 16-bit one: Slurm's
    job record holds that, a signal the kernel lacks reaches no process), else a signal's
    name with or without SIG, any case."""
    import signal as signals  # only for --signal: its enum costs every rbatch's start otherwise

    t = name.strip(" \t\n\v\f\r").upper()
    body = t[1:] if t[:1] in "+-" else t
    digits = len(body) - len(body.lstrip("0123456789"))
    if digits:  # strtol found a number: only white space may follow it
        n = int(t[:len(t) - len(body) + digits]) & 0xFFFF
        return n if n >= 1 and not body[digits:] else None
    sig = getattr(signals, t if t.startswith("SIG") else "SIG" + t, None)
    return int(sig) if isinstance(sig, signals.Signals) else None


def mail_types(text: str) -> tuple[str, ...]:
    """--mail-type words, as sbatch ORs them (ALL = BEGIN,END,FAIL,REQUEUE,INVALID_DEPEND,
    STAGE_OUT; NONE clears)."""
    out: list[str] = []
    none = False
    for word in text.split(","):
        w = word.strip().upper()
        if not w:
            continue
        if w == "NONE":
            out, none = [], True
            break
        if w == "ALL":
            out += _MAIL_ALL
        elif w in MAIL_TYPES:
            out.append(w)
    if not out and not none:
        raise usage(f"Invalid --mail-type specification {text!r}: expected "
                    + ",".join(("NONE", "ALL", *MAIL_TYPES)))
    return tuple(dict.fromkeys(out))


def nice_value(value: object) -> int:
    if value is None:
        return 100
    # sbatch reads it with strtoll and no end check: the leading number, else 0 ("1k" is 1)
    text = str(value).lstrip(" \t\n\v\f\r")
    sign = text[:1] if text[:1] in "+-" else ""
    digits = ""
    for ch in text[len(sign):]:
        if not ("0" <= ch <= "9"):
            break
        digits += ch
    n = int(sign + digits) if digits else 0
    if abs(n) > NICE_LIMIT:
        raise usage(f"Invalid --nice value, out of range (+/- {NICE_LIMIT})")
    return n


def exclusive(value: object) -> tuple[bool, str]:
    """--exclusive[=user|mcs|oversubscribe] -> (whole nodes, OverSubscribe word)."""
    if value is None or value is True or str(value).lower() in ("exclusive", ""):
        return True, ""
    word = str(value).lower()
    if word == "user":
        return False, "USER"
    if word == "mcs":
        return False, "MCS"
    if word == "oversubscribe":
        return False, "YES"
    raise usage(f"Invalid --exclusive specification {value!r}: expected user, mcs or nothing")


def open_mode(text: str) -> str:
    t = text.strip()[:1].lower()
    if t == "a":
        return "append"
    if t == "t":
        return "truncate"
    raise usage(f"Invalid --open-mode specification {text!r}: expected append or truncate")


def kill_on_invalid(text: str) -> bool:
    t = text.strip().lower()
    if t in ("yes", "no"):
        return t == "yes"
    raise usage(f"Invalid --kill-on-invalid-dep specification {text!r}: expected yes or no")


def hint(text: str) -> str:
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    bad = [w for w in words if w not in HINTS]
    if bad or not words:  # slurm_opt.c: exit 1, not the usage error's 255
        from ranch.cli.controller import CliError

        raise CliError(f"Invalid --hint specification {text!r}: expected " + ", ".join(HINTS))
    return ",".join(words)


def get_user_env(value: object) -> str:
    if value is None:
        return "yes"
    import re

    text = str(value).strip()
    if not re.fullmatch(r"\d*[SsLl]?", text):
        raise usage(f"Invalid --get-user-env specification {text!r}: expected SECONDS[S|L]")
    return text or "yes"
