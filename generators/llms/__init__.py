"""The llms.txt surface: the ASGI app (`app`), what each page shows (`pages`), the jinja2 environment and text
helpers (`markdown`), and the page templates (`templates/`)."""
