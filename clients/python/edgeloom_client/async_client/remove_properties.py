from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class RemoveProperties(BaseModel):
    remove_properties: "RemovePropertiesRemoveProperties" = Field(
        alias="removeProperties"
    )


class RemovePropertiesRemoveProperties(BaseModel):
    removed: list[str]
    not_held: list[str] = Field(alias="notHeld")
    record: "RemovePropertiesRemovePropertiesRecord"


RemovePropertiesRemovePropertiesRecord = RecordFields
RemoveProperties.model_rebuild()
RemovePropertiesRemoveProperties.model_rebuild()
