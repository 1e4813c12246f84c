/** The README's settings table lists every setting of package.json, with its default. */
import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { EXTENSION_ROOT, readManifest } from '../support/manifest';

describe('README settings table', () => {
  it('has one row per setting, each with the default of package.json', () => {
    const readme = fs.readFileSync(path.join(EXTENSION_ROOT, 'README.md'), 'utf8');
    const rows = new Map<string, string>();
    for (const match of readme.matchAll(/^\| `(kernelstitch\.[\w.]+)` \| `([^`]*)` \|/gm)) {
      assert.ok(!rows.has(match[1]), `${match[1]} twice in the table`);
      rows.set(match[1], match[2]);
    }
    const properties = readManifest().contributes.configuration.properties;
    assert.deepEqual([...rows.keys()].sort(), Object.keys(properties).sort());
    for (const [key, property] of Object.entries(properties)) {
      assert.deepEqual(JSON.parse(rows.get(key) ?? 'null'), property.default, `${key}: README default`);
    }
  });
});
