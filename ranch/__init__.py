"""Ranch: a Slurm-like control plane; every module lives under this one name."""

# The release, written here only: pyproject.toml reads it (dynamic version), every program and
# the HTTP API report it, and rnoded and rctld tell each other theirs.
__version__ = "0.2.0"
