"""Export: SavedModels for serving, and running them on image files."""
