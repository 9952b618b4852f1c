"""The fixed GraphQL document each tool runs: the fields an agent needs next, no more."""

from __future__ import annotations

# What a write answers with: enough to read, link or update the record next.
BRIEF = (
    "id lane sourceType version properties expiresAt "
    "warnings { code message property similarTo memberCount }"
)
RECORD = (
    "id lane sourceType authority content version createdAt updatedAt createdBy properties "
    "connections { id hint active } groups { id hint active } adjustments { id hint active } "
    "corrections { id content reason actor at }"
)
VERSION = "number at event actor content properties lane sourceType authority policyVersion hash"
PAGE_INFO = "totalCount pageInfo { hasNextPage endCursor }"
LISTED = "id lane sourceType content properties createdAt updatedAt"
EVENT = "id cursor kind recordId lane actor at payload"

INGEST = f"""mutation($input: IngestInput!) {{ ingest(input: $input) {{ {BRIEF} }} }}"""
INGEST_MANY = f"""mutation($inputs: [IngestInput!]!) {{
  ingestMany(inputs: $inputs) {{ {BRIEF} }} }}"""

GATHER = f"""query($match: [String!]!, $mode: GatherMode, $lanes: [String!], $asOf: DateTime,
    $first: Int, $after: String) {{
  gather(match: $match, mode: $mode, lanes: $lanes, asOf: $asOf, first: $first, after: $after)
  {{ items {{ {LISTED} }} {PAGE_INFO} }} }}"""
TRAVERSE = f"""query($from: ID!, $depth: Int, $labels: [String!], $asOf: DateTime, $limit: Int,
    $edgeTypes: [String!]) {{
  traverse(from: $from, depth: $depth, labels: $labels, asOf: $asOf, limit: $limit,
    edgeTypes: $edgeTypes) {{
    items {{ hop via record {{ {LISTED} }} edge {{ id type fromId toId detector evidence }} }}
    notShown beyondLimit clipped {{ via hop memberCount }} }} }}"""

READ = f"""query($id: ID!, $asOf: DateTime) {{ record(id: $id, asOf: $asOf) {{ {RECORD} }} }}"""
READ_VERSIONS = f"""query($id: ID!, $asOf: DateTime) {{
  record(id: $id, asOf: $asOf) {{ {RECORD} versions {{ {VERSION} }} }} }}"""

UPDATE = f"""mutation($id: ID!, $content: String, $properties: [String!], $expectedVersion: Int,
    $expiresAt: DateTime, $expireNow: Boolean) {{
  update(id: $id, content: $content, properties: $properties, expectedVersion: $expectedVersion,
    expiresAt: $expiresAt, expireNow: $expireNow)
  {{ {BRIEF} }} }}"""

LABELS = "query($lane: String) { labels(lane: $lane) { label recordCount } }"
VALUES = """query($label: String!, $lane: String, $prefix: String, $similarTo: String, $first: Int,
    $after: String) {
  values(label: $label, lane: $lane, prefix: $prefix, similarTo: $similarTo, first: $first,
    after: $after) { items { property memberCount } pageInfo { hasNextPage endCursor } } }"""
SEARCH = f"""query($text: String, $vector: [Float!], $match: [String!], $mode: GatherMode,
    $lanes: [String!], $asOf: DateTime, $first: Int, $after: String) {{
  search(text: $text, vector: $vector, match: $match, mode: $mode, lanes: $lanes, asOf: $asOf,
    first: $first, after: $after) {{
    items {{ score textRank vectorRank matchedTerms highlights {{ text start end }}
      record {{ id lane content properties }} }}
    totalCountExact terms dropped hint {PAGE_INFO} }} }}"""
ADD = f"""mutation($id: ID!, $properties: [String!]!) {{
  addProperties(id: $id, properties: $properties) {{
    added alreadyHeld rejected record {{ {BRIEF} }} }} }}"""
REMOVE = f"""mutation($id: ID!, $labels: [String!], $properties: [String!]) {{
  removeProperties(id: $id, labels: $labels, properties: $properties) {{
    removed notHeld record {{ {BRIEF} }} }} }}"""
ASSERTED = "id hint active createdAt actor endedAt endedBy records { id lane version }"
CONNECT = f"""mutation($a: ID!, $b: ID!, $hint: String!) {{
  connect(a: $a, b: $b, hint: $hint) {{ {ASSERTED} }} }}"""
