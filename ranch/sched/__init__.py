"""The pure scheduling core: placement and the FIFO pass over plain data (no I/O, no clock)."""
