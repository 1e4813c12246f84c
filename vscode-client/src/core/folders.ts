/**
 * Multi-root workspaces: each workspace folder gets its own server, started with that folder's
 * interpreter setting and working directory, serving the documents under it.  A workspace with
 * one folder (or none) keeps one server for every Python document.
 */

export interface Folder {
  /** The folder's URI as a string: the server's key. */
  uri: string;
  fsPath: string;
  name: string;
}

/** The key of the server for documents outside every folder, untitled ones, or a single root. */
export const SHARED_KEY = '';

/** The URI schemes served: files, unsaved editors and the cells of notebooks. */
export const NOTEBOOK_CELL_SCHEME = 'vscode-notebook-cell';

export interface DocumentFilter {
  scheme: string;
  language: string;
  pattern?: string;
}

/** The folder a document belongs to: the innermost folder whose path contains the document's. */
export function folderOf(documentUri: string, folders: readonly Folder[]): Folder | undefined {
  const docPath = pathOfUri(documentUri);
  if (docPath === undefined) {
    return undefined;
  }
  let best: Folder | undefined;
  for (const folder of folders) {
    const root = folder.fsPath.replace(/\/+$/, '');
    if ((docPath === root || docPath.startsWith(root + '/')) && (!best || root.length > best.fsPath.length)) {
      best = folder;
    }
  }
  return best;
}

/** Which server a document goes to: its folder's when there are several folders. */
export function serverKeyFor(documentUri: string, folders: readonly Folder[]): string {
  if (folders.length <= 1) {
    return SHARED_KEY;
  }
  return folderOf(documentUri, folders)?.uri ?? SHARED_KEY;
}

/**
 * The document selector of a server: everything Python with one folder or none; with several,
 * the folder's files and notebook cells (by path), and for the shared server unsaved editors only.
 */
export function documentSelector(folder: Folder | undefined, folderCount: number): DocumentFilter[] {
  const python = (scheme: string, pattern?: string): DocumentFilter =>
    (pattern === undefined ? { scheme, language: 'python' } : { scheme, language: 'python', pattern });
  if (folderCount <= 1 || folder === undefined) {
    return folderCount <= 1
      ? [python('file'), python('untitled'), python(NOTEBOOK_CELL_SCHEME)]
      : [python('untitled')];
  }
  const pattern = `${escapeGlob(folder.fsPath.replace(/\/+$/, ''))}/**/*`;
  return [python('file', pattern), python(NOTEBOOK_CELL_SCHEME, pattern)];
}

/** The decoded path of a `file:` or notebook-cell URI, else undefined. */
export function pathOfUri(uri: string): string | undefined {
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    return undefined;
  }
  if (parsed.protocol !== 'file:' && parsed.protocol !== `${NOTEBOOK_CELL_SCHEME}:`) {
    return undefined;
  }
  try {
    return decodeURIComponent(parsed.pathname);
  } catch {
    return undefined;
  }
}

function escapeGlob(path: string): string {
  return path.replace(/[[\]{}*?!]/g, (ch) => `[${ch}]`);
}
