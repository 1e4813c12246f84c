import * as assert from 'node:assert/strict';
import { EnvironmentPath, PythonEnvironments, ResolvedEnvironment, activeInterpreter } from '../../src/core/pythonApi';

/** A stand-in for ms-python.python's exports.environments. */
function environments(active: EnvironmentPath | undefined,
                      resolve: (env: EnvironmentPath | string) => Promise<ResolvedEnvironment | undefined>,
                      seen: unknown[] = []): PythonEnvironments {
  return {
    getActiveEnvironmentPath: (resource?: unknown) => {
      seen.push(resource);
      return active;
    },
    resolveEnvironment: resolve,
  };
}

const VENV = { id: 'venv', path: '/w/.venv/bin/python' };

describe('activeInterpreter', () => {
  it('returns the executable of the resolved active environment, asked for the given folder', async () => {
    const seen: unknown[] = [];
    const envs = environments(VENV, (env) => {
      assert.deepEqual(env, VENV);
      return Promise.resolve({ executable: { uri: { fsPath: '/w/.venv/bin/python3.11' } }, version: { major: 3, minor: 11 } });
    }, seen);
    assert.deepEqual(await activeInterpreter(envs, 'folder-uri'), { path: '/w/.venv/bin/python3.11' });
    assert.deepEqual(seen, ['folder-uri']);
  });

  it('accepts an environment of unknown version', async () => {
    const envs = environments(VENV, () => Promise.resolve({ executable: { uri: { fsPath: '/p' } } }));
    assert.deepEqual(await activeInterpreter(envs), { path: '/p' });
  });

  it('rejects a Python older than 3.10, saying why', async () => {
    const envs = environments(VENV, () => Promise.resolve({ executable: { uri: { fsPath: '/old/python' } }, version: { major: 3, minor: 8 } }));
    const lookup = await activeInterpreter(envs);
    assert.ok('problem' in lookup);
    assert.match(lookup.problem, /Python 3\.8.*3\.10 or newer/);
  });

  it('reports no active environment, an unresolvable one, and one without an executable', async () => {
    const noActive = await activeInterpreter(environments(undefined, () => Promise.resolve(undefined)));
    assert.ok('problem' in noActive && /no active interpreter/.test(noActive.problem));
    const throws = await activeInterpreter(environments(VENV, () => Promise.reject(new Error('boom'))));
    assert.ok('problem' in throws && /boom/.test(throws.problem));
    const condaWithoutPython = await activeInterpreter(environments(VENV, () => Promise.resolve({ executable: {} })));
    assert.ok('problem' in condaWithoutPython && /no Python executable/.test(condaWithoutPython.problem));
  });
});
