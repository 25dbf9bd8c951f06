"""Every message Ranch daemons and commands exchange, as frozen attrs classes.

One cattrs converter (ranch.protocol.codec) turns them into bytes; the frame header carries the type
name
(`MESSAGE_TYPES` key), so a message class here never names its own type in its fields.
"""

from __future__ import annotations

# The messages live in modules by area (node traffic, admin commands, jobs, steps); each one is
# `messages.Name` all the same, and MESSAGE_TYPES below is the one registry of them.
from ranch.protocol.adminmessages import *  # noqa: F403
from ranch.protocol.adminmessages import ADMIN_MESSAGES
from ranch.protocol.dryrunmessages import *  # noqa: F403
from ranch.protocol.dryrunmessages import DRY_RUN_MESSAGES
from ranch.protocol.jobmessages import *  # noqa: F403
from ranch.protocol.jobmessages import JOB_MESSAGES
from ranch.protocol.nodemessages import *  # noqa: F403
from ranch.protocol.nodemessages import NODE_MESSAGES
from ranch.protocol.relaymessages import *  # noqa: F403
from ranch.protocol.relaymessages import RELAY_MESSAGES
from ranch.protocol.stepmessages import *  # noqa: F403
from ranch.protocol.stepmessages import STEP_MESSAGES

MESSAGE_TYPES: dict[str, type] = {
    cls.__name__: cls
    for cls in (*NODE_MESSAGES, *ADMIN_MESSAGES, *JOB_MESSAGES, *STEP_MESSAGES, *RELAY_MESSAGES,
                *DRY_RUN_MESSAGES)
}
