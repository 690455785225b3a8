"""PseudoSeg's image classifier, class activation maps and their refinement."""

import math

import tensorflow as tf

from official_seg import validation

# Added to the attention logits of invalid keys; exp() of it is exactly 0 in
# float32 once the softmax subtracts the row's maximum (PseudoSeg's value).
_MASKED_LOGIT = -1e9


def image_labels(labels, num_classes, ignore_label):
  """Which foreground classes occur in each image (multi-hot).

  Args:
    labels: int [B, H, W, 1] pixel labels.
    num_classes: int C, including background 0.
    ignore_label: int, pixels with this label count for no class.

  Returns:
    float32 [B, C-1]: entry c-1 is 1 where class c (1..C-1) occurs in the
    image, else 0.
  """
  labels = tf.cast(labels, tf.int32)
  # Ignore pixels become background, which no column counts.
  labels = tf.where(tf.equal(labels, ignore_label), tf.zeros_like(labels),
                    labels)
  # A boolean comparison per class: one byte a pixel and class, where a
  # float one-hot would take four.
  present = tf.equal(labels, tf.range(1, num_classes, dtype=tf.int32))
  return tf.cast(tf.reduce_any(present, axis=[1, 2]), tf.float32)


def classification_loss(logits, image_labels_):
  """Mean sigmoid cross-entropy over images and classes (PseudoSeg's).

  Args:
    logits: float [B, C-1] classifier logits.
    image_labels_: float [B, C-1] multi-hot targets from `image_labels`.

  Returns:
    Scalar float32 loss.
  """
  return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
      labels=tf.cast(image_labels_, tf.float32),
      logits=tf.cast(logits, tf.float32)))


def feature_levels(backbone_features, count):
  """The `count` deepest feature maps of a Model Garden backbone.

  Args:
    backbone_features: dict of level string ('2', '3', ...) to float
      [B, h_l, w_l, K_l], a Model Garden backbone's output.
    count: int >= 1, how many levels to return.

  Returns:
    List of `count` tensors, deepest level first.

  Raises:
    ValueError: `count` is below 1 or above the number of levels.
  """
  levels = sorted(backbone_features, key=int, reverse=True)
  if not 1 <= count <= len(levels):
    raise validation.ConfigurationError(
        f'feature_levels: count={count} but the backbone '
        f'outputs levels {sorted(levels, key=int)}.')
  return [backbone_features[level] for level in levels[:count]]


class ImageClassifier(tf.keras.layers.Layer):
  """Multi-label image classifier: global average pool, then a 1x1 conv.

  As PseudoSeg's, it predicts the C-1 foreground classes. The 1x1 conv on a
  pooled vector is a Dense layer; its kernel [K, C-1] is `self.kernel`.
  """

  def __init__(self, num_classes, kernel_regularizer=None, **kwargs):
    """Builds the layer.

    Args:
      num_classes: int C, classes including background.
      kernel_regularizer: optional Keras regularizer of the kernel.
      **kwargs: Keras layer arguments; the name defaults to
        'image_classifier'.
    """
    kwargs.setdefault('name', 'image_classifier')
    super().__init__(**kwargs)
    self._num_classes = num_classes
    self._dense = tf.keras.layers.Dense(
        num_classes - 1, kernel_regularizer=kernel_regularizer,
        dtype=self.dtype_policy, name='logits')

  @property
  def kernel(self):
    """The [K, C-1] kernel (exists once the layer has been called)."""
    return self._dense.kernel

  def call(self, features):
    """Image logits.

    Args:
      features: float [B, h, w, K] backbone features.

    Returns:
      float32 [B, C-1] logits.
    """
    # The mean is taken in float32: a bfloat16 sum over many pixels rounds.
    pooled = tf.reduce_mean(tf.cast(features, tf.float32), axis=[1, 2])
    logits = self._dense(tf.cast(pooled, self.compute_dtype))
    return tf.cast(logits, tf.float32)

  def cam(self, features, image_labels_):
    """Class activation maps of the classes present, normalised to [0, 1].

    Grad-CAM weighs each feature channel k by the spatial mean of
    d logit_c / d A_k. With this head (mean pool, then linear) that
    gradient is W_kc / (h*w) at every pixel of every image, so Grad-CAM is
    ReLU(sum_k W_kc A_k) / (h*w), and the constant cancels in the
    normalisation by the maximum: one einsum replaces C-1 gradient
    computations (PseudoSeg's compute_cam_v2 takes them class by class).

    Args:
      features: float [B, h, w, K], the features this layer classifies.
      image_labels_: float [B, C-1], which classes to keep (others are 0).

    Returns:
      float32 [B, h, w, C-1], each image's and class's map divided by its
      spatial maximum (0 where that maximum is 0); no gradient flows
      through it.
    """
    kernel = tf.cast(tf.convert_to_tensor(self.kernel), tf.float32)
    cams = tf.nn.relu(tf.einsum('bhwk,kc->bhwc',
                                tf.cast(features, tf.float32), kernel))
    cams *= tf.cast(image_labels_, tf.float32)[:, tf.newaxis, tf.newaxis, :]
    peak = tf.reduce_max(cams, axis=[1, 2], keepdims=True)
    return tf.stop_gradient(tf.math.divide_no_nan(cams, peak))


