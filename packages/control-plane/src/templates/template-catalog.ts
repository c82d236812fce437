import { ErrorCode, SpaceError, builtinTemplateNames, type Template, type TemplateConfig } from '@space/protocol';
import type { Store, TemplateRow } from '../store/store.js';

/**
 * Which templates a tenant has: the built-ins, shared by all, and its own (versions of snapshots of
 * its checkpoints, made by TemplateService). Another tenant's templates do not exist for it.
 */
export class TemplateCatalog {
  constructor(private readonly store: Store) {}

  /** The newest version of each of the tenant's own templates (hidden ones, a build's cached steps named `_…`, left out). */
  async newestVersions(tenantId: string): Promise<TemplateRow[]> {
    const newest = new Map<string, TemplateRow>();
    for (const row of await this.store.listTemplates(tenantId)) if (!row.name.startsWith('_')) newest.set(row.name, row);
    return [...newest.values()];
  }

  /** One version of the tenant's templates by id (a build's session starts from a cached step so), or null. */
  async version(tenantId: string, id: string): Promise<TemplateRow | null> {
    return (await this.store.listTemplates(tenantId)).find((t) => t.id === id) ?? null;
  }

  /**
   * What the node starts a new session's volume from (a built-in's name or the newest version's id)
   * and the node that must hold the session (a custom template's; any for a built-in); UNKNOWN_TEMPLATE otherwise.
   */
  async forNewSession(tenantId: string, name: string): Promise<{ template: string; nodeId: string | null; config: TemplateConfig | null }> {
    if (builtinTemplateNames.includes(name)) return { template: name, nodeId: null, config: null };
    const own = await this.newestVersions(tenantId);
    const found = own.find((t) => t.name === name) ?? (name.startsWith('tpl_') ? await this.version(tenantId, name) : null);
    if (found) return { template: found.id, nodeId: found.nodeId, config: found.config };
    const available = [...builtinTemplateNames, ...own.map((t) => t.name)];
    throw new SpaceError(ErrorCode.UNKNOWN_TEMPLATE, `unknown template ${JSON.stringify(name)}; available: ${available.join(', ')}`);
  }

  /**
   * What a later start of the session names: the same, except that a template deleted since is
   * passed on by name (the node needs it only if the session's volume is gone, and then refuses).
   */
  async forStart(tenantId: string, name: string): Promise<string> {
    if (builtinTemplateNames.includes(name) || name.startsWith('tpl_')) return name;
    return (await this.newestVersions(tenantId)).find((t) => t.name === name)?.id ?? name;
  }

  async list(tenantId: string): Promise<Template[]> {
    const sessions = new Map<string, number>();
    for (const s of await this.store.listSessions(tenantId)) sessions.set(s.template, (sessions.get(s.template) ?? 0) + 1);
    const builtIns: Template[] = builtinTemplateNames.map((name) => ({
      name,
      version: 0,
      builtIn: true,
      source: 'built-in',
      fromCheckpoint: null,
      createdAt: null,
      sessions: sessions.get(name) ?? 0,
      config: null,
    }));
    const own: Template[] = (await this.newestVersions(tenantId)).map((t) => ({
      name: t.name,
      version: t.version,
      builtIn: false,
      // An image's version has no checkpoint; a Dockerfile's has a config.
      source: t.fromCheckpoint === '' ? 'image' : t.config ? 'dockerfile' : 'checkpoint',
      fromCheckpoint: t.fromCheckpoint || null,
      createdAt: t.createdAt,
      sessions: sessions.get(t.name) ?? 0,
      config: t.config,
    }));
    return [...builtIns, ...own];
  }
}
