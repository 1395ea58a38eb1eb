"""The seam between canon and its surfaces: the composition root (an instance), its model snapshot, the change feed,
and the Surface protocol every surface implements."""
