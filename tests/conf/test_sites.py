"""Complete configs written in the style of real sites load cleanly, with the expected model."""

from pathlib import Path

import pytest

from ranch.conf.build import load_config

DATA = Path(__file__).parent / "data"


def test_site_a_university_hpc() -> None:
    cfg = load_config(DATA / "site_a" / "slurm.conf", strict=True)
    assert cfg.warnings == ()
    assert cfg.cluster_name == "hopper"
    assert [h.name for h in cfg.control.hosts] == ["hopper-mgmt1", "hopper-mgmt2"]
    assert [f for f, _ in cfg.files] == ["slurm.conf", "nodes.conf", "partitions.conf"]
    assert len(cfg.nodes) == 384 + 16 + 24 + 12 + 4
    assert {p.name: len(p.nodes) for p in cfg.partitions} == {
        "debug": 4, "standard": 384, "long": 85, "bigmem": 16, "gpu": 36, "scavenger": 440}
    a01 = cfg.node("hpc-a01")
    assert (a01.cpus, a01.sockets, a01.cores_per_socket, a01.threads_per_core, a01.gpus,
            a01.tmp_disk) == (128, 2, 32, 2, 8, 400000)
    assert cfg.node("hpc-c017").state == "DOWN"
    assert cfg.node("hpc-c017").reason == "bad DIMM, ticket 4711"
    assert cfg.node("hpc-g07").state == "DRAIN"
    assert cfg.partitions_of("hpc-c350") == ("standard", "long", "scavenger")
    assert cfg.default_partition.name == "standard"
    gpu = cfg.partition("gpu")
    assert dict(gpu.options)["TRESBillingWeights"] == "CPU=1.0,Mem=0.25G,GRES/gpu=16.0"
    assert dict(gpu.options)["DefMemPerCPU"] == "3800"  # from PartitionName=DEFAULT
    assert cfg.timeouts.return_to_service == 2
    assert cfg.health.node_state == ("ANY", "CYCLE")
    assert "CryptoType" in cfg.ignored
    # issue 44: the scheduler keys are read (bf_continue, default_queue_depth kept, not acted on)
    assert "SchedulerParameters" not in cfg.ignored
    s = cfg.scheduler
    assert (s.type, s.bf_interval, s.bf_window, s.bf_resolution) == ("sched/backfill", 30, 4320,
                                                                      600)


def test_site_b_gpu_cluster_with_percent_c_includes() -> None:
    cfg = load_config(DATA / "site_b" / "slurm.conf", strict=True)
    assert cfg.warnings == ()
    assert cfg.cluster_name == "tensor"
    assert [f for f, _ in cfg.files] == [
        "slurm.conf", "tensor-nodes.conf", "tensor-partitions.conf"]
    assert [(h.name, h.addr) for h in cfg.control.hosts] == [
        ("tensor-head", "192.168.100.1"), ("tensor-head2", "192.168.100.2")]
    assert len(cfg.nodes) == 4 * 32 + 96 + 2
    dgx = cfg.node("dgx3-017")
    assert (dgx.addr, dgx.cpus, dgx.gpus, dgx.gres_str) == ("10.3.0.17", 256, 8,
                                                            "gpu:h100:8,mps:800")
    prep = cfg.node("prep050")
    assert (prep.cpus, prep.gres) == (96, ())
    assert cfg.node("login2").state == "DRAIN"
    maint = cfg.partition("maint")
    assert (maint.state, maint.hidden, len(maint.nodes)) == ("INACTIVE", True, 226)
    assert {p.name: (p.max_time, p.default_time) for p in cfg.partitions} == {
        "h100": (4320, 240), "pod1": (20160, 240), "preempt": (4320, 240), "cpu": (None, 240),
        "interactive": (480, 60), "maint": (4320, 240)}


