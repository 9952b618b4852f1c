from pydantic import Field

from .base_model import BaseModel


class Profile(BaseModel):
    profile: "ProfileProfile"


class ProfileProfile(BaseModel):
    agent: str
    read_lanes: list[str] = Field(alias="readLanes")
    write_lanes: list[str] = Field(alias="writeLanes")


Profile.model_rebuild()
