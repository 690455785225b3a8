"""The flags that name a raw dataset's layout and folders, shared by the commands that read one."""

from absl import flags


def define_folder_flags(flag_values, input_dir_help, label_subdir_help):
  """Defines --input_dir, --image_dir, --label_dir, --split_list_dir, --label_subdir.

  TensorFlow-free, as `build_tfrecords`' encoding workers import it.

  Args:
    flag_values: the command's `flags.FlagValues`.
    input_dir_help: str, what --input_dir is for that command.
    label_subdir_help: str, what --label_subdir is for that command.
  """
  flags.DEFINE_string('input_dir', None, input_dir_help,
                      flag_values=flag_values)
  flags.DEFINE_string('image_dir', None, 'folders: the images.',
                      flag_values=flag_values)
  flags.DEFINE_string('label_dir', None, 'folders: PNG labels, same stems.',
                      flag_values=flag_values)
  flags.DEFINE_string('split_list_dir', None,
                      'folders: optional <split>.txt lists of stems.',
                      flag_values=flag_values)
  flags.DEFINE_string('label_subdir', None, label_subdir_help,
                      flag_values=flag_values)
