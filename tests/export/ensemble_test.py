"""The fold ensemble's members: their metadata must agree.

The ensemble's SavedModel itself (the members' mean probabilities, its
label maps, its metadata) is tested on the folds that cross_validate trains
and exports, in tests/commands/cross_validate_test.py.
"""

import json
import os

import tensorflow as tf

from official_seg import validation
from official_seg.export import ensemble
from official_seg.export import saved_model


class CheckMembersTest(tf.test.TestCase):

  def _export(self, **metadata):
    """A folder with an export's metadata file and nothing else."""
    folder = self.create_tempdir().full_path
    os.makedirs(os.path.join(folder, 'assets.extra'))
    with open(os.path.join(folder, 'assets.extra',
                           saved_model.METADATA_FILE), 'w') as f:
      json.dump(metadata, f)
    return folder

  def test_members_of_one_configuration_give_its_metadata(self):
    first = self._export(crop_size=[97, 97], class_names=['a', 'b'])
    second = self._export(class_names=['a', 'b'], crop_size=[97, 97])
    self.assertEqual(ensemble.check_members([first, second]),
                     {'crop_size': [97, 97], 'class_names': ['a', 'b']})

  def test_members_of_other_preprocessing_are_refused(self):
    first = self._export(crop_size=[97, 97])
    other = self._export(crop_size=[99, 99])
    with self.assertRaisesRegex(validation.ConfigurationError,
                                f'{other} was exported with other '
                                'preprocessing or classes than '
                                f'{first}'):
      ensemble.export_ensemble([first, first, other],
                               os.path.join(first, 'out'))
    self.assertFalse(os.path.exists(os.path.join(first, 'out')))

  def test_one_member_is_refused(self):
    with self.assertRaisesRegex(validation.ConfigurationError,
                                'at least two SavedModels; got 1'):
      ensemble.check_members([self._export()])


if __name__ == '__main__':
  tf.test.main()
