"""noded: rnoded, the node daemon (hardware probe, controller session, config cache)."""
