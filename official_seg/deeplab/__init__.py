"""DeepLab's own models, ported with its variable names, and the checkpoint import."""