DISCONNECT = f"""mutation($id: String!) {{ disconnect(id: $id) {{ {ASSERTED} }} }}"""
GROUP = f"""mutation($recordIds: [ID!]!, $hint: String!) {{
  group(recordIds: $recordIds, hint: $hint) {{ {ASSERTED} }} }}"""
UNGROUP = f"""mutation($id: String!, $recordIds: [ID!]) {{
  ungroup(id: $id, recordIds: $recordIds) {{ {ASSERTED} }} }}"""

AUDIT = f"""query($recordId: ID, $kinds: [String!], $first: Int, $after: String) {{
  audit(recordId: $recordId, kinds: $kinds, first: $first, after: $after) {{
    items {{ {EVENT} }} {PAGE_INFO} }} }}"""
AUDIT_EVENT = f"""query($id: ID!) {{ auditEvent(id: $id) {{
  {EVENT} before {{ {VERSION} }} after {{ {VERSION} }} }} }}"""

PROFILE = """{ profile { agent readLanes writeLanes canApplyPolicy policyVersion
  lanes { lane readable writable open
    sourceTypes { name authority contentFormat requiredKeys labels { label values } } } } }"""

# Typed edges.
EDGE = (
    "id fromId toId type weight namespace confidence detector provenanceActor provenanceType "
    "evidence conflictState resolution resolver winnerId validAt invalidAt expiredAt version"
)
END = "id lane content"
EDGE_UPSERT = f"""mutation($input: EdgeInput!) {{ upsertEdge(input: $input) {{ {EDGE} }} }}"""
EDGE_LIST = f"""query($fromId: ID, $toId: ID, $type: String, $namespace: String, $asOf: DateTime,
    $includeExpired: Boolean, $first: Int, $after: String) {{
  edges(fromId: $fromId, toId: $toId, type: $type, namespace: $namespace, asOf: $asOf,
        includeExpired: $includeExpired, first: $first, after: $after) {{
    items {{ {EDGE} }} {PAGE_INFO} }} }}"""
RELATED = f"""query($id: ID!, $namespace: String, $asOf: DateTime, $includeExpired: Boolean,
    $first: Int, $outgoingAfter: String, $incomingAfter: String) {{
  related(id: $id, namespace: $namespace, asOf: $asOf, includeExpired: $includeExpired) {{
    recordId
    outgoing(first: $first, after: $outgoingAfter) {{
      items {{ {EDGE} toRecord {{ {END} }} }} {PAGE_INFO} }}
    incoming(first: $first, after: $incomingAfter) {{
      items {{ {EDGE} fromRecord {{ {END} }} }} {PAGE_INFO} }} }} }}"""
CONFLICT_RESOLVE = f"""mutation($edgeId: ID!, $resolution: ConflictResolution!, $resolver: String!,
    $winnerId: ID) {{
  resolveConflict(edgeId: $edgeId, resolution: $resolution, resolver: $resolver,
                  winnerId: $winnerId) {{ {EDGE} }} }}"""
CONFLICTS = f"""query($status: ConflictStatus, $lanes: [String!], $first: Int, $after: String) {{
  conflicts(status: $status, lanes: $lanes, first: $first, after: $after) {{
    items {{ {EDGE} fromRecord {{ {END} }} toRecord {{ {END} }} }} {PAGE_INFO} }} }}"""
EGO = f"""query($nodes: [ID!]!, $hops: Int, $direction: Direction, $types: [String!], $limit: Int,
    $asOf: DateTime, $includeExpired: Boolean) {{
  ego(nodes: $nodes, hops: $hops, direction: $direction, types: $types, limit: $limit,
      asOf: $asOf, includeExpired: $includeExpired) {{
    edges {{ {EDGE} }} hops neighbors {{ {END} }}
    notShown {{ expiredExcluded edgesClipped typeFiltered danglingIds }} }} }}"""
RETIRE_EDGE = f"""mutation($id: ID!, $invalidAt: DateTime) {{
  retireEdge(id: $id, invalidAt: $invalidAt) {{ {EDGE} }} }}"""
RETIRE_RECORD = f"""mutation($id: ID!, $reason: String) {{
  retireRecord(id: $id, reason: $reason) {{ {BRIEF} }} }}"""
