"""A 3-channel checkpoint's first convolution kernel adapted to N input channels."""

import numpy as np
import tensorflow as tf

# segmentation_models_pytorch's rule (encoders/_utils.py,
# change_conv_in_channels), as timm's adapt_input_conv: one channel takes
# the sum of the RGB kernels, so a grey image equal to R = G = B gives the
# pretrained response; N channels repeat R, G, B cyclically, scaled by 3 / N
# so that N channels of equal value give it too.
SUM_RULE = 'sum of the RGB kernels'
CYCLIC_RULE = 'RGB kernels repeated cyclically, times 3 / N'


def adaptable(model_shape, checkpoint_shape):
  """Whether a checkpoint kernel of 3 input channels can fill a model's.

  Args:
    model_shape: list of ints, the model variable's shape.
    checkpoint_shape: list of ints, the checkpoint entry's.

  Returns:
    bool: both are convolution kernels [kh, kw, in, out] that differ only
    in `in`, which is 3 in the checkpoint.
  """
  return (len(model_shape) == len(checkpoint_shape) == 4
          and checkpoint_shape[2] == 3 and model_shape[2] != 3
          and model_shape[:2] == checkpoint_shape[:2]
          and model_shape[3] == checkpoint_shape[3])


def rule(channels):
  """The rule's name for `channels` input channels, for the report."""
  return SUM_RULE if channels == 1 else CYCLIC_RULE


def mismatch_entry(key, model_shape, checkpoint_shape):
  """Where the restore report puts a variable whose shape differs.

  Args:
    key: str, its checkpoint key.
    model_shape: list of ints.
    checkpoint_shape: list of ints.

  Returns:
    ('adapted', entry with the rule) for an `adaptable` kernel, else
    ('skipped_shape', entry); entry holds 'key', 'model_shape' and
    'checkpoint_shape'.
  """
  entry = {'key': key, 'model_shape': model_shape,
           'checkpoint_shape': checkpoint_shape}
  if not adaptable(model_shape, checkpoint_shape):
    return 'skipped_shape', entry
  return 'adapted', dict(entry, rule=rule(model_shape[2]))


def adapt_kernel(kernel, channels):
  """The kernel of 3 input channels made one of `channels`.

  Args:
    kernel: float [kh, kw, 3, out].
    channels: int, the model's input channels.

  Returns:
    float [kh, kw, channels, out], of the kernel's dtype.
  """
  kernel = np.asarray(kernel)
  if channels == 1:
    return kernel.sum(axis=2, keepdims=True)
  order = [i % 3 for i in range(channels)]
  return (kernel[:, :, order] * (3 / channels)).astype(kernel.dtype)


def assign_ops(prefix, adapted, variables):
  """Ops that set each adapted variable from its checkpoint kernel.

  Args:
    prefix: str, the checkpoint.
    adapted: dict of variable name to its report entry ('key',
      'model_shape').
    variables: dict of variable name to the model's variable.

  Returns:
    list of assign ops; run once the variables are initialized.
  """
  reader = tf.train.load_checkpoint(prefix)
  return [variables[name].assign(adapt_kernel(reader.get_tensor(entry['key']),
                                              entry['model_shape'][2]))
          for name, entry in sorted(adapted.items())]
