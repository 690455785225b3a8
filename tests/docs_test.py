"""The user docs against the tree: links, listings, cited tests, length."""

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


# A cited test: a file (`tests/x_test.py`, with `::Class::test_name` or
# `::test_name` after it), or, in backticks, `::name` or a bare `test_name` of
# the file cited last before it in the same doc.
_CITED = re.compile(r'(tests/[\w/]+\.py)((?:::\w+)*)|`::(\w+(?:::\w+)*)`'
                    r'|`(test_\w+)`')


def _cited_tests(text):
  """(file, [names defined in it]) of each test a doc cites, in order."""
  cited, current = [], None
  for match in _CITED.finditer(text):
    path, names, relative, bare = match.groups()
    if path:
      current = path
      cited.append((path, names.split('::')[1:]))
    elif current:
      cited.append((current, (relative or bare).split('::')))
    else:
      cited.append(('(no file cited before it)', [relative or bare]))
  return cited


def _missing_citations(doc):
  missing = []
  for path, names in _cited_tests(_read(doc)):
    full = os.path.join(_REPO, path)
    if not os.path.isfile(full):
      missing.append(f'{path}: no such file')
      continue
    source = _read(full)
    missing += [f'{path}::{name}: not defined there' for name in names
                if not re.search(rf'^\s*(def|class) {name}\b', source, re.M)]
  return missing


def _gin_listing(readme):
  """{folder: stems} of the fenced block under README's '## gin files'.

  A line starting `gin/<folder>/` names its folder (`gin/x.gin`, one file of
  `gin/`); the stems follow, separated by commas or semicolons, on it and
  the indented lines below, before a colon; parentheses hold notes.
  """
  section = readme.split('## gin files', 1)[1]
  texts, folder = {}, None
  for line in _FENCE.search(section).group(1).splitlines():
    match = re.match(r'(gin/(?:[\w]+/)?)(\w+\.gin)?\s*(.*)', line)
    if match:
      folder = match.group(1)
      if match.group(2):
        texts.setdefault(folder, []).append(match.group(2)[:-len('.gin')])
        continue
      line = match.group(3)
    texts.setdefault(folder, []).append(line.strip())
  listed = {}
  for folder, parts in texts.items():
    text = re.sub(r'\([^)]*\)', '', ' '.join(parts)).split(':')[0]
    listed[folder] = {item.strip() for item in re.split(r'[,;]', text)
                      if item.strip()}
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

  def test_readme_lists_every_gin_file_under_its_folder(self):
    listed = _gin_listing(_read(os.path.join(_REPO, 'README.md')))
    shipped = {}
    for path in glob.glob(os.path.join(_REPO, 'gin', '**', '*.gin'),
                          recursive=True):
      folder, name = os.path.split(os.path.relpath(path, _REPO))
      shipped.setdefault(folder + '/', set()).add(name[:-len('.gin')])
    wrong = []
    for folder in sorted(set(shipped) | set(listed)):
      wrong += [f'{folder}{stem}.gin is not listed under {folder} in README.md'
                for stem in sorted(shipped.get(folder, set())
                                   - listed.get(folder, set()))]
      wrong += [f'README.md lists {stem!r} under {folder}, not a gin file there'
                for stem in sorted(listed.get(folder, set())
                                   - shipped.get(folder, set()))]
    self.assertEmpty(wrong)

  def test_every_cited_test_exists(self):
    missing = []
    for doc in _docs():
      missing += [f'{os.path.relpath(doc, _REPO)} cites {line}'
                  for line in _missing_citations(doc)]
    self.assertEmpty(missing)

  def test_citations_are_read_as_files_and_names(self):
    text = ('`tests/a_test.py::test_one`, `::test_two`; `tests/b/c_test.py` '
            '(`test_three`) and `tests/b/c_test.py::Case::test_four`')
    self.assertEqual(_cited_tests(text), [
        ('tests/a_test.py', ['test_one']), ('tests/a_test.py', ['test_two']),
        ('tests/b/c_test.py', []), ('tests/b/c_test.py', ['test_three']),
        ('tests/b/c_test.py', ['Case', 'test_four'])])

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
