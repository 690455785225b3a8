"""Tests for the measured part of a plan, on tables of measurements."""

from absl.testing import parameterized
import gin
import tensorflow as tf

from official_seg import validation
from official_seg.datasets import plan_file
from official_seg.datasets import plan_search
from official_seg.datasets import planner
from official_seg.modeling import model as model_lib
from official_seg.runtime import gin_config

_MIB = 2**20


def _table(peaks, seconds=1.0):
  """measure(batch) from {batch: MiB}, recording the batches measured."""
  asked = []

  def measure(batch):
    asked.append(batch)
    return plan_search.Measurement(seconds * batch, peaks(batch) * _MIB)

  return measure, asked


class FitBatchTest(tf.test.TestCase, parameterized.TestCase):

  def test_linear_memory_meets_the_budget_in_three_measurements(self):
    # 1000 + 100 b MiB: batch 6 takes 1600 <= 1650, batch 7 1700.
    measure, asked = _table(lambda b: 1000 + 100 * b)
    batch, taken = plan_search.fit_batch(measure, 1650 * _MIB, 16)
    self.assertEqual(batch, 6)
    self.assertEqual(asked, [1, 2, 6])
    self.assertEqual(sorted(taken), [1, 2, 6])

  def test_the_largest_batch_caps(self):
    measure, asked = _table(lambda b: 1000 + b)
    self.assertEqual(plan_search.fit_batch(measure, 10**4 * _MIB, 5)[0], 5)
    self.assertEqual(asked, [1, 2, 5])

  def test_a_batch_over_the_line_steps_down_below_it(self):
    # Batch 6 jumps over the budget; 5 fits.
    measure, asked = _table(lambda b: 5000 if b == 6 else 1000 + 100 * b)
    batch, _ = plan_search.fit_batch(measure, 1650 * _MIB, 16)
    self.assertEqual(batch, 5)
    self.assertEqual(asked, [1, 2, 6, 5])

  def test_batch_two_over_keeps_one(self):
    measure, _ = _table(lambda b: 1000 * b)
    self.assertEqual(plan_search.fit_batch(measure, 1500 * _MIB, 16)[0], 1)

  def test_one_image_over_the_budget_stops(self):
    measure, _ = _table(lambda b: 3000)
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'one image takes 3000 MiB, over the memory '
                                'budget of 2000 MiB'):
      plan_search.fit_batch(measure, 2000 * _MIB, 16)


_FACTS = plan_search.Facts(train_images=100, eval_images=10,
                           median=(60, 60), largest_eval=(64, 64),
                           objects=(8.0, 20.0))


