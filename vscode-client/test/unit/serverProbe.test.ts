/** The interpreter check before a server start, and the pip command the extension offers. */
import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  PROBE_SCRIPT, failedStartMessage, interpretProbe, isKernelstitchProject, notStartableMessage, pipInstallArgs,
  shellLine,
} from '../../src/core/serverProbe';

const reply = (fields: Record<string, unknown>): string => JSON.stringify(
  { version: [3, 11, 2], executable: '/venv/bin/python', missing: [], pip: true, ...fields });

describe('interpreter probe', () => {
  it('accepts an interpreter with kernelstitch and its [server] extra', () => {
    assert.deepEqual(interpretProbe('python3', { exitCode: 0, stdout: reply({}), stderr: '' }),
      { ok: true, executable: '/venv/bin/python' });
  });

  it('says which package is missing, and whether pip can add it', () => {
    const none = interpretProbe('/venv/bin/python', { exitCode: 0, stdout: reply({ missing: ['kernelstitch.server', 'pygls'] }), stderr: '' });
    assert.deepEqual(none, { ok: false, problem: '/venv/bin/python has no kernelstitch package', installable: true });
    const extra = interpretProbe('py', { exitCode: 0, stdout: reply({ missing: ['pygls', 'watchdog'], pip: false }), stderr: '' });
    assert.deepEqual(extra, {
      ok: false, installable: false,
      problem: '/venv/bin/python has kernelstitch but not its [server] extra (missing: pygls, watchdog)',
    });
  });

  it('refuses an old Python, a missing interpreter, a non-Python and a hang', () => {
    const old = interpretProbe('py', { exitCode: 0, stdout: reply({ version: [3, 8, 10] }), stderr: '' });
    assert.equal(old.ok, false);
    assert.match(!old.ok ? old.problem : '', /is Python 3\.8; KernelStitch needs Python 3\.10 or newer/);
    const absent = interpretProbe('/nope/python', { spawnError: { code: 'ENOENT', message: 'spawn ENOENT' }, exitCode: null, stdout: '', stderr: '' });
    assert.deepEqual(absent, { ok: false, problem: 'the interpreter "/nope/python" does not exist (or is not on PATH)', installable: false });
    const python2 = interpretProbe('python2', { exitCode: 1, stdout: '', stderr: '  File "<string>", line 1\nSyntaxError: invalid syntax\n' });
    assert.match(!python2.ok ? python2.problem : '', /"python2" does not run as a Python 3 interpreter \(SyntaxError: invalid syntax\)/);
    const hang = interpretProbe('py', { exitCode: null, stdout: '', stderr: '', timedOut: true });
    assert.match(!hang.ok ? hang.problem : '', /did not answer/);
  });

  it('runs in a real interpreter and reports what it lacks', function () {
    const run = spawnSync('python3', ['-I', '-c', PROBE_SCRIPT], { encoding: 'utf8', timeout: 20_000 });
    if (run.error) {
      this.skip(); // no python3 on this machine
    }
    const parsed = JSON.parse(run.stdout) as { version: number[]; missing: string[]; pip: boolean };
    assert.equal(parsed.version[0], 3);
    const verdict = interpretProbe('python3', { exitCode: run.status, stdout: run.stdout, stderr: run.stderr });
    assert.equal(verdict.ok, parsed.missing.length === 0);
    // -I keeps the repository's folders off sys.path: only an installed kernelstitch counts.
    assert.ok(parsed.missing.every((m) => ['kernelstitch.server', 'pygls', 'lsprotocol', 'watchdog'].includes(m)));
  });
});

describe('install command', () => {
  it('uses the setting, else this checkout (editable), else kernelstitch[server]', () => {
    assert.deepEqual(pipInstallArgs(['--no-deps', '/src/ks[server]']), ['--no-deps', '/src/ks[server]']);
    assert.deepEqual(pipInstallArgs([], '/src/ks'), ['-e', '/src/ks[server]']);
    assert.deepEqual(pipInstallArgs(['', 'x']), ['kernelstitch[server]']); // an empty part: not usable
    assert.deepEqual(pipInstallArgs('kernelstitch'), ['kernelstitch[server]']);
  });

  it('recognises the kernelstitch checkout by its pyproject.toml', () => {
    const own = fs.readFileSync(path.resolve(__dirname, '..', '..', '..', '..', 'pyproject.toml'), 'utf8');
    assert.equal(isKernelstitchProject(own), true);
    assert.equal(isKernelstitchProject('[project]\nname = "other"\n[tool.x]\nname = "kernelstitch"\n'), false);
    assert.equal(isKernelstitchProject('[tool.poetry]\nname = "kernelstitch"\n'), false);
  });

  it('quotes what a shell would split and names the command in the messages', () => {
    assert.equal(shellLine('/my env/python', ['-m', 'pip', 'install', 'kernelstitch[server]']),
      "'/my env/python' -m pip install 'kernelstitch[server]'");
    assert.equal(notStartableMessage('/v/python has no kernelstitch package', '/v/python -m kernelstitch.server',
      "/v/python -m pip install 'kernelstitch[server]'"),
    'KernelStitch: the server cannot start: /v/python has no kernelstitch package, so "/v/python -m '
      + 'kernelstitch.server" would fail. Install it with: /v/python -m pip install \'kernelstitch[server]\'');
    assert.equal(failedStartMessage('srv --stdio', 3, 'Traceback...\nImportError: no module x\n'),
      'KernelStitch: the server did not start with "srv --stdio" (exit status 3): ImportError: no module x. '
      + 'Is kernelstitch[server] installed for that interpreter?');
  });
});
