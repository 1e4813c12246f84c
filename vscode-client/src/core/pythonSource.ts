/**
 * Just enough of Python's lexical structure to find statements and their indentation: strings
 * and comments are blanked out, bracketed and backslash-continued lines are joined.  The server
 * does the exact analysis with `ast`; the client only needs to name the module at the cursor.
 */

/** One statement line: what Python calls a logical line, possibly spanning physical lines. */
export interface LogicalLine {
  /** First and last physical line, 0-based. */
  start: number;
  end: number;
  /** Width of the leading whitespace of the first line (tabs advance to multiples of 8). */
  indent: number;
  /** The statement's code with string contents and comments removed, lines joined by a space. */
  code: string;
}

export function logicalLines(text: string): LogicalLine[] {
  const lines = text.split(/\r\n|\r|\n/);
  const result: LogicalLine[] = [];
  let current: LogicalLine | undefined;
  let depth = 0; // open brackets
  let quote: string | undefined; // the delimiter of a string still open at the end of a line
  let backslash = false;

  lines.forEach((raw, index) => {
    if (current && depth === 0 && quote === undefined && !backslash) {
      current = undefined;
    }
    let code = '';
    for (let i = 0; i < raw.length; i++) {
      const ch = raw[i];
      if (quote !== undefined) {
        if (ch === '\\') {
          i++;
        } else if (raw.startsWith(quote, i)) {
          i += quote.length - 1;
          quote = undefined;
          code += '""';
        }
        continue;
      }
      if (ch === '#') {
        break;
      }
      if (ch === '"' || ch === "'") {
        quote = raw.startsWith(ch.repeat(3), i) ? ch.repeat(3) : ch;
        i += quote.length - 1;
        continue;
      }
      if ('([{'.includes(ch)) {
        depth++;
      } else if (')]}'.includes(ch)) {
        depth = Math.max(0, depth - 1);
      }
      code += ch;
    }
    const trimmed = code.trimEnd();
    backslash = trimmed.endsWith('\\');
    if (quote !== undefined && quote.length === 1 && !backslash) {
      quote = undefined; // an unterminated one-line string: a syntax error, do not let it spread
    }
    if (current) {
      current.end = index;
      current.code += ' ' + code.trim();
    } else if (code.trim() !== '' || quote !== undefined || depth > 0) {
      current = { start: index, end: index, indent: indentWidth(raw), code: code.trim() };
      result.push(current);
    }
  });
  return result;
}

function indentWidth(line: string): number {
  let width = 0;
  for (const ch of line) {
    if (ch === ' ') {
      width++;
    } else if (ch === '\t') {
      width = (Math.floor(width / 8) + 1) * 8;
    } else {
      break;
    }
  }
  return width;
}
