"""The measured part of a plan: the batch that fits the memory budget and the backbone and steps that fit the time budget."""

import collections
import math

from official_seg import validation
from official_seg.datasets import plan_file
from official_seg.datasets import planner

# What one training step cost on this machine: seconds, and the peak
# resident bytes of a process that runs it.
Measurement = collections.namedtuple('Measurement', ['seconds', 'peak_bytes'])
# A candidate backbone: its name, gin file, the bindings after it, its
# output stride and its gin configurable.
Backbone = collections.namedtuple(
    'Backbone', ['name', 'gin_file', 'bindings', 'output_stride',
                 'configurable'])
# Cheapest first, at output stride 16 or 8 (a crop of 16k + 1 fits both).
BACKBONES = (
    Backbone('mobilenet_v2_035', 'backbones/mobilenet_v2.gin',
             ('backbones.MobileNet.filter_size_scale = 0.35',), 16,
             'backbones.MobileNet'),
    # The quickstart's backbone: stride 8 keeps objects of a few cells at 16
    # several cells wide, for about the cost of the next width up.
    Backbone('mobilenet_v2_035_os8', 'backbones/mobilenet_v2.gin',
             ('backbones.MobileNet.filter_size_scale = 0.35',
              'backbones.MobileNet.output_stride = 8'), 8,
             'backbones.MobileNet'),
    Backbone('mobilenet_v2', 'backbones/mobilenet_v2.gin', (), 16,
             'backbones.MobileNet'),
    Backbone('resnet50_os16', 'backbones/dilated_resnet50_os16.gin', (), 16,
             'backbones.DilatedResNet'),
)
# DeepLabV3+'s decoder, for every backbone: the backbone's stride-4 features
# (level 2), projected to DeepLab's 48 channels, joined to ASPP's output
# before the classifier.
DECODER = (('heads.SegmentationHead.feature_fusion', 'deeplabv3plus'),
           ('heads.SegmentationHead.low_level', 2),
           ('heads.SegmentationHead.low_level_num_filters', 48))
# Model Garden's batch-norm momentum, kept for runs long enough for it.
MAX_NORM_MOMENTUM = 0.99
# The share of a run that batch norm's moving statistics describe: what
# came before it weighs under NORM_RESIDUE in them.
NORM_WINDOW, NORM_RESIDUE = 0.1, 0.01
# DeepLab's batch; a larger one does not make a CPU step cheaper per image.
MAX_BATCH = 16
# The weights train from scratch (no ImageNet checkpoint is fetched): the
# costliest backbone that still sees each training image this often wins.
MIN_EPOCHS = 50
# The facts of the splits a plan needs: training and evaluation images,
# the median training image (h, w), the largest evaluation image (h, w),
# and the (smallest, largest) mean object side.
Facts = collections.namedtuple(
    'Facts', ['train_images', 'eval_images', 'median', 'largest_eval',
              'objects'])
# One backbone planned: its batch and that batch's measurement, every
# measurement taken {batch: Measurement}, the evaluation's choice and
# seconds, the steps and the epochs they make.
Candidate = collections.namedtuple(
    'Candidate', ['backbone', 'batch', 'measurement', 'taken', 'evaluation',
                  'eval_seconds', 'steps', 'epochs'])
_MIB = 2.0**20


def _fits(measurement, memory_budget):
  return measurement.peak_bytes <= memory_budget


