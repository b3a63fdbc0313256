"""The session an Anthropic request belongs to, from its ``metadata.user_id``.

Claude Code fills ``metadata.user_id`` with more than the session: newer
releases send a JSON object as text, ``{"device_id": "…", "account_uuid":
"…", "session_id": "<uuid>"}``; older ones ``user_<hash>_account_<uuid>_session_<uuid>``.
Only the session part names the session (the device and account ids are no
session, and a device id is not something to seal in every verdict). Any other
value is the caller's own session name, taken as it is.
"""

import json
import re

_LEGACY_SESSION = re.compile(r"^user_[^\s]*_session_([0-9A-Fa-f-]{8,64})$")


def session_from_user_id(user_id: str | None) -> str | None:
    """The session named by ``metadata.user_id``, or ``None`` when it names none."""
    if not user_id:
        return None
    if user_id.lstrip().startswith("{"):
        try:
            document = json.loads(user_id)
        except (ValueError, RecursionError):
            return user_id
        if isinstance(document, dict):
            session = document.get("session_id")
            return session if isinstance(session, str) and session else None
        return user_id
    found = _LEGACY_SESSION.fullmatch(user_id)
    return found.group(1) if found else user_id
