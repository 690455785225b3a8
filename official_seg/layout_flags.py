"""The flags that name a raw dataset's layout, folders and classes, shared by the commands that read one."""

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
  define_folder_pair_flags(flag_values)
  flags.DEFINE_string('label_subdir', None, label_subdir_help,
                      flag_values=flag_values)


def define_folder_pair_flags(flag_values):
  """Defines --image_dir, --label_dir and --split_list_dir (the folders
  layout)."""
  flags.DEFINE_string('image_dir', None, 'folders: the images.',
                      flag_values=flag_values)
  flags.DEFINE_string('label_dir', None, 'folders: PNG labels, same stems.',
                      flag_values=flag_values)
  flags.DEFINE_string('split_list_dir', None,
                      'folders: optional <split>.txt lists of stems.',
                      flag_values=flag_values)


# The flags `define_class_flags` defines, in its order.
CLASS_FLAGS = ('num_classes', 'ignore_label', 'palette',
               'unknown_colours_to_ignore', 'class_masks')


def define_class_flags(flag_values):
  """Defines how the labels name classes: --num_classes, --ignore_label,
  --palette, --unknown_colours_to_ignore and --class_masks
  (`CLASS_FLAGS`)."""
  flags.DEFINE_integer('num_classes', None,
                       'folders without --dataset_gin: number of classes.',
                       flag_values=flag_values)
  flags.DEFINE_integer('ignore_label', 255,
                       'folders without --dataset_gin, or a --palette file: '
                       'the ignore label.', flag_values=flag_values)
  flags.DEFINE_string(
      'palette', None,
      'Labels are colour masks (RGB or RGBA PNGs) with these colours: a '
      'shipped dataset\'s palette by name (pascal_voc, cityscapes, ade20k), '
      'a JSON file {"class name": [r, g, b], ...} or CVAT\'s labelmap.txt. '
      'The classes come from it, and <output_dir>/dataset.gin is written for '
      'them. Palette (mode P) and grey PNGs still read as class ids.',
      flag_values=flag_values)
  flags.DEFINE_bool('unknown_colours_to_ignore', False,
                    'With --palette: colours of no class become the ignore '
                    'label instead of an error.', flag_values=flag_values)
  flags.DEFINE_bool('class_masks', False,
                    'folders: --label_dir holds a folder of binary masks per '
                    'class, <class>/<image stem>.png (0 absent, 1 or 255 '
                    'present; classes may overlap). Each label becomes their '
                    'bit mask, for the sigmoid output kind, and '
                    '<output_dir>/dataset.gin is written for them.',
                    flag_values=flag_values)
