"""The application: the command line, model diff and apply, artifacts, synthetic graphs."""
