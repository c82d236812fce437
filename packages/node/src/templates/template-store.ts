import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { ErrorCode, SpaceError, TemplateIdSchema, type TemplateConfig } from '@space/protocol';
import { type ImageSource, unpackImage } from './image-import.js';
import type { BtrfsVolume } from '../storage/btrfs-volume.js';
import type { Subvolumes } from '../storage/subvolumes.js';
import { recipeHash, type Progress, type TemplateRecipe } from './recipes.js';

/**
 * Templates as read-only subvolumes. Built-ins are named `<name>@<recipe hash>`: built once, rebuilt
 * only when the recipe changes; a build happens in a scratch subvolume and becomes visible only when
 * complete. A tenant's template versions are `custom/<tpl_id>`, snapshots of checkpoints.
 */
export class TemplateStore {
  private readonly building = new Map<string, Promise<string>>();
  private readonly recipes: Map<string, TemplateRecipe>;
  /** Aborted by `stop`: builds and imports under way are killed, not waited for. */
  private readonly stopping = new AbortController();
  /** Image imports under way, each settled (`stop` waits for them to end). */
  private readonly importing = new Set<Promise<unknown>>();

  constructor(
    private readonly volume: BtrfsVolume,
    private readonly subvolumes: Subvolumes,
    recipes: readonly TemplateRecipe[],
    private readonly buildEnvironment: { cacheDir: string; debianMirror: string | null },
  ) {
    this.recipes = new Map(recipes.map((r) => [r.name, r]));
  }

  names(): string[] {
    return [...this.recipes.keys()];
  }

  /**
   * Ends the builds and image imports under way: their commands are killed with everything they
   * started and their trees deleted (with what they mounted in them); resolves once they have ended
   * (the node unmounts its storage next). None starts after.
   */
  async stop(): Promise<void> {
    this.stopping.abort(new Error('the node is stopping'));
    await Promise.all([...this.building.values()].map((b) => b.catch(() => undefined)));
    await Promise.all(this.importing);
  }

  recipe(name: string): TemplateRecipe {
    const recipe = this.recipes.get(name);
    if (!recipe) throw new SpaceError(ErrorCode.UNKNOWN_TEMPLATE, `unknown template ${JSON.stringify(name)}; available: ${this.names().join(', ')}`);
    return recipe;
  }

  /** Refuses (UNKNOWN_TEMPLATE) a name that is neither a built-in nor a tenant's template version on this node. */
  async check(name: string): Promise<void> {
    if (TemplateIdSchema.safeParse(name).success) await this.existingCustom(name);
    else this.recipe(name);
  }

  /** Returns the template's subvolume path, building it first if needed (a built-in) or failing when it is not on this node (a tenant's). */
  async ensure(name: string, progress: Progress = () => undefined): Promise<string> {
    if (TemplateIdSchema.safeParse(name).success) return this.existingCustom(name);
    const recipe = this.recipe(name);
    const target = this.pathOf(recipe);
    if (await this.subvolumes.exists(target)) return target;
    let pending = this.building.get(name);
    if (!pending) {
      if (this.stopping.signal.aborted) throw new SpaceError(ErrorCode.TEMPLATE_BUILD_FAILED, `template ${name} not built: the node is stopping`);
      pending = this.build(recipe, target, progress).finally(() => this.building.delete(name));
      this.building.set(name, pending);
    }
    return pending;
  }

  /** Makes template version `templateId` a read-only snapshot of `source` (a checkpoint): a metadata operation. */
  async createCustom(templateId: string, source: string): Promise<void> {
    if (await this.subvolumes.exists(this.customPath(templateId))) return;
    await this.subvolumes.snapshot(source, this.customPath(templateId), { readOnly: true });
  }

  /**
   * Makes template version `templateId` from an image (see `unpackImage`): unpacked into a scratch
   * subvolume that becomes the template, read-only, only when complete. Returns the image's config.
   */
  importCustom(templateId: string, source: ImageSource, progress: (line: string) => void): Promise<TemplateConfig> {
    const importing = this.unpackCustom(templateId, source, progress);
    const settled = importing.catch(() => undefined);
    this.importing.add(settled);
    void settled.finally(() => this.importing.delete(settled));
    return importing;
  }

