"""rsprio's formatting (cli/rsprio.py) against sprio 22.05's print.c, without a controller:
the default formats per weight, `%[.]N` widths (right-justified or cut and padded), the weighted
and normalised cells, an admin's Priority=, the Weights row. tests/conformance/test_sprio.py holds
whole outputs against Slurm's."""

from __future__ import annotations

from ranch.cli import rsprio

WEIGHTS = {"age": 0, "assoc": 0, "fairshare": 10000, "jobsize": 1000, "partition": 0,
           "qos": 5000, "tres": "CPU=800"}
ROW = {"job_id": 7, "partition": "main", "user": "alice", "direct": 0, "age": 0.0,
       "assoc": 0.0, "fairshare": 10000.0, "jobsize": 375.0, "part": 0.0, "qos": 2500.0,
       "tres": [["cpu", 200.0]], "tres_norm": [["cpu", 0.25]], "nice": 10, "site": 0}


def test_default_formats_list_the_weighted_factors_only() -> None:
    assert rsprio.default_format(WEIGHTS, normalized=False, long=False, users=False) == (
        "%.15i %9r %.10Y %.10S %.10F %.10J %.10Q %.20T")
    assert rsprio.default_format(WEIGHTS, normalized=True, long=False, users=True) == (
        "%.15i %9r %.8u %10y %10f %10j %10q %20t")
    assert rsprio.default_format({}, normalized=False, long=True, users=False) \
        == rsprio.NICE_LONG


def test_cells_as_print_c_writes_them() -> None:
    fields = rsprio.parse_format("%.6i %4r|%.10Y %y %j %T %N")
    assert rsprio.line(fields, None, WEIGHTS) == " JOBID PART|  PRIORITY PRIORITY JOBSIZE TRES NICE"
    # PRIORITY: the sum less nice (13075 - 10); normalised over 2^32-1
    assert rsprio.line(fields, ROW, WEIGHTS) == (
        "     7 main|     13065 0.00000304193236 0.3750000 cpu=200 10")
    admin = dict(ROW, direct=5000)
    assert rsprio.value("Y", admin, WEIGHTS) == "5000"
    assert rsprio.value("y", admin, WEIGHTS) == "5000.00000000000000"  # not normalised
    assert rsprio.value("N", admin, WEIGHTS) == "0"


def test_weights_row_and_sorting() -> None:
    fields = rsprio.parse_format(rsprio.default_format(WEIGHTS, normalized=False, long=False,
                                                       users=False))
    assert rsprio.line(fields, {}, WEIGHTS).split() == ["Weights", "1", "10000", "1000", "5000",
                                                       "CPU=800"]
    rows = [dict(ROW, job_id=i, qos=q) for i, q in ((1, 0.0), (2, 5000.0), (3, 100.0))]
    assert [r["job_id"] for r in rsprio.sort_rows(rows, "-y")] == [2, 3, 1]
    assert [r["job_id"] for r in rsprio.sort_rows(rows, "i")] == [1, 2, 3]
