"""The pending reasons of the accounting limits by TRES (acct_policy.c _get_tres_state_reason,
the words of slurm_protocol_defs.c job_reason_string, Slurm 22.05), each in TRES order: cpu,
mem, node, gres. A node has no per-node reason of its own: the unknown one stays."""

from __future__ import annotations

QOS_GRP = ("QOSGrpCpuLimit", "QOSGrpMemLimit", "QOSGrpNodeLimit", "QOSGrpGRES")
QOS_GRP_MIN = ("QOSGrpCPUMinutesLimit", "QOSGrpMemoryMinutes", "QOSGrpNodeMinutes",
               "QOSGrpGRESMinutes")
QOS_GRP_RUN_MIN = ("QOSGrpCPURunMinutesLimit", "QOSGrpMemoryRunMinutes",
                   "QOSGrpNodeRunMinutes", "QOSGrpGRESRunMinutes")
QOS_PER_JOB = ("QOSMaxCpuPerJobLimit", "QOSMaxMemoryPerJob", "QOSMaxNodePerJobLimit",
               "QOSMaxGRESPerJob")
QOS_MINS_PER_JOB = ("QOSMaxCpuMinutesPerJobLimit", "QOSMaxMemoryMinutesPerJob",
                    "QOSMaxNodeMinutesPerJob", "QOSMaxGRESMinutesPerJob")
QOS_PER_NODE = ("QOSMaxCpuPerNode", "QOSMaxMemoryPerNode", "QOSMaxUnknownPerNode",
                "QOSMaxGRESPerNode")
QOS_MIN = ("QOSMinCpuNotSatisfied", "QOSMinMemory", "QOSMinNode", "QOSMinGRES")
QOS_PER_ACCT = ("MaxCpuPerAccount", "MaxMemoryPerAccount", "MaxNodePerAccount",
                "MaxGRESPerAccount")
QOS_PER_USER = ("QOSMaxCpuPerUserLimit", "QOSMaxMemoryPerUser", "QOSMaxNodePerUserLimit",
                "QOSMaxGRESPerUser")
ASSOC_GRP = ("AssocGrpCpuLimit", "AssocGrpMemLimit", "AssocGrpNodeLimit", "AssocGrpGRES")
ASSOC_GRP_MIN = ("AssocGrpCPUMinutesLimit", "AssocGrpMemMinutes", "AssocGrpNodeMinutes",
                 "AssocGrpGRESMinutes")
ASSOC_GRP_RUN_MIN = ("AssocGrpCPURunMinutesLimit", "AssocGrpMemRunMinutes",
                     "AssocGrpNodeRunMinutes", "AssocGrpGRESRunMinutes")
ASSOC_PER_JOB = ("AssocMaxCpuPerJobLimit", "AssocMaxMemPerJob", "AssocMaxNodePerJobLimit",
                 "AssocMaxGRESPerJob")
ASSOC_MINS_PER_JOB = ("AssocMaxCpuMinutesPerJobLimit", "AssocMaxMemMinutesPerJob",
                      "AssocMaxNodeMinutesPerJob", "AssocMaxGRESMinutesPerJob")
ASSOC_PER_NODE = ("AssocMaxCpuPerNode", "AssocMaxMemPerNode", "AssocMaxUnknownPerNode",
                  "AssocMaxGRESPerNode")
