import * as assert from 'node:assert/strict';
import { LaunchInputs, chooseServerLaunch, commandOverride, expandVariables } from '../../src/core/launch';

const VARIABLES = { workspaceFolder: '/work/proj', userHome: '/home/ada', env: { VENV: '/opt/venv' } };

function launch(inputs: Partial<LaunchInputs>) {
  return chooseServerLaunch({ serverCommand: [], pythonSetting: '', variables: VARIABLES, ...inputs });
}

describe('chooseServerLaunch', () => {
  it('defaults to python3 -m kernelstitch.server', () => {
    assert.deepEqual(launch({}), { command: 'python3', args: ['-m', 'kernelstitch.server'], source: 'the default interpreter' });
  });

  it('prefers the Python extension\'s interpreter over the kernelstitch.python setting', () => {
    const result = launch({ pythonFromExtension: '/work/proj/.venv/bin/python', pythonSetting: '/usr/bin/python3.12' });
    assert.deepEqual([result.command, ...result.args], ['/work/proj/.venv/bin/python', '-m', 'kernelstitch.server']);
    assert.match(result.source, /Python extension/);
  });

  it('uses the kernelstitch.python setting, with variables expanded, without the Python extension', () => {
    const result = launch({ pythonSetting: '${workspaceFolder}/.venv/bin/python' });
    assert.deepEqual([result.command, ...result.args], ['/work/proj/.venv/bin/python', '-m', 'kernelstitch.server']);
    assert.equal(result.source, 'setting kernelstitch.python');
  });

  it('lets kernelstitch.server.command override everything', () => {
    const result = launch({
      serverCommand: ['${env:VENV}/bin/kernelstitch', 'serve', '--log', '~/ks.log'],
      pythonFromExtension: '/x/python',
      pythonSetting: '/y/python',
    });
    assert.deepEqual([result.command, ...result.args], ['/opt/venv/bin/kernelstitch', 'serve', '--log', '/home/ada/ks.log']); // no shell: ~ is expanded here
    assert.equal(result.source, 'setting kernelstitch.server.command');
  });

  it('ignores an unusable server command and a blank interpreter setting', () => {
    assert.equal(launch({ serverCommand: [''], pythonSetting: '   ' }).command, 'python3');
    assert.equal(launch({ serverCommand: 'python -m kernelstitch.server' }).command, 'python3');
    assert.equal(launch({ serverCommand: ['python', 3] }).command, 'python3');
  });
});

describe('commandOverride', () => {
  it('accepts only a non-empty list of strings', () => {
    assert.deepEqual(commandOverride(['py', '-m', 'x']), ['py', '-m', 'x']);
    assert.equal(commandOverride([]), undefined);
    assert.equal(commandOverride(undefined), undefined);
  });
});

describe('expandVariables', () => {
  it('expands the workspace folder, home, environment variables and a leading ~', () => {
    assert.equal(expandVariables('${workspaceFolder}/a:${userHome}/b:${env:VENV}:${env:NOPE}', VARIABLES),
      '/work/proj/a:/home/ada/b:/opt/venv:');
    assert.equal(expandVariables('~/venv/bin/python', VARIABLES), '/home/ada/venv/bin/python');
    assert.equal(expandVariables('/a/~b', VARIABLES), '/a/~b');
  });

  it('leaves ${workspaceFolder} visible when no folder is open', () => {
    assert.equal(expandVariables('${workspaceFolder}/py', { ...VARIABLES, workspaceFolder: undefined }),
      '${workspaceFolder}/py');
  });
});
