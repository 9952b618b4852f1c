from pydantic import Field

from .base_model import BaseModel
from .fragments import RecordFields


class AddProperties(BaseModel):
    add_properties: "AddPropertiesAddProperties" = Field(alias="addProperties")


class AddPropertiesAddProperties(BaseModel):
    added: list[str]
    already_held: list[str] = Field(alias="alreadyHeld")
    rejected: list[str]
    record: "AddPropertiesAddPropertiesRecord"


AddPropertiesAddPropertiesRecord = RecordFields
AddProperties.model_rebuild()
AddPropertiesAddProperties.model_rebuild()
