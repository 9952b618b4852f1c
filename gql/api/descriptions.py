"""Sentences several fields and arguments of the schema share. The schema's descriptions
are the one text for every surface: GraphiQL's docs pane, an agent's introspection, and
the MCP tools (gql.mcp reads them back from the schema)."""

from __future__ import annotations

from store.ids import HINT
from store.kinds.record.traverse import MAX_DEPTH, MAX_LABELS, MAX_LIMIT
from store.limits import MAX_BATCH, MAX_CONTENT_CHARS, MAX_PROPERTIES
from store.reads.pages import DEFAULT_PAGE, MAX_PAGE

RECORD_ID = (
    "A record id (sr_ + 32 hex), or a unique prefix of at least 6 hex characters after "
    "sr_; an ambiguous prefix is refused (AMBIGUOUS_ID, with up to 5 candidates). A record "
    "in a lane you cannot read answers exactly as one that does not exist (NOT_FOUND)."
)
FIRST = (
    f"How many items this page holds: 1 to {MAX_PAGE}, default {DEFAULT_PAGE}; "
    "anything else is refused (BAD_USER_INPUT)."
)
AFTER = (
    "The endCursor of the page before, passed back unchanged, to read the next page; "
    "omit it for the first page. A cursor not given by this list is refused (BAD_USER_INPUT)."
)
AS_OF = "An instant (ISO 8601 with a time zone): answer as the memory was then. Omit it for now."
PROPERTY_RULES = (
    "Edge properties are label:value strings such as org:Acme. A string is split at its "
    "first colon; spaces in the label become underscores; the value is trimmed and "
    "otherwise kept; a string with no colon gets the label general. Labels beginning with "
    "e_ (e_connect, e_group, e_adjustment) are reserved for the engine and refused here. "
    f"At most {MAX_PROPERTIES} per record; a value holds at most 1024 characters, a label "
    "128, neither a control character. A closed lane refuses a label or value its source "
    "type does not allow, naming those it allows (see profile)."
)
LANE_FILTER = (
    "Only this lane; omit it for every lane you may read. A lane you cannot read gives "
    "nothing, as an empty one."
)
LANES_FILTER = (
    "Only these lanes; omit it for every lane you may read. Lanes you cannot read give "
    "nothing, as empty ones."
)
HINT_RULE = (
    "What the relation is, e.g. works_with: 1 to 64 letters, digits, '_' or '-' "
    f"({HINT.pattern}); it becomes part of the minted id."
)
CONTENT = (
    f"The record's text, up to {MAX_CONTENT_CHARS:,} characters; a lane's source type "
    "may require JSON (content_format: json) with given keys."
)
TRAVERSE_DEPTH = f"How many hops to walk: 1 to {MAX_DEPTH}, default 1."
TRAVERSE_LIMIT = f"The most records to list: 1 to {MAX_LIMIT}, default 100."
TRAVERSE_LABELS = (
    f"Walk only edge properties with these labels (up to {MAX_LABELS}; e_connect, e_group "
    "and e_adjustment name the asserted edges; [] for none); omit it to walk every label."
)
TRAVERSE_EDGE_TYPES = (
    f"Walk only typed edges of these types, either way (up to {MAX_LABELS}; [] for none); "
    "omit it to walk every type. Edges are seen as every read sees them: both records "
    "readable and not retired, valid at the instant read. From a note's record (a file intake "
    "read) the note's links are walked: those its sections make and those made to them."
)
BATCH = f"At most {MAX_BATCH} inputs in one call."
AUTHORITY = "How far the record is to be trusted, fixed by its source type."
METADATA = (
    "Facts about this one record that are no relation, as an object of key to text value, "
    "written by the engine (intake: a file's size, modified time, sha256, title, media type "
    "and format; a section's part index and character offset). Metadata is never an edge "
    "property: gather, traverse, labels and hyperedges do not see it. {} when it has none."
)
METADATA_VERSION = "The record's metadata in this version (see Record.metadata)."
NAMED = (
    "Only the records named so, in any case: a note whose title (its first heading, or its "
    "frontmatter title) or one of its frontmatter aliases equals this text. A lookup, not "
    "link resolution: links resolve by path and file name only."
)

EMBEDDING = (
    "The content's vector, made by the model the lane's policy names and of the size it "
    "declares (see policy); a record with one is found by search(vector). Finite numbers "
    "only."
)

EXPIRES_AT = (
    "When the record expires: from this instant every read treats it as retired (as if "
    "retired then; reads asOf an earlier instant still show it), and the gateway then "
    "writes its retirement (actor edgeloom, reason expired). Must be after now. Omitted on "
    "ingest: the lane's ttl from now, if its policy gives one; on update: the record keeps "
    "its expiry."
)
EXPIRE_NOW = (
    "true: the record expires at once, at this write's instant (an expiresAt at or before "
    "now is then accepted and taken as now)."
)
