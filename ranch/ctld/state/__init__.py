"""Where the state lives and how it gets there: change log, durability, stores, journals."""
