"""The rare-class benchmark's records per arm: means and spreads over seeds, differences from cross-entropy, as a markdown table."""

import statistics

from benchmarks import rare_class

# The figures of a record summarized over seeds.
SCORES = ('mean_iou', 'rare_iou', 'rare_dice', 'rare_boundary_iou',
          'wall_secs')
# Those also given as the difference from the baseline at the same seed.
COMPARED = ('mean_iou', 'rare_iou')
LEGEND = ('Mean ± sample standard deviation over seeds (no spread from one '
          'seed). Δ: the arm minus {baseline} at the same seed, mean ± '
          'standard deviation over the seeds both ran.')


def spread(values):
  """(mean, sample standard deviation) of the values that are not None.

  (None, None) when none is; the deviation is None for a single value.
  """
  values = [v for v in values if v is not None]
  if not values:
    return None, None
  deviation = statistics.stdev(values) if len(values) > 1 else None
  return statistics.fmean(values), deviation


def paired_difference(runs, baseline_runs, key):
  """`spread` of the arm's `key` minus the baseline's, seed by seed."""
  base = {r['seed']: r[key] for r in baseline_runs}
  return spread([r[key] - base[r['seed']] for r in runs
                 if r[key] is not None and base.get(r['seed']) is not None])


def summarize(records):
  """{arm: summary}, arms in the order they first appear in `records`.

  A summary holds 'runs', 'seeds', the `spread` of each of `SCORES`, and
  for each of `COMPARED` '<key>_difference', the `paired_difference` from
  the baseline arm ((None, None) for the baseline, or when it did not run).
  """
  baseline = [r for r in records if r['arm'] == rare_class.BASELINE]
  summary = {}
  for arm in dict.fromkeys(r['arm'] for r in records):
    runs = [r for r in records if r['arm'] == arm]
    summary[arm] = {'runs': len(runs),
                    'seeds': sorted(r['seed'] for r in runs)}
    for key in SCORES:
      summary[arm][key] = spread([r.get(key) for r in runs])
    for key in COMPARED:
      summary[arm][f'{key}_difference'] = (
          paired_difference(runs, baseline, key)
          if baseline and arm != rare_class.BASELINE else (None, None))
  return summary


def _cell(pair, form='.3f'):
  mean, deviation = pair
  if mean is None:
    return '-'
  text = format(mean, form)
  if deviation is None:
    return text
  return f"{text} ± {format(deviation, form.lstrip('+'))}"


def markdown_table(summary, rare_name):
  """The summary as a markdown table, one row per arm, and its legend."""
  header = ['arm', 'runs', 'mIoU', 'Δ mIoU', f'{rare_name} IoU',
            f'Δ {rare_name} IoU', f'{rare_name} Dice',
            f'{rare_name} Boundary IoU', 'wall s']
  lines = ['| ' + ' | '.join(header) + ' |',
           '|' + ' --- |' * len(header)]
  for arm, s in summary.items():
    cells = [arm, str(s['runs']), _cell(s['mean_iou']),
             _cell(s['mean_iou_difference'], '+.3f'), _cell(s['rare_iou']),
             _cell(s['rare_iou_difference'], '+.3f'), _cell(s['rare_dice']),
             _cell(s['rare_boundary_iou']), _cell(s['wall_secs'], '.0f')]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(
      lines + ['', LEGEND.format(baseline=rare_class.BASELINE)])


def report(records):
  """The markdown table of a benchmark's records ('' when there are none)."""
  if not records:
    return ''
  return markdown_table(summarize(records), records[0]['rare_class'])
