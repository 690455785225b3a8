"""Training settings planned from a split's facts and a step's measured cost, each with its one-line reason."""

import math
import re

import numpy as np

from official_seg import validation
from official_seg.datasets import plan_file
from official_seg.datasets import sampling_advice
from official_seg.datasets import stats as stats_lib

# DeepLab's training crop, the largest side planned.
LARGEST_CROP = 513
# A crop holds an object of the largest mean size with as much context.
CONTEXT = 2.0
# DeepLab's scale range and step.
SCALE_RANGE = (0.5, 2.0)
SCALE_STEP = 0.25
# Seconds of a run that are not training steps: start-up, graph builds,
# checkpoints and the exports after the evaluation.
OVERHEAD_SECONDS = 60.0
# A forward pass costs about a third of a training step (forward and
# backward) per pixel.
FORWARD_SHARE = 1 / 3
# Seconds of training between checkpoints: what a crash may cost.
CHECKPOINT_SECONDS = 600.0
# The warm-up's share of the steps.
WARMUP_SHARE = 0.05
# From scratch in a short run Adam gets where momentum SGD needs several
# times the steps (gin/experiments/quickstart.gin, docs/performance.md).
OPTIMIZER = '@tf.train.AdamOptimizer'
LEARNING_RATE = 0.01


_SECONDS = {'s': 1, 'm': 60, 'h': 3600}
_BYTES = {'': 1, 'k': 2**10, 'm': 2**20, 'g': 2**30, 't': 2**40}


def seconds_of(text):
  """Seconds of a duration such as '90s', '20m', '2h' or '1h30m'.

  Raises:
    validation.ConfigurationError: not a duration.
  """
  parts = re.findall(r'(\d+(?:\.\d+)?)([smh])', text.strip().lower())
  if not parts or ''.join(a + b for a, b in parts) != text.strip().lower():
    raise validation.ConfigurationError(
        f'--time_budget={text!r} is not a duration such as 90s, 20m, 2h or '
        '1h30m.')
  return sum(float(number) * _SECONDS[unit] for number, unit in parts)


def bytes_of(text):
  """Bytes of a size such as '8G', '8GiB', '512M' or '1073741824' (binary
  units).

  Raises:
    validation.ConfigurationError: not a size.
  """
  found = re.fullmatch(r'(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?',
                       text.strip().lower())
  if not found:
    raise validation.ConfigurationError(
        f'--memory_budget={text!r} is not a size such as 8G, 512M or 8GiB.')
  return int(float(found.group(1)) * _BYTES[found.group(2)])


def stride_side(side, output_stride):
  """The least output_stride * k + 1 of at least `side` (DeepLab's 513)."""
  return output_stride * math.ceil(max(side - 1, 0) / output_stride) + 1


def median_size(sizes):
  """(height, width): the medians over images of a Counter of (h, w)."""
  heights = [h for (h, _), n in sizes.items() for _ in range(n)]
  widths = [w for (_, w), n in sizes.items() for _ in range(n)]
  return float(np.median(heights)), float(np.median(widths))


def object_sides(class_pixels, images_with):
  """Each class's mean object side: sqrt(its pixels per image holding it).

  Args:
    class_pixels: int [C], labelled pixels of each class.
    images_with: int [C], images that hold each class.

  Returns:
    float64 [C]; 0 for a class in no image.
  """
  pixels = np.asarray(class_pixels, np.float64)
  images = np.asarray(images_with, np.float64)
  return np.sqrt(np.divide(pixels, images, out=np.zeros_like(pixels),
                           where=images > 0))


def object_range(class_pixels, images_with):
  """(smallest, largest) mean object side, the largest class left out.

  The class of most pixels is the background of most datasets, whose
  'object' is the whole image; with one class it is all there is.
  """
  sides = object_sides(class_pixels, images_with)
  kept = np.flatnonzero(sides > 0)
  if len(kept) > 1:
    kept = kept[kept != int(np.argmax(class_pixels))]
  return float(sides[kept].min()), float(sides[kept].max())


