from datetime import datetime
from typing import Any, Optional

from pydantic import Field

from .base_model import BaseModel


class AuditEvents(BaseModel):
    audit_events: "AuditEventsAuditEvents" = Field(alias="auditEvents")


class AuditEventsAuditEvents(BaseModel):
    id: str
    cursor: str
    kind: str
    record_id: Optional[str] = Field(alias="recordId")
    lane: Optional[str]
    actor: str
    at: datetime
    payload: Any


AuditEvents.model_rebuild()
