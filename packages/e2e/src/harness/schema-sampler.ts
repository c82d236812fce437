import type { z } from 'zod';
import type { Random } from './random.js';

/** Strings that have broken parsers, paths and shells elsewhere. */
const nastyStrings = [
  '',
  ' ',
  '..',
  '../../../../etc/passwd',
  '/proc/self/environ',
  '%00',
  '\u0000',
  '\r\n\r\nHTTP/1.1 200 OK',
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the literal text is the point (log4shell's lookup)
  '${jndi:ldap://x}',
  "'; DROP TABLE sessions; --",
  '\ud800',
  '👾'.repeat(50),
  'a'.repeat(5000),
  '__proto__',
  'constructor',
  '-1',
  'NaN',
  '1e309',
];

/** Values of every JSON type, including the ones no schema asks for. */
function anyJson(rng: Random, depth = 0): unknown {
  switch (rng.int(0, depth > 3 ? 5 : 8)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick([0, -1, 1.5, 2 ** 53, -(2 ** 63), 1e308, -0]);
    case 3:
      return rng.pick(nastyStrings);
    case 4:
      return rng.int(-5, 100000);
    case 5:
      return 'x'.repeat(rng.int(0, 64));
    case 6:
      return Array.from({ length: rng.int(0, 5) }, () => anyJson(rng, depth + 1));
    case 7:
      return Object.fromEntries(
        Array.from({ length: rng.int(0, 4) }, () => [rng.pick(['a', 'type', 'path', '__proto__', 'cmd', '']), anyJson(rng, depth + 1)]),
      );
    default:
      // Nesting deeper than any schema.
      return JSON.parse(`${'['.repeat(200)}${']'.repeat(200)}`);
  }
}

/**
 * A value shaped after `schema`: valid most of the time, with `mutation` the chance at each level of
 * something it would refuse (a wrong type, a value out of range, a missing or unknown key). Covers
 * the zod types the protocol uses; anything else gets an arbitrary JSON value.
 */
export function sample(schema: z.ZodTypeAny, rng: Random, mutation = 0.1, depth = 0): unknown {
  if (rng.chance(mutation)) return anyJson(rng);
  const def = schema._def as { typeName: string } & Record<string, any>;
  const next = (s: z.ZodTypeAny) => sample(s, rng, mutation, depth + 1);
  switch (def.typeName) {
    case 'ZodObject': {
      const shape = (schema as z.AnyZodObject).shape as Record<string, z.ZodTypeAny>;
      const out: Record<string, unknown> = {};
      for (const [key, field] of Object.entries(shape)) {
        const optional = field.isOptional();
        if (optional && rng.chance(0.5)) continue;
        if (rng.chance(mutation / 2)) continue;
        out[key] = next(field);
      }
      if (rng.chance(mutation / 2)) out[rng.pick(['extra', '__proto__', 'constructor', 'x'.repeat(300)])] = anyJson(rng);
      return out;
    }
    case 'ZodString':
      return stringFor(def as StringDef, rng);
    case 'ZodNumber':
      return numberFor(def as NumberDef, rng);
    case 'ZodBigInt':
    case 'ZodBoolean':
      return rng.chance(0.5);
    case 'ZodLiteral':
      return def.value;
    case 'ZodEnum':
      return rng.pick(def.values as string[]);
    case 'ZodNativeEnum':
      return rng.pick(Object.values(def.values));
    case 'ZodArray': {
      const max = Math.min(def.maxLength?.value ?? 4, 4);
      const min = def.minLength?.value ?? 0;
      return Array.from({ length: rng.int(min, Math.max(min, max)) }, () => next(def.type));
    }
    case 'ZodTuple':
      return (def.items as z.ZodTypeAny[]).map(next);
    case 'ZodRecord':
      return Object.fromEntries(Array.from({ length: rng.int(0, 3) }, () => [stringFor({ checks: [] }, rng), next(def.valueType)]));
    case 'ZodOptional':
    case 'ZodNullable':
      return rng.chance(0.2) ? (def.typeName === 'ZodNullable' ? null : undefined) : next(def.innerType);
    case 'ZodDefault':
      return rng.chance(0.3) ? undefined : next(def.innerType);
    case 'ZodEffects':
      return next(def.schema);
    case 'ZodPipeline':
      return next(def.in);
    case 'ZodLazy':
      return depth > 4 ? null : next(def.getter());
    case 'ZodUnion':
    case 'ZodDiscriminatedUnion':
      return next(rng.pick([...(def.options as Iterable<z.ZodTypeAny>)]));
    case 'ZodIntersection':
      return { ...(next(def.left) as object), ...(next(def.right) as object) };
    default:
      return anyJson(rng);
  }
}

type StringDef = { checks?: { kind: string; value?: number; regex?: RegExp }[] };
type NumberDef = { checks?: { kind: string; value?: number }[] };

function stringFor(def: StringDef, rng: Random): string {
  const checks = def.checks ?? [];
  if (rng.chance(0.15)) return rng.pick(nastyStrings);
  const max = checks.find((c) => c.kind === 'max')?.value ?? 24;
  const min = checks.find((c) => c.kind === 'min')?.value ?? 1;
  // Patterned strings (names, ids) mostly come out of a small alphabet that fits the common patterns.
  const alphabet = checks.some((c) => c.kind === 'regex') ? 'abcdefghijklmnopqrstuvwxyz0123456789' : 'abcdefghijklmnopqrstuvwxyz0123456789 ./-_*:';
  const length = rng.int(min, Math.max(min, Math.min(max, 24)));
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet[rng.int(0, alphabet.length - 1)];
  return checks.some((c) => c.kind === 'regex') ? `a${out.slice(1)}` : out;
}

function numberFor(def: NumberDef, rng: Random): number {
  const checks = def.checks ?? [];
  const min = checks.find((c) => c.kind === 'min')?.value ?? 0;
  const max = checks.find((c) => c.kind === 'max')?.value ?? 1000;
  if (rng.chance(0.1)) return rng.pick([min - 1, max + 1, 0.5, -1]);
  const value = min + rng.next() * (Math.min(max, min + 1000) - min);
  return checks.some((c) => c.kind === 'int') ? Math.round(value) : value;
}
