from .add_properties import (
    AddProperties,
    AddPropertiesAddProperties,
    AddPropertiesAddPropertiesRecord,
)
from .base_client import BaseClient
from .base_model import BaseModel, Upload
from .client import GeneratedSyncClient
from .edges import Edges, EdgesEdges, EdgesEdgesItems, EdgesEdgesPageInfo
from .enums import GatherMode
from .exceptions import (
    GraphQLClientError,
    GraphQLClientGraphQLError,
    GraphQLClientGraphQLMultiError,
    GraphQLClientHttpError,
    GraphQLClientInvalidResponseError,
)
from .fragments import PageInfoFields, RecordFields, RecordFieldsRetired
from .gather import Gather, GatherGather, GatherGatherItems, GatherGatherPageInfo
from .get_record import GetRecord, GetRecordRecord
from .ingest import Ingest, IngestIngest, IngestIngestWarnings
from .ingest_many import IngestMany, IngestManyIngestMany
from .input_types import IngestInput
from .profile import Profile, ProfileProfile
from .remove_properties import (
    RemoveProperties,
    RemovePropertiesRemoveProperties,
    RemovePropertiesRemovePropertiesRecord,
)
from .restore_record import RestoreRecord, RestoreRecordRestoreRecord
from .retire_record import RetireRecord, RetireRecordRetireRecord
from .search import (
    Search,
    SearchSearch,
    SearchSearchItems,
    SearchSearchItemsHighlights,
    SearchSearchItemsRecord,
    SearchSearchPageInfo,
)
from .traverse import (
    Traverse,
    TraverseTraverse,
    TraverseTraverseItems,
    TraverseTraverseItemsRecord,
)
from .update import Update, UpdateUpdate
from .values import Values, ValuesValues, ValuesValuesItems, ValuesValuesPageInfo

__all__ = [
    "AddProperties",
    "AddPropertiesAddProperties",
    "AddPropertiesAddPropertiesRecord",
    "BaseClient",
    "BaseModel",
    "Edges",
    "EdgesEdges",
    "EdgesEdgesItems",
    "EdgesEdgesPageInfo",
    "Gather",
    "GatherGather",
    "GatherGatherItems",
    "GatherGatherPageInfo",
    "GatherMode",
    "GeneratedSyncClient",
    "GetRecord",
    "GetRecordRecord",
    "GraphQLClientError",
    "GraphQLClientGraphQLError",
    "GraphQLClientGraphQLMultiError",
    "GraphQLClientHttpError",
    "GraphQLClientInvalidResponseError",
    "Ingest",
    "IngestIngest",
    "IngestIngestWarnings",
    "IngestInput",
    "IngestMany",
    "IngestManyIngestMany",
    "PageInfoFields",
    "Profile",
    "ProfileProfile",
    "RecordFields",
    "RecordFieldsRetired",
    "RemoveProperties",
    "RemovePropertiesRemoveProperties",
    "RemovePropertiesRemovePropertiesRecord",
    "RestoreRecord",
    "RestoreRecordRestoreRecord",
    "RetireRecord",
    "RetireRecordRetireRecord",
    "Search",
    "SearchSearch",
    "SearchSearchItems",
    "SearchSearchItemsHighlights",
    "SearchSearchItemsRecord",
    "SearchSearchPageInfo",
    "Traverse",
    "TraverseTraverse",
    "TraverseTraverseItems",
    "TraverseTraverseItemsRecord",
    "Update",
    "UpdateUpdate",
    "Upload",
    "Values",
    "ValuesValues",
    "ValuesValuesItems",
    "ValuesValuesPageInfo",
]
