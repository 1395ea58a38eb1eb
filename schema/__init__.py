"""JSON Schema 2020-12 documents shipped with canon: the model meta-schema and the default model with its seed.

A package only so the documents travel inside the wheel; read them with `importlib.resources.files("schema")`.
"""
