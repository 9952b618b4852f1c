from .base_model import BaseModel
from .fragments import RecordFields


class Update(BaseModel):
    update: "UpdateUpdate"


UpdateUpdate = RecordFields
Update.model_rebuild()
