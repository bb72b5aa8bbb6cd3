"""All-reduce algorithms: naive, ring, trees, halving-doubling."""
