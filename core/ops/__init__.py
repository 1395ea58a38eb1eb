"""What an operator sets and sees: configuration, tokens, logs, metrics and traces."""
