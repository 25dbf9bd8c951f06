"""The usage keys (issue 43): PriorityDecayHalfLife, PriorityCalcPeriod, PriorityUsageResetPeriod
and a partition's TRESBillingWeights read, typed, and a bad value refused at its file:line:col."""

from ranch.conf.build import parse_config_text

from .helpers import one_error

NODE = "NodeName=n1 CPUs=4\n"


def test_defaults_are_slurms() -> None:
    a = parse_config_text("").accounting
    assert (a.half_life, a.calc_period, a.reset_period) == (7 * 86400, 300, "NONE")


def test_usage_keys_read() -> None:
    cfg = parse_config_text(
        "PriorityDecayHalfLife=0\nPriorityCalcPeriod=1\nPriorityUsageResetPeriod=daily\n" + NODE
        + "PartitionName=p Nodes=n1 TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=2.0\n")
    a = cfg.accounting
    assert (a.half_life, a.calc_period, a.reset_period) == (0, 60, "DAILY")
    assert cfg.partitions[0].billing == (("cpu", 1.0), ("mem", 0.25 / 1024), ("gres/gpu", 2.0))
    assert "PriorityDecayHalfLife" not in {k for k, _ in cfg.ignored}
    assert parse_config_text("PriorityDecayHalfLife=1-0\n").accounting.half_life == 86400


def test_bad_values_point_at_the_value() -> None:
    e = one_error("PriorityUsageResetPeriod=hourly\n")
    assert (e.line, e.col) == (1, 26) and "hourly" in e.message
    e = one_error(NODE + "PartitionName=p Nodes=n1 TRESBillingWeights=CPU=1,Mem=x\n")
    assert e.line == 2 and e.col == 45 + len("CPU=1,") and "Mem=x" in e.message
    e = one_error("PriorityDecayHalfLife=soon\n")
    assert e.line == 1 and e.col == 23


def test_no_decay_needs_a_reset_period_as_slurm_says() -> None:
    e = one_error("PriorityDecayHalfLife=0\n")
    assert (e.line, e.col) == (1, 23) and "PriorityUsageResetPeriod set to something" in e.message
