"""Helpers of the fleet simulator (bench/fleet.py): config, controller process, simulated nodes,
figures."""
