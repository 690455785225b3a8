"""The step type: what a training step hands to the model_fn."""

import dataclasses
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf


@dataclasses.dataclass
class Step:
  """What a training step, supervised or semi-supervised, hands to the model_fn.

  Attributes:
    logits: the labeled batch's logits [B, h, w, C].
    losses: dict of name to scalar float32; their sum (plus weight decay) is
      the training loss; 'segmentation' is the labeled batch's.
    update_ops: the batch-norm updates of the step's passes (the
      semi-supervised step's `BATCH_NORM_PASSES`).
    scalars: monitoring scalars, for `summaries.Registered`.
    sampled_scalars: optional callable building more monitoring scalars,
      only on the steps that write them
      (`summaries.Registered.sampled_scalars`).
    pictures: monitoring pictures of the unlabeled batch.
    host_checks: callables for `summaries.Registered.host_checks`.
  """

  logits: tf.Tensor
  losses: Dict[str, tf.Tensor]
  update_ops: List[Any]
  scalars: Dict[str, tf.Tensor]
  pictures: Dict[str, tf.Tensor]
  host_checks: List[Any] = dataclasses.field(default_factory=list)
  sampled_scalars: Optional[Callable[[], Dict[str, tf.Tensor]]] = None
