"""Who a caller is, and the rights that follow: the owner-or-admin rule, written once.

ctld/rpc/permissions.py applies these to every request (its gate), the job commands and the steps
to the jobs they touch, the web side to a token's user.
"""

from __future__ import annotations

import grp
import pwd

import attrs

from ranch.conf.model import AccessSettings, ClusterConfig

DENIED = "Access/permission denied"
ADMINS = "root, SlurmUser or AdminUsers"


@attrs.frozen
class Identity:
    """A user proven by a credential."""

    uid: int
    gid: int
    name: str
    admin: bool

    def __str__(self) -> str:
        return f"{self.name} (uid {self.uid})"


def user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)  # a uid with no passwd entry is still that uid


def is_admin(access: AccessSettings, uid: int, gid: int, name: str) -> bool:
    """Root, SlurmUser (a name or a uid) and AdminUsers (names, uids or %groups)."""
    if uid == 0 or access.slurm_user in (name, str(uid)):
        return True
    for entry in access.admin_users:
        if entry in (name, str(uid)):
            return True
        if entry.startswith("%") and _in_group(entry[1:], uid, gid, name):
            return True
    return False


def _in_group(group: str, uid: int, gid: int, name: str) -> bool:
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return False
    return g.gr_gid == gid or name in g.gr_mem


def identify(config: ClusterConfig, uid: int, gid: int) -> Identity:
    name = user_name(uid)
    return Identity(uid, gid, name, is_admin(config.access, uid, gid, name))


# The cluster key's holder, where its request names no user (rrun's StepRequest): trusted with
# every right, as Slurm trusts the holder of the munge key, who can mint any user's credential.
KEY_HOLDER = Identity(0, 0, "", True)


def acting(config: ClusterConfig, who: Identity | None, uid: int, user: str) -> Identity:
    """Who a job command acts as: the user munged proved (`who`), or, for the cluster key's
    holder (who is None), the user its request names, taken as said (root is uid 0; the name
    "root" alone proves nothing)."""
    if who is not None:
        return who
    # the rights follow the uid (its passwd name), never the name the request wrote
    admin = uid == 0 or (uid >= 0 and is_admin(config.access, uid, -1, user_name(uid)))
    return Identity(uid, -1, user, admin)


def may_act_on(actor: Identity, owner_uid: int, owner_name: str) -> bool:
    """The owner-or-admin rule, for a job, its steps and its allocation: its owner (by uid, or
    by name where an older client sent no uid) or an admin."""
    return actor.admin or actor.uid == owner_uid or bool(actor.name and
                                                         actor.name == owner_name)


def may_see_usage(config: ClusterConfig, who: Identity | None, owner_uid: int) -> bool:
    """PrivateData=usage: a user who is not an admin sees only their own usage."""
    return (who is None or who.admin or who.uid == owner_uid
            or "usage" not in config.access.private_data)


def denied(what: str, why: str) -> str:
    """scontrol's wording first, then what was refused and why."""
    return f"{DENIED}: {what}: {why}"


def identify_name(config: ClusterConfig, name: str) -> Identity:
    """The user an HTTP token names (uid -1 when the name has no passwd entry: then only
    AdminUsers or SlurmUser can make it an admin)."""
    try:
        pw = pwd.getpwnam(name)
        uid, gid = pw.pw_uid, pw.pw_gid
    except KeyError:
        uid = gid = -1
    return Identity(uid, gid, name, is_admin(config.access, uid, gid, name))
