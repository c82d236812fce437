// What the `desktop` built-in template holds besides its recipe's steps (recipes.ts): its Debian
// packages, and the files it writes for E2B Desktop's SDK and for Chromium in gVisor.

/**
 * A desktop an agent can see and drive: an X server without a screen (Xvfb), XFCE's window manager
 * (xfwm4, light, and what E2B Desktop's SDK looks for), Chromium, a terminal (st: xterm cannot open
 * its pty in this runsc, see the desktop server), xdotool for input, xprop for windows, fonts, a VNC
 * server and noVNC for people to watch, and Pillow (built with XCB) for screenshots. All Debian's.
 */
export const desktopPackages = [
  'xvfb',
  'xfwm4',
  'xdotool',
  'x11-utils',
  'stterm',
  'chromium',
  'fonts-dejavu-core',
  'x11vnc',
  'novnc',
  'python3-websockify',
  'python3-pil',
];

/**
 * What E2B Desktop's SDK (`@e2b/desktop`) runs in its sandbox by command, so that it works
 * unmodified against `/e2b`: XFCE (`startxfce4`, with a D-Bus session), scrot for screenshots,
 * xrandr, xdg-open, gtk-launch, netstat; its noVNC launcher is `e2bNoVncProxy` below.
 */
export const e2bDesktopPackages = [
  'xfce4-session',
  'xfdesktop4',
  'xfce4-panel',
  'dbus-x11',
  'scrot',
  'x11-xserver-utils',
  'xdg-utils',
  'libgtk-3-bin',
  'net-tools',
];

/** `/opt/noVNC/utils/novnc_proxy --vnc HOST:PORT --listen PORT --web DIR`, where E2B Desktop's SDK starts noVNC: Debian's websockify serving Debian's noVNC. */
export const e2bNoVncProxy = `#!/bin/sh
# E2B Desktop's noVNC launcher (its SDK runs this path), as Debian's websockify.
vnc=localhost:5900 listen=6080 web=/usr/share/novnc
while [ $# -gt 0 ]; do
  case "$1" in
    --vnc) vnc=$2; shift 2 ;;
    --listen) listen=$2; shift 2 ;;
    --web) web=$2; shift 2 ;;
    *) shift ;;
  esac
done
# Its --web is /opt/noVNC, a checkout E2B's image has: Debian's noVNC is served instead.
[ -f "$web/vnc.html" ] || web=/usr/share/novnc
# localhost is tried as ::1 first, where x11vnc does not listen and a connection hangs in this gVisor.
case "$vnc" in localhost:*) vnc="127.0.0.1:\${vnc#localhost:}" ;; esac
exec websockify --web "$web" "$listen" "$vnc"
`;

/**
 * Chromium in a gVisor sandbox, read by Debian's chromium wrapper however it is started (the desktop
 * server, a command, xdg-open, gtk-launch): no sandbox of its own (it needs namespaces and setuid,
 * and gVisor is the sandbox), no GPU; none of its own traffic (an outside connection open at a full
 * checkpoint makes it wait or fail); and the files it deletes while they are open or mapped (its
 * temporary files and shared memory, which the wrapper sends to TMPDIR as /dev/shm is small here,
 * and its metrics files) in gVisor's own memory under /dev, where a full checkpoint saves them: on
 * the volume such files make it fail ("deleted and invalidated dentries can't be restored"). The
 * profile itself stays on the volume (cookies and logins survive a sandbox's death). The desktop
 * server gives every program it starts the same TMPDIR.
 */
export const chromiumInSandbox = `# SPACE: Chromium in a gVisor sandbox (the desktop template's recipe writes this).
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --no-sandbox --disable-gpu --no-first-run --password-store=basic"
# (--disable-background-networking here too: the wrapper leaves it out when another file of chromium.d enables remote extensions.)
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --disable-background-networking --disable-component-update --disable-sync --disable-default-apps --disable-domain-reliability --disable-client-side-phishing-detection --disable-breakpad --metrics-recording-only --safebrowsing-disable-auto-update"
export CHROMIUM_FLAGS="$CHROMIUM_FLAGS --disable-features=NetworkTimeServiceQuerying,Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,AutofillServerCommunication,CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions"
export TMPDIR=/dev/.space-desktop-tmp
mkdir -p -m 1777 "$TMPDIR" && mkdir -p "$TMPDIR/BrowserMetrics"
metrics="\${XDG_CONFIG_HOME:-$HOME/.config}/chromium/BrowserMetrics"
if [ ! -L "$metrics" ]; then rm -rf "$metrics"; mkdir -p "$(dirname "$metrics")"; ln -s "$TMPDIR/BrowserMetrics" "$metrics"; fi
`;
