from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, Optional, Union

from .add_properties import AddProperties
from .async_base_client import AsyncBaseClient
from .audit_events import AuditEvents
from .base_model import UNSET, UnsetType
from .edges import Edges
from .enums import GatherMode
from .gather import Gather
from .get_record import GetRecord
from .ingest import Ingest
from .ingest_many import IngestMany
from .input_types import IngestInput
from .profile import Profile
from .remove_properties import RemoveProperties
from .restore_record import RestoreRecord
from .retire_record import RetireRecord
from .search import Search
from .traverse import Traverse
from .update import Update
from .values import Values
from .watch import Watch


def gql(q: str) -> str:
    return q


class GeneratedAsyncClient(AsyncBaseClient):
    async def get_record(
        self,
        id: str,
        as_of: Union[Optional[datetime], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> GetRecord:
        query = gql("""
            query GetRecord($id: ID!, $asOf: DateTime) {
              record(id: $id, asOf: $asOf) {
                ...RecordFields
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"id": id, "asOf": as_of}
        response = await self.execute(
            query=query, operation_name="GetRecord", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return GetRecord.model_validate(data)

    async def gather(
        self,
        match: list[str],
        mode: Union[Optional[GatherMode], UnsetType] = UNSET,
        lanes: Union[Optional[list[str]], UnsetType] = UNSET,
        as_of: Union[Optional[datetime], UnsetType] = UNSET,
        first: Union[Optional[int], UnsetType] = UNSET,
        after: Union[Optional[str], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Gather:
        query = gql("""
            query Gather($match: [String!]!, $mode: GatherMode, $lanes: [String!], $asOf: DateTime, $first: Int, $after: String) {
              gather(
                match: $match
                mode: $mode
                lanes: $lanes
                asOf: $asOf
                first: $first
                after: $after
              ) {
                totalCount
                items {
                  ...RecordFields
                }
                pageInfo {
                  ...PageInfoFields
                }
              }
            }

            fragment PageInfoFields on PageInfo {
              hasNextPage
              endCursor
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "match": match,
            "mode": mode,
            "lanes": lanes,
            "asOf": as_of,
            "first": first,
            "after": after,
        }
        response = await self.execute(
            query=query, operation_name="Gather", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Gather.model_validate(data)

    async def search(
        self,
        text: Union[Optional[str], UnsetType] = UNSET,
        vector: Union[Optional[list[float]], UnsetType] = UNSET,
        match: Union[Optional[list[str]], UnsetType] = UNSET,
        mode: Union[Optional[GatherMode], UnsetType] = UNSET,
        lanes: Union[Optional[list[str]], UnsetType] = UNSET,
        source_types: Union[Optional[list[str]], UnsetType] = UNSET,
        as_of: Union[Optional[datetime], UnsetType] = UNSET,
        first: Union[Optional[int], UnsetType] = UNSET,
        after: Union[Optional[str], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Search:
        query = gql("""
            query Search($text: String, $vector: [Float!], $match: [String!], $mode: GatherMode, $lanes: [String!], $sourceTypes: [String!], $asOf: DateTime, $first: Int, $after: String) {
              search(
                text: $text
                vector: $vector
                match: $match
                mode: $mode
                lanes: $lanes
                sourceTypes: $sourceTypes
                asOf: $asOf
                first: $first
                after: $after
              ) {
                totalCount
                totalCountExact
                items {
                  score
                  textRank
                  vectorRank
                  highlights {
                    text
                    start
                    end
                  }
                  record {
                    ...RecordFields
                  }
                }
                pageInfo {
                  ...PageInfoFields
                }
              }
            }

            fragment PageInfoFields on PageInfo {
              hasNextPage
              endCursor
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "text": text,
            "vector": vector,
            "match": match,
            "mode": mode,
            "lanes": lanes,
            "sourceTypes": source_types,
            "asOf": as_of,
            "first": first,
            "after": after,
        }
        response = await self.execute(
            query=query, operation_name="Search", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Search.model_validate(data)

    async def traverse(
        self,
        from_: str,
        depth: Union[Optional[int], UnsetType] = UNSET,
        labels: Union[Optional[list[str]], UnsetType] = UNSET,
        as_of: Union[Optional[datetime], UnsetType] = UNSET,
        limit: Union[Optional[int], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Traverse:
        query = gql("""
            query Traverse($from: ID!, $depth: Int, $labels: [String!], $asOf: DateTime, $limit: Int) {
              traverse(
                from: $from
                depth: $depth
                labels: $labels
                asOf: $asOf
                limit: $limit
              ) {
                notShown
                items {
                  hop
                  via
                  record {
                    ...RecordFields
                  }
                }
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "from": from_,
            "depth": depth,
            "labels": labels,
            "asOf": as_of,
            "limit": limit,
        }
        response = await self.execute(
            query=query, operation_name="Traverse", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Traverse.model_validate(data)

    async def values(
        self,
        label: str,
        lane: Union[Optional[str], UnsetType] = UNSET,
        prefix: Union[Optional[str], UnsetType] = UNSET,
        similar_to: Union[Optional[str], UnsetType] = UNSET,
        first: Union[Optional[int], UnsetType] = UNSET,
        after: Union[Optional[str], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Values:
        query = gql("""
            query Values($label: String!, $lane: String, $prefix: String, $similarTo: String, $first: Int, $after: String) {
              values(
                label: $label
                lane: $lane
                prefix: $prefix
                similarTo: $similarTo
                first: $first
                after: $after
              ) {
                items {
                  label
                  value
                  property
                  memberCount
                }
                pageInfo {
                  ...PageInfoFields
                }
              }
            }

            fragment PageInfoFields on PageInfo {
              hasNextPage
              endCursor
            }
            """)
        variables: dict[str, object] = {
            "label": label,
            "lane": lane,
            "prefix": prefix,
            "similarTo": similar_to,
            "first": first,
            "after": after,
        }
        response = await self.execute(
            query=query, operation_name="Values", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Values.model_validate(data)

    async def edges(
        self,
        from_id: Union[Optional[str], UnsetType] = UNSET,
        to_id: Union[Optional[str], UnsetType] = UNSET,
        type_: Union[Optional[str], UnsetType] = UNSET,
        namespace: Union[Optional[str], UnsetType] = UNSET,
        as_of: Union[Optional[datetime], UnsetType] = UNSET,
        include_expired: Union[Optional[bool], UnsetType] = UNSET,
        first: Union[Optional[int], UnsetType] = UNSET,
        after: Union[Optional[str], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Edges:
        query = gql("""
            query Edges($fromId: ID, $toId: ID, $type: String, $namespace: String, $asOf: DateTime, $includeExpired: Boolean, $first: Int, $after: String) {
              edges(
                fromId: $fromId
                toId: $toId
                type: $type
                namespace: $namespace
                asOf: $asOf
                includeExpired: $includeExpired
                first: $first
                after: $after
              ) {
                totalCount
                items {
                  id
                  fromId
                  toId
                  type
                  weight
                  namespace
                  confidence
                  evidence
                  conflictState
                  validAt
                  invalidAt
                  expiredAt
                  createdAt
                  updatedAt
                }
                pageInfo {
                  ...PageInfoFields
                }
              }
            }

            fragment PageInfoFields on PageInfo {
              hasNextPage
              endCursor
            }
            """)
        variables: dict[str, object] = {
            "fromId": from_id,
            "toId": to_id,
            "type": type_,
            "namespace": namespace,
            "asOf": as_of,
            "includeExpired": include_expired,
            "first": first,
            "after": after,
        }
        response = await self.execute(
            query=query, operation_name="Edges", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Edges.model_validate(data)

    async def profile(self, **kwargs: Any) -> Profile:
        query = gql("""
            query Profile {
              profile {
                agent
                readLanes
                writeLanes
              }
            }
            """)
        variables: dict[str, object] = {}
        response = await self.execute(
            query=query, operation_name="Profile", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Profile.model_validate(data)

    async def ingest(self, input: IngestInput, **kwargs: Any) -> Ingest:
        query = gql("""
            mutation Ingest($input: IngestInput!) {
              ingest(input: $input) {
                ...RecordFields
                warnings {
                  code
                  message
                  property
                  similarTo
                }
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"input": input}
        response = await self.execute(
            query=query, operation_name="Ingest", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Ingest.model_validate(data)

    async def ingest_many(self, inputs: list[IngestInput], **kwargs: Any) -> IngestMany:
        query = gql("""
            mutation IngestMany($inputs: [IngestInput!]!) {
              ingestMany(inputs: $inputs) {
                ...RecordFields
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"inputs": inputs}
        response = await self.execute(
            query=query, operation_name="IngestMany", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return IngestMany.model_validate(data)

    async def update(
        self,
        id: str,
        content: Union[Optional[str], UnsetType] = UNSET,
        properties: Union[Optional[list[str]], UnsetType] = UNSET,
        expected_version: Union[Optional[int], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> Update:
        query = gql("""
            mutation Update($id: ID!, $content: String, $properties: [String!], $expectedVersion: Int) {
              update(
                id: $id
                content: $content
                properties: $properties
                expectedVersion: $expectedVersion
              ) {
                ...RecordFields
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "id": id,
            "content": content,
            "properties": properties,
            "expectedVersion": expected_version,
        }
        response = await self.execute(
            query=query, operation_name="Update", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return Update.model_validate(data)

    async def add_properties(
        self, id: str, properties: list[str], **kwargs: Any
    ) -> AddProperties:
        query = gql("""
            mutation AddProperties($id: ID!, $properties: [String!]!) {
              addProperties(id: $id, properties: $properties) {
                added
                alreadyHeld
                rejected
                record {
                  ...RecordFields
                }
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"id": id, "properties": properties}
        response = await self.execute(
            query=query, operation_name="AddProperties", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return AddProperties.model_validate(data)

    async def remove_properties(
        self,
        id: str,
        labels: Union[Optional[list[str]], UnsetType] = UNSET,
        properties: Union[Optional[list[str]], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> RemoveProperties:
        query = gql("""
            mutation RemoveProperties($id: ID!, $labels: [String!], $properties: [String!]) {
              removeProperties(id: $id, labels: $labels, properties: $properties) {
                removed
                notHeld
                record {
                  ...RecordFields
                }
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "id": id,
            "labels": labels,
            "properties": properties,
        }
        response = await self.execute(
            query=query,
            operation_name="RemoveProperties",
            variables=variables,
            **kwargs,
        )
        data = self.get_data(response)
        return RemoveProperties.model_validate(data)

    async def retire_record(
        self, id: str, reason: Union[Optional[str], UnsetType] = UNSET, **kwargs: Any
    ) -> RetireRecord:
        query = gql("""
            mutation RetireRecord($id: ID!, $reason: String) {
              retireRecord(id: $id, reason: $reason) {
                ...RecordFields
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"id": id, "reason": reason}
        response = await self.execute(
            query=query, operation_name="RetireRecord", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return RetireRecord.model_validate(data)

    async def restore_record(self, id: str, **kwargs: Any) -> RestoreRecord:
        query = gql("""
            mutation RestoreRecord($id: ID!) {
              restoreRecord(id: $id) {
                ...RecordFields
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {"id": id}
        response = await self.execute(
            query=query, operation_name="RestoreRecord", variables=variables, **kwargs
        )
        data = self.get_data(response)
        return RestoreRecord.model_validate(data)

    async def audit_events(
        self,
        after: Union[Optional[str], UnsetType] = UNSET,
        lanes: Union[Optional[list[str]], UnsetType] = UNSET,
        kinds: Union[Optional[list[str]], UnsetType] = UNSET,
        match: Union[Optional[list[str]], UnsetType] = UNSET,
        mode: Union[Optional[GatherMode], UnsetType] = UNSET,
        record_ids: Union[Optional[list[str]], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> AsyncIterator[AuditEvents]:
        query = gql("""
            subscription AuditEvents($after: String, $lanes: [String!], $kinds: [String!], $match: [String!], $mode: GatherMode, $recordIds: [ID!]) {
              auditEvents(
                after: $after
                lanes: $lanes
                kinds: $kinds
                match: $match
                mode: $mode
                recordIds: $recordIds
              ) {
                id
                cursor
                kind
                recordId
                lane
                actor
                at
                payload
              }
            }
            """)
        variables: dict[str, object] = {
            "after": after,
            "lanes": lanes,
            "kinds": kinds,
            "match": match,
            "mode": mode,
            "recordIds": record_ids,
        }
        async for data in self.execute_ws(
            query=query, operation_name="AuditEvents", variables=variables, **kwargs
        ):
            yield AuditEvents.model_validate(data)

    async def watch(
        self,
        match: list[str],
        mode: Union[Optional[GatherMode], UnsetType] = UNSET,
        initial: Union[Optional[bool], UnsetType] = UNSET,
        after: Union[Optional[str], UnsetType] = UNSET,
        **kwargs: Any,
    ) -> AsyncIterator[Watch]:
        query = gql("""
            subscription Watch($match: [String!]!, $mode: GatherMode, $initial: Boolean, $after: String) {
              watch(match: $match, mode: $mode, initial: $initial, after: $after) {
                change
                cursor
                record {
                  ...RecordFields
                }
              }
            }

            fragment RecordFields on Record {
              id
              lane
              sourceType
              content
              version
              createdAt
              updatedAt
              createdBy
              properties
              retired {
                at
                actor
                reason
              }
            }
            """)
        variables: dict[str, object] = {
            "match": match,
            "mode": mode,
            "initial": initial,
            "after": after,
        }
        async for data in self.execute_ws(
            query=query, operation_name="Watch", variables=variables, **kwargs
        ):
            yield Watch.model_validate(data)