def test_site_c_cloud_burst_with_ranch_keys() -> None:
    cfg = load_config(DATA / "site_c" / "cluster.conf", strict=True)
    here = str(DATA / "site_c")
    assert cfg.warnings == ()
    assert (cfg.cluster_name, cfg.control.port) == ("stratus", 6820)
    assert (cfg.auth.key_file, cfg.auth.node_approval) == (f"{here}/keys/cluster.key", "manual")
    assert cfg.timeouts.heartbeat_interval == 15
    assert cfg.power.resume_program == f"{here}/bin/resume.sh"
    assert cfg.power.suspend_exc_nodes[0].count == 8
    assert len(cfg.power.suspend_exc_nodes[0].nodes) == 64
    assert len(cfg.nodes) == 128 + 1 + 4 * 64
    assert sum(n.state == "CLOUD" for n in cfg.nodes) == 256
    assert cfg.node("onprem001").port == 6818
    assert cfg.node("onprem125").state == "FUTURE"
    assert cfg.node("login01").features == ("login", "colour#1")
    assert len(cfg.partition("burst").nodes) == 256
    assert cfg.partition("gpu").nodes[0] == "onprem001"
    assert cfg.partition("login").state == "DOWN"


def test_example_config_loads() -> None:
    root = Path(__file__).resolve().parents[2]
    cfg = load_config(root / "examples" / "slurm-like.conf", strict=True)
    assert cfg.warnings == ()
    assert cfg.cluster_name == "ranch-demo"
    assert [(h.name, h.addr) for h in cfg.control.hosts] == [("localhost", "127.0.0.1")]
    gpu = cfg.partition("gpu")
    assert (gpu.default, gpu.max_time, gpu.nodes) == (True, 1440, ("gpu01", "gpu02", "gpu03",
                                                                    "gpu04"))
    assert all(cfg.node(n).gpus == 4 and cfg.node(n).cpus == 2 for n in gpu.nodes)
    assert all(n.real_memory <= 1024 and n.cpus <= 2 for n in cfg.nodes)
    assert len(cfg.partition("cpu").nodes) == 8
    assert [n.name for n in cfg.nodes if n.state == "CLOUD"] == [f"cloud0{i}" for i in range(1, 5)]
    assert any(n.state == "FUTURE" for n in cfg.nodes)
    assert (cfg.timeouts.slurmd_timeout, cfg.timeouts.heartbeat_interval,
            cfg.timeouts.return_to_service) == (30, 5, 1)
    assert cfg.health.program == str(root / "examples" / "healthcheck.sh")
    assert cfg.health.interval == 30
    assert cfg.power.suspend_program == str(root / "examples" / "suspend.sh")
    assert (cfg.power.suspend_time, cfg.power.suspend_timeout, cfg.power.resume_timeout) == (
        600, 30, 120)
    assert cfg.power.suspend_exc_parts == ("gpu",)
    assert "SelectType" in cfg.ignored and "ProctrackType" in cfg.ignored


def test_config_reference_documents_every_acted_key() -> None:
    from ranch.conf.keys import ALL_SPECS

    root = Path(__file__).resolve().parents[2]
    # README's reference, or the page of docs/ that covers the key (docs/daemons.md: the logs)
    doc = "\n".join(p.read_text() for p in [root / "README.md", *sorted(root.glob("docs/*.md"))])
    missing = [s.name for s in ALL_SPECS if s.acted and f"`{s.name}`" not in doc]
    assert missing == []


# Three more sites with lines slurmctld 22.05 starts with but only logs about. Each was run
# through real slurmctld 22.05.8 (names resolved locally): it started, logged the lines the
# warnings below mirror, and showed the CPUs and DefaultTime values asserted here.


def _warned(cfg) -> list[tuple[str, int, str]]:
    return [(w.path.split("/")[-1], w.line, w.message) for w in cfg.warnings]


