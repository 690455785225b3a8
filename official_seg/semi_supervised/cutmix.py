"""CutMix of a batch of strong views, as UniMatch draws it, and the pseudo labels that follow it."""

import tensorflow as tf

# UniMatch's obtain_cutmix_box: area share and aspect ratio of a CutMix box.
CUTMIX_AREA = (0.02, 0.4)
CUTMIX_RATIO = (0.3, 1 / 0.3)


def cutmix_boxes(batch_size, size, probability, seed=None):
  """Draws one CutMix box per example, as UniMatch's obtain_cutmix_box.

  UniMatch redraws until the box fits; here the box is clipped to the crop
  instead, so the draw is one fixed set of ops.

  Args:
    batch_size: int or int32 scalar, B.
    size: (H, W) ints or int32 [2], the crop size.
    probability: float, the chance that an example gets a box.
    seed: optional int32 or int64 [2], a stateless seed; None draws afresh.

  Returns:
    (apply bool [B], boxes int32 [B, 4]: top, left, height, width, unclipped;
     area height * width is a uniform share in CUTMIX_AREA of H * W, and
     height / width about a uniform ratio in CUTMIX_RATIO).
  """
  shape = tf.stack([batch_size, 5])
  if seed is None:
    draws = tf.random.uniform(shape)
  else:
    draws = tf.random.stateless_uniform(shape, seed)
  size = tf.cast(tf.convert_to_tensor(size), tf.float32)
  area = (CUTMIX_AREA[0] + draws[:, 0] * (CUTMIX_AREA[1] - CUTMIX_AREA[0])
          ) * size[0] * size[1]
  ratio = CUTMIX_RATIO[0] + draws[:, 1] * (CUTMIX_RATIO[1] - CUTMIX_RATIO[0])
  boxes = tf.stack([draws[:, 2] * size[0], draws[:, 3] * size[1],
                    tf.sqrt(area * ratio), tf.sqrt(area / ratio)], axis=1)
  return draws[:, 4] < probability, tf.cast(tf.floor(boxes), tf.int32)


def cutmix(features, labels, probability, seed=None):
  """Pastes a box of the next example of the batch into each strong view.

  Args:
    features: dict of a batch from `UnlabeledParser`, B examples.
    labels: int32 [B, H, W, 1], returned unchanged.
    probability: float, the chance that an example gets a box.
    seed: optional int32 or int64 [2], a stateless seed; None draws afresh.

  Returns:
    (features, labels): 'strong_image', 'strong_valid' and 'strong_label'
    take the partner's pixels (partner (i + 1) % B) inside each box;
    'mix_index' int32 [B] is the partner (the example itself when nothing
    was pasted) and 'mix_mask' float32 [B, H, W, 1] is 1 on pasted pixels.
  """
  features = dict(features)
  shape = tf.shape(features['strong_label'])
  own = tf.range(shape[0])
  if not probability:
    features['mix_index'] = own
    features['mix_mask'] = tf.zeros_like(features['strong_valid'])
    return features, labels
  apply, boxes = cutmix_boxes(shape[0], shape[1:3], probability, seed)
  partner = (own + 1) % shape[0]
  apply = apply & (partner != own)  # A batch of one has no partner.
  top, left, height, width = [boxes[:, i, None, None] for i in range(4)]
  rows = tf.range(shape[1])[None, :, None]
  cols = tf.range(shape[2])[None, None, :]
  inside = ((rows >= top) & (rows < top + height) & (cols >= left) &
            (cols < left + width) & apply[:, None, None])
  features['mix_index'] = tf.where(apply, partner, own)
  features['mix_mask'] = tf.cast(inside, tf.float32)[..., None]
  for key in ('strong_image', 'strong_valid', 'strong_label'):
    features[key] = mix(features[key], features['mix_index'],
                        features['mix_mask'])
  return features, labels


def mix(tensor, mix_index, mix_mask):
  """Follows a CutMix: the partner's values where `mix_mask` is set.

  Args:
    tensor: [B, H, W, C] at the crop size, any dtype (the weak view's pseudo
      labels or probabilities, a label, an image).
    mix_index: int32 [B], from `cutmix`.
    mix_mask: float32 [B, H, W, 1], from `cutmix`.

  Returns:
    `tensor`'s dtype and shape.
  """
  return tf.where(mix_mask > 0, tf.gather(tensor, mix_index), tensor)
