"""Model stages: the DeepLab network and its losses."""
