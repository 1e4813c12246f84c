import * as assert from 'node:assert/strict';
import {
  DEFAULT_SERVER_SETTINGS,
  RESTART_SETTINGS,
  ServerSettings,
  needsRestart,
  toServerSettings,
} from '../../src/core/serverSettings';
import { readManifest } from '../support/manifest';

/** A reader over dotted keys, as vscode's WorkspaceConfiguration.get is. */
function reader(values: Record<string, unknown>): (key: string) => unknown {
  return (key) => values[key];
}

describe('toServerSettings', () => {
  it('gives the documented defaults when nothing is set', () => {
    const { settings, problems } = toServerSettings(reader({}));
    assert.deepEqual(settings, {
      llm: { baseUrl: '', model: '', apiKeyEnv: 'OPENAI_API_KEY', timeoutSeconds: 180 },
      coder: 'builtin',
      gpu: { device: 0 },
      budget: { timeSeconds: 600, iterations: 4, tokens: 0 },
      profilers: ['torch', 'ncu'],
      watch: { onSave: true },
      search: { enabled: true, variants: 4, timeSeconds: 180 },
      precision: 'fp32',
    } satisfies ServerSettings);
    assert.deepEqual(problems, []);
  });

  it('maps every setting to the nested section the server reads', () => {
    const { settings, problems } = toServerSettings(reader({
      'llm.baseUrl': 'http://localhost:8000/v1', 'llm.model': 'qwen', 'llm.apiKeyEnv': 'MY_KEY',
      coder: 'llm', 'gpu.device': 1, 'budget.timeSeconds': 30.5, 'budget.iterations': 2,
      'llm.timeoutSeconds': 45, 'budget.tokens': 100000,
      profilers: ['nsys', 'torch', 'nsys'], 'watch.onSave': false,
      'search.enabled': false, 'search.variants': 2, 'search.timeSeconds': 60, precision: 'tf32',
      python: '/usr/bin/python3', 'server.command': ['x'], 'trace.server': 'verbose',
    }));
    assert.deepEqual(settings, {
      llm: { baseUrl: 'http://localhost:8000/v1', model: 'qwen', apiKeyEnv: 'MY_KEY', timeoutSeconds: 45 },
      coder: 'llm',
      gpu: { device: 1 },
      budget: { timeSeconds: 30.5, iterations: 2, tokens: 100000 },
      profilers: ['nsys', 'torch'],
      watch: { onSave: false },
      search: { enabled: false, variants: 2, timeSeconds: 60 },
      precision: 'tf32',
    });
    assert.deepEqual(problems, []);
    assert.equal('python' in settings, false); // extension-only settings stay in the extension
  });

  it('accepts every precision the server knows, strict included', () => {
    for (const precision of ['fp32', 'strict', 'tf32', 'bf16', 'fp16']) {
      const { settings, problems } = toServerSettings(reader({ precision }));
      assert.equal(settings.precision, precision);
      assert.deepEqual(problems, []);
    }
  });

  it('falls back to the default for each wrong value and says which', () => {
    const { settings, problems } = toServerSettings(reader({
      coder: 'gpt', 'gpu.device': -1, 'budget.timeSeconds': 0, 'budget.iterations': 2.5,
      'llm.timeoutSeconds': -3, 'budget.tokens': -1,
      profilers: ['torch', 'perf'], 'watch.onSave': 'yes',
      'search.enabled': 1, 'search.variants': 17, 'search.timeSeconds': -1, precision: 'int8',
    }));
    assert.deepEqual(settings, DEFAULT_SERVER_SETTINGS);
    assert.deepEqual(problems.map((p) => p.split(':')[0]), [
      'kernelstitch.profilers', 'kernelstitch.llm.timeoutSeconds', 'kernelstitch.coder', 'kernelstitch.gpu.device',
      'kernelstitch.budget.timeSeconds', 'kernelstitch.budget.iterations', 'kernelstitch.budget.tokens',
      'kernelstitch.watch.onSave', 'kernelstitch.search.enabled', 'kernelstitch.search.variants',
      'kernelstitch.search.timeSeconds', 'kernelstitch.precision',
    ]);
  });

  it('refuses an API key pasted where the variable name belongs, without echoing it', () => {
    const key = 'sk-proj-abc123/xyz';
    const { settings, problems } = toServerSettings(reader({ 'llm.apiKeyEnv': key }));
    assert.equal(settings.llm.apiKeyEnv, 'OPENAI_API_KEY');
    assert.equal(problems.length, 1);
    assert.ok(!problems[0].includes(key));
  });
});

describe('needsRestart', () => {
  it('restarts for the interpreter and the server command only', () => {
    assert.equal(needsRestart((s) => s === 'kernelstitch.python'), true);
    assert.equal(needsRestart((s) => s === 'kernelstitch.server.command'), true);
    assert.equal(needsRestart((s) => s === 'kernelstitch.llm.model'), false);
  });
});

describe('package.json configuration', () => {
  const properties = readManifest().contributes.configuration.properties;
  const fromManifest = (key: string): unknown => properties[`kernelstitch.${key}`]?.default;

  it('declares the defaults the server is sent', () => {
    assert.deepEqual(toServerSettings(fromManifest).settings, DEFAULT_SERVER_SETTINGS);
  });

  it('describes every setting and has no undocumented extras', () => {
    const expected = [
      'kernelstitch.llm.baseUrl', 'kernelstitch.llm.model', 'kernelstitch.llm.apiKeyEnv',
      'kernelstitch.llm.timeoutSeconds', 'kernelstitch.coder', 'kernelstitch.gpu.device',
      'kernelstitch.budget.timeSeconds', 'kernelstitch.budget.iterations', 'kernelstitch.budget.tokens',
      'kernelstitch.profilers', 'kernelstitch.watch.onSave', 'kernelstitch.search.enabled',
      'kernelstitch.search.variants', 'kernelstitch.search.timeSeconds', 'kernelstitch.precision',
      ...RESTART_SETTINGS,
      'kernelstitch.trace.server', 'kernelstitch.server.pipInstallArgs',
    ];
    assert.deepEqual(Object.keys(properties).sort(), expected.sort());
    for (const [key, property] of Object.entries(properties)) {
      assert.ok(property.description ?? property.markdownDescription, `${key} has no description`);
      assert.notEqual(property.default, undefined, `${key} has no default`);
    }
    assert.deepEqual(properties['kernelstitch.trace.server'].enum, ['off', 'messages', 'verbose']);
    assert.deepEqual(properties['kernelstitch.coder'].enum, ['builtin', 'llm']);
  });
});
