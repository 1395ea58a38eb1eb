"""The pages surface: HTML pages for people, under `/browse/` (see `generators.pages.app`)."""
