"""Disclosure bounds: what of a candidate's record a model may be sent.

Relevance is a judgment and disclosure is a grant. The bound is decided by
two things only: what ctx04's read admitted (the candidate's readiness) and
where the model runs (``Settings.model_locality``); never by a score, and
never by text inside the repository, which is data with no authority.

- A refused file was never read: ``path-only`` under every profile, its
  path and the reason it was withheld.
- An excerpt the slice shows was admitted by the read: ``content`` under
  every profile. The request still carries no content (the door's records
  never hold any); ``content`` admits the file's content digest.
- An excerpt a budget cut was read but not admitted into the block: a
  hosted model sees ``path-span`` (path, span, size), a local one
  ``content``.
"""

from __future__ import annotations

import json
from typing import Any

from ctx04_core.evidence import sha256_hex
from ctx04_core.model import is_local
from ctx04_core.selection import REFUSED, SHOWN
from ctx04_core.types import CONTENT, PATH_ONLY, PATH_SPAN, Observed

POLICY = "ctx04.disclosure-bounds.v1"
# Each bound's fields, cumulative: the wider bound sends the narrower one's too.
FIELDS = {
    PATH_ONLY: ("option", "path", "readiness", "withheld"),
    PATH_SPAN: ("option", "path", "readiness", "start_line", "end_line", "bytes"),
    CONTENT: ("option", "path", "readiness", "start_line", "end_line", "bytes",
              "content_digest"),
}


def bound(candidate: Observed, locality: str) -> str:
    if candidate.readiness == REFUSED:
        return PATH_ONLY
    if candidate.readiness == SHOWN or is_local(locality):
        return CONTENT
    return PATH_SPAN


def disclosed(candidate: Observed, bound_name: str) -> dict[str, Any]:
    """The record as the model is sent it: the bound's fields that have a value."""
    record = {name: getattr(candidate, name) for name in FIELDS[bound_name]}
    return {name: value for name, value in record.items() if value not in (None, "")}


def policy_digest(locality: str) -> str:
    """The identity of the rules applied: the policy's name, its fields, the locality."""
    return sha256_hex(json.dumps({"policy": POLICY, "fields": FIELDS, "locality": locality},
                                 sort_keys=True))
