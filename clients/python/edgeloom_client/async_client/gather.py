from pydantic import Field

from .base_model import BaseModel
from .fragments import PageInfoFields, RecordFields


class Gather(BaseModel):
    gather: "GatherGather"


class GatherGather(BaseModel):
    total_count: int = Field(alias="totalCount")
    items: list["GatherGatherItems"]
    page_info: "GatherGatherPageInfo" = Field(alias="pageInfo")


GatherGatherItems = RecordFields
GatherGatherPageInfo = PageInfoFields
Gather.model_rebuild()
GatherGather.model_rebuild()
