"""Input stages: TFExample decoding, parsing and augmentation, input_fn."""
