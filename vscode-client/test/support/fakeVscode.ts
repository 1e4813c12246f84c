/**
 * A recording stand-in for the few `vscode` APIs that src/editor/moduleCommands.ts and
 * src/editor/jobStatusBar.ts use.  Importing this module makes `require('vscode')` return it,
 * so import it before the modules under test.
 */
import Module from 'node:module';

export class FakeStatusBarItem {
  text = '';
  tooltip: string | undefined;
  command: { command: string; arguments?: unknown[] } | undefined;
  name = '';
  visible = false;
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
  }
}

export interface FakeEditor {
  document: {
    languageId: string;
    isUntitled: boolean;
    fileName: string;
    uri: { scheme: string; toString(): string };
    getText(): string;
  };
  selection: { active: { line: number; character: number } };
}

type Handler = (...args: unknown[]) => unknown;

export const fake = {
  activeTextEditor: undefined as FakeEditor | undefined,
  commands: new Map<string, Handler>(),
  /** Every commands.executeCommand call, as [id, ...args]. */
  executed: [] as unknown[][],
  messages: [] as { level: 'info' | 'warning' | 'error'; text: string }[],
  quickPicks: [] as unknown[][],
  /** What the next showQuickPick returns, given its items. */
  pick: (_items: unknown[]): unknown => undefined,
  statusBarItems: [] as FakeStatusBarItem[],

  reset(): void {
    this.activeTextEditor = undefined;
    this.commands.clear();
    this.executed = [];
    this.messages = [];
    this.quickPicks = [];
    this.pick = () => undefined;
    this.statusBarItems = [];
  },

  /** Runs a registered command as VS Code would. */
  run(id: string, ...args: unknown[]): Promise<unknown> {
    const handler = this.commands.get(id);
    if (!handler) {
      return Promise.reject(new Error(`command '${id}' not found`));
    }
    return Promise.resolve(handler(...args));
  },
};

export function pythonEditor(text: string, line: number, uri = 'file:///w/model.py'): FakeEditor {
  return {
    document: {
      languageId: 'python', isUntitled: uri.startsWith('untitled:'), fileName: '/w/model.py',
      uri: { scheme: uri.slice(0, uri.indexOf(':')), toString: () => uri }, getText: () => text,
    },
    selection: { active: { line, character: 0 } },
  };
}

const message = (level: 'info' | 'warning' | 'error') => (text: string): Promise<undefined> => {
  fake.messages.push({ level, text });
  return Promise.resolve(undefined);
};

const vscodeApi = {
  StatusBarAlignment: { Left: 1, Right: 2 },
  window: {
    get activeTextEditor(): FakeEditor | undefined {
      return fake.activeTextEditor;
    },
    createStatusBarItem: (): FakeStatusBarItem => {
      const item = new FakeStatusBarItem();
      fake.statusBarItems.push(item);
      return item;
    },
    showInformationMessage: message('info'),
    showWarningMessage: message('warning'),
    showErrorMessage: message('error'),
    showQuickPick: (items: unknown[]): Promise<unknown> => {
      fake.quickPicks.push(items);
      return Promise.resolve(fake.pick(items));
    },
  },
  commands: {
    registerCommand: (id: string, handler: Handler): { dispose(): void } => {
      if (fake.commands.has(id)) {
        throw new Error(`command '${id}' already exists`);
      }
      fake.commands.set(id, handler);
      return { dispose: () => fake.commands.delete(id) };
    },
    executeCommand: (id: string, ...args: unknown[]): Promise<unknown> => {
      fake.executed.push([id, ...args]);
      const handler = fake.commands.get(id);
      return Promise.resolve(handler ? handler(...args) : undefined);
    },
  },
};

const loader = Module as unknown as { _load: (request: string, ...rest: unknown[]) => unknown };
const originalLoad = loader._load;
loader._load = (request: string, ...rest: unknown[]) => (request === 'vscode' ? vscodeApi : originalLoad(request, ...rest));
