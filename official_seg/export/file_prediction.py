"""One image file predicted by a SavedModel or a `.tflite`, read as the model's records are."""

from official_seg import validation
from official_seg.data import encode
from official_seg.data import image_files
from official_seg.export import predictor
from official_seg.export import tflite_runner


def model_kind(model):
  """(channels, bit depth) of the images a SavedModel or `.tflite` reads.

  Args:
    model: a `predictor.Predictor` (its metadata; exports written before
      the channels were recorded read 8-bit RGB) or a
      `tflite_runner.TfliteModel`.

  Returns:
    (int, int).
  """
  if isinstance(model, tflite_runner.TfliteModel):
    return model.channels, model.bit_depth
  metadata = model.metadata or {}
  return (metadata.get('image_channels', 3),
          metadata.get('image_bit_depth', 8))


def predict_file(model, path):
  """(outputs, pixels) of one image file, predicted by either kind of model.

  Args:
    model: a `predictor.Predictor` or a `tflite_runner.TfliteModel`.
    path: str, a JPEG, PNG or TIFF file.

  Returns:
    (dict of str to array: 'semantic' [H, W] int32 and the maps a SavedModel
    gives; the pixels [H, W, C] as the model read them).

  Raises:
    validation.ConfigurationError: the file is not an image of the model's
      channels and depth; names it.
  """
  found = image_files.read(path)
  if found is None:
    if isinstance(model, predictor.Predictor):
      with open(path, 'rb') as f:  # The export's own check names the file.
        model.outputs(f.read(), name=path)
    raise validation.ConfigurationError(
        f'{path}: not a JPEG, PNG or TIFF image.')
  image = image_files.decode(found, path, *model_kind(model))
  if isinstance(model, tflite_runner.TfliteModel):
    return {'semantic': model.predict(image)}, image
  if found.image_format == encode.RAW_FORMAT:
    raise validation.ConfigurationError(
        f'{path} has {found.channels} channels, which no PNG holds, and a '
        'SavedModel takes PNGs: feed its pixels to the image_tensor '
        'signature, or predict with a .tflite.')
  return model.outputs(found.data, name=path), image
