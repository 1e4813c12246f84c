/**
 * The "kernelstitch" settings as the server receives them (workspace/configuration and
 * didChangeConfiguration): validated, defaulted, and without the extension-only keys.
 */

export const SETTINGS_SECTION = 'kernelstitch';

export type Profiler = 'torch' | 'ncu' | 'nsys';
export type Coder = 'builtin' | 'llm';
export type Precision = 'fp32' | 'strict' | 'tf32' | 'bf16' | 'fp16';

export interface ServerSettings {
  llm: { baseUrl: string; model: string; apiKeyEnv: string; timeoutSeconds: number };
  coder: Coder;
  gpu: { device: number };
  /** tokens: LLM tokens per generate job, 0 = no limit. */
  budget: { timeSeconds: number; iterations: number; tokens: number };
  profilers: Profiler[];
  watch: { onSave: boolean };
  /** generate's measured search: on/off, round-1 variants, seconds before no more verifying. */
  search: { enabled: boolean; variants: number; timeSeconds: number };
  /** The precision the user allows (fp32: strict; tf32 / bf16 / fp16: opt-in for GEMMs and convs). */
  precision: Precision;
}

export const DEFAULT_SERVER_SETTINGS: ServerSettings = {
  llm: { baseUrl: '', model: '', apiKeyEnv: 'OPENAI_API_KEY', timeoutSeconds: 180 },
  coder: 'builtin',
  gpu: { device: 0 },
  budget: { timeSeconds: 600, iterations: 4, tokens: 0 },
  profilers: ['torch', 'ncu'],
  watch: { onSave: true },
  search: { enabled: true, variants: 4, timeSeconds: 180 },
  precision: 'fp32',
};

/** Settings that change how the server process is started: changing one restarts it. */
export const RESTART_SETTINGS = ['kernelstitch.python', 'kernelstitch.server.command'] as const;

const PROFILERS: readonly string[] = ['torch', 'ncu', 'nsys'];
const ENV_VAR_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export interface SettingsResult {
  settings: ServerSettings;
  /** Values that were replaced by their default, to log. */
  problems: string[];
}

/**
 * Builds the server's settings from `read(key)`, which returns the value of
 * `kernelstitch.<key>` (undefined when unset).  A wrong value falls back to its default.
 */
export function toServerSettings(read: (key: string) => unknown): SettingsResult {
  const problems: string[] = [];
  const d = DEFAULT_SERVER_SETTINGS;

  function pick<T>(key: string, fallback: T, accept: (value: unknown) => value is T, why: string): T {
    const value = read(key);
    if (value === undefined || value === null) {
      return fallback;
    }
    if (accept(value)) {
      return value;
    }
    // Never echo a value that may be a secret pasted into the wrong setting.
    problems.push(`${SETTINGS_SECTION}.${key}: ${why}; using ${JSON.stringify(fallback)}`);
    return fallback;
  }

  const isString = (v: unknown): v is string => typeof v === 'string';
  const isBool = (v: unknown): v is boolean => typeof v === 'boolean';
  const isIndex = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
  const isCount = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 1;
  const isVariants = (v: unknown): v is number => isCount(v) && v <= 16;
  const isLimit = (v: unknown): v is number => Number.isInteger(v) && (v as number) >= 0;
  const isPositive = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v > 0;
  const isCoder = (v: unknown): v is Coder => v === 'builtin' || v === 'llm';
  const isPrecision = (v: unknown): v is Precision => v === 'fp32' || v === 'strict' || v === 'tf32' || v === 'bf16' || v === 'fp16';
  const isEnvName = (v: unknown): v is string => typeof v === 'string' && ENV_VAR_NAME.test(v);

  const profilers = pick('profilers', d.profilers,
    (v): v is Profiler[] => Array.isArray(v) && v.every((p) => PROFILERS.includes(p as string)),
    'expected a list of "torch", "ncu", "nsys"');

  return {
    settings: {
      llm: {
        baseUrl: pick('llm.baseUrl', d.llm.baseUrl, isString, 'expected a string'),
        model: pick('llm.model', d.llm.model, isString, 'expected a string'),
        apiKeyEnv: pick('llm.apiKeyEnv', d.llm.apiKeyEnv, isEnvName,
          'expected the NAME of an environment variable, not a key'),
        timeoutSeconds: pick('llm.timeoutSeconds', d.llm.timeoutSeconds, isPositive, 'expected a number > 0'),
      },
      coder: pick('coder', d.coder, isCoder, 'expected "builtin" or "llm"'),
      gpu: { device: pick('gpu.device', d.gpu.device, isIndex, 'expected an integer >= 0') },
      budget: {
        timeSeconds: pick('budget.timeSeconds', d.budget.timeSeconds, isPositive, 'expected a number > 0'),
        iterations: pick('budget.iterations', d.budget.iterations, isCount, 'expected an integer >= 1'),
        tokens: pick('budget.tokens', d.budget.tokens, isLimit, 'expected an integer >= 0 (0: no limit)'),
      },
      profilers: [...new Set(profilers)],
      watch: { onSave: pick('watch.onSave', d.watch.onSave, isBool, 'expected true or false') },
      search: {
        enabled: pick('search.enabled', d.search.enabled, isBool, 'expected true or false'),
        variants: pick('search.variants', d.search.variants, isVariants, 'expected an integer from 1 to 16'),
        timeSeconds: pick('search.timeSeconds', d.search.timeSeconds, isPositive, 'expected a number > 0'),
      },
      precision: pick('precision', d.precision, isPrecision, 'expected "fp32", "strict", "tf32", "bf16" or "fp16"'),
    },
    problems,
  };
}

/** Whether a configuration change needs a new server process (see RESTART_SETTINGS). */
export function needsRestart(affects: (setting: string) => boolean): boolean {
  return RESTART_SETTINGS.some((setting) => affects(setting));
}
