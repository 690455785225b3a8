"""The Model Garden's ASPP, its atrous branches skipping taps that read only padding."""

import gin
import tensorflow as tf
from official.vision.modeling import decoders
from official.vision.modeling.layers import deeplab


def kept_taps(kernel_size, rate, length):
  """The kernel taps of one axis that can read a pixel of a 'same' conv's input.

  With 'same' padding and stride 1, tap j of an odd kernel of `kernel_size`
  taps reads input i + (j - c) * rate for output i, c = kernel_size // 2;
  a tap whose offset is at least `length` reads padding for every output.

  Args:
    kernel_size: int, taps along the axis.
    rate: int, the dilation rate along the axis.
    length: int, the input's size along the axis.

  Returns:
    (start, stop): the taps [start, stop) that can read the input; the whole
    kernel for an even kernel size, whose 'same' padding is not symmetric.
  """
  if kernel_size % 2 == 0:
    return 0, kernel_size
  centre = kernel_size // 2
  reach = min(centre, (length - 1) // rate)
  return centre - reach, centre + reach + 1


@tf.keras.utils.register_keras_serializable(package='official_seg')
class PaddingAwareConv2D(tf.keras.layers.Conv2D):
  """A `Conv2D` that leaves out the kernel rows and columns reading only padding.

  A dilated 3x3 convolution with 'same' padding on a map no taller than its
  rate reads padding with both off-centre kernel rows for every output, so
  it equals the 1x3 convolution with the kernel's centre row (and the 1x1
  convolution with the centre tap when the map is no wider either). The
  outputs are the same sums without the zero terms, and the kernel's
  gradient is the same (zero at the dropped taps, as it is in the full
  convolution). The variables are Conv2D's, so checkpoints are unchanged.
  Decided per call from static shapes; with an unknown height or width, or
  another padding, stride, grouping or data format, it is Conv2D's own op.
  Written here because neither Keras nor TensorFlow prunes such taps: on a
  CPU a dilated convolution is computed in full through SpaceToBatchND.
  """

  def _kept(self, input_shape):
    """The (start, stop) taps of each spatial axis, or None for the full op."""
    spatial = input_shape[1:3] if input_shape.rank == 4 else None
    if (self.padding != 'same' or self.data_format != 'channels_last'
        or self.groups != 1 or tuple(self.strides) != (1, 1)
        or spatial is None or not spatial.is_fully_defined()):
      return None
    kept = [kept_taps(k, r, n) for k, r, n in
            zip(self.kernel_size, self.dilation_rate, spatial)]
    if kept == [(0, k) for k in self.kernel_size]:
      return None
    return kept

  def convolution_op(self, inputs, kernel):
    kept = self._kept(inputs.shape)
    if kept is None:
      return super().convolution_op(inputs, kernel)
    (top, bottom), (left, right) = kept
    # In the layer's call, so a mixed-precision kernel reads as the compute
    # dtype before it is sliced.
    kernel = tf.convert_to_tensor(kernel)[top:bottom, left:right]
    dilations = [rate if stop - start > 1 else 1 for rate, (start, stop)
                 in zip(self.dilation_rate, kept)]
    return tf.nn.convolution(inputs, kernel, strides=1, padding='SAME',
                             dilations=dilations, data_format='NHWC',
                             name=self.__class__.__name__)


def use_padding_aware_convolutions(layer):
  """Makes the dilated `Conv2D`s under `layer` `PaddingAwareConv2D`s.

  Re-classing keeps each layer's name, configuration and (not yet created)
  variables: the Model Garden constructs them inside its own `build`.

  Args:
    layer: a built Keras layer whose sublayers are not yet called.

  Returns:
    The number of convolutions changed.
  """
  changed = 0
  for sublayer in layer._flatten_layers(include_self=False):  # pylint: disable=protected-access
    if (type(sublayer) is tf.keras.layers.Conv2D  # pylint: disable=unidiomatic-typecheck
        and max(sublayer.dilation_rate) > 1):
      sublayer.__class__ = PaddingAwareConv2D
      changed += 1
  return changed


class SpatialPyramidPooling(deeplab.SpatialPyramidPooling):
  """The Model Garden's ASPP layers (its 'v1'), with padding-aware atrous convs.

  Keeps the Model Garden's class name, so layer and variable names are its.
  """

  def build(self, input_shape):
    super().build(input_shape)
    use_padding_aware_convolutions(self)


@gin.configurable(module='decoders')
@tf.keras.utils.register_keras_serializable(package='official_seg')
class ASPP(decoders.ASPP):
  """The Model Garden's `decoders.ASPP`, whose atrous branches skip padding.

  Bound in gin as `decoders.ASPP`: every argument is the Model Garden's,
  plus `drop_padding_taps`. Variables, names and values are the Model
  Garden's; only the ops of an atrous branch whose rate reaches past the
  feature map change (see `PaddingAwareConv2D`).
  """

  def __init__(self, *args, drop_padding_taps=True, **kwargs):
    """As `decoders.ASPP`; `drop_padding_taps=False` keeps its own ops.

    Args:
      *args: `decoders.ASPP`'s.
      drop_padding_taps: bool, compute atrous branches without the kernel
        taps that read only padding ('v1' layers, the default).
      **kwargs: `decoders.ASPP`'s.
    """
    super().__init__(*args, **kwargs)
    self._drop_padding_taps = drop_padding_taps
    if drop_padding_taps and self._aspp_layer is deeplab.SpatialPyramidPooling:
      self._aspp_layer = SpatialPyramidPooling

  def get_config(self):
    return dict(super().get_config(), drop_padding_taps=self._drop_padding_taps)