def test_site_d_upgraded_in_place_with_old_spellings() -> None:
    cfg = load_config(DATA / "site_d" / "slurm.conf")
    assert [h.name for h in cfg.control.hosts] == ["mesa-head"]
    # CPUs wins over Procs wherever it stands on the line; Procs alone still counts.
    assert {cfg.node(n).cpus for n in ("mesa001", "mesa032")} == {80}
    assert (cfg.node("mesa-vm03").cpus, cfg.node("mesa-vm03").sockets) == (2, 1)
    assert cfg.node("mesa-old2").cpus == 16
    # The DEFAULT line's one-hour DefaultTime exceeds debug's and teach's MaxTime: cleared there.
    times = {p.name: (p.max_time, p.default_time) for p in cfg.partitions}
    assert times == {"debug": (30, None), "batch": (2880, 60), "teach": (45, None),
                     "old": (None, 60)}
    warned = _warned(cfg)
    assert [(f, line) for f, line, _ in warned] == [
        ("slurm.conf", 31), ("slurm.conf", 54), ("slurm.conf", 56)]
    assert "Ignoring obsolete FastSchedule=1" in warned[0][2]
    assert "partition debug DefaultTime exceeds MaxTime (60 > 30)" in warned[1][2]
    assert "partition teach DefaultTime exceeds MaxTime (60 > 45)" in warned[2][2]
    assert dict(cfg.partition("teach").options)["OverSubscribe"] == "FORCE:2"


def test_site_e_gpu_cluster_with_cpu_counts_slurm_fixes() -> None:
    cfg = load_config(DATA / "site_e" / "slurm.conf")
    assert [f for f, _ in cfg.files] == ["slurm.conf", "nodes.conf", "partitions.conf"]
    assert len(cfg.nodes) == 16 + 8 + 100 + 2
    assert cfg.node("kgpu01").cpus == 64  # Sockets*CoresPerSocket: accepted as written
    assert cfg.node("kgpu17").cpus == 128  # 96 matches nothing: reset, as slurmctld does
    assert cfg.node("kburst042").cpus == 8  # CPUs of the DEFAULT line beats Procs=4
    assert cfg.node("kburst042").state == "CLOUD" and cfg.node("kgpu20").gpus == 8
    times = {p.name: (p.max_time, p.default_time) for p in cfg.partitions}
    assert times == {"gpu": (4320, 240), "interactive": (120, None), "burst": (1440, None),
                     "preempt": (4320, 240)}
    warned = _warned(cfg)
    assert [(f, line) for f, line, _ in warned] == [
        ("nodes.conf", 6), ("partitions.conf", 5), ("partitions.conf", 6)]
    assert "CPUs=96" in warned[0][2] and "reset to 128" in warned[0][2]
    assert "(240 > 120)" in warned[1][2] and "(2880 > 1440)" in warned[2][2]
    assert dict(cfg.partition("gpu").options)["DefMemPerCPU"] == "7500"


def test_site_f_small_lab() -> None:
    cfg = load_config(DATA / "site_f" / "slurm.conf")
    assert cfg.node("ws05").cpus == 16 and cfg.node("ws14").cpus == 32
    times = {p.name: (p.max_time, p.default_time) for p in cfg.partitions}
    assert times == {"quick": (10, None), "long": (10080, 1440), "gpu": (2880, 5)}
    assert _warned(cfg) == [("slurm.conf", 23, "partition quick DefaultTime exceeds MaxTime "
                             "(1440 > 10); DefaultTime cleared (NONE), as slurmctld does")]
    assert cfg.default_partition.name == "quick"


@pytest.mark.parametrize("site", ["site_d", "site_e", "site_f"])
def test_sites_slurm_starts_with_pass_strict_check(site: str) -> None:
    # --strict refuses only what slurmctld refuses (and unknown keys): these all start.
    cfg = load_config(DATA / site / "slurm.conf", strict=True)
    assert cfg.partitions and all("refuses" not in w.message for w in cfg.warnings)
