"""Browser tests: /docs (Swagger UI) and /graphql (GraphiQL) in headless Chromium against `canon serve`."""
