"""conf: cluster.conf (Slurm's slurm.conf syntax) -> validated, typed ClusterConfig. Pure.

Import a name from the module that defines it (ranch.conf.build.load_config,
ranch.conf.model.ClusterConfig): nothing is re-exported here, so `import ranch.conf.hostlist`
pays for nothing else.
"""
