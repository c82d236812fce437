/** The user the control plane runs as in its image (the Kubernetes manifests' `runAsUser`). */
export const controlPlaneUid = 10001;
/** Where both images keep their state (`SPACE_DATA_DIR`): the manifests mount their volumes there. */
export const imageDataDir = '/var/lib/space';

/** What goes into one of SPACE's images, on a Debian bookworm rootfs made by debootstrap (minbase). */
export interface ImageRecipe {
  /** `space-<name>`: the image's name and the process it runs (`space <name>`). */
  name: 'control-plane' | 'node';
  /** Debian bookworm packages beyond minbase. */
  packages: string[];
  /** From bookworm-backports, as `./space` installs them on a host (the versions SPACE needs). */
  backports: string[];
  /** The in-sandbox agent and its helpers (packages/agent/dist): what a node puts in every sandbox. */
  sandboxRuntime: boolean;
  /** npm beside Node.js: a node puts it into the base template. */
  npm: boolean;
  /** The user the image runs as; the root user when absent. */
  uid?: number;
}

/** The two images `./space image build` makes. */
export const imageRecipes: readonly ImageRecipe[] = [
  {
    name: 'control-plane',
    // openssl signs node API certificates with the cluster CA.
    packages: ['ca-certificates', 'openssl'],
    backports: [],
    sandboxRuntime: false,
    npm: false,
    uid: controlPlaneUid,
  },
  {
    name: 'node',
    packages: [
      'ca-certificates',
      'openssl',
      // Sandboxes' network namespaces and egress rules; the btrfs image's loop device and mounts.
      'iproute2',
      'iptables',
      'util-linux',
      'mount',
      'procps',
      // Built-in templates: base (debootstrap), tiny (busybox); template imports (skopeo, umoci).
      'debootstrap',
      'debian-archive-keyring',
      'busybox-static',
      'skopeo',
      'umoci',
      // What skopeo's containers-common depends on (a virtual package debootstrap does not resolve).
      'containernetworking-plugins',
      // btrfs-progs' libraries from bookworm (the program comes from backports).
      'libcom-err2',
      'libext2fs2',
      'liblzo2-2',
    ],
    backports: ['runsc', 'btrfs-progs', 'libreiserfscore0'],
    sandboxRuntime: true,
    npm: true,
  },
];
