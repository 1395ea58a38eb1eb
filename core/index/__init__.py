"""The graph index and what reads it: the in-memory graph, its layers, and the ranked search."""
