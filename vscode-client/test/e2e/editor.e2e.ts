/**
 * What a user sees of the extension in a real VS Code (code-server), from a first run with an
 * interpreter that lacks kernelstitch to a generated file: the failed start's message and its
 * buttons, the offered install, the missing-inputs hint, hover, code actions, Add example
 * inputs, Generate with its status bar stages and the generated file opened, and cancel.
 *
 * The interpreter is a fresh venv that sees the repository venv's packages (torch, pygls...)
 * through a .pth line but not kernelstitch itself, so "Install kernelstitch[server]" runs a
 * real `pip install` into it (of this checkout, without downloads) and Generate can then run.
 */
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ARTIFACTS, CodeServer, EXTENSION_ROOT, REPO_ROOT, Workbench, sleep } from './workbench';

const MODULE = `import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x):
        return torch.relu(self.fc(x)) * 2.0
`;
const CLASS_LINE = 5; // 1-based, for Go to Line

/** A notebook whose one Python cell holds a module without example inputs. */
const NOTEBOOK = JSON.stringify({
  cells: [{
    cell_type: 'code', execution_count: null, metadata: {}, outputs: [],
    source: ['import torch\n', 'from torch import nn\n', '\n', '\n', 'class Cell(nn.Module):\n',
      '    def forward(self, x):\n', '        return torch.tanh(x)\n'],
  }],
  metadata: { kernelspec: { display_name: 'Python 3', language: 'python', name: 'python3' },
    language_info: { name: 'python' } },
  nbformat: 4, nbformat_minor: 5,
});

function python(venv: string): string {
  return path.join(venv, 'bin', 'python');
}

