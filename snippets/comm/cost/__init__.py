"""The alpha-beta cost model of a collective."""
