"""Ranch: a Slurm-like control plane; every module lives under this one name."""
