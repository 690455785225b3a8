"""The commands users install beside train_and_eval, one module each: `<name>` or `python -m official_seg.commands.<name>`."""
