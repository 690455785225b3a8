"""Semi-supervised training: unlabeled views, pseudo labels, the step."""