  private async unpackCustom(templateId: string, source: ImageSource, progress: (line: string) => void): Promise<TemplateConfig> {
    if (this.stopping.signal.aborted)
      throw new SpaceError(ErrorCode.TEMPLATE_BUILD_FAILED, `template version ${templateId} not imported: the node is stopping`);
    const target = this.customPath(templateId);
    if (await this.subvolumes.exists(target)) throw new SpaceError(ErrorCode.VALIDATION_FAILED, `template version ${templateId} exists already`);
    const scratch = `${target}.importing`;
    const work = this.volume.dir('imports', templateId);
    await this.subvolumes.delete(scratch);
    await this.subvolumes.create(scratch);
    try {
      await mkdir(work, { recursive: true, mode: 0o700 });
      const config = await unpackImage(source, scratch, work, progress, this.stopping.signal);
      await this.subvolumes.setReadOnly(scratch);
      await this.subvolumes.rename(scratch, target);
      return config;
    } finally {
      await this.subvolumes.delete(scratch).catch(() => undefined);
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Where an uploaded image archive for `templateId` is kept until it is imported. */
  importArchivePath(templateId: string): string {
    return this.volume.dir('imports', `${TemplateIdSchema.parse(templateId)}.tar`);
  }

  /** Deletes a tenant's template version; sessions made from it keep their volumes (snapshots of their own). */
  async deleteCustom(templateId: string): Promise<void> {
    await this.subvolumes.delete(this.customPath(templateId));
  }

  private async existingCustom(templateId: string): Promise<string> {
    const custom = this.customPath(templateId);
    if (!(await this.subvolumes.exists(custom))) throw new SpaceError(ErrorCode.UNKNOWN_TEMPLATE, `template version ${templateId} is not on this node`);
    return custom;
  }

  private customPath(templateId: string): string {
    return this.volume.dir('templates', 'custom', TemplateIdSchema.parse(templateId));
  }

  private pathOf(recipe: TemplateRecipe): string {
    return this.volume.dir('templates', `${recipe.name}@${recipeHash(recipe)}`);
  }

  private async build(recipe: TemplateRecipe, target: string, progress: Progress): Promise<string> {
    const scratch = this.volume.dir('templates', `.build-${recipe.name}-${randomBytes(4).toString('hex')}`);
    const started = Date.now();
    progress(`building template ${recipe.name}: ${recipe.description}`);
    if (recipe.from) await this.subvolumes.snapshot(await this.ensure(recipe.from.name, progress), scratch, { readOnly: false });
    else await this.subvolumes.create(scratch);
    try {
      await recipe.build(scratch, (m) => progress(`[${recipe.name}] ${m}`), {
        cacheDir: path.join(this.buildEnvironment.cacheDir, recipe.name),
        debianMirror: this.buildEnvironment.debianMirror,
        abort: this.stopping.signal,
      });
      await this.subvolumes.snapshot(scratch, target, { readOnly: true });
    } catch (err) {
      throw new SpaceError(ErrorCode.TEMPLATE_BUILD_FAILED, `building template ${recipe.name} failed: ${(err as Error).message}`);
    } finally {
      // Deleting the subvolume detaches what a killed build left mounted in it (debootstrap's /proc).
      await this.subvolumes.delete(scratch).catch(() => undefined);
    }
    await this.removeOtherVersions(recipe, target);
    progress(`template ${recipe.name} ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return target;
  }

  /** Drops older builds of a recipe and scratch directories left by an interrupted build. */
  async removeOtherVersions(recipe: TemplateRecipe, keep: string): Promise<void> {
    const dir = this.volume.dir('templates');
    await mkdir(dir, { recursive: true });
    for (const entry of await readdir(dir)) {
      const full = path.join(dir, entry);
      const stale = (entry.startsWith(`${recipe.name}@`) && full !== keep) || (entry.startsWith(`.build-${recipe.name}-`) && !this.building.has(recipe.name));
      if (stale) await this.subvolumes.delete(full).catch(() => undefined);
    }
  }
}
