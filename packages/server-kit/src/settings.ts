import { z } from 'zod';

/**
 * A `SPACE_*` environment setting, declared once: its name, what it does, what it expects and its
 * default. A process reads a table of them with `readSettings`, which stops it at start on a bad
 * value, naming the setting and what it expected; `scripts/configuration.mjs` writes
 * docs/configuration.md from the same tables.
 */
export interface Setting<T> {
  readonly name: string;
  /** One line for the docs: what the setting does. */
  readonly doc: string;
  /** What a value must be, for errors and the docs ("a whole number from 0"). */
  readonly expects: string;
  /** The default as the docs show it (markdown), or null when unset means "none". */
  readonly shownDefault: string | null;
  /** Test-only settings are documented apart. */
  readonly testOnly: boolean;
  /** The value of an unset or empty variable. */
  readonly fallback: T;
  /** Parses a set value; fails with no message of its own (the setting's `expects` is the message). */
  readonly schema: z.ZodType<T, z.ZodTypeDef, string>;
}

interface Declared<T> {
  doc: string;
  /** Shown as the default (markdown) when it is computed elsewhere (`<data>/gateway-ca`, "the host's"). */
  shownDefault?: string;
  testOnly?: boolean;
  default: T;
}

function declare<T>(name: string, expects: string, schema: z.ZodType<T, z.ZodTypeDef, string>, d: Declared<T>): Setting<T> {
  const value = Array.isArray(d.default) ? d.default.join(',') : d.default;
  const shown = d.shownDefault ?? (value === undefined || value === null || value === '' ? null : `\`${value}\``);
  return { name, doc: d.doc, expects, shownDefault: shown, testOnly: d.testOnly ?? false, fallback: d.default, schema };
}

const wholeNumber = z
  .string()
  .regex(/^\s*-?\d+\s*$/)
  .transform(Number);

function range(min: number | undefined, max: number | undefined, unit: 'whole number' | 'number'): string {
  if (min !== undefined && max !== undefined) return `a ${unit} from ${min} to ${max}`;
  if (min !== undefined) return `a ${unit} from ${min}`;
  return max !== undefined ? `a ${unit} up to ${max}` : `a ${unit}`;
}

/** The kinds of setting there are; each builds its schema and says what it expects. */
export const setting = {
  integer(name: string, d: Declared<number> & { min?: number; max?: number }): Setting<number> {
    const schema = wholeNumber.pipe(
      z
        .number()
        .int()
        .min(d.min ?? Number.MIN_SAFE_INTEGER)
        .max(d.max ?? Number.MAX_SAFE_INTEGER),
    );
    return declare(name, range(d.min, d.max, 'whole number'), schema, d);
  },

  /** A number above zero (and at most `max`): a share, a size in GB, seconds. */
  positive(name: string, d: Declared<number> & { max?: number }): Setting<number> {
    const schema = z
      .string()
      .regex(/^\s*\d*\.?\d+\s*$/)
      .transform(Number)
      .pipe(
        z
          .number()
          .positive()
          .max(d.max ?? Number.MAX_VALUE),
      );
    return declare(name, d.max === undefined ? 'a number above 0' : `a number above 0 and up to ${d.max}`, schema, d);
  },

  choice<const C extends readonly [string, ...string[]]>(name: string, choices: C, d: Declared<C[number]>): Setting<C[number]> {
    return declare(name, `one of ${choices.join(', ')}`, z.enum(choices), d);
  },

  /** `1` on, `0` off. */
  flag(name: string, d: Declared<boolean>): Setting<boolean> {
    return declare(
      name,
      '0 or 1',
      z.enum(['0', '1']).transform((v) => v === '1'),
      { ...d, shownDefault: d.shownDefault ?? (d.default ? '`1`' : '`0`') },
    );
  },

  /** Free text (a URL, a key, a path): `check` refuses what cannot work, `expects` says what would. */
  text<T extends string | undefined>(name: string, d: Declared<T> & { expects?: string; check?: RegExp | z.ZodType<string> }): Setting<string | T> {
    const schema = d.check instanceof RegExp ? z.string().regex(d.check) : (d.check ?? z.string());
    return declare<string | T>(name, d.expects ?? 'text', schema, d);
  },

  /** Comma-separated names; blanks are dropped. */
  list<D extends string[] | null>(name: string, d: Declared<D> & { check?: RegExp; expects?: string }): Setting<string[] | D> {
    const item = d.check ? z.string().regex(d.check) : z.string();
    const schema = z.string().transform((raw, ctx) => {
      const items = raw
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean);
      for (const i of items) if (!item.safeParse(i).success) ctx.addIssue({ code: z.ZodIssueCode.custom });
      return items;
    });
    return declare<string[] | D>(name, d.expects ?? 'comma-separated names', schema, d);
  },
};

export type SettingTable = Record<string, Setting<unknown>>;
export type SettingValues<T extends SettingTable> = { [K in keyof T]: T[K] extends Setting<infer V> ? V : never };

/** Every bad setting at once, each named with what it expects: a process stops on it at start. */
export class SettingsError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.length === 1 ? problems[0] : `${problems.length} settings are wrong: ${problems.join('; ')}`);
    this.name = 'SettingsError';
  }
}

/** Reads a table of settings from the environment: unset or empty gives the default. */
export function readSettings<T extends SettingTable>(table: T, env: NodeJS.ProcessEnv): SettingValues<T> {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, s] of Object.entries(table)) {
    const raw = env[s.name];
    if (raw === undefined || raw.trim() === '') {
      values[key] = s.fallback;
      continue;
    }
    const parsed = s.schema.safeParse(raw);
    if (parsed.success) values[key] = parsed.data;
    else problems.push(`${s.name} must be ${s.expects}, got ${JSON.stringify(raw)}`);
  }
  if (problems.length) throw new SettingsError(problems);
  return values as SettingValues<T>;
}
