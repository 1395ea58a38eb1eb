"""Dispatch: the registry of tools and resources, who may see and call what, the dispatcher every surface calls, the
walk workers, prompts, guides and examples."""
