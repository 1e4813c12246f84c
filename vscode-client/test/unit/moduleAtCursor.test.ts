import * as assert from 'node:assert/strict';
import { moduleAtLine, moduleClasses, resolveModuleTarget } from '../../src/core/moduleAtCursor';

/** The 0-based line of the first line of `text` that contains `marker`. */
function lineOf(text: string, marker: string): number {
  const index = text.split('\n').findIndex((line) => line.includes(marker));
  assert.notEqual(index, -1, `marker ${marker} not in the text`);
  return index;
}

const TWO_MODULES = `import torch
import torch.nn as nn


class Helper:
    pass


class Model(nn.Module):
    """A model.

    class NotAClass(nn.Module): inside a docstring
    """

    def __init__(self, features):
        super().__init__()
        self.scale = 2.0  # marker:init

    def forward(self, x):
        y = torch.relu(
x)  # marker:continuation at column 0
        return y * self.scale  # marker:forward


class Other(torch.nn.Module):
    def forward(self, x):
        return x  # marker:other


def get_inputs():
    return [torch.randn(8, 8)]  # marker:inputs
`;

describe('moduleClasses', () => {
  it('finds nn.Module subclasses in file order and skips other classes and strings', () => {
    assert.deepEqual(moduleClasses(TWO_MODULES), [
      { name: 'Model', line: lineOf(TWO_MODULES, 'class Model') },
      { name: 'Other', line: lineOf(TWO_MODULES, 'class Other') },
    ]);
  });

  it('accepts aliased, qualified, multi-line and generic bases; rejects ModuleList and keywords', () => {
    const text = [
      'class A(Module): pass',
      'class B(pl.LightningModule, Generic[T]): pass',
      'class C(',
      '    Mixin,',
      '    nn.Module,',
      '):',
      '    pass',
      'class D(nn.ModuleList): pass',
      'class E(Base, metaclass=nn.Module): pass',
      'class F: pass',
    ].join('\n');
    assert.deepEqual(moduleClasses(text).map((m) => m.name), ['A', 'B', 'C']);
  });

  it('counts a subclass of a module class of the same file as a module', () => {
    const text = 'class Base(nn.Module):\n    pass\n\nclass Model(Base):\n    pass\n\nclass Plain(object):\n    pass\n';
    assert.deepEqual(moduleClasses(text).map((m) => m.name), ['Base', 'Model']);
  });
});

describe('moduleAtLine', () => {
  const cases: [string, string | undefined][] = [
    ['class Model', 'Model'],
    ['marker:init', 'Model'],
    ['marker:continuation', 'Model'],
    ['marker:forward', 'Model'],
    ['marker:other', 'Other'],
    ['class Other', 'Other'],
    ['marker:inputs', undefined],
    ['def get_inputs', undefined],
    ['class Helper', undefined],
    ['import torch', undefined],
  ];
  for (const [marker, expected] of cases) {
    it(`names ${String(expected)} at "${marker}"`, () => {
      assert.equal(moduleAtLine(TWO_MODULES, lineOf(TWO_MODULES, marker)), expected);
    });
  }

  it('uses the statement above a blank line inside a class body', () => {
    const blank = lineOf(TWO_MODULES, 'marker:init') + 1;
    assert.equal(TWO_MODULES.split('\n')[blank], '');
    assert.equal(moduleAtLine(TWO_MODULES, blank), 'Model');
  });

  it('finds the module around a nested plain class and with tab indentation', () => {
    const text = 'class Outer(nn.Module):\n\tclass Config:\n\t\tsize = 3\n\tdef forward(self, x):\n\t\treturn x\n';
    assert.equal(moduleAtLine(text, 2), 'Outer');
    assert.equal(moduleAtLine(text, 4), 'Outer');
  });

  it('is not fooled by brackets and quotes inside strings and comments', () => {
    const text = [
      'class Model(nn.Module):',
      '    def forward(self, x):',
      '        s = "(("  # )) [',
      "        t = '''",
      'class Fake(nn.Module):',
      "'''",
      '        return x',
    ].join('\n');
    assert.deepEqual(moduleClasses(text).map((m) => m.name), ['Model']);
    assert.equal(moduleAtLine(text, 6), 'Model');
  });

  it('handles CRLF line endings and lines past the end', () => {
    const text = 'class Model(nn.Module):\r\n    def forward(self, x):\r\n        return x\r\n';
    assert.equal(moduleAtLine(text, 2), 'Model');
    assert.equal(moduleAtLine(text, 99), 'Model');
    assert.equal(moduleAtLine('', 0), undefined);
  });
});

describe('resolveModuleTarget', () => {
  it('prefers the module at the cursor', () => {
    assert.deepEqual(resolveModuleTarget(TWO_MODULES, lineOf(TWO_MODULES, 'marker:other')),
      { kind: 'found', name: 'Other' });
  });

  it('asks which module when the cursor is outside every module and there are several', () => {
    assert.deepEqual(resolveModuleTarget(TWO_MODULES, lineOf(TWO_MODULES, 'marker:inputs')),
      { kind: 'choose', names: ['Model', 'Other'] });
  });

  it('takes the only module of the file from anywhere', () => {
    const text = 'import torch\n\nclass Model(torch.nn.Module):\n    pass\n\ndef get_inputs():\n    return []\n';
    assert.deepEqual(resolveModuleTarget(text, 0), { kind: 'found', name: 'Model' });
    assert.deepEqual(resolveModuleTarget(text, 6), { kind: 'found', name: 'Model' });
  });

  it('says so when the file has no module class', () => {
    assert.deepEqual(resolveModuleTarget('x = 1\nclass A:\n    pass\n', 2), { kind: 'none' });
  });
});