class CamRefinement(tf.keras.layers.Layer):
  """PseudoSeg's self-attention refinement of a CAM into C-class logits.

  The CAM (C-1 channels) is the value of one self-attention over the
  pixels, with keys and queries from the backbone's features (a
  hypercolumn); a skip connection adds the CAM back, a background score of
  2 - max is prepended, and a 1x1 conv with batch norm maps the C scores to
  logits (compute_self_att_v2 in googleinterns/wss). Invalid pixels (padding,
  cutout) are never attended; in training mode the batch norm's moments
  still take every pixel, as PseudoSeg's. Features and CAM get no gradient:
  a loss on the output trains this layer's own variables only.
  """

  def __init__(self, num_classes, attention_dim=128, kernel_regularizer=None,
               **kwargs):
    """Builds the layer.

    Args:
      num_classes: int C, classes including background.
      attention_dim: int, channels of the keys and queries.
      kernel_regularizer: optional Keras regularizer of the three kernels.
      **kwargs: Keras layer arguments; the name defaults to
        'cam_refinement' and the dtype to 'float32'.
    """
    kwargs.setdefault('name', 'cam_refinement')
    # The attention's softmax over all pixels and its -1e9 mask are kept in
    # float32 under a mixed policy; the layer is small next to the backbone.
    kwargs.setdefault('dtype', 'float32')
    super().__init__(**kwargs)
    self._num_classes = num_classes
    self._attention_dim = attention_dim

    def conv(filters, name):
      # PseudoSeg's key, query and output convs have no bias.
      return tf.keras.layers.Conv2D(
          filters, 1, use_bias=False, kernel_regularizer=kernel_regularizer,
          dtype=self.dtype_policy, name=name)

    self.key = conv(attention_dim, 'key')
    self.query = conv(attention_dim, 'query')
    self.output_conv = conv(num_classes, 'pixel_normalization')
    # slim.batch_norm's defaults (PseudoSeg passes it only is_training): an
    # offset and no scale. Keras's momentum (0.99), as the Model Garden's.
    self.batch_norm = tf.keras.layers.BatchNormalization(
        center=True, scale=False, epsilon=1e-3, dtype=self.dtype_policy,
        name='pixel_normalization_bn')

  def call(self, features, cam, valid_mask, training=None):
    """Refined logits.

    Args:
      features: list of float [B, h_i, w_i, K_i] backbone features (the two
        deepest levels), resized bilinearly to the CAM's size.
      cam: float [B, h, w, C-1] from `ImageClassifier.cam`.
      valid_mask: float [B, H, W, 1], 1 on image pixels, 0 on padding and
        cutout; resized (nearest) to the CAM's size when H, W differ.
      training: bool, batch norm's mode.

    Returns:
      float32 [B, h, w, C] logits.
    """
    cam = tf.stop_gradient(tf.cast(cam, tf.float32))
    size = tf.shape(cam)[1:3]
    # Half-pixel centres, as everywhere in the Model Garden; PseudoSeg's TF1
    # resize aligned corners.
    hypercolumn = tf.stop_gradient(tf.concat(
        [tf.image.resize(tf.cast(f, tf.float32), size, method='bilinear')
         for f in features], axis=-1))
    valid = tf.image.resize(tf.cast(valid_mask, tf.float32), size,
                            method='nearest')
    attended = self._attend(hypercolumn, cam, valid)
    # The CAM's classes score in [0, 2] after the skip connection; the
    # background starts from 2 minus the best of them (PseudoSeg).
    scores = attended + cam
    background = 2.0 - tf.reduce_max(scores, axis=-1, keepdims=True)
    scores = tf.concat([background, scores], axis=-1)
    logits = self.batch_norm(self.output_conv(scores), training=training)
    return tf.cast(logits, tf.float32)

  def _attend(self, hypercolumn, cam, valid):
    """Softmax(q k^T / sqrt(d)) @ cam over the valid keys, per image.

    Args:
      hypercolumn: float32 [B, h, w, K] features.
      cam: float32 [B, h, w, C-1] values.
      valid: float32 [B, h, w, 1], 0 where a pixel may not be attended.

    Returns:
      float32 [B, h, w, C-1].
    """
    shape = tf.shape(cam)
    batch, pixels = shape[0], shape[1] * shape[2]
    keys = tf.reshape(self.key(hypercolumn), [batch, pixels, -1])
    queries = tf.reshape(self.query(hypercolumn), [batch, pixels, -1])
    values = tf.reshape(cam, [batch, pixels, -1])
    logits = tf.matmul(queries, keys, transpose_b=True)
    logits /= math.sqrt(self._attention_dim)
    # PseudoSeg masks the pair (query, key) when either is invalid, so an
    # invalid query's row is all -1e9 and its weights depend on float
    # rounding; masking the keys alone gives the same rows for valid queries
    # and well-defined ones for invalid queries (which no loss counts).
    valid_keys = tf.reshape(valid, [batch, 1, pixels])
    logits += (1.0 - valid_keys) * _MASKED_LOGIT
    weights = tf.nn.softmax(logits, axis=-1)
    return tf.reshape(tf.matmul(weights, values), shape)
