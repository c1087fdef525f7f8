"""classifier: windows, features, the phase labeller and the imbalance flag."""
