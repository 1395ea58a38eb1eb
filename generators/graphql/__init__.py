"""The GraphQL surface: the schema built from the registry (`schema`), JSON Schema -> strawberry types (`types`),
edge fields (`edges`), the bounds and error form (`bounds`), the gate that applies them (`gate`), and the HTTP and
WebSocket app (`app`)."""
