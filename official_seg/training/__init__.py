"""Training stages: schedules, optimizers, summaries and the model_fn."""
