"""canon's core: the canonical model, the store, the graph index and, later, the registry and dispatch.

The domain modules here import no web or MCP framework; only the MCP seam does.
"""

__version__ = "0.1.0"
