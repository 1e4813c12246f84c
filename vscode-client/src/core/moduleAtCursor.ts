/**
 * Which nn.Module class a command applies to: the class around the cursor, found with a text
 * scan of `class X(...Module...)` headers (see pythonSource.ts for why not a real parser).
 */
import { LogicalLine, logicalLines } from './pythonSource';

export interface ModuleClass {
  name: string;
  /** 0-based line of the `class` keyword. */
  line: number;
}

/** What a command should act on, given the document and the cursor. */
export type ModuleTarget =
  | { kind: 'found'; name: string }
  | { kind: 'choose'; names: string[] }
  | { kind: 'none' };

const CLASS_HEADER = /^class\s+([A-Za-z_]\w*)\s*(\(.*)?:/;
// `nn.Module`, `torch.nn.Module`, `Module`, `pl.LightningModule`; not `nn.ModuleList`.
const MODULE_BASE = /^(?:[A-Za-z_]\w*\.)*\w*Module$/;

/** The module classes of `text`, in file order. */
export function moduleClasses(text: string): ModuleClass[] {
  return scanClasses(logicalLines(text)).modules.map(({ name, line }) => ({ name, line: line.start }));
}

/** The module class whose header or body holds `line` (0-based), or undefined. */
export function moduleAtLine(text: string, line: number): string | undefined {
  const lines = logicalLines(text);
  const { modules } = scanClasses(lines);
  const moduleAt = new Map(modules.map((m) => [m.line, m.name]));
  let index = -1;
  for (let i = 0; i < lines.length && lines[i].start <= line; i++) {
    index = i;
  }
  if (index < 0) {
    return undefined;
  }
  // Walk up through the enclosing blocks: each one starts on a line indented less than
  // everything below it.
  let minIndent = lines[index].indent;
  if (moduleAt.has(lines[index])) {
    return moduleAt.get(lines[index]);
  }
  for (let i = index - 1; i >= 0 && minIndent > 0; i--) {
    const candidate = lines[i];
    if (candidate.indent >= minIndent) {
      continue;
    }
    const name = moduleAt.get(candidate);
    if (name !== undefined) {
      return name;
    }
    minIndent = candidate.indent;
  }
  return undefined;
}

/** The class at the cursor; else the file's only module class; else a choice (or nothing). */
export function resolveModuleTarget(text: string, line: number): ModuleTarget {
  const atCursor = moduleAtLine(text, line);
  if (atCursor !== undefined) {
    return { kind: 'found', name: atCursor };
  }
  const names = moduleClasses(text).map((m) => m.name);
  if (names.length === 0) {
    return { kind: 'none' };
  }
  return names.length === 1 ? { kind: 'found', name: names[0] } : { kind: 'choose', names };
}

interface ScannedModule {
  name: string;
  line: LogicalLine;
}

function scanClasses(lines: LogicalLine[]): { modules: ScannedModule[] } {
  const modules: ScannedModule[] = [];
  const moduleNames = new Set<string>();
  for (const line of lines) {
    const match = CLASS_HEADER.exec(line.code);
    if (!match) {
      continue;
    }
    const bases = match[2] ? splitBases(match[2]) : [];
    // A subclass of a module class defined earlier in the file is a module too.
    if (bases.some((base) => MODULE_BASE.test(base) || moduleNames.has(base))) {
      moduleNames.add(match[1]);
      modules.push({ name: match[1], line });
    }
  }
  return { modules };
}

/** `(a.B, C[int], metaclass=M)` -> ['a.B', 'C']: positional bases without subscripts. */
function splitBases(parenthesised: string): string[] {
  const bases: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of parenthesised) {
    if ('([{'.includes(ch)) {
      depth++;
    } else if (')]}'.includes(ch)) {
      depth--;
      if (depth === 0) {
        break;
      }
    } else if (depth === 1 && ch === ',') {
      bases.push(current);
      current = '';
    } else if (depth === 1) {
      current += ch;
    }
  }
  bases.push(current);
  return bases.map((b) => b.trim()).filter((b) => b !== '' && !b.includes('='));
}
