"""I/O adapters: each module is the only place that touches its resource."""
