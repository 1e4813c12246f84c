/** The extension's package.json, read the way VS Code reads it. */
import * as fs from 'node:fs';
import * as path from 'node:path';

export const EXTENSION_ROOT = path.resolve(__dirname, '..', '..', '..');

export interface ConfigurationProperty {
  type: string;
  default: unknown;
  description?: string;
  markdownDescription?: string;
  enum?: string[];
}

export interface Manifest {
  name: string;
  publisher: string;
  main: string;
  engines: { vscode: string };
  activationEvents?: string[];
  contributes: {
    commands: { command: string; title: string; category?: string }[];
    menus: Record<string, { command: string; when?: string }[]>;
    configuration: { properties: Record<string, ConfigurationProperty> };
  };
  [key: string]: unknown;
}

export function readManifest(file = path.join(EXTENSION_ROOT, 'package.json')): Manifest {
  return JSON.parse(fs.readFileSync(file, 'utf8')) as Manifest;
}
