"""The REST surface: the FastAPI app (`app`), the OpenAPI 3.1 document and its routes (`openapi`), and how
schemas' `$defs` move into the document's components and back (`hoist`)."""
