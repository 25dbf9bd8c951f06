"""A partition's accounting words (slurm.conf 22.05 PartitionName ... QOS= AllowAccounts=
DenyAccounts= AllowQos= DenyQos=) and partition_mgr.c's part_policy_valid_acct / _qos verdict:
refused at submission under EnforcePartLimits, else the job pends with the reason."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

ACCOUNT_REASON = "AccountNotAllowed"  # WAIT_ACCOUNT
QOS_REASON = "QOSNotAllowed"  # WAIT_QOS


def _names(text: str) -> tuple[str, ...]:
    """A comma list; ALL (or nothing) lifts the restriction."""
    got = tuple(w.strip().lower() for w in text.split(",") if w.strip())
    return () if "all" in got else got


@attrs.frozen
class PartPolicy:
    name: str
    qos: str = ""
    allow_accounts: tuple[str, ...] = ()
    deny_accounts: tuple[str, ...] = ()
    allow_qos: tuple[str, ...] = ()
    deny_qos: tuple[str, ...] = ()

    @classmethod
    def of(cls, name: str, options: Iterable[tuple[str, str]]) -> PartPolicy:
        """From the partition line's words as written (PartitionConfig.options)."""
        got = {k.lower(): v for k, v in options}
        return cls(name, got.get("qos", "").strip().lower(),
                   _names(got.get("allowaccounts", "")), _names(got.get("denyaccounts", "")),
                   _names(got.get("allowqos", "")), _names(got.get("denyqos", "")))

    def account_ok(self, account: str) -> bool:
        if self.allow_accounts:  # AllowAccounts outweighs DenyAccounts
            return account.lower() in self.allow_accounts
        return account.lower() not in self.deny_accounts

    def qos_ok(self, qos: str) -> bool:
        if self.allow_qos:
            return qos.lower() in self.allow_qos
        return qos.lower() not in self.deny_qos

    def reason(self, account: str, qos: str) -> str:
        """At scheduling (select_nodes: the QOS, then the account): the pending reason, ""
        when both may use the partition."""
        if not self.qos_ok(qos):
            return QOS_REASON
        return "" if self.account_ok(account) else ACCOUNT_REASON
