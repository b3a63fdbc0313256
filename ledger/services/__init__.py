"""Use cases over ports: no printing, no argv, no exit codes."""
