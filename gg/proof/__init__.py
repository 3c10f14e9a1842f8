"""Proof that gg keeps its promises: invariant checks over a store, used by the chaos suite."""
