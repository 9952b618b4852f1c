from pydantic import Field

from .base_model import BaseModel
from .fragments import PageInfoFields


class Values(BaseModel):
    values: "ValuesValues"


class ValuesValues(BaseModel):
    items: list["ValuesValuesItems"]
    page_info: "ValuesValuesPageInfo" = Field(alias="pageInfo")


class ValuesValuesItems(BaseModel):
    label: str
    value: str
    property_: str = Field(alias="property")
    member_count: int = Field(alias="memberCount")


ValuesValuesPageInfo = PageInfoFields
Values.model_rebuild()
ValuesValues.model_rebuild()
