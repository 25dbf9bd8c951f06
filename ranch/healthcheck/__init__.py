"""Health checks: run a site's HealthCheckProgram (runner), decide when (schedule), and the
built-in checks behind `python -m ranch.healthcheck` (disk, memory, load, GPU boot/NVML/XID)."""