function purelib(pythonPath: string): string {
  return execFileSync(pythonPath, ['-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
    { encoding: 'utf8' }).trim();
}

/**
 * A venv that imports the repository venv's packages (pip, setuptools, torch, pygls...) through
 * a .pth line, but not kernelstitch: that venv's editable install is a .pth of its own, which
 * Python reads only in a site directory.
 */
function bareVenv(root: string): string {
  const repoPython = python(path.join(REPO_ROOT, '.venv'));
  assert.ok(fs.existsSync(repoPython), `${repoPython} missing: run make install first`);
  const venv = path.join(root, 'bare-venv');
  execFileSync(repoPython, ['-m', 'venv', '--without-pip', venv], { stdio: 'pipe', timeout: 120_000 });
  fs.writeFileSync(path.join(purelib(python(venv)), 'kernelstitch_e2e_deps.pth'), `${purelib(repoPython)}\n`);
  const probe = execFileSync(python(venv), ['-c',
    'import importlib.util as u; print(u.find_spec("kernelstitch") is None, u.find_spec("pygls") is not None)'],
  { cwd: root, encoding: 'utf8' }).trim();
  assert.equal(probe, 'True True', 'the bare venv must lack kernelstitch and see pygls');
  return venv;
}

describe('KernelStitch in code-server', function () {
  this.timeout(10 * 60_000);
  let root: string;
  let workspace: string;
  let venv: string;
  let server: CodeServer;
  let bench: Workbench;
  let settings: Record<string, unknown>;
  const file = (): string => path.join(workspace, 'model.py');

  before(async () => {
    const t0 = Date.now();
    const lap = (what: string): void => console.log(`      [${((Date.now() - t0) / 1000).toFixed(1)} s] ${what}`);
    fs.rmSync(ARTIFACTS, { recursive: true, force: true });
    fs.mkdirSync(ARTIFACTS, { recursive: true });
    root = fs.mkdtempSync(path.join(os.tmpdir(), 'kernelstitch-e2e-'));
    workspace = path.join(root, 'workspace');
    fs.mkdirSync(workspace);
    fs.writeFileSync(file(), MODULE);
    fs.writeFileSync(path.join(workspace, 'cells.ipynb'), NOTEBOOK);
    venv = bareVenv(root);
    lap('venv made');
    const vsix = path.join(root, 'kernelstitch.vsix');
    execFileSync(process.execPath, [require.resolve('@vscode/vsce/vsce'), 'package', '--no-dependencies', '--out', vsix],
      { cwd: EXTENSION_ROOT, stdio: 'pipe', timeout: 150_000 });
    lap('.vsix packaged');
    settings = {
        'security.workspace.trust.enabled': false,
        'workbench.startupEditor': 'none',
        'workbench.tips.enabled': false,
        'workbench.secondarySideBar.defaultVisibility': 'hidden',
        'chat.disableAIFeatures': true,
        'extensions.autoCheckUpdates': false,
        'extensions.autoUpdate': false,
        'telemetry.telemetryLevel': 'off',
        'editor.hover.delay': 100,
        'kernelstitch.python': python(venv),
        // This checkout, editable, without downloads: the venv already sees its dependencies.
        'kernelstitch.server.pipInstallArgs': ['--no-deps', '--no-build-isolation', '-e', REPO_ROOT],
        'kernelstitch.search.enabled': false,
        'kernelstitch.trace.server': 'verbose',
    };
    server = new CodeServer({
      root,
      vsix,
      settings,
      env: { KERNELSTITCH_CPU_NVCC: '0' }, // no nvcc compile of the kernels: minutes on 2 cores
    });
    await server.start();
    lap('code-server started');
    bench = await Workbench.open(`http://127.0.0.1:${server.port}/?folder=${encodeURIComponent(workspace)}`);
    lap('workbench open');
  });

  afterEach(async function () {
    if (this.currentTest?.state === 'failed' && bench) {
      await bench.screenshot(`failed-${this.currentTest.title.slice(0, 40).replace(/[^a-z0-9]+/gi, '-')}`);
    }
  });

  after(async () => {
    await bench?.close();
    await server?.stop();
    if (root) {
      // The extension's output channel (client, server, LSP trace) and VS Code's own logs.
      fs.cpSync(path.join(root, 'user-data', 'logs'), path.join(ARTIFACTS, 'logs'), { recursive: true, force: true });
      fs.rmSync(root, { recursive: true, force: true });
    }
  });

  it('explains a failed start with the command to run and Install / Select Interpreter buttons', async () => {
    await bench.openFromExplorer('model.py');
    const message = await bench.waitForNotification(/server cannot start/, 60_000);
    await bench.screenshot('failed-start');
    assert.match(message, /has no kernelstitch package/);
    assert.ok(message.includes(`${python(venv)} -m kernelstitch.server`), message);
    assert.ok(message.includes(`${python(venv)} -m pip install --no-deps --no-build-isolation -e ${REPO_ROOT}`), message);
    const buttons = await bench.notificationButtons(/server cannot start/);
    assert.deepEqual(buttons.slice(0, 2), ['Install kernelstitch[server]', 'Select Interpreter']);
  });

  it('installs kernelstitch[server] into that interpreter and starts the server', async () => {
    await bench.clickNotificationButton(/server cannot start/, 'Install kernelstitch[server]');
    await bench.waitForNotification(/kernelstitch\[server\] is installed/, 180_000);
    const probe = execFileSync(python(venv), ['-c', 'import kernelstitch.server; print("ok")'],
      { cwd: root, encoding: 'utf8' }).trim();
    assert.equal(probe, 'ok');
    // The server now runs: the module without example inputs gets its hint.
    await bench.runCommand('View: Focus Problems');
    const problems = await bench.until('the missing-inputs hint in Problems', async () =>
      (await bench.problems()).find((row) => row.includes('Model has no example inputs')), 60_000);
    assert.match(problems, /Add example inputs/);
    await bench.screenshot('installed-hint-in-problems');
  });

  it('shows the module hover', async () => {
    await bench.focusEditor();
    await bench.goTo(CLASS_LINE, 8);
    const hover = await bench.hoverText(/No example inputs yet/);
    await bench.screenshot('hover');
    assert.match(hover, /Model has no example inputs/); // the hint's diagnostic, in the same hover
    await bench.press('Escape');
  });

  it('offers Add example inputs, which writes shapes from the layers', async () => {
    await bench.goTo(CLASS_LINE, 8);
    const actions = await bench.codeActions();
    await bench.screenshot('code-actions-no-inputs');
    assert.ok(actions.some((a) => a.includes('Add example inputs')), actions.join(' | '));
    assert.ok(!actions.some((a) => a.includes('Generate CUDA implementation')), actions.join(' | '));
    await bench.pickCodeAction('Add example inputs');
    await bench.until('the scaffold in the editor', () => bench.page.$eval('.part.editor .monaco-editor .view-lines',
      (lines) => (lines.textContent ?? '').replace(/\u00a0/g, ' ').includes('def get_inputs')));
    await bench.press('Control+s');
    const saved = await bench.until('the saved scaffold', () => {
      const text = fs.readFileSync(file(), 'utf8');
      return Promise.resolve(text.includes('def get_inputs') ? text : undefined);
    });
    await bench.screenshot('scaffold-applied');
    assert.match(saved, /torch\.randn\(batch, 64\),\s+# x: what self\.fc \(nn\.Linear\(64, 64\)\) takes/);
  });

  it('generates: stages in the status bar, then the generated file opens', async () => {
    await bench.dismissNotifications();
    await bench.goTo(CLASS_LINE, 8);
    const actions = await bench.until('Generate among the code actions', async () => {
      const titles = await bench.codeActions();
      if (!titles.some((a) => a.includes('Generate CUDA implementation'))) {
        await bench.press('Escape');
        return undefined;
      }
      return titles;
    });
    assert.ok(!actions.some((a) => a.includes('Add example inputs')), actions.join(' | '));
    await bench.pickCodeAction('Generate CUDA implementation');
    const seen = new Set<string>();
    let shot = false;
    const ended = await bench.until('the generate job to end', async () => {
      for (const item of await bench.statusBar()) {
        if (/Model: /.test(item)) {
          seen.add(item);
          if (!shot) {
            shot = true;
            await bench.screenshot('generate-status-bar');
          }
        }
      }
      return (await bench.notifications()).find((text) => /Model \(generate\)/.test(text));
    }, 240_000, 100);
    assert.ok(seen.size > 0, 'no status bar item for the job');
    assert.ok([...seen].some((text) => /Model: (queued|capture|plan|code|compil|verif|run)/i.test(text)),
      [...seen].join(' | '));
    assert.doesNotMatch(ended, /failed/, ended);
    await bench.until('model_new.py to open', async () => (await bench.tabs()).includes('model_new.py'), 30_000);
    await bench.screenshot('generated-file-opened');
    const generated = path.join(workspace, '.kernelstitch', 'model', 'Model', 'model_new.py');
    assert.ok(fs.existsSync(generated), `${generated} missing`);
    assert.match(fs.readFileSync(generated, 'utf8'), /class ModelNew\(/);
  });

  it('cancels a running job from its status bar item', async () => {
    await bench.dismissNotifications();
    // A module whose example inputs take minutes to make: without a GPU (and without nvcc) a job
    // ends within a second or two, before a click can land (it did on CI).  The sleep runs in the
    // job's worker, which the cancel must stop.
    const slow = fs.readFileSync(file(), 'utf8').replace('def get_inputs():\n',
      'def get_inputs():\n    import time\n    time.sleep(600)\n');
    assert.match(slow, /time\.sleep\(600\)/);
    fs.writeFileSync(path.join(workspace, 'cancel_me.py'), slow);
    await bench.openFromExplorer('cancel_me.py');
    await bench.goTo(CLASS_LINE, 8);
    await bench.runCommand('KernelStitch: Generate CUDA implementation');
    const item = await bench.until('the job in the status bar', async () => {
      for (const element of await bench.page.$$('#workbench\\.parts\\.statusbar .statusbar-item')) {
        if (/Model: /.test(await element.evaluate((e) => e.textContent ?? ''))) {
          return element;
        }
      }
      return undefined;
    }, 30_000, 50);
    await item.click();
    const message = await bench.waitForNotification(/Model \(generate\)/, 60_000);
    await bench.screenshot('cancelled');
    assert.match(message, /cancelled/);
    await sleep(500);
    assert.ok(!(await bench.statusBar()).some((text) => /Model: /.test(text)), 'the job stays in the status bar');
  });

  it('serves Python notebook cells: the hint and Add example inputs', async () => {
    await bench.dismissNotifications();
    await bench.openFromExplorer('cells.ipynb', false);
    await bench.runCommand('View: Focus Problems');
    await bench.until('the hint on the notebook cell', async () =>
      (await bench.problems()).find((row) => row.includes('Cell has no example inputs')), 60_000);
    await bench.screenshot('notebook-cell-hint');
    // The light bulb of the cell offers the scaffold (and no job: no .py file to read).
    await bench.page.click('.notebook-editor .cell-editor-container .monaco-editor .view-lines');
    await bench.goTo(5, 8);
    const actions = await bench.codeActions();
    await bench.screenshot('notebook-cell-actions');
    assert.ok(actions.some((a) => a.includes('Add example inputs')), actions.join(' | '));
    assert.ok(!actions.some((a) => a.includes('Generate')), actions.join(' | '));
    await bench.press('Escape');
  });

  it('reports a server command that exits before it starts, with its exit status and last words', async () => {
    await bench.dismissNotifications();
    settings['kernelstitch.server.command'] = [python(venv), '-c',
      'import sys; sys.stderr.write("e2e: this server refuses to start\\n"); sys.exit(3)'];
    server.writeSettings(settings); // a launch setting: the extension restarts the server
    const message = await bench.waitForNotification(/did not start with/, 60_000);
    await bench.screenshot('server-exits-at-start');
    assert.match(message, /\(exit status 3\): e2e: this server refuses to start/);
    assert.deepEqual((await bench.notificationButtons(/did not start with/)).slice(0, 2), ['Show Logs', 'Select Interpreter']);
    await sleep(1000);
    const others = (await bench.notifications()).filter((text) => !/did not start with/.test(text));
    assert.deepEqual(others, [], 'vscode-languageclient\'s own messages about the failed start');
  });

  it('starts one server per folder of a multi-root workspace, each with its folder\'s interpreter', async () => {
    delete settings['kernelstitch.server.command'];
    server.writeSettings(settings);
    fs.writeFileSync(path.join(workspace, 'first.py'), MODULE.replace(/Model/g, 'First'));
    const second = path.join(root, 'second');
    fs.mkdirSync(path.join(second, '.vscode'), { recursive: true });
    fs.writeFileSync(path.join(second, 'other.py'), MODULE.replace(/Model/g, 'Other'));
    fs.writeFileSync(path.join(second, '.vscode', 'settings.json'),
      JSON.stringify({ 'kernelstitch.python': '/nonexistent/bin/python3' }));
    const workspaceFile = path.join(root, 'two.code-workspace');
    fs.writeFileSync(workspaceFile, JSON.stringify({ folders: [{ path: workspace }, { path: second }] }));
    await bench.close();
    bench = await Workbench.open(`http://127.0.0.1:${server.port}/?workspace=${encodeURIComponent(workspaceFile)}`);
    await bench.untilFoldersShown();

    await bench.openFromExplorer('first.py');
    await bench.runCommand('View: Focus Problems');
    await bench.until('the first folder\'s hint', async () =>
      (await bench.problems()).find((row) => row.includes('First has no example inputs')), 60_000);
    const rootRow = await bench.until('the second folder in the Explorer', () =>
      bench.page.$('.explorer-folders-view .monaco-list-row[aria-label^="second"]'));
    if ((await rootRow.evaluate((row) => row.getAttribute('aria-expanded'))) !== 'true') {
      await rootRow.click();
    }
    await bench.openFromExplorer('other.py');
    const message = await bench.waitForNotification(/server cannot start/, 60_000);
    await bench.screenshot('multi-root-second-folder-interpreter');
    assert.match(message, /the interpreter "\/nonexistent\/bin\/python3" does not exist/);
    assert.ok(!(await bench.problems()).some((row) => row.includes('Other has no example inputs')));
    // The first folder's server runs on: back in first.py (the preview tab closed it), its hint.
    await bench.dismissNotifications();
    await bench.openFromExplorer('first.py');
    await bench.until('the first folder\'s hint again', async () =>
      (await bench.problems()).find((row) => row.includes('First has no example inputs')), 30_000);
    assert.deepEqual(await bench.notifications(), []);
  });
});
