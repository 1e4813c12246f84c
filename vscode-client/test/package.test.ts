/**
 * Packages the extension with vsce, as a release would, and checks what a user would install:
 * the manifest VS Code reads, and a bundle that loads without node_modules.
 */
import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import Module from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';
import { EXTENSION_ROOT, Manifest } from './support/manifest';
import { readZip } from './support/zip';

function vsceBin(): string {
  const packageJson = require.resolve('@vscode/vsce/package.json', { paths: [EXTENSION_ROOT] });
  const { bin } = JSON.parse(fs.readFileSync(packageJson, 'utf8')) as { bin: { vsce: string } };
  return path.join(path.dirname(packageJson), bin.vsce);
}

/** Loads a CommonJS file with `require('vscode')` answered by a stub, as no VS Code runs here. */
function loadWithVscodeStub(file: string): Record<string, unknown> {
  // Any property is a callable, constructible stub: enough for module-level code to run.
  const stub: object = new Proxy(function stubbed() {}, {
    get: (_target, property) => (property === Symbol.toPrimitive ? () => '' : stub),
    apply: () => stub,
    construct: () => stub,
  });
  const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
  const originalLoad = loader._load;
  loader._load = (request: string, ...rest: unknown[]) => (request === 'vscode' ? stub : originalLoad(request, ...rest));
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require(file) as Record<string, unknown>;
  } finally {
    loader._load = originalLoad;
  }
}

describe('vsce package', function () {
  this.timeout(180_000);
  let workDir: string;
  let entries: Map<string, Buffer>;
  let manifest: Manifest;

  before(async () => {
    workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kernelstitch-vsix-'));
    const vsix = path.join(workDir, 'kernelstitch.vsix');
    execFileSync(process.execPath, [vsceBin(), 'package', '--no-dependencies', '--out', vsix],
      { cwd: EXTENSION_ROOT, stdio: 'pipe', timeout: 150_000 });
    entries = await readZip(vsix);
    const packageJson = entries.get('extension/package.json');
    assert.ok(packageJson, 'extension/package.json missing from the .vsix');
    manifest = JSON.parse(packageJson.toString('utf8')) as Manifest;
  });

  after(() => {
    fs.rmSync(workDir, { recursive: true, force: true });
  });

  it('has a manifest VS Code accepts', () => {
    assert.match(manifest.name, /^[a-z0-9][a-z0-9-]*$/);
    assert.ok(manifest.publisher);
    assert.match(manifest.engines.vscode, /^\^1\.\d+\.\d+$/);
    assert.ok(entries.has('extension.vsixmanifest'));
    assert.ok(manifest.contributes.commands.length >= 7);
    assert.ok(Object.keys(manifest.contributes.configuration.properties).length >= 12);
    assert.ok(manifest.activationEvents?.includes('onLanguage:python'));
  });

  it('contains the file `main` names, with README and LICENSE', () => {
    const main = `extension/${path.posix.normalize(manifest.main)}`;
    assert.ok(entries.has(main), `${main} (main) missing from the .vsix`);
    // vsce renames these (readme.md, LICENSE.txt): compare case-insensitively, any extension.
    const names = [...entries.keys()].map((name) => name.toLowerCase());
    for (const document of ['extension/readme.md', 'extension/license']) {
      assert.ok(names.some((name) => name.startsWith(document)), `${document} missing`);
    }
  });

  it('ships only the bundle and its documents, no sources, tests or node_modules', () => {
    const unexpected = [...entries.keys()].filter((name) =>
      /^extension\/(src|test|out|node_modules)\//.test(name) || name.endsWith('.ts') || name.endsWith('.map'));
    assert.deepEqual(unexpected, []);
  });

  it('has a self-contained bundle that exports activate and deactivate', () => {
    const bundle = entries.get(`extension/${path.posix.normalize(manifest.main)}`);
    assert.ok(bundle);
    const file = path.join(workDir, 'extension.js');
    fs.writeFileSync(file, bundle);
    const exported = loadWithVscodeStub(file);
    assert.equal(typeof exported.activate, 'function');
    assert.equal(typeof exported.deactivate, 'function');
    assert.doesNotMatch(bundle.toString('utf8'), /require\(["']vscode-languageclient/);
  });
});
