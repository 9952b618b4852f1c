from typing import Optional

from pydantic import Field

from .base_model import BaseModel
from .fragments import PageInfoFields, RecordFields


class Search(BaseModel):
    search: "SearchSearch"


class SearchSearch(BaseModel):
    total_count: int = Field(alias="totalCount")
    total_count_exact: bool = Field(alias="totalCountExact")
    items: list["SearchSearchItems"]
    page_info: "SearchSearchPageInfo" = Field(alias="pageInfo")


class SearchSearchItems(BaseModel):
    score: float
    text_rank: Optional[int] = Field(alias="textRank")
    vector_rank: Optional[int] = Field(alias="vectorRank")
    highlights: list["SearchSearchItemsHighlights"]
    record: "SearchSearchItemsRecord"


class SearchSearchItemsHighlights(BaseModel):
    text: str
    start: int
    end: int


SearchSearchItemsRecord = RecordFields
SearchSearchPageInfo = PageInfoFields
Search.model_rebuild()
SearchSearch.model_rebuild()
SearchSearchItems.model_rebuild()
