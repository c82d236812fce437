import { ErrorCode, SpaceError, builtinTemplateNames, newId, type CreateTemplateRequest, type Template, type TemplateConfig } from '@space/protocol';
import type { Readable } from 'node:stream';
import type { Caller } from '../tenants/auth.js';
import type { NodeClient } from '../cluster/node-client.js';
import type { NodeDirectory } from '../cluster/node-directory.js';
import type { SessionCheckpointService } from '../sessions/session-checkpoint-service.js';
import type { Store, TemplateRow } from '../store/store.js';
import type { TemplateCatalog } from '../templates/template-catalog.js';

/**
 * Makes and deletes a tenant's templates. A template is a read-only snapshot of one of its
 * checkpoints (of a session: an fs checkpoint taken first), so making one is a metadata operation;
 * making a name again makes a new version, which new sessions get.
 */
export class TemplateService {
  constructor(
    private readonly store: Store,
    private readonly nodes: NodeDirectory,
    private readonly checkpoints: SessionCheckpointService,
    private readonly catalog: TemplateCatalog,
  ) {}

  /** A template from a session (an fs checkpoint of it first) or a checkpoint; Dockerfiles go to TemplateBuilds. */
  async create(caller: Caller, request: Omit<CreateTemplateRequest, 'dockerfile'>): Promise<Template> {
    const checkpointId = request.fromSession ? (await this.checkpoints.create(caller, request.fromSession, 'fs')).id : request.fromCheckpoint!;
    await this.createVersion(caller, request.name, checkpointId, null);
    return (await this.catalog.list(caller.tenantId)).find((t) => t.name === request.name)!;
  }

  /**
   * The next version of template `name` (a name starting with `_` is hidden: a build's cached
   * step) as a snapshot of one of the tenant's checkpoints, with what its sessions start with.
   */
  async createVersion(caller: Caller, name: string, checkpointId: string, config: TemplateConfig | null): Promise<TemplateRow> {
    const checkpoint = await this.checkpoints.checkpoint(caller, checkpointId);
    // The template is a snapshot on the checkpoint's node; sessions made from it are placed there.
    const node = await this.nodes.client(checkpoint.nodeId);
    const id = newId('tpl');
    await node.createTemplate(id, checkpointId);
    return this.record(caller, node, { id, name, fromCheckpoint: checkpointId, config });
  }

  /**
   * The next version of template `name` from an image: an archive streamed to a node (placed by
   * load), or pulled from a registry there. Its config (env, workdir, user, ENTRYPOINT and CMD,
   * labels, exposed ports) is the template's, as a Dockerfile's would be.
   */
  async importImage(caller: Caller, name: string, source: { archive: Readable; length: string | undefined } | { image: string }): Promise<Template> {
    const node = await this.nodes.place();
    const id = newId('tpl');
    const config = 'image' in source ? await node.pullImage(id, source.image) : await node.importImage(id, source.archive, source.length);
    await this.record(caller, node, { id, name, fromCheckpoint: '', config });
    return (await this.catalog.list(caller.tenantId)).find((t) => t.name === name)!;
  }

  /** Records a version the node has just made; if that fails, the node's copy goes too. An image's version has no checkpoint (''). */
  private async record(caller: Caller, node: NodeClient, version: Pick<TemplateRow, 'id' | 'name' | 'fromCheckpoint' | 'config'>): Promise<TemplateRow> {
    try {
      return await this.store.insertTemplateVersion({ ...version, tenantId: caller.tenantId, nodeId: node.nodeId, createdAt: new Date().toISOString() });
    } catch (err) {
      await node.deleteTemplate(version.id).catch(() => undefined);
      throw err;
    }
  }

  /** Deletes one version (a build's cached step that is evicted); sessions made from it keep their files. */
  async deleteVersion(version: TemplateRow): Promise<void> {
    await (await this.nodes.forVolume({ volumeNodeId: version.nodeId })).deleteTemplate(version.id);
    await this.store.deleteTemplate(version.id);
  }

  /** Deletes every version of the tenant's template; refused while sessions made from it exist unless `force` (their volumes are their own). */
  async delete(caller: Caller, name: string, force: boolean): Promise<void> {
    if (builtinTemplateNames.includes(name)) throw new SpaceError(ErrorCode.FORBIDDEN, `${name} is a built-in template; it cannot be deleted`);
    const versions = (await this.store.listTemplates(caller.tenantId)).filter((t) => t.name === name);
    if (versions.length === 0) throw new SpaceError(ErrorCode.TEMPLATE_NOT_FOUND, `no template ${JSON.stringify(name)}`);
    const sessions = (await this.store.listSessions(caller.tenantId)).filter((s) => s.template === name).length;
    if (sessions > 0 && !force) {
      throw new SpaceError(
        ErrorCode.TEMPLATE_IN_USE,
        `${sessions} session(s) were made from template ${name}; delete them first, or delete with ?force=1 (they keep their files)`,
        {
          sessions,
        },
      );
    }
    for (const version of versions) await this.deleteVersion(version);
  }
}
