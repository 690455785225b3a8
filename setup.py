"""Packaging for official_seg; gin files ship as package data under official_seg/gin."""

import glob
import os

import setuptools

# The modules of official_seg/commands/, each installed as a command.
COMMANDS = sorted(os.path.basename(path)[:-len('.py')]
                  for path in glob.glob('official_seg/commands/*.py')
                  if not path.endswith('__init__.py'))
_GIN_FILES = sorted(os.path.relpath(path, 'gin')
                    for path in glob.glob('gin/**/*.gin', recursive=True))

setuptools.setup(
    name='official_seg',
    version='0.1.0',
    description='DeepLab-class semantic segmentation on the Estimator API.',
    python_requires='>=3.11,<3.12',
    # benchmarks/ is tool-level code beside tools/, a package of its own
    # rather than part of official_seg.
    packages=setuptools.find_packages(
        include=['official_seg', 'official_seg.*', 'benchmarks',
                 'benchmarks.*']) + ['official_seg.gin'],
    # The repository keeps gin files at the top level; installed, they live
    # inside the package so the binary finds them from any directory.
    package_dir={'official_seg.gin': 'gin'},
    package_data={'official_seg.gin': _GIN_FILES},
    # TensorFlow itself comes through tf-models-official (the CUDA build);
    # requirements.lock pins tensorflow-cpu instead for CPU machines.
    install_requires=[
        'tensorflow-estimator==2.15.0',
        'tf-models-official==2.15.0',
        'gin-config',
        'absl-py',
        'numpy<2',
    ],
    # TensorBoard's Profile tab, for traces of profile_hooks.profile_steps
    # (docs/tensorboard.md).
    extras_require={'profile': ['tensorboard-plugin-profile==2.15.1']},
    # The binary, and each command as its module's name: `<name>` once
    # installed, `python -m official_seg.commands.<name>` without.
    entry_points={
        'console_scripts': ['train_and_eval=official_seg.train_and_eval:run'] + [
            f'{name}=official_seg.commands.{name}:main' for name in COMMANDS],
    },
)
