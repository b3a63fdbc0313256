"""The pure core: values in, values out. No clock, no files, no processes."""
