"""A partition's accounting words (slurm.conf 22.05 PartitionName ... QOS= AllowAccounts=
DenyAccounts= AllowQos= DenyQos=) and partition_mgr.c's part_policy_valid_acct / _qos verdict:
refused at submission under EnforcePartLimits, else the job pends with the reason."""

from __future__ import annotations

from collections.abc import Iterable

import attrs

# WAIT_QOS and WAIT_ACCOUNT (QOSNotAllowed, AccountNotAllowed) come with a state_desc, which
# squeue's %r shows in their place
QOS_ALLOWS = "Job's QOS not permitted to use this partition ({} allows {} not {})"
QOS_DENIES = "Job's QOS not permitted to use this partition ({} denies {} including {})"
ACCOUNT_ALLOWS = "Job's account not permitted to use this partition ({} allows {} not {})"
ACCOUNT_DENIES = "Job's account not permitted to use this partition ({} denies {} including {})"


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
    written: tuple[tuple[str, str], ...] = ()  # each word's value as written, for the reasons

    @classmethod
    def of(cls, name: str, options: Iterable[tuple[str, str]]) -> PartPolicy:
        """From the partition line's words as written (PartitionConfig.options)."""
        got = {k.lower(): v for k, v in options}
        return cls(name, got.get("qos", "").strip().lower(),
                   _names(got.get("allowaccounts", "")), _names(got.get("denyaccounts", "")),
                   _names(got.get("allowqos", "")), _names(got.get("denyqos", "")),
                   tuple(sorted(got.items())))

    def account_ok(self, account: str) -> bool:
        if self.allow_accounts:  # AllowAccounts outweighs DenyAccounts
            return account.lower() in self.allow_accounts
        return account.lower() not in self.deny_accounts

    def qos_ok(self, qos: str) -> bool:
        if self.allow_qos:
            return qos.lower() in self.allow_qos
        return qos.lower() not in self.deny_qos

    def reason(self, account: str, qos: str) -> str:
        """At scheduling (select_nodes: the QOS, then the account): the pending reason as
        squeue shows it (part_policy_valid_qos / _acct's state_desc), "" when both may use
        the partition."""
        said = dict(self.written)
        if self.allow_qos and qos.lower() not in self.allow_qos:
            return QOS_ALLOWS.format(self.name, said.get("allowqos", ""), qos)
        if not self.allow_qos and qos.lower() in self.deny_qos:
            return QOS_DENIES.format(self.name, said.get("denyqos", ""), qos)
        if self.allow_accounts and account.lower() not in self.allow_accounts:
            return ACCOUNT_ALLOWS.format(self.name, said.get("allowaccounts", ""), account)
        if not self.allow_accounts and account.lower() in self.deny_accounts:
            return ACCOUNT_DENIES.format(self.name, said.get("denyaccounts", ""), account)
        return ""
