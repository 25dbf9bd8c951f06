"""assoc: Slurm's accounting tree (clusters, accounts, users, associations, QOS) as values. Pure."""
