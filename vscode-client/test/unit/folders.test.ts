/** Which server serves a document in a multi-root workspace, and what each server selects. */
import * as assert from 'node:assert/strict';
import { Folder, SHARED_KEY, documentSelector, folderOf, pathOfUri, serverKeyFor } from '../../src/core/folders';

const A: Folder = { uri: 'file:///w/a', fsPath: '/w/a', name: 'a' };
const AB: Folder = { uri: 'file:///w/a/b', fsPath: '/w/a/b', name: 'b' };
const C: Folder = { uri: 'file:///w/c%20d', fsPath: '/w/c d', name: 'c d' };

describe('workspace folders', () => {
  it('finds the innermost folder of files and notebook cells', () => {
    assert.equal(folderOf('file:///w/a/m.py', [A, AB, C]), A);
    assert.equal(folderOf('file:///w/a/b/deep/m.py', [A, AB, C]), AB);
    assert.equal(folderOf('file:///w/c%20d/m.py', [A, AB, C]), C);
    assert.equal(folderOf('vscode-notebook-cell:/w/c%20d/nb.ipynb#W0sZmlsZQ%3D%3D', [A, AB, C]), C);
    assert.equal(folderOf('file:///w/ab/m.py', [A, AB, C]), undefined); // a prefix, not a parent
    assert.equal(folderOf('untitled:Untitled-1', [A, AB, C]), undefined);
  });

  it('gives each folder its own server only when there are several', () => {
    assert.equal(serverKeyFor('file:///w/a/m.py', [A]), SHARED_KEY);
    assert.equal(serverKeyFor('file:///w/a/m.py', [A, C]), A.uri);
    assert.equal(serverKeyFor('file:///elsewhere/m.py', [A, C]), SHARED_KEY);
    assert.equal(serverKeyFor('untitled:Untitled-1', [A, C]), SHARED_KEY);
  });

  it('selects python files, unsaved editors and notebook cells', () => {
    assert.deepEqual(documentSelector(A, 1), [
      { scheme: 'file', language: 'python' }, { scheme: 'untitled', language: 'python' },
      { scheme: 'vscode-notebook-cell', language: 'python' }]);
    assert.deepEqual(documentSelector(undefined, 0), documentSelector(A, 1));
    assert.deepEqual(documentSelector(C, 2), [
      { scheme: 'file', language: 'python', pattern: '/w/c d/**/*' },
      { scheme: 'vscode-notebook-cell', language: 'python', pattern: '/w/c d/**/*' }]);
    assert.deepEqual(documentSelector({ ...A, fsPath: '/w/[x]' }, 2)[0].pattern, '/w/[[]x[]]/**/*');
    assert.deepEqual(documentSelector(undefined, 2), [{ scheme: 'untitled', language: 'python' }]);
  });

  it('reads paths only from file and notebook-cell URIs', () => {
    assert.equal(pathOfUri('file:///w/x%23y.py'), '/w/x#y.py');
    assert.equal(pathOfUri('https://example.test/w.py'), undefined);
    assert.equal(pathOfUri('not a uri'), undefined);
  });
});
