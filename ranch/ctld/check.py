"""`rctld --check -f FILE`: validate a cluster.conf, print it normalized as TOML or JSON."""

from __future__ import annotations

import json
import sys

from ranch.conf.build import load_config
from ranch.conf.dump import to_json_dict, to_toml
from ranch.conf.errors import ConfigError
from ranch.conf.refused import NO_PARTITION, REFUSES, SLURMCTLD_EXIT, UNPROCESSABLE

EXIT_OK = 0
EXIT_SLURM_REFUSES = SLURMCTLD_EXIT  # Ranch runs the file; slurmctld 22.05 exits 1 on it
EXIT_CONFIG_ERROR = 2


def run_check(path: str, *, strict: bool = False, as_json: bool = False) -> int:
    """Print the normalized config to stdout, diagnostics to stderr; 0 if valid, 2 if not, 1
    (slurmctld's status) if Ranch runs it but slurmctld 22.05 would not start with it (an
    unknown key, a removed one, no partition: what --strict makes errors)."""
    try:
        cfg = load_config(path, strict=strict)
    except ConfigError as exc:
        for diag in (*exc.errors, *exc.warnings):
            print(diag.format(), file=sys.stderr)
        n = len(exc.errors)
        print(f"{path}: {n} error{'s' if n != 1 else ''}, config not valid", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    refused = sum(REFUSES in w.message for w in cfg.warnings)
    if not cfg.partitions:
        # Fragments load (tests, includes), but slurmctld will not start without a partition.
        refusal = f"{REFUSES}: {NO_PARTITION}"
        if strict:
            for diag in cfg.warnings:
                print(diag.format(), file=sys.stderr)
            print(f"{path}: {refusal}", file=sys.stderr)
            print(f"{path}: 1 error, config not valid", file=sys.stderr)
            return EXIT_CONFIG_ERROR
        print(f"{path}: warning: {refusal}", file=sys.stderr)
        refused += 1
    for diag in cfg.warnings:
        print(diag.format(), file=sys.stderr)
    if cfg.ignored:
        print(f"note: Ranch keeps but ignores these Slurm keys: {', '.join(cfg.ignored)}",
              file=sys.stderr)
    if as_json:
        sys.stdout.write(json.dumps(to_json_dict(cfg), indent=2) + "\n")
    else:
        sys.stdout.write(to_toml(cfg))
    sys.stdout.flush()
    if refused:
        print(f"{path}: slurmctld 22.05 would not start with this file ({UNPROCESSABLE}: "
              f"{refused} setting{'s' if refused != 1 else ''} above); rctld runs it",
              file=sys.stderr)
        return EXIT_SLURM_REFUSES
    return EXIT_OK
