"""A controller pair on etcd: the election, the campaigning controller, the standby."""
