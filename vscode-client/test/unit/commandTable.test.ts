import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  CLIENT_COMMANDS,
  MODULE_COMMANDS,
  SERVER_COMMANDS,
  cancelArguments,
  explicitCancelTarget,
  explicitModuleTarget,
  moduleCommandArguments,
} from '../../src/core/commandTable';
import { EXTENSION_ROOT, readManifest } from '../support/manifest';

describe('command arguments', () => {
  it('sends [uri, moduleName] to the module commands', () => {
    assert.deepEqual(moduleCommandArguments('file:///w/a.py', 'Model'), ['file:///w/a.py', 'Model']);
  });

  it('sends [jobId] or [uri, moduleName] to kernelstitch.cancel', () => {
    assert.deepEqual(cancelArguments({ jobId: 'j7' }), ['j7']);
    assert.deepEqual(cancelArguments({ uri: 'file:///w/a.py', module: 'Model' }), ['file:///w/a.py', 'Model']);
  });

  it('takes explicit targets only when they are well-formed', () => {
    assert.deepEqual(explicitModuleTarget(['file:///a.py', 'M']), { uri: 'file:///a.py', module: 'M' });
    assert.equal(explicitModuleTarget([]), undefined);
    assert.equal(explicitModuleTarget([{ path: '/a.py' }, 'M']), undefined); // e.g. a Uri from a menu
    assert.equal(explicitModuleTarget(['file:///a.py', '']), undefined);
    assert.deepEqual(explicitCancelTarget(['job-1']), { jobId: 'job-1' });
    assert.deepEqual(explicitCancelTarget(['file:///a.py', 'M']), { uri: 'file:///a.py', module: 'M' });
    assert.equal(explicitCancelTarget([42]), undefined);
  });
});

describe('package.json commands', () => {
  const manifest = readManifest();
  const contributed = manifest.contributes.commands.map((c) => c.command);
  const clientIds = [...MODULE_COMMANDS.map((c) => c.id), ...Object.values(CLIENT_COMMANDS)];

  it('contributes exactly the commands the extension registers', () => {
    assert.deepEqual([...contributed].sort(), [...clientIds].sort());
  });

  it('titles the module commands as the table does, under the KernelStitch category', () => {
    for (const command of MODULE_COMMANDS) {
      const entry = manifest.contributes.commands.find((c) => c.command === command.id);
      assert.equal(entry?.title, command.title);
    }
    assert.ok(manifest.contributes.commands.every((c) => c.category === 'KernelStitch'));
    const titles = manifest.contributes.commands.map((c) => c.title);
    assert.ok(titles.includes('Restart Server') && titles.includes('Show Logs'));
  });

  it('never reuses a server command ID (vscode-languageclient registers those itself)', () => {
    const serverIds = new Set<string>(Object.values(SERVER_COMMANDS));
    assert.deepEqual(clientIds.filter((id) => serverIds.has(id)), []);
  });

  it('puts the module commands and Cancel job in the Python editor context menu', () => {
    const menu = manifest.contributes.menus['editor/context'];
    for (const id of [...MODULE_COMMANDS.map((c) => c.id), CLIENT_COMMANDS.cancelJob]) {
      const entry = menu.find((m) => m.command === id);
      assert.ok(entry, `${id} missing from editor/context`);
      assert.match(entry.when ?? '', /editorLangId == python/);
    }
    const palette = manifest.contributes.menus.commandPalette;
    assert.match(palette.find((m) => m.command === CLIENT_COMMANDS.cancelJob)?.when ?? '', /kernelstitch\.jobRunning/);
  });
});

describe('server contract', () => {
  // The server's own list, where this checkout has it: the two sides must agree on the names.
  const actions = path.join(EXTENSION_ROOT, '..', 'server', 'actions.py');

  it('uses the command names of server/actions.py', function () {
    if (!fs.existsSync(actions)) {
      this.skip();
    }
    const source = fs.readFileSync(actions, 'utf8');
    const declared = new Set([...source.matchAll(/^CMD_\w+\s*=\s*"([^"]+)"/gm)].map((m) => m[1]));
    for (const name of Object.values(SERVER_COMMANDS)) {
      assert.ok(declared.has(name), `${name} is not declared in server/actions.py`);
    }
  });
});
