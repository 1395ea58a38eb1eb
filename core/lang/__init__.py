"""The model and its language: the model document, its limits, versions, migrations and checks, the schemas derived
from it, validation of writes, conditions, projections and schema comparison."""
