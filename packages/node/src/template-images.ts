import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Resources } from '@space/protocol';
import type { Logger } from './logger.js';
import type { MemoryImageMeta } from './storage/checkpoint-store.js';
import type { Subvolumes } from './storage/subvolumes.js';
import { pathExists } from './storage/path-exists.js';

/** A template's ready sandbox saved to disk: a read-only snapshot of its volume and its memory image. */
export interface TemplateImage {
  template: string;
  rootfs: string;
  memoryDir: string;
  meta: Omit<MemoryImageMeta, 'sizeBytes'>;
}

/** What building an image needs: a sandbox booted and saved (the node's PooledSandboxes). */
export interface ImageCapture {
  /** Boots a ready sandbox of the template and saves it: memory into `memoryDir`, its volume as `rootfs`. */
  captureTemplateImage(template: string, resources: Resources, target: { rootfs: string; memoryDir: string }): Promise<Omit<MemoryImageMeta, 'sizeBytes'>>;
}

/**
 * Snapshot preloading: one memory image per template, taken of a sandbox whose daemon is up and
 * warmed, so a new session the warm pool cannot serve is restored from it (daemon already running)
 * instead of booting. Images are rebuilt at every start of the node agent, so they always match the
 * current template, daemon build, gateway CA and runtime; `dir` holds nothing else.
 */
export class TemplateImages {
  private readonly images = new Map<string, TemplateImage>();

  constructor(
    private readonly dir: string,
    private readonly subvolumes: Subvolumes,
    private readonly capture: ImageCapture,
    private readonly log: Logger,
  ) {}

  /** The template's image, if one is built. */
  get(template: string): TemplateImage | null {
    return this.images.get(template) ?? null;
  }

  has(template: string): boolean {
    return this.images.has(template);
  }

  /** Builds (or rebuilds) the template's image; a failure leaves no image and nothing on disk. */
  async build(template: string, resources: Resources): Promise<void> {
    const started = performance.now();
    const target = { rootfs: path.join(this.dir, template, 'rootfs'), memoryDir: path.join(this.dir, template, 'memory') };
    await this.remove(template);
    await mkdir(target.memoryDir, { recursive: true, mode: 0o700 });
    try {
      const meta = await this.capture.captureTemplateImage(template, resources, target);
      this.images.set(template, { template, ...target, meta });
      this.log.info(`template image of ${template} ready in ${Math.round(performance.now() - started)} ms`);
    } catch (err) {
      await this.remove(template);
      throw err;
    }
  }

  /** Deletes every image on disk (those of a previous run included). */
  async clear(): Promise<void> {
    for (const template of await readdir(this.dir).catch(() => [] as string[])) await this.remove(template);
  }

  private async remove(template: string): Promise<void> {
    this.images.delete(template);
    const dir = path.join(this.dir, template);
    if (!(await pathExists(dir))) return;
    await this.subvolumes.delete(path.join(dir, 'rootfs'));
    await rm(dir, { recursive: true, force: true });
  }
}
