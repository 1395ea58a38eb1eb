"""The leaf vocabulary every layer speaks: errors, records and operations, URIs, JSON helpers, the JSON Schema dialect,
principals, paging and the audit record."""