def fit_batch(measure, memory_budget, max_batch):
  """The largest batch whose measured step fits the memory budget.

  Measures batches 1 and 2, then the batch where the line through batch 1
  and the largest batch that fitted meets the budget (below the smallest
  batch that did not fit), until that batch is one already measured.

  Args:
    measure: callable(batch) -> `Measurement`.
    memory_budget: int, bytes.
    max_batch: int, the largest batch to try.

  Returns:
    (batch, {batch: `Measurement`} of every batch measured).

  Raises:
    validation.ConfigurationError: a step of one image exceeds the budget.
  """
  taken = {1: measure(1)}
  if not _fits(taken[1], memory_budget):
    raise validation.ConfigurationError(
        f'A training step of one image takes '
        f'{taken[1].peak_bytes / _MIB:.0f} MiB, over the memory budget of '
        f'{memory_budget / _MIB:.0f} MiB: raise --memory_budget or use '
        'smaller images.')
  if max_batch > 1:
    taken[2] = measure(2)
  while True:
    fitting = max(b for b, m in taken.items() if _fits(m, memory_budget))
    over = [b for b, m in taken.items() if not _fits(m, memory_budget)]
    per_image = max(taken[fitting].peak_bytes - taken[1].peak_bytes, 1) / max(
        fitting - 1, 1)
    guess = 1 + int((memory_budget - taken[1].peak_bytes) // per_image)
    guess = min([guess, max_batch] + [b - 1 for b in over])
    if guess <= fitting or guess in taken:
      return fitting, taken
    taken[guess] = measure(guess)


def plan_candidate(backbone, measure, facts, crop, budgets, max_batch):
  """One backbone's batch, evaluation and steps.

  Args:
    backbone: `Backbone`.
    measure: callable(backbone, crop, batch) -> `Measurement`.
    facts: `Facts`.
    crop: [height, width], CROP_SIZE.
    budgets: (seconds, bytes).
    max_batch: int.

  Returns:
    `Candidate`.

  Raises:
    validation.ConfigurationError: one image's step exceeds the memory
      budget, or not one step fits the time budget.
  """
  time_budget, memory_budget = budgets
  batch, taken = fit_batch(lambda b: measure(backbone, crop, b),
                           memory_budget,
                           min(max_batch, facts.train_images))
  step = taken[batch]
  evaluation, pixels = planner.eval_choice(facts.largest_eval, crop, batch,
                                           backbone.output_stride)
  seconds = planner.eval_seconds(facts.eval_images, pixels, step.seconds,
                                 batch, crop)
  steps = planner.steps_choice(time_budget, step.seconds, seconds)
  return Candidate(backbone, batch, step, taken, evaluation, seconds, steps,
                   steps * batch / facts.train_images)


def choose(plan, backbones=BACKBONES):
  """The costliest backbone that trains MIN_EPOCHS epochs, else the first.

  Plans the backbones cheapest first and stops at the first one under
  MIN_EPOCHS (a costlier one would train fewer) or over a budget.

  Args:
    plan: callable(`Backbone`) -> `Candidate`, see `plan_candidate`.
    backbones: sequence of `Backbone`, cheapest first.

  Returns:
    (the chosen `Candidate`, the next one planned or None).

  Raises:
    validation.ConfigurationError: the first backbone fits no budget.
  """
  chosen = None
  for backbone in backbones:
    try:
      candidate = plan(backbone)
    except validation.ConfigurationError:
      if chosen is None:
        raise
      return chosen, None
    if chosen is not None and candidate.epochs < MIN_EPOCHS:
      return chosen, candidate
    chosen = candidate
    if candidate.epochs < MIN_EPOCHS:
      return chosen, None
  return chosen, None


def backbone_choice(chosen, rejected):
  """`plan_file.Choice` of the backbone's gin file and bindings."""
  reason = (f'{chosen.backbone.name} trains {chosen.epochs:.0f} epochs in the '
            f'budget')
  if rejected is not None:
    reason += (f'; {rejected.backbone.name} would train '
               f'{rejected.epochs:.0f}, under {MIN_EPOCHS}')
  elif chosen.epochs < MIN_EPOCHS:
    reason += f', under {MIN_EPOCHS}, but it is the cheapest'
  bindings = [tuple(b.split(' = ')) for b in chosen.backbone.bindings]
  return plan_file.Choice(
      (chosen.backbone.gin_file,),
      [(name, plan_file.Reference(value)) for name, value in bindings],
      reason + ' (from scratch).')


def decoder_choice():
  """`plan_file.Choice` of DeepLabV3+'s decoder (`DECODER`).

  Without it the logits are upsampled from the output stride, so every
  border is drawn at a sixteenth of the image's resolution; on small images
  the pixels near borders are a large share of all.
  """
  return plan_file.Choice(
      (), list(DECODER),
      'DeepLabV3+\'s decoder joins the backbone\'s stride-4 features to '
      'ASPP\'s: borders at a quarter of the resolution, not a sixteenth.')


def decoder_bindings():
  """`DECODER` as gin binding lines, for the measured steps."""
  return plan_file.binding_lines(DECODER)


def norm_momentum(steps):
  """The batch-norm momentum m whose m ** (NORM_WINDOW * steps) is at most
  NORM_RESIDUE, to 3 decimals, and at most MAX_NORM_MOMENTUM."""
  momentum = NORM_RESIDUE ** (1 / max(1.0, NORM_WINDOW * steps))
  return min(MAX_NORM_MOMENTUM, math.floor(momentum * 1000) / 1000)


def batch_norm_choice(candidate):
  """`plan_file.Choice` of the norm momentum of backbone, ASPP and head.

  A short run from scratch moves its weights faster than statistics of a
  slow momentum follow, and evaluates on statistics of weights it has left.
  """
  momentum = norm_momentum(candidate.steps)
  names = (candidate.backbone.configurable, 'decoders.ASPP',
           'heads.SegmentationHead')
  return plan_file.Choice(
      (), [(f'{name}.norm_momentum', momentum) for name in names],
      f'batch norm\'s moving statistics describe about the last '
      f'{NORM_WINDOW:.0%} of the {candidate.steps} steps (older ones weigh '
      f'under {NORM_RESIDUE:.0%}), at most {MAX_NORM_MOMENTUM}, Model '
      'Garden\'s default: slower statistics lag the weights of a short run.')


def batch_choice(candidate, memory_budget):
  """`plan_file.Choice` of TRAIN_BATCH_SIZE, naming every measurement."""
  measured = ', '.join(f'{b}: {m.peak_bytes / _MIB:.0f} MiB'
                       for b, m in sorted(candidate.taken.items()))
  return plan_file.Choice(
      (), [('TRAIN_BATCH_SIZE', candidate.batch)],
      f'measured peaks by batch ({measured}) against the '
      f'memory budget of {memory_budget / _MIB:.0f} MiB, '
      f'at most {MAX_BATCH} and the training images.')


def steps_choice(candidate, time_budget):
  """`plan_file.Choice` of TRAIN_STEPS, naming the measured step."""
  return plan_file.Choice(
      (), [('TRAIN_STEPS', candidate.steps)],
      f'{time_budget:.0f} s less {planner.OVERHEAD_SECONDS:.0f} s of '
      f'start-up and exports and {candidate.eval_seconds:.0f} s of '
      f'evaluation, at {candidate.measurement.seconds:.3f} s a measured '
      f'step of batch {candidate.batch}.')
