/**
 * The editor wiring with a recording `vscode`: a palette command reaches the server with the
 * module at the cursor, the reply and the jobStatus notifications drive the status bar, and a
 * click on it cancels the job.
 */
import { FakeStatusBarItem, fake, pythonEditor } from '../support/fakeVscode'; // first: installs the fake
import * as assert from 'node:assert/strict';
import type * as vscode from 'vscode';
import { CLIENT_COMMANDS, JOB_RUNNING_CONTEXT, MODULE_COMMANDS } from '../../src/core/commandTable';
import { JobStatusBar } from '../../src/editor/jobStatusBar';
import { registerModuleCommands } from '../../src/editor/moduleCommands';
import type { ServerController } from '../../src/editor/serverController';

const TEXT = `import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x  # line 4

def get_inputs():
    return []  # line 7

class Other(nn.Module):
    def forward(self, x):
        return x  # line 11
`;
const URI = 'file:///w/model.py';

/** A server that records the commands it is sent and answers with `reply`. */
class FakeServer {
  calls: [string, unknown[]][] = [];
  reply: (command: string, args: unknown[]) => unknown = () => ({});
  executeCommand(command: string, args: unknown[]): Promise<unknown> {
    this.calls.push([command, args]);
    return Promise.resolve().then(() => this.reply(command, args));
  }
}

const log = { info() {}, warn() {}, error() {}, show() {} } as unknown as vscode.LogOutputChannel;

