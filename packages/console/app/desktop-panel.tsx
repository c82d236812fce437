import { useEffect, useState } from 'preact/hooks';
import { call, json } from './api.js';
import { ErrorAlert } from './ui.js';

/** How often the picture is taken again while the tab is open. */
const refreshMs = 1000;

/** A blob as a data: URL (the console's CSP allows images from itself and data: only). */
function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error);
    reader.readAsDataURL(blob);
  });
}

/**
 * The session's desktop (template `desktop`), live: a screenshot a second, through the API like any
 * client. A click on the picture clicks there on the desktop; the noVNC live view (a preview URL
 * with a token, view-only) opens in a tab of its own.
 */
export function DesktopPanel({ sessionId }: { sessionId: string }) {
  const base = `/v1/sessions/${sessionId}/desktop`;
  const [picture, setPicture] = useState<string | null>(null);
  const [size, setSize] = useState<{ width: number; height: number } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [liveUrl, setLiveUrl] = useState<string | null>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const take = async () => {
      try {
        if (!size) setSize(await json<{ width: number; height: number }>('GET', `${base}/state`));
        const shot = await dataUrl(await (await call('GET', `${base}/screenshot`)).blob());
        if (!stopped) setPicture(shot), setError(null);
      } catch (e) {
        if (!stopped) setError((e as Error).message);
      }
      if (!stopped) timer = setTimeout(take, refreshMs);
    };
    void take();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [sessionId]);
  const clickAt = async (e: MouseEvent) => {
    if (!size) return;
    const image = e.currentTarget as HTMLImageElement;
    const box = image.getBoundingClientRect();
    const x = Math.min(size.width - 1, Math.round(((e.clientX - box.left) / box.width) * size.width));
    const y = Math.min(size.height - 1, Math.round(((e.clientY - box.top) / box.height) * size.height));
    await json('POST', `${base}/input`, { type: 'click', x, y }).catch((err: Error) => setError(err.message));
  };
  const openLive = async () => {
    try {
      const stream = await json<{ url: string; hostUrl: string | null }>('POST', `${base}/stream`, {});
      if (!stream.hostUrl) throw new Error('the live view needs the host form of preview URLs: set SPACE_PREVIEW_DOMAIN on the control plane');
      setLiveUrl(stream.hostUrl);
      window.open(stream.hostUrl, '_blank', 'noopener');
    } catch (e) {
      setError((e as Error).message);
    }
  };
  return (
    <section aria-label="Desktop">
      <form class="inline" onSubmit={(e) => e.preventDefault()}>
        <button type="button" onClick={openLive}>
          Open the live view
        </button>
        {liveUrl && (
          <a href={liveUrl} target="_blank" rel="noopener noreferrer" data-live-view>
            live view (view-only)
          </a>
        )}
      </form>
      <ErrorAlert error={error} />
      {picture && (
        // biome-ignore lint/a11y/useKeyWithClickEvents: the desktop's own keyboard is the API's; the picture is for the mouse
        <img class="desktop" src={picture} alt={`The desktop of ${sessionId}`} data-desktop onClick={clickAt} />
      )}
    </section>
  );
}