def crop_choice(median, largest_object, output_stride):
  """CROP_SIZE: covers the median image and twice the largest object.

  Each side is the least output_stride * k + 1 of at least
  min(max(median side, CONTEXT x largest object side), LARGEST_CROP).

  Args:
    median: (height, width) of the median training image.
    largest_object: float, the largest mean object side in pixels.
    output_stride: int, the backbone's.

  Returns:
    `plan_file.Choice`.
  """
  crop = [stride_side(min(max(m, CONTEXT * largest_object), LARGEST_CROP),
                      output_stride) for m in median]
  return plan_file.Choice(
      (), [('CROP_SIZE', crop)],
      f'the median training image is {median[0]:g}x{median[1]:g} '
      f'and the largest mean object {largest_object:.0f} px a side: '
      f'crops cover both (twice the object), capped at '
      f'{LARGEST_CROP}, at output stride {output_stride} x k + 1.')


def window_count(length, window):
  """Windows along a side at the default stride, two thirds of a window."""
  if length <= window:
    return 1
  stride = max(1, (2 * window) // 3)
  return math.ceil((length - window) / stride) + 1


def eval_choice(largest, crop, batch, output_stride):
  """Whole images when one holds no more pixels than a training batch.

  A training step keeps its forward activations for the backward pass, so
  one image of no more pixels than the measured batch's evaluates within
  the measured memory; larger ones run windows of the training crop.

  Args:
    largest: (height, width) of the evaluation split's largest image.
    crop: [height, width], CROP_SIZE.
    batch: int, the training batch.
    output_stride: int.

  Returns:
    (`plan_file.Choice`, the pixels one evaluated image runs through the
    model).
  """
  whole = [stride_side(side, output_stride) for side in largest]
  budget = batch * crop[0] * crop[1]
  if whole[0] * whole[1] <= budget:
    return plan_file.Choice(
        (), [('EVAL_CROP_SIZE', whole), ('WINDOW_SIZE', None)],
        f'the largest evaluation image, {largest[0]}x{largest[1]}, holds no '
        f'more pixels than a training batch ({batch} x {crop[0]}x{crop[1]}): '
        'whole images.'), whole[0] * whole[1]
  windows = window_count(largest[0], crop[0]) * window_count(largest[1],
                                                             crop[1])
  return plan_file.Choice(
      (), [('EVAL_CROP_SIZE', list(crop)), ('WINDOW_SIZE', list(crop))],
      f'the largest evaluation image, {largest[0]}x{largest[1]}, holds more '
      f'pixels than a training batch ({batch} x {crop[0]}x{crop[1]}): '
      f'windows of the training crop, {windows} an image.'), (
          windows * crop[0] * crop[1])


def _rounded_scale(value, up):
  steps = value / SCALE_STEP
  return SCALE_STEP * (math.ceil(steps - 1e-9) if up else math.floor(
      steps + 1e-9))


def scale_choice(crop, smallest_object, largest_object, output_stride):
  """Random scaling within DeepLab's 0.5-2.0 that keeps objects usable.

  The largest scale keeps the largest object inside the crop
  (min(crop) / largest object side), the smallest keeps the smallest
  object one output-stride cell wide (output_stride / smallest side); both
  on DeepLab's 0.25 steps, with 1.0 always inside.

  Returns:
    `plan_file.Choice` binding MIN_SCALE_FACTOR and MAX_SCALE_FACTOR.
  """
  high = min(SCALE_RANGE[1], max(1.0, _rounded_scale(
      min(crop) / max(largest_object, 1.0), up=False)))
  low = max(SCALE_RANGE[0], min(1.0, _rounded_scale(
      output_stride / max(smallest_object, 1.0), up=True)))
  return plan_file.Choice(
      (), [('MIN_SCALE_FACTOR', low), ('MAX_SCALE_FACTOR', high)],
      f'objects are {smallest_object:.0f}-{largest_object:.0f} px a side: '
      f'scaled by {low:g}-{high:g} the largest still fits the crop and the '
      f'smallest spans {output_stride} px (within DeepLab\'s 0.5-2).')


def check_time_budget(time_budget):
  """Stops a budget that start-up and exports alone use up, before measuring.

  Raises:
    validation.ConfigurationError: `time_budget` seconds are at most
      OVERHEAD_SECONDS.
  """
  if time_budget <= OVERHEAD_SECONDS:
    raise validation.ConfigurationError(
        f'A time budget of {time_budget:.0f} s leaves no time for a training '
        f'step after {OVERHEAD_SECONDS:.0f} s of start-up and exports: raise '
        '--time_budget.')


def steps_choice(time_budget, step_seconds, eval_seconds):
  """TRAIN_STEPS: the steps that fit the budget after evaluation and
  start-up.

  Args:
    time_budget: float, seconds.
    step_seconds: float, a measured training step.
    eval_seconds: float, the final evaluation's estimate.

  Returns:
    int.

  Raises:
    validation.ConfigurationError: not one step fits.
  """
  left = time_budget - OVERHEAD_SECONDS - eval_seconds
  steps = int(left // step_seconds) if left > 0 else 0
  if steps < 1:
    raise validation.ConfigurationError(
        f'A time budget of {time_budget:.0f} s leaves no time for one '
        f'training step of {step_seconds:.2f} s after {OVERHEAD_SECONDS:.0f} s '
        f'of start-up and exports and {eval_seconds:.0f} s of evaluation: '
        'raise --time_budget.')
  return steps


def eval_seconds(eval_images, eval_pixels, step_seconds, batch, crop):
  """The evaluation's estimate: its pixels at a forward pass's share of the
  measured step's seconds per pixel."""
  per_pixel = step_seconds / (batch * crop[0] * crop[1])
  return eval_images * eval_pixels * per_pixel * FORWARD_SHARE


def loss_choice(shares, names):
  """Cross-entropy and Dice when a class is rare, else cross-entropy.

  Args:
    shares: float [C], each class's percentage of the labelled pixels.
    names: C str.

  Returns:
    `plan_file.Choice`.
  """
  rare = [c for c in range(len(shares))
          if 0 < shares[c] < sampling_advice.RARE_SHARE]
  if not rare:
    return plan_file.Choice(
        (), [], f'every class with pixels covers '
        f'{sampling_advice.RARE_SHARE:g}% of them or more: '
        'cross-entropy, the default loss.')
  listed = ', '.join(f'{names[c]} {shares[c]:.2f}%' for c in rare)
  return plan_file.Choice(
      ('losses/ce_dice.gin',), [],
      f'{listed} of the labelled pixels: cross-entropy plus Dice, '
      'in which a rare class weighs as much as any '
      '(docs/your_own_data.md).')


def sampling_choices(suggestions):
  """The sampling suggestions (`sampling_advice.suggest`) as `Choice`s."""
  return [plan_file.Choice((), list(s.bindings), s.reason)
          for s in suggestions]


def normalization_choice(mean, std, split):
  """Parser.mean_rgb and .stddev_rgb: the training split's per channel."""
  return plan_file.Choice(
      (), stats_lib.normalization_bindings(mean, std),
      f'the mean and deviation of each channel over split '
      f'{split!r}.')


def schedule_choice(steps, step_seconds, time_budget):
  """A linear warm-up, then DeepLab's poly decay to 0 at the last step.

  Checkpoints come every `CHECKPOINT_SECONDS` of steps, so a stopped run
  resumes near where it stopped; evaluations wait for the last one (the
  throttle is the whole budget), whose cost the steps were planned around.

  Args:
    steps: int, the planned steps.
    step_seconds: float, the measured seconds of one step.
    time_budget: float, the run's seconds.

  Returns:
    A `plan_file.Choice`.
  """
  warmup = max(1, round(WARMUP_SHARE * steps))
  every = max(1, min(steps, round(CHECKPOINT_SECONDS / step_seconds)))
  return plan_file.Choice(
      ('schedules/poly_warmup.gin',), [
          ('make_optimizer.optimizer', plan_file.Reference(OPTIMIZER)),
          ('BASE_LEARNING_RATE', LEARNING_RATE),
          ('WARMUP_STEPS', warmup),
          ('build_run_config.save_checkpoints_steps', every),
          ('run.throttle_secs', math.ceil(time_budget))],
      f'Adam at {LEARNING_RATE:g} from scratch, warmed up over '
      f'{warmup} steps ({WARMUP_SHARE:.0%}), poly decay to 0 at '
      f'step {steps}; a checkpoint every {every} steps (about '
      f'{CHECKPOINT_SECONDS / 60:.0f} minutes), one evaluation, '
      'at the end.')