describe('editor commands', () => {
  let server: FakeServer;
  let jobs: JobStatusBar;
  let item: FakeStatusBarItem;

  beforeEach(() => {
    fake.reset();
    server = new FakeServer();
    jobs = new JobStatusBar(log);
    item = fake.statusBarItems[0];
    registerModuleCommands(server as unknown as ServerController, jobs, log);
  });

  function runningContext(): unknown {
    const calls = fake.executed.filter(([id, key]) => id === 'setContext' && key === JOB_RUNNING_CONTEXT);
    return calls[calls.length - 1]?.[2];
  }

  it('registers every module command and Cancel job', () => {
    for (const id of [...MODULE_COMMANDS.map((c) => c.id), CLIENT_COMMANDS.cancelJob]) {
      assert.ok(fake.commands.has(id), `${id} not registered`);
    }
  });

  it('generates for the module at the cursor and shows the job until it is done', async () => {
    fake.activeTextEditor = pythonEditor(TEXT, 11);
    server.reply = () => ({ jobId: 'j1', state: 'queued' });
    await fake.run('kernelstitch.generateAtCursor');

    assert.deepEqual(server.calls, [['kernelstitch.generate', [URI, 'Other']]]);
    assert.equal(item.visible, true);
    assert.equal(item.text, '$(clock) Other: queued');
    assert.deepEqual(item.command?.arguments, ['j1']);
    assert.equal(item.command?.command, CLIENT_COMMANDS.cancelJob);
    assert.equal(runningContext(), true);

    const click = item.command;
    jobs.onJobStatus({ jobId: 'j1', uri: URI, module: 'Other', kind: 'generate', stage: 'verify',
      message: 'checking', state: 'running', step: 3, total: 4 });
    assert.equal(item.text, '$(sync~spin) Other: verify (3/4)');
    // progress keeps the command object: VS Code re-registers a new one under a new id, and a
    // click on the item as rendered before the update would find no command
    assert.equal(item.command, click);

    jobs.onJobStatus({ jobId: 'j1', uri: URI, module: 'Other', stage: 'done', message: '', state: 'done' });
    assert.equal(item.visible, false);
    assert.equal(runningContext(), false);
    assert.deepEqual(fake.messages, []);
  });

  it('cancels the shown job when the status bar item is clicked', async () => {
    jobs.onJobStatus({ jobId: 'j9', uri: URI, module: 'Model', stage: 'code', message: '', state: 'running' });
    server.reply = () => ({ cancelled: true, jobId: 'j9' });
    const click = item.command;
    assert.ok(click);
    await fake.run(click.command, ...(click.arguments ?? []));
    assert.deepEqual(server.calls, [['kernelstitch.cancel', ['j9']]]);
  });

  it('asks which module when the cursor is outside every module class', async () => {
    fake.activeTextEditor = pythonEditor(TEXT, 7);
    fake.pick = () => 'Model';
    await fake.run('kernelstitch.profileAtCursor');
    assert.deepEqual(fake.quickPicks, [['Model', 'Other']]);
    assert.deepEqual(server.calls, [['kernelstitch.profile', [URI, 'Model']]]);
  });

  it('does nothing when the choice is dismissed', async () => {
    fake.activeTextEditor = pythonEditor(TEXT, 7);
    await fake.run('kernelstitch.verifyAtCursor');
    assert.deepEqual(server.calls, []);
    assert.equal(item.visible, false);
  });

  it('takes [uri, moduleName] arguments instead of the cursor', async () => {
    await fake.run('kernelstitch.addExampleInputsAtCursor', 'file:///w/other.py', 'Net');
    assert.deepEqual(server.calls, [['kernelstitch.addExampleInputs', ['file:///w/other.py', 'Net']]]);
  });

  it('runs no job on a notebook cell but adds its example inputs', async () => {
    const cell = 'vscode-notebook-cell:/w/nb.ipynb#W0sZmlsZQ%3D%3D';
    fake.activeTextEditor = pythonEditor(TEXT, 4, cell);
    await fake.run('kernelstitch.generateAtCursor');
    assert.deepEqual(server.calls, []);
    assert.match(fake.messages[0].text, /runs on a saved \.py file; jobs cannot read a notebook cell/);
    server.reply = () => ({ applied: true });
    await fake.run('kernelstitch.addExampleInputsAtCursor');
    assert.deepEqual(server.calls, [['kernelstitch.addExampleInputs', [cell, 'Model']]]);
  });

  it('explains instead of calling the server without a Python editor', async () => {
    await fake.run('kernelstitch.generateAtCursor');
    assert.deepEqual(server.calls, []);
    assert.match(fake.messages[0]?.text ?? '', /needs a Python file/);
  });

  it('leaves refusals to the server, which shows them, but shows edit and connection failures', async () => {
    fake.activeTextEditor = pythonEditor(TEXT, 4);
    server.reply = () => ({ error: 'Model has no example inputs' });
    await fake.run('kernelstitch.verifyAtCursor');
    assert.deepEqual(fake.messages, []);

    server.reply = () => ({ applied: false, error: 'Model not found, or the file does not parse' });
    await fake.run('kernelstitch.addExampleInputsAtCursor');
    assert.deepEqual(fake.messages.pop(), { level: 'error',
      text: 'KernelStitch: Add example inputs (Model): Model not found, or the file does not parse' });

    server.reply = () => {
      throw new Error('the server is not running');
    };
    await fake.run('kernelstitch.verifyAtCursor');
    assert.deepEqual(fake.messages.pop(), {
      level: 'error', text: 'KernelStitch: Verify generated implementation failed: the server is not running' });
  });

  it('cancels the job of the module at the cursor, or says that none runs', async () => {
    fake.activeTextEditor = pythonEditor(TEXT, 4);
    jobs.onJobStatus({ jobId: 'a', uri: URI, module: 'Model', stage: 'plan', message: '', state: 'running' });
    jobs.onJobStatus({ jobId: 'b', uri: URI, module: 'Other', stage: 'plan', message: '', state: 'running' });
    await fake.run(CLIENT_COMMANDS.cancelJob);
    assert.deepEqual(server.calls, [['kernelstitch.cancel', ['a']]]);

    jobs.clear();
    fake.activeTextEditor = pythonEditor(TEXT, 7);
    await fake.run(CLIENT_COMMANDS.cancelJob);
    assert.equal(server.calls.length, 1);
    assert.match(fake.messages.pop()?.text ?? '', /no job is running/);
  });

  it('ignores a malformed notification', () => {
    jobs.onJobStatus({ state: 'running' });
    assert.equal(item.visible, false);
  });
});
