from datetime import datetime
from typing import Optional

from pydantic import Field

from .base_model import BaseModel


class IngestInput(BaseModel):
    """A new record."""

    content: str
    "The record's text, up to 1,000,000 characters; a lane's source type may require JSON (content_format: json) with given keys."
    properties: Optional[list[str]] = None
    "Its edge properties. Edge properties are label:value strings such as org:Acme. A string is split at its first colon; spaces in the label become underscores; the value is trimmed and otherwise kept; a string with no colon gets the label general. Labels beginning with e_ (e_connect, e_group, e_adjustment) are reserved for the engine and refused here. At most 256 per record; a value holds at most 1024 characters, a label 128, neither a control character. A closed lane refuses a label or value its source type does not allow, naming those it allows (see profile)."
    source_type: Optional[str] = Field(alias="sourceType", default=None)
    "Its source type, which fixes its authority and the labels it may carry: default conversational. An open lane takes the builtins conversational and documentary; a closed lane only its own types (see profile)."
    lane: Optional[str] = None
    "The lane to write it in (default 'default'); you need write access."
    idempotency_key: Optional[str] = Field(alias="idempotencyKey", default=None)
    "A retry with the same key (per agent) returns the first record instead of writing another; up to 256 characters."
    adjusts: Optional[list[str]] = None
    "Records this one adjusts: it joins their adjustment chains, and one new chain (e_adjustment:adj_<hex>) joins it to those on none."
    embedding: Optional[list[float]] = None
    "The content's vector, made by the model the lane's policy names and of the size it declares (see policy); a record with one is found by search(vector). Finite numbers only."
    expires_at: Optional[datetime] = Field(alias="expiresAt", default=None)
    "When the record expires: from this instant every read treats it as retired (as if retired then; reads asOf an earlier instant still show it), and the gateway then writes its retirement (actor edgeloom, reason expired). Must be after now. Omitted on ingest: the lane's ttl from now, if its policy gives one; on update: the record keeps its expiry."
    expire_now: Optional[bool] = Field(alias="expireNow", default=None)
    "true: the record expires at once, at this write's instant (an expiresAt at or before now is then accepted and taken as now)."