class CandidateTest(tf.test.TestCase):

  def test_steps_and_epochs_of_the_measured_batch(self):
    def measure(backbone, crop, batch):
      del backbone, crop
      return plan_search.Measurement(0.1 * batch, (1000 + 100 * batch) * _MIB)

    candidate = plan_search.plan_candidate(
        plan_search.BACKBONES[0], measure, _FACTS, [65, 65],
        (1200.0, 1650 * _MIB), 16)
    self.assertEqual(candidate.batch, 6)
    # Whole images of 65 x 65 (one training crop), at a third of 0.6 s per
    # 6 crops.
    eval_seconds = 10 * 65 * 65 * (0.6 / (6 * 65 * 65)) / 3
    self.assertAllClose(candidate.eval_seconds, eval_seconds)
    steps = int((1200 - planner.OVERHEAD_SECONDS - eval_seconds) // 0.6)
    self.assertEqual(candidate.steps, steps)
    self.assertAllClose(candidate.epochs, steps * 6 / 100)


def _planned(epochs):
  """plan(backbone) from {name: epochs, or None for over a budget}."""
  asked = []

  def plan(backbone):
    asked.append(backbone.name)
    if epochs[backbone.name] is None:
      raise validation.ConfigurationError('over the budget')
    return plan_search.Candidate(backbone, 1, None, {}, None, 0.0, 10,
                                 epochs[backbone.name])

  return plan, asked


class ChooseTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(
      # The costliest over MIN_EPOCHS; the next named as rejected.
      ((200, 150, 80, 30), 'mobilenet_v2', 'resnet50_os16', 4),
      ((200, 150, 80, 60), 'resnet50_os16', None, 4),
      ((200, 60, 40, 30), 'mobilenet_v2_035_os8', 'mobilenet_v2', 3),
      # The cheapest under it: no costlier one is measured.
      ((40, 80, 80, 60), 'mobilenet_v2_035', None, 1),
      # A costlier one over a budget stops the search.
      ((200, None, 80, 60), 'mobilenet_v2_035', None, 2))
  def test_choice(self, epochs, chosen, rejected, planned):
    names = [b.name for b in plan_search.BACKBONES]
    plan, asked = _planned(dict(zip(names, epochs)))
    candidate, other = plan_search.choose(plan)
    self.assertEqual(candidate.backbone.name, chosen)
    self.assertEqual(other and other.backbone.name, rejected)
    self.assertEqual(asked, names[:planned])
    self.assertNotIn('\n', plan_search.backbone_choice(candidate,
                                                       other).reason)

  def test_the_cheapest_over_a_budget_stops(self):
    plan, _ = _planned({b.name: None for b in plan_search.BACKBONES})
    with self.assertRaisesRegex(validation.ConfigurationError, 'over'):
      plan_search.choose(plan)

  def test_backbone_bindings_are_written_as_given(self):
    plan, _ = _planned({b.name: 100 for b in plan_search.BACKBONES})
    candidate = plan(plan_search.BACKBONES[0])
    choice = plan_search.backbone_choice(candidate, None)
    self.assertEqual(choice.includes, ('backbones/mobilenet_v2.gin',))
    self.assertEqual([f'{n} = {v!r}' for n, v in choice.bindings],
                     list(plan_search.BACKBONES[0].bindings))



class BatchNormTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(20, 410, 2000, 4600)
  def test_statistics_forget_all_but_the_last_tenth(self, steps):
    momentum = plan_search.norm_momentum(steps)
    window = steps / 10
    self.assertLessEqual(momentum**window, 0.01 * (1 + 1e-12))
    # The largest such momentum to 3 decimals.
    self.assertGreater((momentum + 0.001)**window, 0.01)

  @parameterized.parameters(4700, 100000)
  def test_long_runs_keep_model_gardens_default(self, steps):
    self.assertEqual(plan_search.norm_momentum(steps), 0.99)

  @parameterized.parameters(*[(b,) for b in plan_search.BACKBONES])
  def test_every_layer_with_batch_norm_is_bound(self, backbone):
    plan, _ = _planned({b.name: 100 for b in plan_search.BACKBONES})
    choice = plan_search.batch_norm_choice(plan(backbone))
    with open(gin_config.resolve_gin_file(backbone.gin_file)) as f:
      self.assertIn(f'@{backbone.configurable}\n', f.read())
    momentum = plan_search.norm_momentum(plan(backbone).steps)
    self.assertEqual(dict(choice.bindings), {
        f'{backbone.configurable}.norm_momentum': momentum,
        'decoders.ASPP.norm_momentum': momentum,
        'heads.SegmentationHead.norm_momentum': momentum})


class DecoderTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    gin.clear_config()

  def _logits_side(self, backbone, bindings):
    gin_config.parse(['base.gin', backbone.gin_file],
                     list(backbone.bindings) + bindings, finalize=False)
    model = model_lib.build_model(num_classes=3)
    return model(tf.zeros([1, 65, 65, 3]), training=False)['logits'].shape[1]

  @parameterized.parameters(*[(b,) for b in plan_search.BACKBONES])
  def test_every_backbone_draws_logits_at_stride_four(self, backbone):
    # 65 pixels: 17 cells at stride 4, 64 / s + 1 at output stride s.
    self.assertEqual(self._logits_side(backbone, []),
                     64 // backbone.output_stride + 1)
    gin.clear_config()
    self.assertEqual(
        self._logits_side(backbone, plan_search.decoder_bindings()), 17)

  def test_the_choice_binds_what_is_measured(self):
    self.assertEqual(
        plan_file.binding_lines(plan_search.decoder_choice().bindings),
        plan_search.decoder_bindings())

if __name__ == '__main__':
  tf.test.main()
