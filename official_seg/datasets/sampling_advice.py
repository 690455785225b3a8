"""Sampling settings suggested from a split's class shares and per-image classes."""

import collections

import numpy as np

from official_seg.data import image_classes
from official_seg.data import repeat_factors
from official_seg.datasets import stats as stats_lib

# The rules, each from one fact of the split:
# - a class covers DOMINANT_SHARE % of the labelled pixels or more: crops
#   are drawn again while one class covers CAT_MAX_RATIO of them
#   (mmsegmentation's value for Cityscapes and ADE20K);
# - classes cover under RARE_SHARE % each: FOREGROUND_SHARE of the crops
#   (nnU-Net's oversample_foreground_percent) centre on one of them;
# - a class is in fewer than RARE_IMAGES of the images: images repeat by
#   LVIS's factor with threshold RARE_IMAGES.
DOMINANT_SHARE = 50.0
CAT_MAX_RATIO = 0.75
RARE_SHARE = 1.0
FOREGROUND_SHARE = 0.33
RARE_IMAGES = 0.1

# Rare classes a reason names; the bindings list them all.
_NAMED = 5
# bindings: list of (gin binding, value); reason: one line.
Suggestion = collections.namedtuple('Suggestion', ['bindings', 'reason'])


def _cat_max_ratio(shares, names):
  top = int(np.argmax(shares))
  if shares[top] >= DOMINANT_SHARE:
    return Suggestion(
        [('CropSampling.cat_max_ratio', CAT_MAX_RATIO)],
        f'{names[top]} covers {shares[top]:.1f}% of the labelled pixels: '
        f'crops it covers {CAT_MAX_RATIO:.0%} or more of are drawn again '
        '(mmsegmentation).')
  return Suggestion(
      [('CropSampling.cat_max_ratio', 1.0)],
      f'no class covers {DOMINANT_SHARE:.0f}% of the labelled pixels (the '
      f'largest, {names[top]}, {shares[top]:.1f}%): crops stay uniform.')


def _foreground(shares, names):
  rare = [c for c in range(len(shares)) if 0 < shares[c] < RARE_SHARE]
  if not rare:
    return Suggestion(
        [('CropSampling.foreground_share', 0.0)],
        f'every class with pixels covers {RARE_SHARE:g}% of the labelled '
        'pixels or more: no crop is centred on a class.')
  listed = ', '.join(f'{names[c]} {shares[c]:.2f}%' for c in rare[:_NAMED])
  if len(rare) > _NAMED:
    listed += f' and {len(rare) - _NAMED} more'
  return Suggestion(
      [('CropSampling.foreground_share', FOREGROUND_SHARE),
       ('CropSampling.foreground_classes', rare)],
      f'{listed} of the labelled pixels (under {RARE_SHARE:g}% each): '
      f'{FOREGROUND_SHARE:.0%} of the crops are centred on one of them '
      '(nnU-Net).')


def _repeat_threshold(presence, names):
  fraction = presence.mean(axis=0)
  seen = np.flatnonzero(fraction > 0)
  rarest = seen[np.argmin(fraction[seen])] if len(seen) else None
  binding = 'train/build_dataset.repeat_factor_threshold'
  if rarest is None or fraction[rarest] >= RARE_IMAGES:
    return Suggestion(
        [(binding, 0.0)],
        f'every class is in {RARE_IMAGES:.0%} of the images or more: each '
        'image is read once an epoch.')
  factors = repeat_factors.repeat_factors(presence, RARE_IMAGES)
  count = int(presence[:, rarest].sum())
  return Suggestion(
      [(binding, RARE_IMAGES)],
      f'{names[rarest]} is in {count} of {len(presence)} images: its images '
      f'repeat {np.sqrt(RARE_IMAGES / fraction[rarest]):.2f} times (LVIS), '
      f'an epoch grows {factors.mean():.2f} times.')


def suggest(stats, class_names, ignore_label):
  """The suggested sampling settings of a split, each with its reason.

  Args:
    stats: `stats.Stats` of the split.
    class_names: sequence of C str.
    ignore_label: int.

  Returns:
    list of `Suggestion`: cat_max_ratio, foreground crops, repeat factors.
  """
  shares = stats_lib.class_shares(stats)
  _, presence = image_classes.presence(stats.image_labels, ignore_label,
                                       len(class_names))
  return [_cat_max_ratio(shares, class_names),
          _foreground(shares, class_names),
          _repeat_threshold(presence, class_names)]


def format_suggestions(suggestions):
  """The printed lines: each reason, then its bindings."""
  lines = ['Suggested sampling settings (docs/your_own_data.md):']
  for suggestion in suggestions:
    lines.append(f'  # {suggestion.reason}')
    lines += [f'  {name} = {value!r}' for name, value in suggestion.bindings]
  return '\n'.join(lines)


def gin_snippet(suggestions, title):
  """A gin file of the suggestions: imports, then each reason and bindings.

  Args:
    suggestions: list of `Suggestion`.
    title: str, what they were computed from, for the first comment.

  Returns:
    str, ending in a newline.
  """
  lines = [f'# Sampling settings suggested by dataset_stats for {title}.',
           'import official_seg.data.crop_sampling',
           'import official_seg.data.input_fn', '']
  for suggestion in suggestions:
    lines.append(f'# {suggestion.reason}')
    lines += [f'{name} = {value!r}' for name, value in suggestion.bindings]
  return '\n'.join(lines) + '\n'
