/// <reference lib="dom" /> // the callbacks of page.$eval run in the browser
/**
 * The end-to-end harness: a real code-server (VS Code in a browser) with the packaged .vsix
 * installed, driven through headless Debian Chromium by puppeteer-core the way a user drives it:
 * clicks, keys, the command palette, and what the page shows.  Screenshots go to
 * vscode-client/e2e-artifacts/ (git-ignored).
 */
import { ChildProcess, execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';
import type { Browser, ElementHandle, Page } from 'puppeteer-core';
// eslint-disable-next-line @typescript-eslint/no-require-imports
const puppeteer = require('puppeteer-core') as typeof import('puppeteer-core');

export const EXTENSION_ROOT = path.resolve(__dirname, '..', '..', '..');
export const REPO_ROOT = path.resolve(EXTENSION_ROOT, '..');
export const ARTIFACTS = path.join(EXTENSION_ROOT, 'e2e-artifacts');

export function requiredEnv(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(`${name} is not set: run the end-to-end tests with e2e/run.sh (make test-vscode)`);
  }
  return value;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export interface CodeServerOptions {
  root: string;
  vsix: string;
  settings: Record<string, unknown>;
  env?: Record<string, string>;
}

/** code-server on a free loopback port, with its own user data, extensions and config. */
export class CodeServer {
  private process: ChildProcess | undefined;
  readonly log: string;
  port = 0;

  constructor(private readonly options: CodeServerOptions) {
    this.log = path.join(ARTIFACTS, 'code-server.log');
  }

  get userDataDir(): string {
    return path.join(this.options.root, 'user-data');
  }

  get settingsFile(): string {
    return path.join(this.userDataDir, 'User', 'settings.json');
  }

  /**
   * User settings, and the same as the machine's: code-server is a remote window, where
   * `machine`-scoped settings (kernelstitch.server.pipInstallArgs) come from Machine/settings.json.
   */
  writeSettings(settings: Record<string, unknown>): void {
    for (const file of [this.settingsFile, path.join(this.userDataDir, 'Machine', 'settings.json')]) {
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, JSON.stringify(settings, null, 2));
    }
  }

  async start(): Promise<void> {
    const node = requiredEnv('KS_E2E_NODE24');
    const entry = requiredEnv('KS_E2E_CODE_SERVER');
    const { root } = this.options;
    const extensions = path.join(root, 'extensions');
    const config = path.join(root, 'code-server.yaml');
    this.port = await freePort();
    fs.writeFileSync(config, `bind-addr: 127.0.0.1:${this.port}\nauth: none\ncert: false\n`);
    this.writeSettings(this.options.settings);
    const common = ['--config', config, '--user-data-dir', this.userDataDir, '--extensions-dir', extensions];
    execFileSync(node, [entry, ...common, '--install-extension', this.options.vsix], { stdio: 'pipe', timeout: 120_000 });
    const out = fs.openSync(this.log, 'w');
    this.process = spawn(node, [entry, ...common, '--disable-telemetry', '--disable-update-check',
      '--disable-workspace-trust', '--disable-getting-started-override'], {
      cwd: root, stdio: ['ignore', out, out], detached: true,
      env: { ...process.env, ...this.options.env },
    });
    const deadline = Date.now() + 60_000;
    while (!fs.readFileSync(this.log, 'utf8').includes('HTTP server listening')) {
      if (this.process.exitCode !== null || Date.now() > deadline) {
        throw new Error(`code-server did not start:\n${fs.readFileSync(this.log, 'utf8')}`);
      }
      await sleep(200);
    }
  }

  /** Stops code-server and everything it started (extension host, language servers, jobs). */
  async stop(): Promise<void> {
    const child = this.process;
    this.process = undefined;
    if (child?.pid === undefined || child.exitCode !== null) {
      return;
    }
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return;
    }
    await Promise.race([exited, sleep(10_000)]);
    try {
      process.kill(-child.pid, 'SIGKILL'); // whatever ignored SIGTERM in the group
    } catch {
      // already gone
    }
  }
}

/** A browser tab on the workbench, with what a user does and sees. */
export class Workbench {
  /** Screenshots are numbered across workbench pages, in the order taken. */
  private static shots = 0;

  private constructor(private readonly browser: Browser, readonly page: Page) {}

