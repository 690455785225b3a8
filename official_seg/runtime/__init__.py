"""Runtime: gin parsing, run configs, estimators and experiment modes."""
