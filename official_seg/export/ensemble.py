"""One SavedModel whose probabilities are the mean of several exports' (cross-validation folds)."""

import json
import os

import tensorflow as tf

from official_seg import validation
from official_seg.data import storage
from official_seg.export import predictor
from official_seg.export import saved_model
from official_seg.export import signatures

_ENCODED = tf.TensorSpec([None], tf.string, name=signatures.INPUT_KEY)


def check_members(export_dirs):
  """The members' common preprocessing metadata.

  Raises:
    validation.ConfigurationError: fewer than two exports, or exports whose
      preprocessing or classes differ (their probabilities would not be of
      the same pixels); the message names the first that differs.
  """
  if len(export_dirs) < 2:
    raise validation.ConfigurationError(
        f'An ensemble needs at least two SavedModels; got {len(export_dirs)}.')
  first = predictor.read_metadata(export_dirs[0])
  for export_dir in export_dirs[1:]:
    if predictor.read_metadata(export_dir) != first:
      raise validation.ConfigurationError(
          f'{export_dir} was exported with other preprocessing or classes '
          f'than {export_dirs[0]} (assets.extra/{saved_model.METADATA_FILE} '
          'differs); ensemble exports of one configuration.')
  return first


class FoldEnsemble(tf.Module):
  """The mean of the members' `probabilities` signatures, served as one model.

  Signatures, on encoded images (B images, model input [B, H, W],
  C classes):
  - `probabilities`: 'probabilities' float32 [B, H, W, C], the members'
    mean; 'logits', its log; 'height' and 'width' int32 [B], each image's
    decoded size; 'input_height' and 'input_width', its size in the input.
  - `serving_default`: 'semantic' int32 [B, max height, max width], the
    mean's arg max cut to each image's decoded size as the members cut
    theirs (`signatures.labels_at_original_size`), 'height' and 'width'.
  """

  def __init__(self, export_dirs):
    super().__init__()
    self.members = [tf.saved_model.load(d) for d in export_dirs]

  def _mean(self, images):
    outputs = [member.signatures[signatures.PROBABILITIES](
        **{signatures.INPUT_KEY: images}) for member in self.members]
    mean = tf.add_n([out['probabilities'] for out in outputs]) / len(outputs)
    sizes = {key: outputs[0][key] for key in signatures.SIZE_OUTPUTS}
    return mean, sizes

  @tf.function(input_signature=[_ENCODED])
  def probabilities(self, images):
    mean, sizes = self._mean(images)
    return dict(sizes, probabilities=mean, logits=tf.math.log(mean))

  @tf.function(input_signature=[_ENCODED])
  def serving_default(self, images):
    mean, sizes = self._mean(images)
    semantic = tf.argmax(mean, axis=-1, output_type=tf.int32)
    inside = tf.stack([sizes['input_height'], sizes['input_width']], axis=1)
    original = tf.stack([sizes['height'], sizes['width']], axis=1)
    return {'semantic': signatures.labels_at_original_size(
                semantic, inside, original),
            'height': sizes['height'], 'width': sizes['width']}


def export_ensemble(export_dirs, output_dir):
  """Writes the SavedModel of `FoldEnsemble(export_dirs)` to `output_dir`.

  Its assets.extra holds the members' common metadata, with the members
  listed under 'ensemble_of', so `predict_images --saved_model` reads it as
  any export's.

  Args:
    export_dirs: list of SavedModel dirs of `saved_model`'s exports.
    output_dir: str, a folder that does not exist yet.

  Returns:
    str, `output_dir`.

  Raises:
    validation.ConfigurationError: see `check_members`.
  """
  metadata = dict(check_members(export_dirs) or {},
                  ensemble_of=list(export_dirs))
  ensemble = FoldEnsemble(export_dirs)
  tf.saved_model.save(ensemble, output_dir, signatures={
      signatures.SERVING_DEFAULT: ensemble.serving_default,
      signatures.PROBABILITIES: ensemble.probabilities})
  storage.write_whole(
      os.path.join(output_dir, 'assets.extra', saved_model.METADATA_FILE),
      json.dumps(metadata, indent=1, sort_keys=True))
  return output_dir
