"""The rpc layer: server, frame reader, routes, permissions, identity, admission."""
