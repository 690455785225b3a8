"""The user docs against the tree: links, the layout listing, length."""

import glob
import os
import re

import tensorflow as tf

from tests import testing_utils

_REPO = testing_utils.REPO
# A before-stop hook flags docs over this many lines; guides stay under it.
MAX_DOC_LINES = 300
_FENCE = re.compile(r'^```[^\n]*\n(.*?)^```', re.S | re.M)
_LINK = re.compile(r'\]\(([^)\s]+)\)|<img [^>]*src="([^"]+)"')


def _docs():
  paths = [os.path.join(_REPO, 'README.md')]
  paths += glob.glob(os.path.join(_REPO, 'docs', '**', '*.md'), recursive=True)
  return sorted(paths)


def _read(path):
  with open(path, encoding='utf-8') as f:
    return f.read()


def _anchors(path):
  """GitHub's heading anchors of a Markdown file."""
  seen, anchors = {}, set()
  for line in _FENCE.sub('', _read(path)).splitlines():
    match = re.match(r'#+\s+(.*)', line)
    if not match:
      continue
    slug = re.sub(r'[^a-z0-9 _-]', '', match.group(1).strip().lower())
    slug = slug.replace(' ', '-')
    count = seen.get(slug, 0)
    seen[slug] = count + 1
    anchors.add(f'{slug}-{count}' if count else slug)
  return anchors


def _broken_links(path):
  broken = []
  for match in _LINK.finditer(_FENCE.sub('', _read(path))):
    target = match.group(1) or match.group(2)
    if re.match(r'[a-z]+:', target):
      continue
    file_part, _, anchor = target.partition('#')
    resolved = (os.path.normpath(os.path.join(os.path.dirname(path), file_part))
                if file_part else path)
    if not os.path.exists(resolved):
      broken.append(f'{target}: no such file')
    elif anchor and resolved.endswith('.md') and anchor not in _anchors(
        resolved):
      broken.append(f'{target}: no heading with that anchor')
  return broken


def _listed_modules(text):
  """Module names under each `package/` label of the fenced listings.

  A label owns the names to its right on its line, and on the lines below
  it the names from its column on, until the next line with labels.
  """
  listed = {}
  for block in _FENCE.findall(text):
    labels = []
    for line in block.splitlines():
      tokens = [(m.start(), m.group()) for m in re.finditer(r'\S+', line)]
      here = [(column, token[:-1]) for column, token in tokens
              if re.fullmatch(r'[a-z_]+/', token)]
      labels = here or labels
      for column, token in tokens:
        owners = [name for start, name in labels if start <= column]
        if owners and re.fullmatch(r'[a-z][a-z0-9_]+', token):
          listed.setdefault(owners[-1], set()).add(token)
  return listed


def _modules():
  """Module names of each package of official_seg/, and of tools/, benchmarks/."""
  modules = {}
  for top in ('official_seg', 'tools', 'benchmarks'):
    for path in glob.glob(os.path.join(_REPO, top, '**', '*.py'),
                          recursive=True):
      parts = os.path.relpath(path, _REPO).split(os.sep)
      name = parts[-1][:-len('.py')]
      if name == '__init__' or (top == 'official_seg' and len(parts) < 3):
        continue
      package = parts[1] if top == 'official_seg' else top
      modules.setdefault(package, set()).add(name)
  return modules


class DocsTest(tf.test.TestCase):

  def test_relative_links_point_to_existing_files_and_headings(self):
    broken = []
    for path in _docs():
      broken += [f'{os.path.relpath(path, _REPO)}: {link}'
                 for link in _broken_links(path)]
    self.assertEmpty(broken)

  def test_architecture_lists_every_module_under_its_package(self):
    listed = _listed_modules(
        _read(os.path.join(_REPO, 'docs', 'architecture.md')))
    wrong = []
    for package, names in sorted(_modules().items()):
      shown = listed.get(package, set())
      wrong += [f'{package}/{name}.py is not listed in docs/architecture.md'
                for name in sorted(names - shown)]
      wrong += [f'docs/architecture.md lists {package}/{name}, not in the tree'
                for name in sorted(shown - names)]
    self.assertEmpty(wrong)

  def test_docs_stay_short(self):
    long = []
    for path in _docs():
      count = len(_read(path).splitlines())
      if count > MAX_DOC_LINES:
        long.append(f'{os.path.relpath(path, _REPO)}: {count} lines')
    self.assertEmpty(long)

  def test_readme_shows_both_commands(self):
    readme = _read(os.path.join(_REPO, 'README.md'))
    self.assertIn('make demo', readme)
    self.assertIn('make test', readme)


if __name__ == '__main__':
  tf.test.main()