  static async open(url: string): Promise<Workbench> {
    const browser = await puppeteer.launch({
      executablePath: requiredEnv('KS_E2E_CHROMIUM'),
      headless: true,
      // root in CI: Chromium's sandbox needs an unprivileged user.
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--window-size=1400,900'],
      defaultViewport: { width: 1400, height: 900 },
    });
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    await page.goto(url, { waitUntil: 'domcontentloaded', timeout: 60_000 });
    await page.waitForSelector('.monaco-workbench .part.editor', { timeout: 90_000 });
    return new Workbench(browser, page);
  }

  async close(): Promise<void> {
    await this.browser.close().catch(() => undefined);
  }

  /** Saves a numbered screenshot into the artifacts folder and returns its path. */
  async screenshot(name: string): Promise<string> {
    Workbench.shots += 1;
    const file = `${path.join(ARTIFACTS, `${String(Workbench.shots).padStart(2, '0')}-${name}`)}.png` as const;
    await this.page.screenshot({ path: file });
    return file;
  }

  /** Polls `probe` until it returns something truthy. */
  async until<T>(what: string, probe: () => Promise<T | undefined | null | false>, timeoutMs = 30_000,
                 intervalMs = 250): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let lastError: unknown;
    while (Date.now() < deadline) {
      try {
        const value = await probe();
        if (value) {
          return value;
        }
      } catch (error) {
        lastError = error; // a node that went away between query and read
      }
      await sleep(intervalMs);
    }
    await this.screenshot(`timeout-${what.replace(/[^a-z0-9]+/gi, '-').slice(0, 40)}`).catch(() => undefined);
    throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`
      + (lastError instanceof Error ? ` (last error: ${lastError.message})` : ''));
  }

  async press(chord: string): Promise<void> {
    const keys = chord.split('+');
    for (const key of keys.slice(0, -1)) {
      await this.page.keyboard.down(key as Parameters<Page['keyboard']['down']>[0]);
    }
    await this.page.keyboard.press(keys[keys.length - 1] as Parameters<Page['keyboard']['press']>[0]);
    for (const key of keys.slice(0, -1).reverse()) {
      await this.page.keyboard.up(key as Parameters<Page['keyboard']['up']>[0]);
    }
  }

  /** Runs a command from the palette by its title, as a user types it. */
  async runCommand(title: string): Promise<void> {
    await this.press('F1');
    const input = await this.page.waitForSelector('.quick-input-widget input', { visible: true });
    await input!.type(title);
    await this.until(`the palette to offer "${title}"`, () => this.page.$$eval('.quick-input-list .monaco-list-row',
      (rows, wanted) => rows.some((row) => (row.getAttribute('aria-label') ?? row.textContent ?? '').includes(wanted)), title));
    await this.press('Enter');
    await sleep(300);
  }

  /**
   * Waits for the Explorer to list the workspace's folders.  code-server once opened a freshly
   * written .code-workspace file as "No Folder Opened" (a clean clone's run, 2026-11-27); one
   * reload reads its folders.
   */
  async untilFoldersShown(): Promise<void> {
    const shown = () => this.page.$('.explorer-folders-view .monaco-list-row');
    try {
      await this.until('the workspace folders in the Explorer', shown, 20_000);
    } catch {
      await this.page.reload({ waitUntil: 'domcontentloaded', timeout: 60_000 });
      await this.page.waitForSelector('.monaco-workbench .part.editor', { timeout: 90_000 });
      await this.until('the workspace folders after a reload', shown, 30_000);
    }
  }

  /** Opens a file of the workspace by clicking it in the Explorer. */
  async openFromExplorer(name: string, focus = true): Promise<void> {
    const row = await this.until(`${name} in the Explorer`, () =>
      this.page.$(`.explorer-folders-view .monaco-list-row[aria-label^="${name}"]`));
    await row.click();
    await this.until(`the editor tab of ${name}`, () => this.activeTab().then((tab) => tab === name));
    if (focus) {
      await this.focusEditor();
    }
  }

  async focusEditor(): Promise<void> {
    const lines = await this.page.waitForSelector('.part.editor .monaco-editor .view-lines', { visible: true, timeout: 60_000 });
    await lines!.click();
  }

  async activeTab(): Promise<string | undefined> {
    return this.page.$eval('.tabs-container .tab.active', (tab) => tab.getAttribute('data-resource-name') ?? tab.textContent?.trim() ?? '')
      .catch(() => undefined);
  }

  async tabs(): Promise<string[]> {
    return this.page.$$eval('.tabs-container .tab', (tabs) => tabs.map((tab) => tab.getAttribute('data-resource-name') ?? ''));
  }

  /** Moves the cursor with Go to Line (1-based line and column). */
  async goTo(line: number, column: number): Promise<void> {
    await this.press('Control+g');
    const input = await this.page.waitForSelector('.quick-input-widget input', { visible: true });
    await input!.type(`${line}:${column}`);
    await this.press('Enter');
    await sleep(300);
  }

  /** The texts of the visible notification toasts. */
  async notifications(): Promise<string[]> {
    return this.page.$$eval('.notifications-toasts .notification-toast', (toasts) =>
      toasts.map((toast) => toast.textContent ?? ''));
  }

  async waitForNotification(pattern: RegExp, timeoutMs = 30_000): Promise<string> {
    return this.until(`a notification matching ${String(pattern)}`, async () =>
      (await this.notifications()).find((text) => pattern.test(text)), timeoutMs);
  }

  /** The buttons of the toast whose text matches `pattern`. */
  async notificationButtons(pattern: RegExp): Promise<string[]> {
    const toast = await this.toast(pattern);
    return toast.$$eval('.monaco-button', (buttons) => buttons.map((b) => b.textContent?.trim() ?? ''));
  }

  async clickNotificationButton(pattern: RegExp, label: string): Promise<void> {
    const toast = await this.toast(pattern);
    const buttons = await toast.$$('.monaco-button');
    for (const button of buttons) {
      if ((await button.evaluate((b) => b.textContent?.trim())) === label) {
        await button.click();
        return;
      }
    }
    throw new Error(`no button "${label}" on the notification ${String(pattern)}`);
  }

  async dismissNotifications(): Promise<void> {
    await this.runCommand('Notifications: Clear All Notifications');
  }

  private async toast(pattern: RegExp): Promise<ElementHandle> {
    return this.until(`the notification ${String(pattern)}`, async () => {
      for (const toast of await this.page.$$('.notifications-toasts .notification-toast')) {
        if (pattern.test(await toast.evaluate((t) => t.textContent ?? ''))) {
          return toast;
        }
      }
      return undefined;
    });
  }

  /** The texts of the status bar items. */
  async statusBar(): Promise<string[]> {
    return this.page.$$eval('#workbench\\.parts\\.statusbar .statusbar-item', (items) =>
      items.map((item) => `${item.textContent ?? ''} ${item.getAttribute('aria-label') ?? ''}`.trim()));
  }

  /** The hover's whole text (diagnostics and providers), once it matches `pattern`. */
  async hoverText(pattern: RegExp): Promise<string> {
    await this.runCommand('Show or Focus Hover');
    return this.until(`a hover matching ${String(pattern)}`, async () => {
      const texts = await this.page.$$eval('.monaco-hover:not(.hidden)', (hovers) => hovers.map((h) => h.textContent ?? ''));
      return texts.find((text) => pattern.test(text));
    });
  }

  /** The titles of the code actions (the light bulb's menu) at the cursor. */
  async codeActions(): Promise<string[]> {
    await this.press('Control+.');
    return this.until('the code action menu', async () => {
      const titles = await this.page.$$eval('.action-widget .monaco-list-row.action',
        (rows) => rows.map((row) => row.getAttribute('aria-label') ?? row.textContent ?? ''));
      return titles.length > 0 ? titles : undefined;
    });
  }

  /** Picks a code action of the open menu by its title. */
  async pickCodeAction(title: string): Promise<void> {
    const rows = await this.page.$$('.action-widget .monaco-list-row.action');
    for (const row of rows) {
      const label = await row.evaluate((r) => r.getAttribute('aria-label') ?? r.textContent ?? '');
      if (label.includes(title)) {
        await row.click();
        return;
      }
    }
    throw new Error(`no code action "${title}"`);
  }

  /** The messages in the Problems panel. */
  async problems(): Promise<string[]> {
    return this.page.$$eval('.markers-panel .monaco-list-row', (rows) =>
      rows.map((row) => row.getAttribute('aria-label') ?? row.textContent ?? ''));
  }
}
